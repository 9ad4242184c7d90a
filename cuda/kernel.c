/* SPDX-License-Identifier: MIT */
/*
 * kernel.c - one kernel at a time: making a kernel (its copies, arch and
 * namespace), loading it through the cache (kcache.c), compiling one
 * without keeping it, and its module on the device.  A kernel is
 * registered when it is asked for and its registration settles with its
 * load's record, or as abandoned when the kernel is dropped first; a failure is not kept forever: the next load
 * registers the kernel again and tries again (a header fixed on disk, a
 * binary that reached the cache meanwhile).
 */
#include "cuda_int.h"

#include <stdio.h>
#include <string.h>

/* Refuses an -arch among the options early, before anything is keyed. */
static envlog_err check_options(const char *name, const char *opts)
{
    for (const char *p = opts; *p;) {
        while (*p == ' ')
            p++;
        if (!strncmp(p, "-arch", 5) || !strncmp(p, "--gpu-architecture", 18) ||
            !strncmp(p, "--gpu-name", 10))
            return envlog__fail(ENVLOG_INVALID_ARG,
                                "kernel %s: give the target as the arch, not among the "
                                "options", name);
        p += strcspn(p, " ");
    }
    return ENVLOG_OK;
}

envlog_err envlog_cuda__kernel_init(envlog_cuda *c, const envlog_cuda_kernel_desc *d,
                                    envlog_cuda_kernel *k)
{
    memset(k, 0, sizeof *k);
    atomic_init(&k->st, ENVLOG_CUDA__K_NEW);
    k->c = c;
    if (!d || !d->name || !*d->name || !d->source || !*d->source)
        return envlog__fail(ENVLOG_INVALID_ARG, "a kernel needs a name and a source");
    const char *arch = d->arch;
    if (!arch) {
        if (!c->has_device)
            return envlog__fail(ENVLOG_UNAVAILABLE,
                                "kernel %s names no arch and this runtime has no device",
                                d->name);
        arch = c->dev.arch;
    }
    if (!envlog_cuda__arch_valid(arch))
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "kernel %s: arch '%s' is not sm_XX or compute_XX", d->name, arch);
    const char *opts = d->options ? d->options : "";
    envlog_err e = check_options(d->name, opts);
    if (e)
        return e;
    if (!envlog_utf8_valid(d->name, strlen(d->name)) ||
        !envlog_utf8_valid(opts, strlen(opts)) ||
        !envlog_utf8_valid(d->source, strlen(d->source)))
        return envlog__fail(ENVLOG_INVALID_ARG, "kernel %s: text that is not UTF-8",
                            d->name);
    if ((e = envlog_cuda__compiler_version(c, &k->compiler_version)))
        return e;
    k->name = envlog_strdup(d->name);
    k->source = envlog_strdup(d->source);
    k->options = envlog_strdup(opts);
    k->arch = envlog_strdup(arch);
    size_t nslen = strlen(c->runtime) + strlen(c->runtime_version) + strlen(arch) +
                   strlen(k->compiler_version) + 32;
    k->ns = envlog_malloc(nslen);
    if (!k->name || !k->source || !k->options || !k->arch || !k->ns)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a kernel");
    snprintf(k->ns, nslen, "kernel/%s/%s/%s/nvrtc-%s", c->runtime, c->runtime_version,
             arch, k->compiler_version);
    envlog_cuda_kernel_desc full = {k->name, k->source, k->options, k->arch};
    if ((e = envlog_cuda_kernel_key(&full, k->compiler_version, &k->key)))
        return e;
    k->source_hash = envlog_hash128_bytes(k->source, strlen(k->source));
    return ENVLOG_OK;
}

void envlog_cuda__kernel_clear(envlog_cuda_kernel *k)
{
    if (k->module) {
        const envlog_cuda_drv *d;
        if (envlog_cuda__drv(&d) == ENVLOG_OK) {
            d->CtxSetCurrent(k->c->cu_ctx);
            d->ModuleUnload(k->module);
        }
        k->module = NULL;
    }
    envlog_cuda_binary_free(k->bin);
    envlog_free(k->name);
    envlog_free(k->source);
    envlog_free(k->options);
    envlog_free(k->arch);
    envlog_free(k->ns);
    k->bin = NULL;
    k->name = k->source = k->options = k->arch = k->ns = NULL;
}

envlog_err envlog_cuda_kernel_new(envlog_cuda *c, const envlog_cuda_kernel_desc *d,
                                  envlog_cuda_kernel **out)
{
    if (!c || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "no runtime or output for a kernel");
    envlog_cuda_kernel *k = envlog_malloc(sizeof *k);
    if (!k)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a kernel");
    envlog_err e = envlog_cuda__kernel_init(c, d, k);
    if (e) {
        envlog_cuda__kernel_clear(k);
        envlog_free(k);
        return e;
    }
    *out = k;
    return ENVLOG_OK;
}

