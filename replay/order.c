/* SPDX-License-Identifier: MIT */
/*
 * order.c - every record of an environment in one total order.
 *
 * Within a session records are read in seq order and their offsets never
 * decrease (both are taken under the session's lock), so the total order
 * (session start + offset, session id, seq) is a k-way merge of the
 * sessions' readers, whatever order the directory lists them in.
 */
#include "replay_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct cursor {
    envlog_reader *r;           /* a session (read through `ahead` once the
                                   merge starts), or NULL for the snapshot */
    size_t ring;                /* its session's place in `ahead` */
    const envlog_ahead_item *it; /* the item rec is from */
    envlog_snap *snap;
    envlog_snap_item item;
    envlog_record srec;
    uint64_t watermark;         /* skip seqs up to here (has_wm) */
    bool has_wm;
    envlog_id128 id;
    const envlog_record *rec;
    envlog_session_rec session; /* a copy; strings below */
    bool have_session;
    envlog_arena arena;         /* the session record's strings */
    uint64_t start_ns;
    uint64_t key_ns;            /* start + offset of rec */
    size_t source;              /* the environment it reads (its index) */
    uint64_t hinted;            /* what the hint gave for rec (has_hinted) */
    bool has_hinted;
} cursor;

static int cur_cmp(const cursor *a, const cursor *b)
{
    int c = envlog_order_cmp(a->key_ns, &a->id, a->rec->stamp.seq, b->key_ns, &b->id,
                             b->rec->stamp.seq);
    if (c)
        return c;
    /* One record in several environments: the first environment's first,
     * a session's log before a snapshot. */
    if (a->source != b->source)
        return a->source < b->source ? -1 : 1;
    return (a->snap != NULL) - (b->snap != NULL);
}

typedef struct kept_session kept_session;

typedef struct merge {
    const envlog_merge_src *src;
    size_t n_src;
    const envlog_keeper *keep;
    kept_session *kept;
    size_t n_kept, cap_kept;
    envlog_arena kept_arena;
    const envlog_replay_opts *opts;
    cursor *cur;
    size_t n, cap;
    envlog_ahead *ahead;        /* reads the sessions (NULL: cursors read
                                   their own readers) */
    cursor **heap;
    size_t hn;
    uint64_t bytes_total, bytes_done;
} merge;

/* Copies the session record so it outlives the reader's next record. */
static envlog_err keep_session(cursor *c, const envlog_session_rec *s)
{
    c->session = *s;
    const char **strs[] = {&c->session.envlog_version, &c->session.runtime,
                           &c->session.runtime_version, &c->session.label,
                           &c->session.host, &c->session.os, &c->session.arch,
                           &c->session.process_mode};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if (!*strs[i])
            continue;
        size_t n = strlen(*strs[i]) + 1;
        char *d = envlog_arena_alloc(&c->arena, n);
        if (!d)
            return envlog__fail(ENVLOG_NOMEM, "keeping a session record");
        memcpy(d, *strs[i], n);
        *strs[i] = d;
    }
    const char **devs = NULL;
    if (s->n_devices &&
        !(devs = envlog_arena_alloc(&c->arena, s->n_devices * sizeof(char *))))
        return envlog__fail(ENVLOG_NOMEM, "keeping a session record");
    for (size_t i = 0; i < s->n_devices; i++) {
        size_t n = strlen(s->devices[i]) + 1;
        char *d = envlog_arena_alloc(&c->arena, n);
        if (!d)
            return envlog__fail(ENVLOG_NOMEM, "keeping a session record");
        memcpy(d, s->devices[i], n);
        devs[i] = d;
    }
    c->session.devices = devs;
    c->have_session = true;
    c->start_ns = s->start_unix_ns;
    return ENVLOG_OK;
}

/* A session record kept for describing the records after it. */
typedef struct kept_session {
    envlog_id128 id;
    envlog_session_rec rec;
} kept_session;

