/* SPDX-License-Identifier: MIT */
/*
 * ahead.c - sessions read ahead: each session's records read, checked
 * (framing, checksums, the chain, seq order) and decoded as the fold reads
 * them, on worker threads, into a ring per session that the merge
 * (order.c) takes from in the total order.  The merge decides the order
 * alone, so the fold is the same however many threads read and whatever
 * order they read in.
 *
 * A ring has one writer at a time (the worker that claimed it) and one
 * reader (the taker): its head and tail are atomic, and a mutex is taken
 * only to claim a ring, to wait, and to wake whoever waits.
 *
 * With no worker (one CPU, or asked for) the taker reads each record
 * itself when it asks for it: one code path, a ring of one.
 *
 * A record handed out stays valid until the taker asks for that session's
 * next one: its bytes are in a segment the keeper takes (kept), or in a
 * copy the ring holds; the strings of the kinds decoded whole (session,
 * forget, user) are in the ring slot's own arena.  With no worker, the
 * taker may hold a record of the fold's kinds (envlog_ahead_hold): it
 * then stays valid through its session's next reads, its fields copied
 * and its bytes left where the reader read them (envlog_reader_hold).
 */
#include "replay_int.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* Memory for the rings of all sessions together; each ring has at least
 * MIN_RING slots, at most MAX_RING. */
#define RING_BUDGET ((size_t)8 << 20)
/* Memory for the windows of all sessions together, read by the taker
 * alone (envlog_reader_set_window). */
#define WINDOW_BUDGET ((size_t)32 << 20)
#define MIN_RING 4
#define MAX_RING 256
#define MAX_THREADS 8

typedef struct ring {
    envlog_reader *r;
    envlog_ahead_item *slot;
    size_t cap;
    size_t head;            /* items taken (atomic: the taker writes) */
    size_t tail;            /* items made (atomic: its worker writes) */
    bool done;              /* the reader ended (under mu) */
    bool claimed;           /* a worker fills it (under mu) */
    bool taking;            /* the taker holds the item at head */
    envlog_dec_memo memo;   /* its items' decoding (whoever fills it) */
    envlog_ahead_item held; /* the item taken last, held (envlog_ahead_hold) */
} ring;

struct envlog_ahead {
    ring *rings;
    size_t n;
    size_t threads;
    bool fold;
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t made;    /* an item was made (the taker waits) */
    pthread_cond_t room;    /* a slot was freed or a ring is wanted */
    size_t wanted;          /* the ring the taker waits for, n: none
                               (atomic reads outside mu) */
    size_t batch;           /* items the taker would like made before it is
                               woken (atomic) */
    bool idle;              /* a worker waits for room (under mu) */
    size_t next;            /* where workers look for work first */
    bool stop;
    const envlog_keeper *keep;
    pthread_mutex_t keep_mu; /* the keeper hears one reader at a time */
};

static void keep_locked(void *ctx, void *p, size_t n, bool mapped)
{
    envlog_ahead *a = ctx;
    pthread_mutex_lock(&a->keep_mu);
    a->keep->fn(a->keep->ctx, p, n, mapped);
    pthread_mutex_unlock(&a->keep_mu);
}

/* Where the text a slice of field `f` names ends (for an array of texts,
 * after its last item). */
static const uint8_t *slice_end(const envlog_field *f, const envlog_text *t, const uint8_t *end)
{
    if (f->type != ENVLOG_F_TEXTS)
        return (const uint8_t *)t->p + t->n;
    envlog_pull p = {(const uint8_t *)t->p, (size_t)(end - (const uint8_t *)t->p), 0};
    envlog_tok k;
    for (size_t i = 0; i < t->n; i++)
        if (envlog_pull_next(&p, &k))
            break;
    return p.p + p.pos;
}

/* A record held in fragments by a segment the keeper takes: the fold
 * reads it from there when its bytes are asked for (its loc), so the item
 * keeps only the part of it that holds its text fields, the slices moved
 * there; its binary, which that part leaves out, is read from the segment
 * too.  Returns false when the record must be kept whole instead. */
