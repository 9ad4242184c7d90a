/* SPDX-License-Identifier: MIT */
/*
 * batch.c - the compile queue, and compiling all of it as one parallel batch.
 *
 * Under COMPILE_ONLY, launches and tune candidates only queue their kernels,
 * so a pass gathers everything a workload reaches; the next load then pays
 * for all of them at once, on every CPU.  NVRTC compiles independent
 * programs concurrently, so the misses run on worker threads while the
 * cache lookups and every record stay on the calling thread, in queue order:
 * the same queue always leaves the same log.
 */
#include "cuda_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Thread_local const void *tune_token;

void envlog_cuda__tune_token_set(const void *token)
{
    tune_token = token;
}

const void *envlog_cuda__tune_token_get(void)
{
    return tune_token;
}

envlog_err envlog_cuda_kernel_queue(envlog_cuda_kernel *k)
{
    if (!k)
        return envlog__fail(ENVLOG_INVALID_ARG, "no kernel to queue");
    envlog_cuda *c = k->c;
    envlog_err e = ENVLOG_OK;
    int st = atomic_load(&k->st);
    if (st != ENVLOG_CUDA__K_NEW && st != ENVLOG_CUDA__K_FAILED)
        return ENVLOG_OK;
    /* Asked for: registered now, settled by the batch (or abandoned). */
    envlog_cuda__kernel_register(k);
    pthread_mutex_lock(&c->mu);
    st = atomic_load(&k->st);
    if (st == ENVLOG_CUDA__K_NEW || st == ENVLOG_CUDA__K_FAILED) {
        if (c->nq == c->capq) {
            size_t cap = c->capq ? c->capq * 2 : 16;
            envlog_cuda_kernel **q = envlog_realloc(c->queue, cap * sizeof *q);
            if (!q) {
                e = envlog__fail(ENVLOG_NOMEM, "out of memory for the compile queue");
                goto out;
            }
            c->queue = q;
            c->capq = cap;
        }
        c->queue[c->nq++] = k;
        k->tune_token = tune_token;
        atomic_store(&k->st, ENVLOG_CUDA__K_QUEUED);
    }
out:
    pthread_mutex_unlock(&c->mu);
    return e;
}

size_t envlog_cuda_queue_length(envlog_cuda *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->nq;
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool envlog_cuda__queue_remove(envlog_cuda *c, envlog_cuda_kernel *k)
{
    for (size_t i = 0; i < c->nq; i++) {
        if (c->queue[i] == k) {
            memmove(c->queue + i, c->queue + i + 1, (c->nq - i - 1) * sizeof *c->queue);
            c->nq--;
            atomic_store(&k->st, ENVLOG_CUDA__K_NEW);
            return true;
        }
    }
    return false;
}

void envlog_cuda__queue_tag(envlog_cuda *c, const void *token, const envlog_stamp *stamp)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nq; i++) {
        envlog_cuda_kernel *k = c->queue[i];
        if (token && k->tune_token == token) {
            k->has_tune = true;
            k->tune = *stamp;
            k->tune_token = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* One kernel of the batch. */
typedef struct job {
    envlog_cuda_kernel *k;
    int what;                  /* HIT, MISS or DUP */
    envlog_cuda_binary *bin;   /* a MISS's result */
    envlog_buf ir;
    envlog_err err;
    char msg[256];
} job;

enum { SETTLED, MISS, DUP };

typedef struct pool {
    job *jobs;
    size_t n;
    _Atomic size_t next;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return NULL;
        job *j = &p->jobs[i];
        if (j->what != MISS)
            continue;
        envlog_cuda_kernel *k = j->k;
        envlog_cuda_kernel_desc d = {k->name, k->source, k->options, k->arch};
        envlog_cuda__compile_starts(k); /* each worker is a thread of the trace */
        j->err = envlog_cuda__nvrtc_build(&d, &j->bin, &j->ir);
        if (j->err)
            snprintf(j->msg, sizeof j->msg, "%s", envlog_errmsg());
    }
}

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)(n > 256 ? 256 : n) : 1;
}

/* Puts the unsettled kernels back at the head of the queue, in order. */
static envlog_err requeue(envlog_cuda *c, job *jobs, size_t n)
{
    size_t back = 0;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].what != SETTLED)
            back++;
    if (!back)
        return ENVLOG_OK;
    pthread_mutex_lock(&c->mu);
    envlog_err e = ENVLOG_OK;
    size_t need = c->nq + back;
    if (need > c->capq) {
        envlog_cuda_kernel **q = envlog_realloc(c->queue, need * sizeof *q);
        if (!q) {
            /* They stay registered, unqueued: their next load settles them,
             * or freeing them abandons them. */
            e = envlog__fail(ENVLOG_NOMEM, "out of memory for the compile queue");
            for (size_t i = 0; i < n; i++)
                if (jobs[i].what != SETTLED)
                    atomic_store(&jobs[i].k->st, ENVLOG_CUDA__K_NEW);
            pthread_mutex_unlock(&c->mu);
            return e;
        }
        c->queue = q;
        c->capq = need;
    }
    memmove(c->queue + back, c->queue, c->nq * sizeof *c->queue);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].what != SETTLED)
            c->queue[k++] = jobs[i].k;
    c->nq = need;
    pthread_mutex_unlock(&c->mu);
    return e;
}

