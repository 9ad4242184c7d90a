/* SPDX-License-Identifier: MIT */
/*
 * launch.c - launches, where the verdict of the two modes is resolved, and
 * device memory for the programs that launch.
 *
 * The verdict is taken where the launch is issued, on its stream: the process
 * mode decides whether the kernel is queued (COMPILE_ONLY) or loaded now; the
 * stream's mode decides whether it then runs or is discarded.  Nothing is
 * recorded per launch, only counted.
 */
#include "cuda_int.h"

#include <stdio.h>

envlog_err envlog_cuda_launch(envlog_cuda_stream *s, envlog_cuda_kernel *k,
                              envlog_cuda_dim3 grid, envlog_cuda_dim3 block,
                              unsigned shared_bytes, void **args)
{
    if (!s || !k || k->c != s->c)
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "a launch needs a kernel and a stream of the same runtime");
    envlog_cuda *c = s->c;
    envlog_cuda_stream_mode sm = envlog_cuda_stream_mode_get(s);
    envlog_err e;
    if (envlog_cuda_mode_get(c) == ENVLOG_CUDA_COMPILE_ONLY &&
        sm == ENVLOG_CUDA_STREAM_DISCARD) {
        if ((e = envlog_cuda_kernel_queue(k)))
            return e;
        envlog_cuda__count(c, ENVLOG_CUDA__LDISCARDED, 1);
        return ENVLOG_OK;
    }
    if ((e = envlog_cuda_kernel_load(k)))
        return e;
    if (sm == ENVLOG_CUDA_STREAM_DISCARD) {
        envlog_cuda__count(c, ENVLOG_CUDA__LDISCARDED, 1);
        return ENVLOG_OK;
    }
    if (s->kind != ENVLOG_CUDA_STREAM_DEVICE)
        return envlog__fail(ENVLOG_UNAVAILABLE,
                            "kernel %s cannot run on a host stream", k->name);
    if ((e = envlog_cuda__kernel_module(k)))
        return e;
    const envlog_cuda_drv *d;
    if ((e = envlog_cuda__drv(&d)))
        return e;
    int r = d->CtxSetCurrent(c->cu_ctx);
    if (!r)
        r = d->LaunchKernel(k->function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                            shared_bytes, s->cu, args, NULL);
    if (r) {
        char what[200];
        snprintf(what, sizeof what, "launching kernel %s", k->name);
        return envlog_cuda__drv_fail(r, what);
    }
    envlog_cuda__count(c, ENVLOG_CUDA__LEXECUTED, 1);
    return ENVLOG_OK;
}

envlog_err envlog_cuda_host_launch(envlog_cuda_stream *s, void (*fn)(void *arg), void *arg)
{
    if (!s || !fn)
        return envlog__fail(ENVLOG_INVALID_ARG, "a host launch needs a stream and a function");
    if (envlog_cuda_stream_mode_get(s) == ENVLOG_CUDA_STREAM_DISCARD) {
        envlog_cuda__count(s->c, ENVLOG_CUDA__LDISCARDED, 1);
        return ENVLOG_OK;
    }
    envlog_err e = envlog_cuda_stream_sync(s);
    if (e)
        return e;
    fn(arg);
    envlog_cuda__count(s->c, ENVLOG_CUDA__LEXECUTED, 1);
    return ENVLOG_OK;
}

static envlog_err device_drv(envlog_cuda *c, const envlog_cuda_drv **d)
{
    if (!c || !c->has_device)
        return envlog__fail(ENVLOG_UNAVAILABLE, "this CUDA runtime has no device");
    envlog_err e = envlog_cuda__drv(d);
    if (e)
        return e;
    int r = (*d)->CtxSetCurrent(c->cu_ctx);
    return r ? envlog_cuda__drv_fail(r, "cuCtxSetCurrent") : ENVLOG_OK;
}

envlog_err envlog_cuda_mem_alloc(envlog_cuda *c, size_t bytes, envlog_cuda_dptr *out)
{
    if (!bytes || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "a device allocation of 0 bytes");
    const envlog_cuda_drv *d;
    envlog_err e = device_drv(c, &d);
    if (e)
        return e;
    int r = d->MemAlloc(out, bytes);
    if (r) {
        char what[64];
        snprintf(what, sizeof what, "cuMemAlloc(%zu)", bytes);
        return envlog_cuda__drv_fail(r, what);
    }
    return ENVLOG_OK;
}

void envlog_cuda_mem_free(envlog_cuda *c, envlog_cuda_dptr p)
{
    const envlog_cuda_drv *d;
    if (p && device_drv(c, &d) == ENVLOG_OK)
        d->MemFree(p);
}

envlog_err envlog_cuda_memcpy_htod(envlog_cuda *c, envlog_cuda_dptr dst, const void *src,
                                   size_t n)
{
    const envlog_cuda_drv *d;
    envlog_err e = device_drv(c, &d);
    if (e)
        return e;
    int r = d->MemcpyHtoD(dst, src, n);
    return r ? envlog_cuda__drv_fail(r, "cuMemcpyHtoD") : ENVLOG_OK;
}

envlog_err envlog_cuda_memcpy_dtoh(envlog_cuda *c, void *dst, envlog_cuda_dptr src, size_t n)
{
    const envlog_cuda_drv *d;
    envlog_err e = device_drv(c, &d);
    if (e)
        return e;
    int r = d->MemcpyDtoH(dst, src, n);
    return r ? envlog_cuda__drv_fail(r, "cuMemcpyDtoH") : ENVLOG_OK;
}
