/* SPDX-License-Identifier: MIT */
/*
 * snap_ahead.c - a walk of a snapshot read ahead of its taker: the walk's
 * envlog_snap_next() runs on a thread of its own into a ring of slots,
 * each with the arena its record's strings lie in and a copy of a record
 * gathered from fragments, and the taker (an import: each entry checked
 * and recorded again) takes them in the walk's order.  The two halves of
 * an import cost about the same, so on two CPUs they overlap.
 *
 * One writer (the walker) and one reader (the taker): head and tail are
 * atomic; the mutex is taken to wait and to wake.  With no thread the
 * taker walks itself, through the same slot code, a ring of one.
 */
#include "replay_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 128
/* A side that finds nothing to do looks again this many times before it
 * sleeps (a short look: a CPU spent looking is one the other side may
 * need), and then sleeps until there is a batch to do: half the ring
 * free, or BATCH slots made.  Waking a thread costs more than a few
 * records; a record handed over with a wake each way ran slower than no
 * thread at all. */
#define SPINS 100
#define BATCH 32
/* A record over this many bytes is not read ahead of others: the walker
 * waits until the taker is on it, and the taker frees its slot's memory
 * when done with it, so big records never pile up in the ring. */
#define BIG ((size_t)256 << 10)

/* A side asleep on cv: `waits` set under mu, read by the other side (which
 * wakes it) without; `at`, under mu: the count of the other side it waits
 * for. */
typedef struct waiting {
    int waits;
    size_t at;
} waiting;
enum { WALKER, TAKER };

typedef struct slot {
    envlog_snap_item it;
    envlog_record rec;
    envlog_arena arena;
    envlog_buf copy;
    envlog_err e;       /* what envlog_snap_next_in() returned */
    char why[256];      /* its detail, when a failure */
} slot;

struct envlog_snap_ahead {
    envlog_snap *s;
    slot *slot;
    size_t cap;
    bool taking;        /* the taker holds the slot at head */
    bool ended;         /* the taker met the walk's end or failure */
    bool threaded;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* a batch made, or freed, or stop */
    /* Each side writes a line of its own. */
    _Alignas(64) size_t head; /* slots the taker is done with (atomic) */
    _Alignas(64) size_t tail; /* slots made (atomic) */
    _Alignas(64) waiting w[2]; /* the walker's (WALKER), the taker's */
    bool stop;                /* the taker wants no more (atomic) */
};

static size_t load(const size_t *v) { return __atomic_load_n(v, __ATOMIC_SEQ_CST); }
static void store(size_t *v, size_t x) { __atomic_store_n(v, x, __ATOMIC_SEQ_CST); }

/* Wakes side `who` when it waits for the count just stored, `count`, to
 * reach what it asked for.  (Each side stores its count, then reads the
 * other's `waits`; a waiter sets its `waits`, then reads the count: one of
 * them sees the other.) */