static envlog_err close_span(envlog_span *sp, bool open, const envlog_cuda_batch *b,
                             envlog_err e)
{
    if (!open)
        return e;
    char kernels[24], compiled[24], loaded[24], failed[24], threads[24];
    snprintf(kernels, sizeof kernels, "%zu", b->kernels);
    snprintf(compiled, sizeof compiled, "%zu", b->compiled);
    snprintf(loaded, sizeof loaded, "%zu", b->loaded);
    snprintf(failed, sizeof failed, "%zu", b->failed);
    snprintf(threads, sizeof threads, "%u", b->threads);
    envlog_attr attrs[] = {{"kernels", kernels}, {"compiled", compiled},
                           {"loaded", loaded}, {"failed", failed}, {"threads", threads}};
    envlog_err se = envlog_span_close(sp, attrs, sizeof attrs / sizeof attrs[0], NULL);
    return e ? e : se;
}

envlog_err envlog_cuda_compile_queued(envlog_cuda *c, envlog_cuda_batch *out)
{
    envlog_cuda_batch b = {0};
    if (out)
        *out = b;
    if (!c)
        return envlog__fail(ENVLOG_INVALID_ARG, "no runtime");
    pthread_mutex_lock(&c->load_mu);
    pthread_mutex_lock(&c->mu);
    envlog_cuda_kernel **q = c->queue;
    size_t n = c->nq;
    unsigned threads = c->threads ? c->threads : online_cpus();
    c->queue = NULL;
    c->nq = c->capq = 0;
    pthread_mutex_unlock(&c->mu);
    if (n == 0) {
        envlog_free(q);
        pthread_mutex_unlock(&c->load_mu);
        return ENVLOG_OK;
    }
    uint64_t t0 = envlog_cuda__now_ns();
    job *jobs = envlog_calloc(n, sizeof *jobs);
    if (!jobs) {
        pthread_mutex_lock(&c->mu);
        c->queue = q; /* the queue is empty here only if no one queued since */
        c->nq = c->capq = n;
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_unlock(&c->load_mu);
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a compile batch");
    }
    for (size_t i = 0; i < n; i++)
        jobs[i].k = q[i];
    envlog_free(q);
    b.kernels = n;
    envlog_span sp;
    bool span_open = envlog_span_open(c->s, "envlog-cuda/compile-batch", &sp) == ENVLOG_OK;
    envlog_err e = ENVLOG_OK;

    /* Pass 1, here: the cache.  A second kernel with the key of an earlier
     * miss waits for it, and then hits. */
    size_t misses = 0;
    for (size_t i = 0; i < n && !e; i++) {
        envlog_cuda_kernel *k = jobs[i].k;
        envlog_cuda_binary *bin = NULL;
        envlog_err le = envlog_cuda__lookup(k, &bin);
        if (le == ENVLOG_OK) {
            e = envlog_cuda__settle(k, bin, (envlog_bytes){NULL, 0});
            jobs[i].what = SETTLED;
            b.loaded++;
            continue;
        }
        if (le != ENVLOG_NOT_FOUND) {
            e = le;
            jobs[i].what = MISS;
            break;
        }
        jobs[i].what = MISS;
        for (size_t j = 0; j < i; j++)
            if (jobs[j].what == MISS && !memcmp(jobs[j].k->key.b, k->key.b, 16) &&
                !strcmp(jobs[j].k->ns, k->ns))
                jobs[i].what = DUP;
        if (jobs[i].what == MISS)
            misses++;
    }
    if (e) {
        for (size_t i = 0; i < n; i++)
            if (jobs[i].what != SETTLED)
                jobs[i].what = MISS;
        goto keep_rest;
    }

    /* Pass 2, on the workers: NVRTC.  It must be the NVRTC the keys name. */
    if (misses) {
        for (size_t i = 0; i < n && !e; i++)
            if (jobs[i].what == MISS)
                e = envlog_cuda__compiler_matches(jobs[i].k);
        if (e)
            goto keep_rest;
        pool p = {jobs, n, 0};
        unsigned nt = threads < misses ? threads : (unsigned)misses;
        pthread_t tid[256];
        unsigned started = 0;
        for (unsigned t = 1; t < nt; t++)
            if (pthread_create(&tid[started], NULL, worker, &p) == 0)
                started++;
        worker(&p); /* the calling thread works too */
        for (unsigned t = 0; t < started; t++)
            pthread_join(tid[t], NULL);
        b.threads = started + 1;
    }

    /* Pass 3, here: one record per kernel, in queue order. */
    for (size_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        if (j->what == SETTLED)
            continue;
        envlog_err ke;
        if (j->what == MISS && j->bin) {
            j->bin->kernel_key = j->k->key;
            ke = envlog_cuda__settle(j->k, j->bin, (envlog_bytes){j->ir.p, j->ir.len});
            j->bin = NULL;
        } else if (j->what == MISS) {
            /* No binary at all (out of memory): the kernel goes back. */
            if (!e)
                e = envlog__fail(j->err, "%s", j->msg);
            continue;
        } else {
            ke = envlog_cuda__obtain(j->k);
            if (ke == ENVLOG_BAD_DATA)
                ke = ENVLOG_OK; /* a failure is counted, not returned */
        }
        j->what = SETTLED;
        const envlog_cuda_binary *kb = j->k->bin;
        if (kb && kb->outcome == ENVLOG_COMPILED)
            b.compiled++;
        else if (kb && kb->outcome == ENVLOG_LOADED)
            b.loaded++;
        else if (kb)
            b.failed++;
        if (ke && !e)
            e = ke;
    }

keep_rest:
    if (!b.threads)
        b.threads = misses ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
        envlog_cuda_binary_free(jobs[i].bin);
        envlog_buf_free(&jobs[i].ir);
    }
    envlog_err re = requeue(c, jobs, n);
    envlog_free(jobs);
    b.wall_ns = envlog_cuda__now_ns() - t0;
    e = close_span(&sp, span_open, &b, e ? e : re);
    pthread_mutex_unlock(&c->load_mu);
    if (out)
        *out = b;
    return e;
}