static envlog_err advance_snap(merge *m, cursor *c)
{
    envlog_err e = envlog_snap_next(c->snap, &c->item, &c->srec);
    if (e == ENVLOG_END) {
        c->rec = NULL;
        return ENVLOG_OK;
    }
    if (e)
        return e;
    c->rec = &c->srec;
    c->key_ns = c->item.unix_ns;
    c->id = c->srec.stamp.session;
    m->bytes_done += c->item.record.size;
    if (c->srec.kind == ENVLOG_KIND_SESSION) {
        /* The snapshot holds each compacted session's record as EVIDENCE,
         * before that session's other records (it is seq 0). */
        if (m->n_kept == m->cap_kept) {
            size_t cap = m->cap_kept ? 2 * m->cap_kept : 16;
            kept_session *p = envlog_realloc(m->kept, cap * sizeof *p);
            if (!p)
                return envlog__fail(ENVLOG_NOMEM, "replaying a snapshot");
            m->kept = p;
            m->cap_kept = cap;
        }
        cursor tmp = {0};
        tmp.arena = m->kept_arena;
        e = keep_session(&tmp, &c->srec.u.session);
        m->kept_arena = tmp.arena;
        if (e)
            return e;
        m->kept[m->n_kept].id = c->srec.stamp.session;
        m->kept[m->n_kept++].rec = tmp.session;
    }
    return ENVLOG_OK;
}

static const envlog_session_rec *snap_session(const merge *m, const envlog_id128 *id)
{
    for (size_t i = m->n_kept; i-- > 0;)
        if (!memcmp(m->kept[i].id.b, id->b, 16))
            return &m->kept[i].rec;
    return NULL;
}

/* The next thing of a session: through the merge's read-ahead, or from
 * the cursor's own reader. */
static envlog_err next_of(merge *m, cursor *c, const envlog_damage **dmg)
{
    if (!m->ahead) {
        envlog_err e = envlog_reader_next(c->r, &c->rec);
        *dmg = envlog_reader_damage(c->r);
        return e;
    }
    envlog_err e = envlog_ahead_next(m->ahead, c->ring, &c->it);
    if (!e && !(e = c->it->code))
        c->rec = c->it->r;
    *dmg = &c->it->dmg;
    return e;
}

/* Advances a cursor to its next record; rec is NULL at the end. */
static envlog_err advance(merge *m, cursor *c)
{
    if (c->snap)
        return advance_snap(m, c);
    for (;;) {
        const envlog_damage *dmg;
        envlog_err e = next_of(m, c, &dmg);
        if (e == ENVLOG_END) {
            c->rec = NULL;
            return ENVLOG_OK;
        }
        if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
            if (m->opts && m->opts->on_damage)
                m->opts->on_damage(m->opts->ctx, dmg, e == ENVLOG_TRUNCATED);
            continue;
        }
        if (e)
            return e;
        m->bytes_done += c->rec->payload.size;
        if (c->rec->kind == ENVLOG_KIND_SESSION && !c->have_session &&
            (e = keep_session(c, &c->rec->u.session)))
            return e;
        /* Records up to the watermark are in the snapshot already. */
        if (c->has_wm && c->rec->stamp.seq <= c->watermark)
            continue;
        c->key_ns = c->start_ns + c->rec->stamp.offset_ns;
        return ENVLOG_OK;
    }
}

static void heap_down(merge *m, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < m->hn && cur_cmp(m->heap[l], m->heap[s]) < 0)
            s = l;
        if (r < m->hn && cur_cmp(m->heap[r], m->heap[s]) < 0)
            s = r;
        if (s == i)
            return;
        cursor *t = m->heap[i];
        m->heap[i] = m->heap[s];
        m->heap[s] = t;
        i = s;
    }
}

static uint64_t dir_bytes(envlog_env *env, const char *name)
{
    int fd;
    uint64_t total = 0;
    if (envlog_open_dir(env->sessions_fd, name, &fd))
        return 0;
    envlog_seg_name *segs;
    size_t n;
    if (envlog_list_segments(fd, &segs, &n) == ENVLOG_OK) {
        for (size_t i = 0; i < n; i++) {
            struct stat st;
            if (envlog_io_get()->fstatat(fd, segs[i].name, &st) == 0)
                total += (uint64_t)st.st_size;
        }
        envlog_free(segs);
    }
    close(fd);
    return total;
}

