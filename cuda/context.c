/* SPDX-License-Identifier: MIT */
/*
 * context.c - the CUDA runtime handle: what it records into, which device it
 * runs on, and the names that make up its namespaces.
 *
 * A runtime binds one session of one environment to at most one device.  It
 * asks the environment's live state before every compile and tune, so it
 * sees its own records at once, and it keeps the process mode, the compile
 * queue and the statistics that the rest of the module shares.
 */
#include "cuda_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *envlog_cuda_mode_name(envlog_cuda_mode mode)
{
    switch (mode) {
    case ENVLOG_CUDA_EXECUTE: return "execute";
    case ENVLOG_CUDA_COMPILE_ONLY: return "compile-only";
    case ENVLOG_CUDA_COMPILE_AND_AUTOTUNE: return "compile-and-autotune";
    }
    return "unknown";
}

void envlog_cuda_opts_init(envlog_cuda_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->runtime = "envlog-cuda";
    opts->runtime_version = ENVLOG_VERSION_STRING;
    opts->mode = ENVLOG_CUDA_EXECUTE;
    opts->device = ENVLOG_CUDA_DEVICE_AUTO;
}

/* A namespace component: non-empty, no '/', UTF-8. */
static bool component_ok(const char *s)
{
    return s && *s && !strchr(s, '/') && envlog_utf8_valid(s, strlen(s));
}

static envlog_err attach_device(envlog_cuda *c, int want)
{
    if (want == ENVLOG_CUDA_DEVICE_NONE)
        return ENVLOG_OK;
    int n = 0;
    envlog_err e = envlog_cuda_device_count(&n);
    if (e || n == 0) {
        if (want == ENVLOG_CUDA_DEVICE_AUTO)
            return ENVLOG_OK;
        return e ? e : envlog__fail(ENVLOG_UNAVAILABLE, "no CUDA device present");
    }
    int ordinal = want == ENVLOG_CUDA_DEVICE_AUTO ? 0 : want;
    if ((e = envlog_cuda_device_get(ordinal, &c->dev)))
        return e;
    const envlog_cuda_drv *d;
    if ((e = envlog_cuda__drv(&d)))
        return e;
    int r = d->DeviceGet(&c->cu_dev, ordinal);
    if (!r)
        r = d->DevicePrimaryCtxRetain(&c->cu_ctx, c->cu_dev);
    if (r)
        return envlog_cuda__drv_fail(r, "retaining the device's primary context");
    if ((r = d->CtxSetCurrent(c->cu_ctx))) {
        d->DevicePrimaryCtxRelease(c->cu_dev);
        c->cu_ctx = NULL;
        return envlog_cuda__drv_fail(r, "cuCtxSetCurrent");
    }
    c->has_device = true;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_open(envlog_env *env, envlog_session *s,
                            const envlog_cuda_opts *opts, envlog_cuda **out)
{
    envlog_cuda_opts def;
    if (!opts) {
        envlog_cuda_opts_init(&def);
        opts = &def;
    }
    if (!env || !s || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "a CUDA runtime needs an environment, "
                            "a session and an output");
    if (envlog_session_env(s) != env)
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "the session does not record into this environment");
    const char *rt = opts->runtime ? opts->runtime : "envlog-cuda";
    const char *rv = opts->runtime_version ? opts->runtime_version : ENVLOG_VERSION_STRING;
    if (!component_ok(rt) || !component_ok(rv))
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "runtime name and version must be non-empty and hold no '/'");
    if ((unsigned)opts->mode > ENVLOG_CUDA_COMPILE_AND_AUTOTUNE)
        return envlog__fail(ENVLOG_INVALID_ARG, "unknown process mode %d", (int)opts->mode);
    if (opts->threads > 256)
        return envlog__fail(ENVLOG_INVALID_ARG, "%u compile threads is over 256",
                            opts->threads);
    if (opts->compiler_version && !component_ok(opts->compiler_version))
        return envlog__fail(ENVLOG_INVALID_ARG, "a bad compiler version");
    envlog_state *st;
    envlog_err e = envlog_env_state(env, &st);
    if (e)
        return e;
    envlog_cuda *c = envlog_calloc(1, sizeof *c);
    if (!c)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a CUDA runtime");
    c->env = env;
    c->s = s;
    c->state = st;
    c->base = opts->mode;
    atomic_store(&c->mode_now, (int)opts->mode);
    c->threads = opts->threads;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->load_mu, &ma);
    pthread_mutexattr_destroy(&ma);
    c->runtime = envlog_strdup(rt);
    c->runtime_version = envlog_strdup(rv);
    if (opts->compiler_version)
        c->compiler_version = envlog_strdup(opts->compiler_version);
    if (!c->runtime || !c->runtime_version ||
        (opts->compiler_version && !c->compiler_version)) {
        envlog_cuda_close(c);
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a CUDA runtime");
    }
    if ((e = envlog_cuda_cpu_fingerprint(c->cpu_fp, sizeof c->cpu_fp)) ||
        (e = attach_device(c, opts->device))) {
        envlog_cuda_close(c);
        return e;
    }
    *out = c;
    return ENVLOG_OK;
}

