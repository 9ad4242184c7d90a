/* SPDX-License-Identifier: MIT */
/*
 * counters.c - statistics collectors: what the work of a runtime, or of one
 * process mode override, triggered.
 *
 * Counters are atomics so a monitoring thread can read them while the work
 * runs; the runtime's own collector counts everything.  A collector given
 * to an override counts the launches made while it holds and every
 * registration opened while it holds, with that registration's
 * settlement whenever it comes, so settled == registered holds for each
 * collector at any quiet point.  Overrides in force share one collector
 * (modes.c refuses another), so there is never more than one to count into.
 */
#include "cuda_int.h"

envlog_err envlog_cuda_stats_new(envlog_cuda_stats **out)
{
    envlog_cuda_stats *st = envlog_calloc(1, sizeof *st);
    if (!st)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a statistics collector");
    for (int i = 0; i < ENVLOG_CUDA__NCOUNTS; i++)
        atomic_init(&st->v[i], 0);
    atomic_init(&st->refs, 1);
    *out = st;
    return ENVLOG_OK;
}

void envlog_cuda__stats_hold(envlog_cuda_stats *st)
{
    if (st)
        atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
}

void envlog_cuda__stats_release(envlog_cuda_stats *st)
{
    if (st && atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1)
        envlog_free(st);
}

void envlog_cuda_stats_free(envlog_cuda_stats *st)
{
    envlog_cuda__stats_release(st);
}

void envlog_cuda_stats_read(const envlog_cuda_stats *st, envlog_cuda_counts *out)
{
    envlog_cuda_stats *s = (envlog_cuda_stats *)(uintptr_t)st;
    uint64_t v[ENVLOG_CUDA__NCOUNTS];
    /* Settlements before registrations: a registration always precedes
     * its settlement, so what is read never settles more than it saw
     * registered. */
    for (int i = ENVLOG_CUDA__NCOUNTS - 1; i >= 0; i--)
        if (i != ENVLOG_CUDA__KREG && i != ENVLOG_CUDA__TREG)
            v[i] = atomic_load_explicit(&s->v[i], memory_order_acquire);
    v[ENVLOG_CUDA__KREG] = atomic_load_explicit(&s->v[ENVLOG_CUDA__KREG], memory_order_acquire);
    v[ENVLOG_CUDA__TREG] = atomic_load_explicit(&s->v[ENVLOG_CUDA__TREG], memory_order_acquire);
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
    out->tunes_single = v[ENVLOG_CUDA__TSINGLE];
    out->tunes_abandoned = v[ENVLOG_CUDA__TABANDONED];
    out->kernels_settled = out->kernels_compiled + out->kernels_loaded +
                           out->kernels_failed + out->kernels_abandoned;
    out->tunes_settled = out->tunes_measured + out->tunes_failed + out->tunes_single +
                         out->tunes_abandoned;
    out->kernels_pending = out->kernels_registered - out->kernels_settled;
    out->tunes_pending = out->tunes_registered - out->tunes_settled;
}

const envlog_cuda_stats *envlog_cuda_stats_of(const envlog_cuda *c)
{
    return &c->stats;
}

envlog_cuda_stats *envlog_cuda__collector_locked(envlog_cuda *c)
{
    envlog_cuda_stats *st = c->top ? c->top->stats_ : NULL;
    envlog_cuda__stats_hold(st);
    return st;
}

void envlog_cuda__count(envlog_cuda *c, int which, uint64_t n)
{
    atomic_fetch_add_explicit(&c->stats.v[which], n, memory_order_acq_rel);
    if (atomic_load_explicit(&c->n_collectors, memory_order_acquire) == 0)
        return;
    pthread_mutex_lock(&c->mu);
    if (c->top && c->top->stats_)
        atomic_fetch_add_explicit(&c->top->stats_->v[which], n, memory_order_acq_rel);
    pthread_mutex_unlock(&c->mu);
}

envlog_cuda_stats *envlog_cuda__register(envlog_cuda *c, int which)
{
    envlog_cuda_stats *col = NULL;
    if (atomic_load_explicit(&c->n_collectors, memory_order_acquire)) {
        pthread_mutex_lock(&c->mu);
        col = envlog_cuda__collector_locked(c);
        pthread_mutex_unlock(&c->mu);
    }
    envlog_cuda__count_to(c, col, which);
    return col;
}

void envlog_cuda__count_to(envlog_cuda *c, envlog_cuda_stats *col, int which)
{
    atomic_fetch_add_explicit(&c->stats.v[which], 1, memory_order_acq_rel);
    if (col)
        atomic_fetch_add_explicit(&col->v[which], 1, memory_order_acq_rel);
}

void envlog_cuda__settle_reg(envlog_cuda *c, envlog_cuda_stats *col, int which)
{
    envlog_cuda__count_to(c, col, which);
    envlog_cuda__stats_release(col);
}