/* Room for `more` cursors past the m->n there are. */
static envlog_err cursors_reserve(merge *m, size_t more)
{
    if (m->n + more <= m->cap)
        return ENVLOG_OK;
    size_t cap = m->n + more;
    cursor *p = envlog_realloc(m->cur, cap * sizeof *p);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "opening sessions");
    m->cur = p;
    m->cap = cap;
    return ENVLOG_OK;
}

/* Opens a cursor per session directory of source `s`. */
static envlog_err open_all(merge *m, size_t s)
{
    envlog_env *env = m->src[s].env;
    envlog_snap *snap = m->src[s].snap;
    if (env->sessions_fd < 0)
        return ENVLOG_OK;
    envlog_id128 *ids;
    size_t n_ids;
    envlog_err e = envlog_session_ids(env, &ids, &n_ids);
    if (e)
        return e;
    if ((e = cursors_reserve(m, n_ids + 1))) {
        envlog_free(ids);
        return e;
    }
    for (size_t k = 0; k < n_ids; k++) {
        envlog_id128 id = ids[k];
        char name[33];
        envlog_id_format(&id, name);
        cursor *c = &m->cur[m->n];
        memset(c, 0, sizeof *c);
        c->id = id;
        c->source = s;
        /* Ids begin with their creation time in ms: the start time to use
         * when the session record itself is unreadable. */
        for (int i = 0; i < 6; i++)
            c->start_ns = c->start_ns << 8 | id.b[i];
        c->start_ns *= 1000000u;
        /* A session the snapshot folded to its sealed end has nothing
         * past its watermark: it is not opened at all. */
        bool complete = false;
        if (snap)
            c->has_wm = envlog_snap_watermark_x(snap, &id, &c->watermark, &complete);
        if (complete)
            continue;
        e = envlog_reader_open(env, &id, &c->r);
        if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
            break;
        if (e) {
            /* A session that cannot be opened (a symbolic link, say) is
             * damage to report, not a reason to stop. */
            if (m->opts && m->opts->on_damage) {
                envlog_damage dm = {.session = id};
                snprintf(dm.reason, sizeof dm.reason, "%.95s", envlog_errmsg());
                m->opts->on_damage(m->opts->ctx, &dm, false);
            }
            e = ENVLOG_OK;
            continue;
        }
        /* The total is for progress reports only: a replay that makes none
         * does not list the directory a second time. */
        if (m->opts && m->opts->on_progress)
            m->bytes_total += dir_bytes(env, name);
        m->n++;
    }
    envlog_free(ids);
    return e;
}

static void close_all(merge *m)
{
    /* The read-ahead closes the readers it took. */
    envlog_ahead_stop(m->ahead);
    for (size_t i = 0; i < m->n; i++) {
        if (m->cur[i].snap)
            continue;
        if (!m->ahead)
            envlog_reader_close(m->cur[i].r);
        envlog_arena_free(&m->cur[i].arena);
    }
    envlog_free(m->cur);
    envlog_free(m->heap);
    envlog_free(m->kept);
    envlog_arena_free(&m->kept_arena);
}

/* The position (time) of stamp `until` in the total order. */
static envlog_err stamp_position(merge *m, uint64_t *ns)
{
    const envlog_replay_opts *o = m->opts;
    for (size_t i = 0; i < m->n; i++) {
        if (m->cur[i].snap || memcmp(m->cur[i].id.b, o->until_session.b, 16))
            continue;
        cursor tmp = {0};
        envlog_err e = envlog_reader_open(m->src[m->cur[i].source].env, &o->until_session,
                                          &tmp.r);
        if (e)
            return e;
        tmp.start_ns = m->cur[i].start_ns;
        tmp.id = o->until_session;
        merge quiet = {0};
        while (!(e = advance(&quiet, &tmp)) && tmp.rec) {
            if (tmp.rec->stamp.seq == o->until_seq) {
                *ns = tmp.key_ns;
                break;
            }
        }
        bool found = !e && tmp.rec;
        envlog_reader_close(tmp.r);
        envlog_arena_free(&tmp.arena);
        if (e)
            return e;
        if (found)
            return ENVLOG_OK;
        break;
    }
    for (size_t s = 0; s < m->n_src; s++) {
        /* A record compacted into a snapshot (kept there as an entry or as
         * evidence). */
        envlog_snap *snap = m->src[s].snap;
        if (!snap)
            continue;
        envlog_snap_item it;
        envlog_record rec;
        bool found = false;
        envlog_err e;
        envlog_snap_rewind_fold(snap);
        while (!found && (e = envlog_snap_next(snap, &it, &rec)) == ENVLOG_OK)
            if (!memcmp(it.stamp.session.b, o->until_session.b, 16) &&
                it.stamp.seq == o->until_seq) {
                *ns = it.unix_ns;
                found = true;
            }
        envlog_snap_rewind(snap);
        if (found)
            return ENVLOG_OK;
        if (e != ENVLOG_END)
            return e; /* not read (out of memory, a failed mapping) */
    }
    char hex[33];
    envlog_id_format(&o->until_session, hex);
    return envlog__fail(ENVLOG_NOT_FOUND, "no record %s:%llu", hex,
                        (unsigned long long)o->until_seq);
}