void envlog_cuda_close(envlog_cuda *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    size_t abandoned = c->nq;
    for (size_t i = 0; i < c->nq; i++)
        c->queue[i]->st = ENVLOG_CUDA__K_NEW;
    c->nq = 0;
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < abandoned; i++)
        envlog_cuda__kernel_settled(c->queue[i], ENVLOG_CUDA__KABANDONED);
    envlog_cuda__gathered_abandon(c);
    if (c->cu_ctx) {
        const envlog_cuda_drv *d;
        if (envlog_cuda__drv(&d) == ENVLOG_OK)
            d->DevicePrimaryCtxRelease(c->cu_dev);
    }
    envlog_free(c->queue);
    envlog_free(c->runtime);
    envlog_free(c->runtime_version);
    envlog_free(c->compiler_version);
    envlog_free(c->sources);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->load_mu);
    envlog_free(c);
}

envlog_err envlog_cuda_device_info(const envlog_cuda *c, envlog_cuda_device *out)
{
    if (!c || !c->has_device)
        return envlog__fail(ENVLOG_UNAVAILABLE, "this CUDA runtime has no device");
    *out = c->dev;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_set_threads(envlog_cuda *c, unsigned threads)
{
    if (threads > 256)
        return envlog__fail(ENVLOG_INVALID_ARG, "%u compile threads is over 256", threads);
    pthread_mutex_lock(&c->mu);
    c->threads = threads;
    pthread_mutex_unlock(&c->mu);
    return ENVLOG_OK;
}

envlog_err envlog_cuda__compiler_version(envlog_cuda *c, const char **v)
{
    pthread_mutex_lock(&c->mu);
    const char *have = c->compiler_version;
    pthread_mutex_unlock(&c->mu);
    if (have) {
        *v = have;
        return ENVLOG_OK;
    }
    const envlog_cuda_nvrtc_api *api;
    envlog_err e = envlog_cuda__nvrtc(&api);
    if (e)
        return e;
    char *copy = envlog_strdup(api->version);
    if (!copy)
        return envlog__fail(ENVLOG_NOMEM, "out of memory");
    pthread_mutex_lock(&c->mu);
    if (!c->compiler_version)
        c->compiler_version = copy;
    else
        envlog_free(copy);
    *v = c->compiler_version;
    pthread_mutex_unlock(&c->mu);
    return ENVLOG_OK;
}

envlog_err envlog_cuda_tune_ns(envlog_cuda *c, envlog_cuda_stream_kind kind,
                               char *out, size_t size)
{
    const char *fp;
    if (kind == ENVLOG_CUDA_STREAM_DEVICE) {
        if (!c->has_device)
            return envlog__fail(ENVLOG_UNAVAILABLE, "this CUDA runtime has no device");
        fp = c->dev.fingerprint;
    } else {
        fp = c->cpu_fp;
    }
    int n = snprintf(out, size, "tune/%s/%s/%s", c->runtime, c->runtime_version, fp);
    if (n < 0 || (size_t)n >= size)
        return envlog__fail(ENVLOG_TOO_BIG, "a tune namespace does not fit in %zu bytes",
                            size);
    return ENVLOG_OK;
}
