/* SPDX-License-Identifier: MIT */
/*
 * kernel.c - kernels: their keys, the cache lookup, the compile, and the
 * record each load leaves.
 *
 * A kernel key names a binary exactly (source, options, compiler version,
 * arch), so the environment's state can answer "have we built this before?"
 * without compiling.  Every load leaves one compile record: OBSERVED
 * `loaded` for a hit (held in memory, so a warm run writes nothing), CHANGED
 * `compiled` with the binary for a miss, and `failed` with the compiler's
 * log for a source NVRTC refused.  A kernel is registered when it is asked
 * for and its registration settles with that record, or as abandoned when
 * the kernel is dropped first; a failure is not kept forever: the next load
 * registers the kernel again and tries again (a header fixed on disk, a
 * binary that reached the cache meanwhile).
 */
#include "cuda_int.h"

#include <stdio.h>
#include <string.h>

#define KEY_TAG "envlog-cuda-kernel-key/1"

static uint8_t *put_field(uint8_t *p, const char *s)
{
    uint64_t n = strlen(s);
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(n >> (8 * i));
    memcpy(p, s, n);
    return p + n;
}

envlog_err envlog_cuda_kernel_key(const envlog_cuda_kernel_desc *d,
                                  const char *compiler_version, envlog_hash128 *key)
{
    if (!d || !d->source || !d->arch || !compiler_version || !key)
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "a kernel key needs a source, an arch and a compiler version");
    const char *opt = d->options ? d->options : "";
    size_t total = sizeof KEY_TAG + 32;
    const char *parts[] = {d->source, opt, compiler_version, d->arch};
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(parts[i]);
        if (n > SIZE_MAX / 2 - total)
            return envlog__fail(ENVLOG_TOO_BIG, "a kernel source too large to key");
        total += n;
    }
    uint8_t *buf = envlog_malloc(total);
    if (!buf)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a kernel key");
    memcpy(buf, KEY_TAG, sizeof KEY_TAG); /* with its NUL */
    uint8_t *p = buf + sizeof KEY_TAG;
    for (int i = 0; i < 4; i++)
        p = put_field(p, parts[i]);
    *key = envlog_hash128_bytes(buf, (size_t)(p - buf));
    envlog_free(buf);
    return ENVLOG_OK;
}

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

void envlog_cuda__kernel_register(envlog_cuda_kernel *k)
{
    envlog_cuda *c = k->c;
    pthread_mutex_lock(&c->mu);
    bool opens = !k->reg_open;
    if (opens) {
        k->reg_open = true;
        k->reg_col = envlog_cuda__collector_locked(c);
    }
    pthread_mutex_unlock(&c->mu);
    if (opens)
        envlog_cuda__count_to(c, k->reg_col, ENVLOG_CUDA__KREG);
}

void envlog_cuda__kernel_settled(envlog_cuda_kernel *k, int which)
{
    envlog_cuda *c = k->c;
    pthread_mutex_lock(&c->mu);
    bool open = k->reg_open;
    envlog_cuda_stats *col = k->reg_col;
    k->reg_open = false;
    k->reg_col = NULL;
    pthread_mutex_unlock(&c->mu);
    if (open)
        envlog_cuda__settle_reg(c, col, which);
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

envlog_err envlog_cuda__lookup(envlog_cuda_kernel *k, envlog_cuda_binary **out)
{
    envlog_kernel_entry ent;
    envlog_err e = envlog_state_kernel(k->c->state, k->ns, &k->key, &ent);
    if (e)
        return e;
    if (!ent.binary.size || !ent.binary.data)
        return ENVLOG_NOT_FOUND; /* an entry without its bytes cannot serve */
    envlog_cuda_binary *b = envlog_cuda__binary_new(ent.binary.data, ent.binary.size, "");
    if (!b)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a %zu-byte binary",
                            ent.binary.size);
    if (memcmp(b->binary_hash.b, ent.binary_hash.b, 16)) {
        /* The bytes do not match their recorded hash: never run them. */
        envlog_cuda_binary_free(b);
        return ENVLOG_NOT_FOUND;
    }
    b->outcome = ENVLOG_LOADED;
    b->kernel_key = k->key;
    b->ptx = !strncmp(k->arch, "compute_", 8);
    *out = b;
    return ENVLOG_OK;
}

void envlog_cuda__compile_starts(envlog_cuda_kernel *k)
{
    k->ran_start_ns = k->c->s ? envlog_session_clock_ns(k->c->s) : 0;
    k->ran_thread = envlog_thread_id();
    k->ran_known = true;
}