/* Hands the sessions' readers to the read-ahead (which closes them, even
 * when it cannot start). */
static envlog_err start_ahead(merge *m, bool fold, int threads)
{
    size_t n = 0;
    envlog_reader **rs = envlog_malloc((m->n ? m->n : 1) * sizeof *rs);
    if (!rs)
        return envlog__fail(ENVLOG_NOMEM, "reading sessions");
    for (size_t i = 0; i < m->n; i++) {
        if (m->cur[i].snap)
            continue;
        m->cur[i].ring = n;
        rs[n++] = m->cur[i].r;
    }
    envlog_err e = envlog_ahead_start(rs, n, envlog_ahead_threads(n, threads), fold, m->keep,
                                      &m->ahead);
    if (e) {
        /* The readers are closed: none is left for close_all. */
        for (size_t i = 0; i < m->n; i++)
            if (!m->cur[i].snap)
                m->cur[i].r = NULL;
    }
    envlog_free(rs);
    return e;
}

/* What the merge hands out of cursor `c`'s record. */
static void merge_rec_of(const merge *m, cursor *c, bool fold, envlog_merge_rec *mr)
{
    *mr = (envlog_merge_rec){
        .r = {c->rec,
              c->snap ? snap_session(m, &c->id) : c->have_session ? &c->session : NULL,
              c->key_ns, c->snap != NULL},
        .item = c->snap ? &c->item : NULL,
        .source = c->source,
        /* A record read in place stays in the snapshot's mapping; one
         * put together from fragments does not. */
        .kept = envlog_snap_holds(c->snap, c->rec->payload.data, c->rec->payload.size),
        .hinted = c->hinted,
        .has_hinted = c->has_hinted,
    };
    if (!c->snap) {
        mr->slices = fold ? c->it->sl : NULL;
        mr->kept = c->it->kept;
        mr->loc = c->it->has_loc ? &c->it->loc : NULL;
    }
}

/* Advances `c` and tells `hint` (may be NULL) of the record it reached. */
static envlog_err advance_hinted(merge *m, cursor *c, bool fold, envlog_merge_hint_fn hint,
                                 void *ctx)
{
    envlog_err e = advance(m, c);
    c->has_hinted = false;
    if (!e && c->rec && hint) {
        envlog_merge_rec mr;
        merge_rec_of(m, c, fold, &mr);
        c->has_hinted = hint(ctx, &mr, &c->hinted);
    }
    return e;
}

