/* SPDX-License-Identifier: MIT */
/*
 * bundle_fed.c - a bundle opened for one walk (an import's), its format 2
 * snapshot decoded from the column image on a thread of its own while the
 * walk reads it: the decoder writes each record in order into memory that
 * holds the whole snapshot at a fixed address and says how far it has
 * written (after the HEADER, MANIFEST and INDEX, which opening reads); the
 * walk reads nothing past that (snapshot.c, envlog_snap_load_fed()).
 *
 * The decoder's verdict (columns that end early or hold more, the snapshot
 * against its hash) comes at the end; it is the walk's first and decides
 * over anything the walk found, so the outcome is the one of decoding the
 * whole first (envlog_bundle_open_to_walk()), only sooner.
 */
#include "bundle_cols.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The records before opening can read: HEADER, MANIFEST, INDEX. */
#define HEAD_RECORDS 3

struct envlog_bundle_fed {
    uint8_t *img;               /* the column image, the decoder's */
    size_t img_n;
    uint8_t *snap;              /* the snapshot's memory (envlog_reserve()) */
    uint64_t size;              /* the bytes it states */
    uint64_t records;           /* written so far (the decoder's) */
    atomic_size_t written;      /* bytes the walk may read */
    atomic_bool waiting;        /* the walk waits on cv */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t tid;
    bool threaded;
    /* under mu */
    bool done;
    envlog_err err;
    char why[512];
};

static uint8_t *fed_room(void *ctx, uint64_t size)
{
    envlog_bundle_fed *f = ctx;
    f->snap = envlog_reserve((size_t)size);
    f->size = size;
    return f->snap;
}

static void wake(envlog_bundle_fed *f)
{
    pthread_mutex_lock(&f->mu);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void fed_made(void *ctx, uint64_t written)
{
    envlog_bundle_fed *f = ctx;
    if (++f->records < HEAD_RECORDS)
        return;
    /* The bytes before `written` are stored before it is (seq_cst: the
     * walk's store of `waiting` and this load cannot both miss). */
    atomic_store(&f->written, (size_t)written);
    if (atomic_load(&f->waiting))
        wake(f);
}

static void *decode(void *arg)
{
    envlog_bundle_fed *f = arg;
    envlog_cols_out to = {fed_room, fed_made, f};
    uint8_t *out;
    uint64_t n;
    envlog_err e = envlog_cols_decode_to(f->img, f->img_n, &to, &out, &n);
    envlog_free(f->img);
    f->img = NULL;
    pthread_mutex_lock(&f->mu);
    f->done = true;
    f->err = e;
    if (e)
        snprintf(f->why, sizeof f->why, "%s", envlog_errmsg());
    else
        atomic_store(&f->written, (size_t)n);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* envlog_snap_feed's wait. */
static envlog_err fed_wait(void *ctx, size_t have, bool all, size_t *now, bool *done)
{
    envlog_bundle_fed *f = ctx;
    size_t w = atomic_load_explicit(&f->written, memory_order_acquire);
    if (!all && w > have) {
        *now = w;
        *done = false;
        return ENVLOG_OK;
    }
    pthread_mutex_lock(&f->mu);
    atomic_store(&f->waiting, true);
    while (!f->done && (all || atomic_load(&f->written) <= have))
        pthread_cond_wait(&f->cv, &f->mu);
    atomic_store(&f->waiting, false);
    envlog_err e = f->done ? f->err : ENVLOG_OK;
    *done = f->done && !e;
    *now = atomic_load(&f->written);
    pthread_mutex_unlock(&f->mu);
    /* The decoder's message, told on this thread. */
    return e ? envlog__fail(e, "%s", f->why) : ENVLOG_OK;
}

static void fed_free(envlog_bundle_fed *f)
{
    if (!f)
        return;
    if (f->threaded)
        pthread_join(f->tid, NULL);
    envlog_free(f->img);
    envlog_unreserve(f->snap, (size_t)f->size);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    envlog_free(f);
}

envlog_err envlog_bundle_walk_open(const void *data, size_t size, bool fed,
                                   envlog_bundle_walk *w)
{
    memset(w, 0, sizeof *w);
    if (!fed || !envlog_bundle_is_format2(data, size))
        return envlog_bundle_open_to_walk(data, size, &w->o);
    envlog_bundle_fed *f = envlog_calloc(1, sizeof *f);
    if (!f)
        return envlog__fail(ENVLOG_NOMEM, "reading a bundle");
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    w->fed = f;
    w->o.format = 2;
    envlog_err e = envlog_bundle_image(data, size, &f->img, &f->img_n);
    if (e)
        goto fail;
    f->threaded = pthread_create(&f->tid, NULL, decode, f) == 0;
    if (!f->threaded)
        decode(f); /* no thread: the whole first, as open_to_walk */
    /* Once the head is written the memory is known. */
    size_t now;
    bool done;
    if ((e = fed_wait(f, 0, false, &now, &done)))
        goto fail;
    envlog_snap_feed feed = {fed_wait, f};
    if ((e = envlog_snap_load_fed(f->snap, &feed, &w->o.snap)))
        goto fail;
    return ENVLOG_OK;
fail:
    envlog_bundle_walk_close(w);
    return e;
}

envlog_err envlog_bundle_walk_settle(envlog_bundle_walk *w)
{
    if (!w->fed)
        return ENVLOG_OK;
    envlog_err e = envlog_snap_fed_end(w->o.snap);
    /* The decoder is done: no thread of it outlives the walk (a session's
     * end may start a compaction in a process of its own). */
    if (w->fed->threaded) {
        pthread_join(w->fed->tid, NULL);
        w->fed->threaded = false;
    }
    return e;
}

void envlog_bundle_walk_close(envlog_bundle_walk *w)
{
    /* The snapshot first: it reads the decoder's memory. */
    envlog_bundle_close(&w->o);
    fed_free(w->fed);
    memset(w, 0, sizeof *w);
}