envlog_err envlog_cuda__settle(envlog_cuda_kernel *k, envlog_cuda_binary *b,
                               envlog_bytes ir)
{
    envlog_cuda *c = k->c;
    if (!k->ran_known || b->outcome == ENVLOG_LOADED)
        envlog_cuda__compile_starts(k);
    envlog_compile rec = {
        .ns = k->ns, .name = k->name, .kernel_key = k->key, .source_hash = k->source_hash,
        .options = k->options, .compiler_version = k->compiler_version, .arch = k->arch,
        .outcome = b->outcome, .duration_ns = b->duration_ns,
        .has_tune = k->has_tune, .tune = k->tune,
        .has_start = true, .start_ns = k->ran_start_ns, .thread = k->ran_thread,
    };
    k->ran_known = false;
    if (b->outcome != ENVLOG_FAILED) {
        rec.binary_hash = b->binary_hash;
        rec.binary_size = b->size;
    }
    if (b->outcome == ENVLOG_COMPILED) {
        rec.binary = (envlog_bytes){b->data, b->size};
        rec.ir = ir;
    }
    if (b->outcome != ENVLOG_LOADED) {
        rec.log = b->log;
        rec.source = k->source;
    }
    /* The source first, so a reader meets it before the records naming it;
     * a source that could not be recorded is reported, the compile record
     * written all the same. */
    envlog_err se = b->outcome != ENVLOG_LOADED ? envlog_cuda__record_source(k) : ENVLOG_OK;
    envlog_stamp stamp;
    envlog_err e = envlog_record_compile(c->s, &rec, &stamp);
    b->recorded = e == ENVLOG_OK;
    if (!e)
        e = se;
    if (b->recorded)
        b->stamp = stamp;
    /* A settle always follows a registration (envlog_cuda__obtain and the
     * queue open one); stored is counted while it is still open. */
    if (b->outcome == ENVLOG_COMPILED && b->recorded)
        envlog_cuda__count_to(c, k->reg_col, ENVLOG_CUDA__KSTORED);
    envlog_cuda__kernel_settled(k, b->outcome == ENVLOG_COMPILED ? ENVLOG_CUDA__KCOMPILED
                                   : b->outcome == ENVLOG_LOADED ? ENVLOG_CUDA__KLOADED
                                                                 : ENVLOG_CUDA__KFAILED);
    k->settles++;
    envlog_cuda_binary_free(k->bin);
    k->bin = b;
    k->tune_token = NULL;
    atomic_store(&k->st, b->outcome == ENVLOG_FAILED ? ENVLOG_CUDA__K_FAILED
                                                     : ENVLOG_CUDA__K_READY);
    k->load_err = e;
    return e;
}

/* ENVLOG_BAD_DATA for a kernel that failed, naming the first log line. */
static envlog_err failed(const envlog_cuda_kernel *k)
{
    const char *log = k->bin && k->bin->log ? k->bin->log : "";
    while (*log == '\n' || *log == ' ')
        log++;
    int len = (int)strcspn(log, "\n");
    if (len > 200)
        len = 200;
    return envlog__fail(ENVLOG_BAD_DATA, "kernel %s failed to compile for %s: %.*s",
                        k->name, k->arch, len, *log ? log : "(no log)");
}

/* On a miss, the NVRTC here must be the one the keys name. */
static envlog_err nvrtc_matches(const envlog_cuda_kernel *k)
{
    const envlog_cuda_nvrtc_api *api;
    envlog_err e = envlog_cuda__nvrtc(&api);
    if (e)
        return envlog__fail(e, "kernel %s is not in the cache and %s", k->name,
                            envlog_errmsg());
    if (strcmp(api->version, k->compiler_version))
        return envlog__fail(ENVLOG_UNAVAILABLE,
                            "kernel %s is not in the cache for NVRTC %s and this NVRTC is "
                            "%s (%s)", k->name, k->compiler_version, api->version,
                            api->path);
    return ENVLOG_OK;
}

envlog_err envlog_cuda__obtain(envlog_cuda_kernel *k)
{
    if (atomic_load(&k->st) == ENVLOG_CUDA__K_READY)
        return ENVLOG_OK;
    /* New, queued, or failed before: this load is asked for (again). */
    envlog_cuda__kernel_register(k);
    envlog_cuda_binary *b = NULL;
    envlog_err e = envlog_cuda__lookup(k, &b);
    if (e == ENVLOG_OK)
        return envlog_cuda__settle(k, b, (envlog_bytes){NULL, 0});
    if (e != ENVLOG_NOT_FOUND)
        return e;
    if ((e = nvrtc_matches(k)))
        return e;
    envlog_buf ir = {0};
    envlog_cuda_kernel_desc d = {k->name, k->source, k->options, k->arch};
    envlog_cuda__compile_starts(k);
    e = envlog_cuda__nvrtc_build(&d, &b, &ir);
    if (!b) {
        envlog_buf_free(&ir);
        return e;
    }
    b->kernel_key = k->key;
    envlog_err se = envlog_cuda__settle(k, b, (envlog_bytes){ir.p, ir.len});
    envlog_buf_free(&ir);
    if (b->outcome == ENVLOG_FAILED)
        return failed(k);
    return se;
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
        e = failed(k); /* the batch tried it, just now */
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