static bool keep_texts(envlog_ahead_item *it, const envlog_schema *s)
{
    const uint8_t *p = it->rec.payload.data, *end = p + it->rec.payload.size;
    const uint8_t *last = p;
    for (size_t i = 0; i < s->n_fields; i++) {
        const envlog_field *f = &s->fields[i];
        if ((f->type != ENVLOG_F_TEXT && f->type != ENVLOG_F_TEXTS) || !it->slices[i].p)
            continue;
        const uint8_t *e = slice_end(f, &it->slices[i], end);
        if (e > last)
            last = e;
    }
    it->copy.len = 0;
    if (envlog_buf_append(&it->copy, p, (size_t)(last - p)))
        return false;
    for (size_t i = 0; i < s->n_fields; i++)
        if (it->slices[i].p)
            it->slices[i].p = (const char *)it->copy.p + ((const uint8_t *)it->slices[i].p - p);
    it->rec.payload = (envlog_bytes){it->copy.p, it->copy.len};
    it->rec.u.compile.binary.data = NULL; /* at loc; only its size is read */
    return true;
}

/* Reads the next item of ring `g` into `it` (no lock held: the ring's
 * reader belongs to the one reading it).  With `own`, the item is made to
 * stand on its own: the taker takes it while the reader reads on. */
static void read_item(const envlog_ahead *a, ring *g, envlog_ahead_item *it, bool own)
{
    const envlog_record *rec;
    it->has_loc = false;
    it->code = envlog_reader_next(g->r, &rec);
    if (it->code == ENVLOG_CORRUPT || it->code == ENVLOG_TRUNCATED) {
        it->dmg = *envlog_reader_damage(g->r);
        return;
    }
    if (it->code)
        return;
    it->kept = envlog_reader_kept(g->r);
    if (!it->kept)
        it->has_loc = envlog_reader_loc(g->r, &it->loc);
    const envlog_schema *s = envlog_schema_of(rec->kind);
    bool sliced = a->fold && s && s->detail;
    if (!own) {
        /* Read when asked for: the reader's record and texts stand until
         * this session's next record is asked for. */
        it->r = rec;
        it->sl = envlog_reader_slices(g->r);
        return;
    }
    it->rec = *rec;
    it->r = &it->rec;
    it->sl = it->slices;
    if (sliced)
        memcpy(it->slices, envlog_reader_slices(g->r), s->n_fields * sizeof *it->slices);
    bool whole = !sliced && s; /* strings in the reader's arena */
    if (it->kept && !whole)
        return;
    if (it->has_loc && sliced && a->keep && a->keep->by_loc &&
        rec->kind == ENVLOG_KIND_COMPILE && keep_texts(it, s))
        return;
    /* Bytes the reader reuses: copied; strings the reader reuses: decoded
     * again from where the item keeps the bytes.  They read a moment ago:
     * nothing but memory can fail. */
    const uint8_t *p = rec->payload.data;
    size_t n = rec->payload.size;
    if (!it->kept) {
        it->copy.len = 0;
        if ((it->code = envlog_buf_append(&it->copy, p, n)))
            return;
        p = it->copy.p;
    }
    envlog_arena_reset(&it->arena);
    it->code = a->fold ? envlog_event_decode_slices(p, n, &it->rec, &it->arena, it->slices,
                                                  &g->memo)
                       : envlog_event_decode(p, n, &it->rec, &it->arena);
    it->rec.stamp = rec->stamp;
    it->rec.segment = rec->segment;
    it->rec.file_offset = rec->file_offset;
    it->rec.file_end = rec->file_end;
}

/* --------------------------------------------------------- workers */

/* Sequentially consistent: a store of one side and a load of the other
 * (a ring's tail and the wanted ring; a ring's head and the idle flag)
 * never both miss each other. */
static size_t load(const size_t *v) { return __atomic_load_n(v, __ATOMIC_SEQ_CST); }
static void store(size_t *v, size_t x) { __atomic_store_n(v, x, __ATOMIC_SEQ_CST); }

/* A ring a worker can fill (under mu): nobody fills it, its reader goes
 * on, it has room. */
static bool workable(const ring *g)
{
    return !g->claimed && !g->done && load(&g->tail) - load(&g->head) < g->cap;
}

/* A ring to fill, the one the taker waits for first (under mu). */
static ring *pick(envlog_ahead *a)
{
    if (a->wanted < a->n && workable(&a->rings[a->wanted]))
        return &a->rings[a->wanted];
    for (size_t k = 0; k < a->n; k++) {
        ring *g = &a->rings[(a->next + k) % a->n];
        if (workable(g)) {
            a->next = (size_t)(g - a->rings);
            return g;
        }
    }
    return NULL;
}

