/* SPDX-License-Identifier: MIT */
/*
 * kcache.c - the kernel cache, below both ways of loading kernels (one at a
 * time, kernel.c; a queue compiled at once, batch.c): the lookup in the
 * environment's state by kernel key (kernel_key.c), the rule that a miss
 * compiles only with the NVRTC the key names, settling a load into its one
 * compile record and its registration counts, and obtaining one kernel
 * (lookup, else compile).
 *
 * Every load leaves one compile record: OBSERVED `loaded` for a hit (held
 * in memory, so a warm run writes nothing), CHANGED `compiled` with the
 * binary for a miss, and `failed` with the compiler's log for a source
 * NVRTC refused.
 */
#include "cuda_int.h"

#include <stdio.h>
#include <string.h>

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

envlog_err envlog_cuda__failed(const envlog_cuda_kernel *k)
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

envlog_err envlog_cuda__compiler_matches(const envlog_cuda_kernel *k)
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
    if ((e = envlog_cuda__compiler_matches(k)))
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
        return envlog_cuda__failed(k);
    return se;
}