void envlog_cuda_kernel_free(envlog_cuda_kernel *k)
{
    if (!k)
        return;
    envlog_cuda *c = k->c;
    pthread_mutex_lock(&c->mu);
    envlog_cuda__queue_remove(c, k);
    pthread_mutex_unlock(&c->mu);
    envlog_cuda__kernel_settled(k, ENVLOG_CUDA__KABANDONED);
    envlog_cuda__kernel_clear(k);
    envlog_free(k);
}

const envlog_cuda_binary *envlog_cuda_kernel_binary(const envlog_cuda_kernel *k)
{
    int st = atomic_load(&((envlog_cuda_kernel *)(uintptr_t)k)->st);
    return st == ENVLOG_CUDA__K_READY || st == ENVLOG_CUDA__K_FAILED ? k->bin : NULL;
}

envlog_err envlog_cuda_kernel_load(envlog_cuda_kernel *k)
{
    if (!k)
        return envlog__fail(ENVLOG_INVALID_ARG, "no kernel");
    envlog_cuda *c = k->c;
    if (atomic_load(&k->st) == ENVLOG_CUDA__K_READY)
        return ENVLOG_OK;
    pthread_mutex_lock(&c->load_mu);
    uint64_t settles = k->settles;
    envlog_err e = envlog_cuda_compile_queued(c, NULL);
    int st = atomic_load(&k->st);
    if (st == ENVLOG_CUDA__K_READY)
        e = ENVLOG_OK;
    else if (st == ENVLOG_CUDA__K_FAILED && k->settles != settles)
        e = envlog_cuda__failed(k); /* the batch tried it, just now */
    else if (!e || st != ENVLOG_CUDA__K_QUEUED)
        e = envlog_cuda__obtain(k); /* new, or failed before: try it */
    pthread_mutex_unlock(&c->load_mu);
    return e;
}

envlog_err envlog_cuda_compile(envlog_cuda *c, const envlog_cuda_kernel_desc *d,
                               envlog_cuda_binary **out)
{
    if (!c || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "no runtime or output for a compile");
    *out = NULL;
    if (d && !d->arch)
        return envlog__fail(ENVLOG_INVALID_ARG, "envlog_cuda_compile needs an arch");
    envlog_cuda_kernel k;
    envlog_err e = envlog_cuda__kernel_init(c, d, &k);
    if (e) {
        envlog_cuda__kernel_clear(&k);
        return e;
    }
    k.temporary = true;
    pthread_mutex_lock(&c->load_mu);
    e = envlog_cuda__obtain(&k);
    pthread_mutex_unlock(&c->load_mu);
    envlog_cuda__kernel_settled(&k, ENVLOG_CUDA__KABANDONED); /* if it stopped short */
    *out = k.bin;
    k.bin = NULL;
    envlog_cuda__kernel_clear(&k);
    return e;
}

envlog_err envlog_cuda__kernel_module(envlog_cuda_kernel *k)
{
    envlog_cuda *c = k->c;
    if (k->function)
        return ENVLOG_OK;
    if (!c->has_device)
        return envlog__fail(ENVLOG_UNAVAILABLE,
                            "kernel %s cannot run: this CUDA runtime has no device", k->name);
    const envlog_cuda_drv *d;
    envlog_err e = envlog_cuda__drv(&d);
    if (e)
        return e;
    pthread_mutex_lock(&c->load_mu);
    int r = 0;
    if (!k->function) {
        char what[300];
        if ((r = d->CtxSetCurrent(c->cu_ctx))) {
            e = envlog_cuda__drv_fail(r, "cuCtxSetCurrent");
        } else if (!k->module && (r = d->ModuleLoadData(&k->module, k->bin->data))) {
            k->module = NULL;
            snprintf(what, sizeof what, "loading kernel %s (%s %s) on %s (%s)", k->name,
                     k->arch, k->bin->ptx ? "PTX" : "CUBIN", c->dev.name, c->dev.arch);
            e = envlog_cuda__drv_fail(r, what);
        } else if ((r = d->ModuleGetFunction(&k->function, k->module, k->name))) {
            k->function = NULL;
            snprintf(what, sizeof what, "finding kernel %s in its module", k->name);
            e = envlog_cuda__drv_fail(r, what);
        }
    }
    pthread_mutex_unlock(&c->load_mu);
    return e;
}