static void *worker(void *arg)
{
    envlog_ahead *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        ring *g = NULL;
        while (!a->stop && !(g = pick(a))) {
            /* Said before looking again, so a taker that frees a slot
             * meanwhile sees it and wakes this worker. */
            __atomic_store_n(&a->idle, true, __ATOMIC_SEQ_CST);
            if ((g = pick(a)))
                break;
            pthread_cond_wait(&a->room, &a->mu);
        }
        __atomic_store_n(&a->idle, false, __ATOMIC_SEQ_CST);
        if (a->stop)
            break;
        g->claimed = true;
        size_t gi = (size_t)(g - a->rings);
        pthread_mutex_unlock(&a->mu);
        /* Fills the ring while it has room, until its reader ends, or
         * until the taker waits for another ring. */
        bool done = false;
        for (;;) {
            size_t t = g->tail; /* this worker alone writes it now */
            if (t - load(&g->head) >= g->cap)
                break;
            envlog_ahead_item *it = &g->slot[t % g->cap];
            read_item(a, g, it, true);
            done = it->code && it->code != ENVLOG_CORRUPT && it->code != ENVLOG_TRUNCATED;
            store(&g->tail, t + 1);
            size_t w = load(&a->wanted);
            /* The taker is woken once a few items wait for it, not for
             * each: a wake-up costs more than a record. */
            if (w == gi && (done || t + 1 - load(&g->head) >= load(&a->batch))) {
                pthread_mutex_lock(&a->mu);
                pthread_cond_broadcast(&a->made);
                pthread_mutex_unlock(&a->mu);
            }
            if (done || __atomic_load_n(&a->stop, __ATOMIC_ACQUIRE) || (w < a->n && w != gi))
                break;
        }
        pthread_mutex_lock(&a->mu);
        g->done = done;
        g->claimed = false;
        /* The taker may wait for this very ring: it has something now, or
         * its end. */
        pthread_cond_broadcast(&a->made);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ----------------------------------------------------------- taking */

envlog_err envlog_ahead_next(envlog_ahead *a, size_t i, const envlog_ahead_item **out)
{
    ring *g = &a->rings[i];
    if (!a->threads) {
        /* Read now: what the reader holds stays until this session's next
         * record, which is not read before the taker asks for it. */
        envlog_ahead_item *it = &g->slot[0];
        read_item(a, g, it, false);
        *out = it;
        return ENVLOG_OK;
    }
    size_t h = g->head; /* the taker alone writes it */
    if (g->taking) {
        store(&g->head, ++h);
        g->taking = false;
        /* A worker that found no room may wait for some: woken once half
         * the ring is free. */
        if (__atomic_load_n(&a->idle, __ATOMIC_SEQ_CST) && load(&g->tail) - h <= g->cap / 2) {
            pthread_mutex_lock(&a->mu);
            pthread_cond_broadcast(&a->room);
            pthread_mutex_unlock(&a->mu);
        }
    }
    if (load(&g->tail) == h) {
        pthread_mutex_lock(&a->mu);
        store(&a->batch, g->cap < 16 ? g->cap : 16);
        store(&a->wanted, i);
        pthread_cond_broadcast(&a->room);
        while (load(&g->tail) == h)
            pthread_cond_wait(&a->made, &a->mu);
        store(&a->wanted, a->n);
        pthread_mutex_unlock(&a->mu);
    }
    g->taking = true;
    *out = &g->slot[h % g->cap];
    return ENVLOG_OK;
}

const envlog_ahead_item *envlog_ahead_hold(envlog_ahead *a, size_t i)
{
    ring *g = &a->rings[i];
    const envlog_ahead_item *it = &g->slot[0];
    if (a->threads || !a->fold || it->code || !it->r)
        return NULL;
    /* The kinds decoded whole have their strings in the reader's arena,
     * which the next record takes again. */
    const envlog_schema *s = envlog_schema_of(it->r->kind);
    if (!s || !s->detail || !envlog_reader_hold(g->r))
        return NULL;
    envlog_ahead_item *h = &g->held;
    h->rec = *it->r;
    h->r = &h->rec;
    memcpy(h->slices, it->sl, s->n_fields * sizeof *h->slices);
    h->sl = h->slices;
    h->kept = it->kept;
    h->has_loc = it->has_loc;
    h->loc = it->loc;
    return h;
}

size_t envlog_ahead_threads(size_t sessions, int asked)
{
    if (asked > 0)
        return (size_t)(asked - 1 < MAX_THREADS ? asked - 1 : MAX_THREADS);
    if (asked < 0 || sessions < 2)
        return 0;
    /* With fewer than 4 CPUs the calling thread alone is faster: on 2, a
     * reader beside it made the fold 0.47x as fast (make bench, replay:
     * 907k against 1.92M tune records a second), each record decoded on one
     * CPU and folded on the other, read from the segments' mappings. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t t = cpus >= 4 ? (size_t)cpus - 1 : 0;
    if (t > sessions)
        t = sessions;
    return t < MAX_THREADS ? t : MAX_THREADS;
}

envlog_err envlog_ahead_start(envlog_reader *const *readers, size_t n, size_t threads,
                              bool fold, const envlog_keeper *keep, envlog_ahead **out)
{
    *out = NULL;
    envlog_ahead *a = envlog_calloc(1, sizeof *a);
    if (!a) {
        for (size_t i = 0; i < n; i++)
            envlog_reader_close(readers[i]);
        return envlog__fail(ENVLOG_NOMEM, "reading sessions");
    }
    a->n = n;
    a->wanted = n;
    a->fold = fold;
    a->keep = keep;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->keep_mu, NULL);
    pthread_cond_init(&a->made, NULL);
    pthread_cond_init(&a->room, NULL);
    if (n && !(a->rings = envlog_calloc(n, sizeof *a->rings))) {
        for (size_t i = 0; i < n; i++)
            envlog_reader_close(readers[i]);
        envlog_ahead_stop(a);
        return envlog__fail(ENVLOG_NOMEM, "reading sessions");
    }
    for (size_t i = 0; i < n; i++)
        a->rings[i].r = readers[i]; /* the rings own them from here on */
    size_t cap = 1;
    if (threads && n) {
        cap = RING_BUDGET / (n * sizeof(envlog_ahead_item));
        cap = cap < MIN_RING ? MIN_RING : cap > MAX_RING ? MAX_RING : cap;
    }
    for (size_t i = 0; i < n; i++) {
        ring *g = &a->rings[i];
        g->cap = cap;
        if (!(g->slot = envlog_calloc(cap, sizeof *g->slot))) {
            envlog_ahead_stop(a);
            return envlog__fail(ENVLOG_NOMEM, "reading sessions");
        }
        envlog_reader_set_fold(g->r, fold);
        /* With workers, from the segments' mappings: a worker reads on
         * while the taker holds what it read before.  The taker reading
         * alone reads a window at a time: a record is folded before its
         * session's next is read, and a copy by pread costs what the
         * bench's limit counts for reading (memcpy), where touching a
         * mapping's pages costs what the machine's page tables make it
         * (five times the copy on the VM of bench/RESULTS.md, "the fold
         * reads windows"; a tenth of it in another state of that VM).
         * The keeper maps the segments either way and takes records from
         * the mapping (envlog_reader_kept): their pages come in only when
         * a lookup reads them. */
        envlog_reader_set_in_place(g->r, threads > 0);
        envlog_reader_set_window(g->r, WINDOW_BUDGET / n);
        if (keep)
            envlog_reader_set_keep(g->r, threads ? keep_locked : keep->fn,
                                   threads ? (void *)a : keep->ctx);
    }
    size_t started = 0;
    for (; n && started < threads; started++)
        if (pthread_create(&a->tid[started], NULL, worker, a))
            break;
    a->threads = started;
    if (!started && threads) {
        /* No thread would start: the taker reads alone, a ring of one. */
        for (size_t i = 0; keep && i < n; i++)
            envlog_reader_set_keep(a->rings[i].r, keep->fn, keep->ctx);
    }
    *out = a;
    return ENVLOG_OK;
}

void envlog_ahead_stop(envlog_ahead *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    __atomic_store_n(&a->stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&a->room);
    pthread_mutex_unlock(&a->mu);
    for (size_t t = 0; t < a->threads; t++)
        pthread_join(a->tid[t], NULL);
    for (size_t i = 0; a->rings && i < a->n; i++) {
        ring *g = &a->rings[i];
        /* Closing hands its last segment's bytes to the keeper. */
        envlog_reader_close(g->r);
        for (size_t k = 0; g->slot && k < g->cap; k++) {
            envlog_arena_free(&g->slot[k].arena);
            envlog_buf_free(&g->slot[k].copy);
        }
        envlog_free(g->slot);
    }
    envlog_free(a->rings);
    pthread_cond_destroy(&a->made);
    pthread_cond_destroy(&a->room);
    pthread_mutex_destroy(&a->keep_mu);
    pthread_mutex_destroy(&a->mu);
    envlog_free(a);
}