envlog_err envlog_replay_merge(const envlog_merge_src *src, size_t n_src,
                               const envlog_replay_opts *opts, bool with_snap, bool fold,
                               const envlog_keeper *keep, envlog_merge_fn fn,
                               envlog_merge_hint_fn hint, void *ctx)
{
    merge m = {.src = src, .n_src = n_src, .opts = opts, .keep = keep};
    envlog_err e = ENVLOG_OK;
    for (size_t s = 0; !e && s < n_src; s++) {
        e = open_all(&m, s);
        if (!e && src[s].snap && with_snap && !(e = cursors_reserve(&m, 1))) {
            memset(&m.cur[m.n], 0, sizeof m.cur[m.n]);
            m.cur[m.n].source = s;
            m.cur[m.n++].snap = src[s].snap;
            (fold ? envlog_snap_rewind_fold : envlog_snap_rewind)(src[s].snap);
        }
    }
    uint64_t until_ns = 0;
    if (!e && opts && opts->until_stamp)
        e = stamp_position(&m, &until_ns);
    if (!e)
        e = start_ahead(&m, fold, opts ? opts->threads : 0);
    if (!e && m.n && !(m.heap = envlog_calloc(m.n, sizeof *m.heap)))
        e = envlog__fail(ENVLOG_NOMEM, "replay");
    for (size_t i = 0; !e && i < m.n; i++) {
        if ((e = advance_hinted(&m, &m.cur[i], fold, hint, ctx)))
            break;
        if (m.cur[i].rec)
            m.heap[m.hn++] = &m.cur[i];
    }
    for (size_t i = m.hn; !e && i-- > 0;)
        heap_down(&m, i);
    uint64_t last_progress = 0;
    /* The record handed out last: one that several environments hold (a
     * session shared through a remote) sorts next to itself and goes out
     * once. */
    bool any = false;
    uint64_t last_ns = 0, last_seq = 0;
    envlog_id128 last_id = {{0}};
    while (!e && m.hn) {
        cursor *c = m.heap[0];
        if (opts && opts->until_time && c->key_ns > opts->until_unix_ns)
            break;
        if (opts && opts->until_stamp &&
            envlog_order_cmp(c->key_ns, &c->id, c->rec->stamp.seq, until_ns,
                             &opts->until_session, opts->until_seq) > 0)
            break;
        bool again = n_src > 1 && any && last_ns == c->key_ns && last_seq == c->rec->stamp.seq &&
                     !memcmp(last_id.b, c->id.b, 16);
        /* A record of a session read alone is folded after its session's
         * next is read, when it can be held: the hint for that next one
         * then asks for its key's memory a fold ahead of its use. */
        envlog_merge_rec mr;
        const envlog_ahead_item *held = NULL;
        if (!again) {
            if (hint && !c->snap && (held = envlog_ahead_hold(m.ahead, c->ring))) {
                c->it = held;
                c->rec = held->r;
            }
            merge_rec_of(&m, c, fold, &mr);
            if (!held && (e = fn(ctx, &mr)))
                break;
            any = true;
            last_ns = c->key_ns;
            last_seq = c->rec->stamp.seq;
            last_id = c->id;
        }
        if ((e = advance_hinted(&m, c, fold, hint, ctx)))
            break;
        if (held && (e = fn(ctx, &mr)))
            break;
        if (!c->rec)
            m.heap[0] = m.heap[--m.hn];
        heap_down(&m, 0);
        if (opts && opts->on_progress && m.bytes_done - last_progress > (4u << 20)) {
            last_progress = m.bytes_done;
            opts->on_progress(opts->ctx, m.bytes_done, m.bytes_total);
        }
    }
    if (!e && opts && opts->on_progress)
        opts->on_progress(opts->ctx, m.bytes_total, m.bytes_total);
    close_all(&m);
    return e;
}

typedef struct public_each {
    envlog_err (*fn)(void *ctx, const envlog_replay_rec *r);
    void *ctx;
} public_each;

static envlog_err each_public(void *ctx, const envlog_merge_rec *m)
{
    const public_each *p = ctx;
    return p->fn(p->ctx, &m->r);
}

envlog_err envlog_replay_each(envlog_env *env, const envlog_replay_opts *opts,
                              envlog_err (*fn)(void *ctx, const envlog_replay_rec *r),
                              void *ctx)
{
    envlog_snap *snap;
    int lk, gen;
    envlog_err e = envlog_env_lock(env, false, &lk);
    if (e)
        return e;
    public_each p = {fn, ctx};
    if (!(e = envlog_snap_pick(env, opts && opts->check_snapshot,
                               opts ? opts->on_damage : NULL, opts ? opts->ctx : NULL,
                               &snap, &gen))) {
        envlog_merge_src src = {env, snap};
        e = envlog_replay_merge(&src, 1, opts, true, false, NULL, each_public, NULL, &p);
    }
    envlog_snap_unmap(snap);
    envlog_env_unlock(env, lk);
    return e;
}