static void wake(envlog_snap_ahead *a, int who, size_t count)
{
    waiting *w = &a->w[who];
    if (!__atomic_load_n(&w->waits, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&a->mu);
    if (w->waits && count >= w->at) {
        __atomic_store_n(&w->waits, 0, __ATOMIC_SEQ_CST);
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Side `who` waits until `ready` holds, to be woken when the other side's
 * count reaches `at`.  A side that goes to sleep first wakes the other,
 * whatever batch that one waits for: the walker stops short of a batch
 * before a big record, and at the walk's end. */
static void wait_for(envlog_snap_ahead *a, int who, bool (*ready)(envlog_snap_ahead *, size_t),
                     size_t x, size_t at)
{
    waiting *w = &a->w[who], *other = &a->w[!who];
    for (int i = 0; i < SPINS; i++) {
        if (ready(a, x))
            return;
        relax();
    }
    pthread_mutex_lock(&a->mu);
    for (;;) {
        w->at = at;
        __atomic_store_n(&w->waits, 1, __ATOMIC_SEQ_CST);
        if (ready(a, x))
            break;
        if (other->waits) {
            __atomic_store_n(&other->waits, 0, __ATOMIC_SEQ_CST);
            pthread_cond_broadcast(&a->cv);
        }
        pthread_cond_wait(&a->cv, &a->mu);
    }
    __atomic_store_n(&w->waits, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&a->mu);
}

static bool stopped(envlog_snap_ahead *a)
{
    return __atomic_load_n(&a->stop, __ATOMIC_ACQUIRE);
}

/* The walker may fill slot `t`: the taker is done with the one it held
 * SLOTS before, or with every one before `t` (after a big record). */
static bool room_for(envlog_snap_ahead *a, size_t t)
{
    return stopped(a) || load(&a->head) + a->cap > t;
}

static bool taker_near(envlog_snap_ahead *a, size_t t)
{
    return stopped(a) || load(&a->head) >= t;
}

static bool made(envlog_snap_ahead *a, size_t h)
{
    return load(&a->tail) > h;
}

static void fill(envlog_snap_ahead *a, slot *sl)
{
    /* (With a ring of more than one, a record gathered from fragments is
     * copied out of the frame reader, which the next record overwrites.) */
    sl->e = envlog_snap_next_in(a->s, &sl->arena, a->cap > 1 ? &sl->copy : NULL, &sl->it,
                                &sl->rec);
    if (sl->e && sl->e != ENVLOG_END)
        snprintf(sl->why, sizeof sl->why, "%s", envlog_errmsg());
}

static void *walker(void *arg)
{
    envlog_snap_ahead *a = arg;
    for (size_t t = 0;; t++) {
        wait_for(a, WALKER, room_for, t, t - a->cap / 2);
        if (stopped(a))
            return NULL;
        slot *sl = &a->slot[t % a->cap];
        fill(a, sl);
        store(&a->tail, t + 1);
        wake(a, TAKER, sl->e ? SIZE_MAX : t + 1); /* the walk's end wakes the taker */
        if (sl->e)
            return NULL; /* the end, or a failure: the walk is over */
        if (sl->it.record.size > BIG)
            wait_for(a, WALKER, taker_near, t, t);
    }
}

/* The taker is done with the slot it held. */
static void release(envlog_snap_ahead *a)
{
    if (!a->taking)
        return;
    a->taking = false;
    size_t h = a->head;
    slot *sl = &a->slot[h % a->cap];
    if (sl->it.record.size > BIG) {
        envlog_arena_free(&sl->arena);
        envlog_buf_free(&sl->copy);
    }
    store(&a->head, h + 1);
    if (a->threaded)
        wake(a, WALKER, h + 1);
}

envlog_err envlog_snap_ahead_start(envlog_snap *s, int threads, envlog_snap_ahead **out)
{
    *out = NULL;
    envlog_snap_ahead *a = envlog_calloc(1, sizeof *a);
    /* By default only where a CPU is left besides the two halves: on two,
     * with one of them taken by another process, an import read ahead ran
     * 1.3 times as long as one read by the taker (668 against 492 ms a
     * 100k-entry import, medians of 5), its halves waiting on each other
     * while the scheduler ran the other process. */
    bool thread = threads > 1 || (threads == 0 && sysconf(_SC_NPROCESSORS_ONLN) >= 4);
    if (a)
        a->cap = thread ? SLOTS : 1;
    if (!a || !(a->slot = envlog_calloc(a->cap, sizeof *a->slot))) {
        envlog_free(a);
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    }
    a->s = s;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    /* Set before the walker starts; no thread would start: the taker walks
     * alone. */
    a->threaded = thread;
    if (thread && pthread_create(&a->tid, NULL, walker, a) != 0)
        a->threaded = false;
    *out = a;
    return ENVLOG_OK;
}

envlog_err envlog_snap_ahead_next(envlog_snap_ahead *a, const envlog_snap_item **it,
                                  const envlog_record **rec)
{
    if (a->ended)
        return envlog__fail(ENVLOG_INVALID_ARG, "the snapshot's walk is over");
    release(a);
    size_t h = a->head;
    slot *sl = &a->slot[h % a->cap];
    if (!a->threaded)
        fill(a, sl);
    else if (!made(a, h))
        wait_for(a, TAKER, made, h, h + BATCH);
    if (sl->e) {
        a->ended = true;
        return sl->e == ENVLOG_END ? ENVLOG_END : envlog__fail(sl->e, "%s", sl->why);
    }
    a->taking = true;
    *it = &sl->it;
    *rec = &sl->rec;
    return ENVLOG_OK;
}

void envlog_snap_ahead_stop(envlog_snap_ahead *a)
{
    if (!a)
        return;
    if (a->threaded) {
        pthread_mutex_lock(&a->mu);
        __atomic_store_n(&a->stop, true, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->tid, NULL);
    }
    for (size_t i = 0; i < a->cap; i++) {
        envlog_arena_free(&a->slot[i].arena);
        envlog_buf_free(&a->slot[i].copy);
    }
    envlog_free(a->slot);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    envlog_free(a);
}
