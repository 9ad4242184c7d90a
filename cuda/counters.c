/* SPDX-License-Identifier: MIT */
/*
 * counters.c - statistics collectors: what the work of a runtime, or of one
 * process mode override, triggered.
 *
 * Counters are atomics so a monitoring thread can read them while the work
 * runs; the runtime's own collector counts everything, and each override in
 * force with a collector counts what happens while it holds.
 */
#include "cuda_int.h"

envlog_err envlog_cuda_stats_new(envlog_cuda_stats **out)
{
    envlog_cuda_stats *st = envlog_calloc(1, sizeof *st);
    if (!st)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a statistics collector");
    for (int i = 0; i < ENVLOG_CUDA__NCOUNTS; i++)
        atomic_init(&st->v[i], 0);
    *out = st;
    return ENVLOG_OK;
}

void envlog_cuda_stats_free(envlog_cuda_stats *st)
{
    envlog_free(st);
}

void envlog_cuda_stats_read(const envlog_cuda_stats *st, envlog_cuda_counts *out)
{
    envlog_cuda_stats *s = (envlog_cuda_stats *)(uintptr_t)st;
    uint64_t v[ENVLOG_CUDA__NCOUNTS];
    for (int i = 0; i < ENVLOG_CUDA__NCOUNTS; i++)
        v[i] = atomic_load_explicit(&s->v[i], memory_order_relaxed);
    out->kernels_registered = v[ENVLOG_CUDA__KREG];
    out->kernels_compiled = v[ENVLOG_CUDA__KCOMPILED];
    out->kernels_loaded = v[ENVLOG_CUDA__KLOADED];
    out->kernels_failed = v[ENVLOG_CUDA__KFAILED];
    out->kernels_abandoned = v[ENVLOG_CUDA__KABANDONED];
    out->kernels_stored = v[ENVLOG_CUDA__KSTORED];
    out->tunes_registered = v[ENVLOG_CUDA__TREG];
    out->tunes_measured = v[ENVLOG_CUDA__TMEASURED];
    out->tunes_failed = v[ENVLOG_CUDA__TFAILED];
    out->tunes_persisted = v[ENVLOG_CUDA__TPERSISTED];
    out->launches_executed = v[ENVLOG_CUDA__LEXECUTED];
    out->launches_discarded = v[ENVLOG_CUDA__LDISCARDED];
}

const envlog_cuda_stats *envlog_cuda_stats_of(const envlog_cuda *c)
{
    return &c->stats;
}

void envlog_cuda__count(envlog_cuda *c, int which, uint64_t n)
{
    atomic_fetch_add_explicit(&c->stats.v[which], n, memory_order_relaxed);
    if (atomic_load_explicit(&c->n_collectors, memory_order_acquire) == 0)
        return;
    pthread_mutex_lock(&c->mu);
    /* Nested overrides may share a collector: count it once. */
    for (envlog_cuda_override *o = c->top; o; o = o->up_) {
        if (!o->stats_)
            continue;
        bool seen = false;
        for (envlog_cuda_override *p = c->top; p != o; p = p->up_)
            if (p->stats_ == o->stats_)
                seen = true;
        if (!seen)
            atomic_fetch_add_explicit(&o->stats_->v[which], n, memory_order_relaxed);
    }
    pthread_mutex_unlock(&c->mu);
}
