/* SPDX-License-Identifier: MIT */
/*
 * build.c - laying out a snapshot of an environment: the standing entries
 * with the records that set them, the sessions' own records as evidence (so
 * `envlog why` can still say where and on what a winner was chosen), all of
 * the history with --evidence all, and a watermark per session folded.
 * Compaction writes the result as the checkpoint; export compresses it.
 */
#include "replay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hist_rec {
    envlog_snap_item item;  /* record.data points into `data` at `off` */
    size_t off;
    bool is_session;
} hist_rec;

typedef struct build_ctx {
    const envlog_build_opts *o;
    envlog_state *st;
    envlog_err err;
    bool damage;                   /* the base's damage was met */
    /* per session: the highest seq folded */
    envlog_build_session *ss;
    size_t n_ss, cap_ss, last_ss;
    /* session records (always) and, with ALL, every record */
    hist_rec *h;
    size_t n_h, cap_h;
    envlog_buf data;
    /* manifest material */
    envlog_arena arena;
    const char **runtimes;
    size_t n_runtimes, cap_runtimes;
    envlog_snap_env *envs;
    size_t n_envs, cap_envs;
    envlog_snap_source *sources;   /* per environment read (list_sources) */
} build_ctx;

static bool ns_taken(const envlog_build_opts *o, const char *ns)
{
    if (!o->n_prefixes)
        return true;
    for (size_t i = 0; i < o->n_prefixes; i++)
        if (ns && envlog_ns_under(ns, o->prefixes[i]))
            return true;
    return false;
}

static envlog_err grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return ENVLOG_OK;
    size_t c = *cap ? 2 * *cap : 16;
    void *p = envlog_realloc(*v, c * elem);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    *v = p;
    *cap = c;
    return ENVLOG_OK;
}

static const char *dup_str(build_ctx *b, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = envlog_arena_alloc(&b->arena, n);
    if (d)
        memcpy(d, s, n);
    else
        b->err = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    return d;
}

static void note_session(build_ctx *b, const envlog_session_rec *s)
{
    char rt[512];
    snprintf(rt, sizeof rt, "%s %s", s->runtime ? s->runtime : "-",
             s->runtime_version ? s->runtime_version : "-");
    bool seen = false;
    for (size_t i = 0; i < b->n_runtimes && !seen; i++)
        seen = !strcmp(b->runtimes[i], rt);
    if (!seen && !grow((void **)&b->runtimes, &b->cap_runtimes, b->n_runtimes,
                       sizeof *b->runtimes))
        b->runtimes[b->n_runtimes++] = dup_str(b, rt);
    for (size_t i = 0; i < b->n_envs; i++) {
        const envlog_snap_env *e = &b->envs[i];
        if (!strcmp(e->label ? e->label : "", s->label ? s->label : "") &&
            !strcmp(e->host ? e->host : "", s->host ? s->host : "") &&
            !strcmp(e->os ? e->os : "", s->os ? s->os : "") &&
            !strcmp(e->arch ? e->arch : "", s->arch ? s->arch : "") &&
            e->n_devices == s->n_devices) {
            bool same = true;
            for (size_t k = 0; k < e->n_devices && same; k++)
                same = !strcmp(e->devices[k], s->devices[k]);
            if (same)
                return;
        }
    }
    if (grow((void **)&b->envs, &b->cap_envs, b->n_envs, sizeof *b->envs)) {
        b->err = ENVLOG_NOMEM;
        return;
    }
    envlog_snap_env *e = &b->envs[b->n_envs++];
    e->label = dup_str(b, s->label ? s->label : "");
    e->host = dup_str(b, s->host ? s->host : "");
    e->os = dup_str(b, s->os ? s->os : "");
    e->arch = dup_str(b, s->arch ? s->arch : "");
    const char **devs = s->n_devices
        ? envlog_arena_alloc(&b->arena, s->n_devices * sizeof(char *)) : NULL;
    for (size_t k = 0; devs && k < s->n_devices; k++)
        devs[k] = dup_str(b, s->devices[k]);
    e->devices = devs;
    e->n_devices = devs ? s->n_devices : 0;
}

/* The fold's progress as the build's "reading" step; with a progress
 * callback the fold's context is the options (damage goes on to theirs). */
typedef struct fold_watch {
    const envlog_build_opts *o;
} fold_watch;

static void reading(void *ctx, uint64_t done, uint64_t total)
{
    const envlog_build_opts *o = ((fold_watch *)ctx)->o;
    o->on_progress(o->ctx, "reading", done, total);
}

static void damaged(void *ctx, const envlog_damage *d, bool torn)
{
    const envlog_build_opts *o = ((fold_watch *)ctx)->o;
    o->on_damage(o->ctx, d, torn);
}

static envlog_err track_seq(build_ctx *b, const envlog_stamp *st)
{
    if (b->n_ss && !memcmp(b->ss[b->last_ss].id.b, st->session.b, 16)) {
        if (st->seq > b->ss[b->last_ss].last_seq)
            b->ss[b->last_ss].last_seq = st->seq;
        return ENVLOG_OK;
    }
    for (size_t i = 0; i < b->n_ss; i++)
        if (!memcmp(b->ss[i].id.b, st->session.b, 16)) {
            b->last_ss = i;
            if (st->seq > b->ss[i].last_seq)
                b->ss[i].last_seq = st->seq;
            return ENVLOG_OK;
        }
    envlog_err e = grow((void **)&b->ss, &b->cap_ss, b->n_ss, sizeof *b->ss);
    if (e)
        return e;
    b->ss[b->n_ss] = (envlog_build_session){st->session, st->seq, false};
    b->last_ss = b->n_ss++;
    return ENVLOG_OK;
}

static const char *record_ns(const envlog_record *rec)
{
    switch (rec->kind) {
    case ENVLOG_KIND_TUNE: return rec->u.tune.ns;
    case ENVLOG_KIND_COMPILE: return rec->u.compile.ns;
    case ENVLOG_KIND_FORGET: return rec->u.forget.under ? rec->u.forget.under : rec->u.forget.ns;
    default: return NULL;
    }
}

static int build_visit(void *ctx, const envlog_replay_rec *r, const envlog_snap_item *it,
                       size_t source)
{
    build_ctx *b = ctx;
    const envlog_record *rec = r->rec;
    if ((b->err = envlog_state_fold_item(b->st, rec, r->unix_ns, it)) ||
        (b->err = track_seq(b, &rec->stamp)))
        return 1;
    bool session = rec->kind == ENVLOG_KIND_SESSION;
    if (b->sources) {
        b->sources[source].records++;
        b->sources[source].sessions += session;
    }
    if (session && b->o->anonymous) {
        envlog_session_rec s = rec->u.session;
        s.host = s.label = "";
        note_session(b, &s);
    } else if (session) {
        note_session(b, &rec->u.session);
    }
    const char *ns = record_ns(rec);
    /* A tombstone explains an absence: it is history at every level. */
    bool keep = (session && !b->o->anonymous) ||
                (rec->kind == ENVLOG_KIND_FORGET && (!ns || ns_taken(b->o, ns))) ||
                (b->o->evidence == ENVLOG_EVIDENCE_ALL && (!ns || ns_taken(b->o, ns)));
    if (!keep)
        return b->err != ENVLOG_OK;
    if ((b->err = grow((void **)&b->h, &b->cap_h, b->n_h, sizeof *b->h)))
        return 1;
    hist_rec *h = &b->h[b->n_h];
    memset(h, 0, sizeof *h);
    h->item.kind = ENVLOG_KIND_EVIDENCE;
    h->item.stamp = rec->stamp;
    h->item.unix_ns = r->unix_ns;
    h->item.record.size = rec->payload.size;
    h->off = b->data.len;
    h->is_session = session;
    if ((b->err = envlog_buf_append(&b->data, rec->payload.data, rec->payload.size)))
        return 1;
    b->n_h++;
    return 0;
}

/* An environment's directory as a bundle names it: its absolute path. */
static const char *source_path(build_ctx *b, const envlog_env *env)
{
    const char *p = envlog_env_path(env);
    char *abs = realpath(p, NULL);
    const char *d = dup_str(b, abs ? abs : p);
    free(abs);
    return d ? d : "";
}

/* An item of the new snapshot: an entry or a piece of history. */
typedef struct item_ref {
    envlog_snap_item item;
    bool indexed;
    uint64_t hash;
    uint8_t *owned; /* a re-encoded record, for --evidence none */
} item_ref;

typedef struct items_ctx {
    build_ctx *b;
    item_ref *v;
    size_t n, cap;
    const char **nss;
    size_t n_nss, cap_nss;
    uint64_t tunes, kernels, users;
} items_ctx;

/* The tune record without its trials (--evidence none). */
static envlog_err strip_trials(const envlog_bytes *in, uint8_t **out, size_t *n)
{
    envlog_record rec;
    envlog_arena a = {0};
    envlog_buf b = {0};
    envlog_err e = envlog_event_decode(in->data, in->size, &rec, &a);
    if (!e) {
        rec.u.tune.n_trials = 0;
        rec.u.tune.trials = NULL;
        e = envlog_event_encode(&b, ENVLOG_KIND_TUNE, &rec.stamp, rec.effect,
                                ENVLOG_LEVEL_FULL, &rec.u.tune);
    }
    envlog_arena_free(&a);
    if (e) {
        envlog_buf_free(&b);
        return e;
    }
    *out = b.p;
    *n = b.len;
    return ENVLOG_OK;
}

static int take_item(void *ctx, const envlog_state_item *it)
{
    items_ctx *c = ctx;
    if (it->table != ENVLOG_TABLE_USER && !ns_taken(c->b->o, it->ns))
        return 0;
    if (!it->payload.size)
        return 0; /* no record kept: cannot happen with keep_payloads */
    if ((c->b->err = grow((void **)&c->v, &c->cap, c->n, sizeof *c->v)))
        return 1;
    item_ref *r = &c->v[c->n];
    memset(r, 0, sizeof *r);
    r->item.kind = ENVLOG_KIND_ENTRY;
    r->item.table = it->table;
    r->item.origin = it->origin;
    r->item.rule = it->rule;
    r->item.stamp = it->stamp;
    r->item.unix_ns = it->unix_ns;
    r->item.record = it->payload;
    r->indexed = it->table != ENVLOG_TABLE_USER;
    r->hash = it->key_hash;
    if (it->table == ENVLOG_TABLE_TUNE && c->b->o->evidence == ENVLOG_EVIDENCE_NONE) {
        size_t n;
        if ((c->b->err = strip_trials(&it->payload, &r->owned, &n)))
            return 1;
        r->item.record.data = r->owned;
        r->item.record.size = n;
    }
    if (it->table == ENVLOG_TABLE_TUNE)
        c->tunes++;
    else if (it->table == ENVLOG_TABLE_KERNEL)
        c->kernels++;
    else
        c->users++;
    c->n++;
    if (it->table != ENVLOG_TABLE_USER &&
        (!c->n_nss || strcmp(c->nss[c->n_nss - 1], it->ns))) {
        bool seen = false;
        for (size_t i = 0; i < c->n_nss && !seen; i++)
            seen = !strcmp(c->nss[i], it->ns);
        if (!seen) {
            if ((c->b->err = grow((void **)&c->nss, &c->cap_nss, c->n_nss, sizeof *c->nss)))
                return 1;
            c->nss[c->n_nss++] = it->ns;
        }
    }
    return 0;
}

static int item_cmp(const void *a, const void *b)
{
    const item_ref *x = a, *y = b;
    int c = envlog_order_cmp(x->item.unix_ns, &x->item.stamp.session, x->item.stamp.seq,
                             y->item.unix_ns, &y->item.stamp.session, y->item.stamp.seq);
    if (c)
        return c;
    return (x->item.kind > y->item.kind) - (x->item.kind < y->item.kind);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int stamp_cmp(const void *a, const void *b)
{
    const envlog_stamp *x = a, *y = b;
    int c = memcmp(x->session.b, y->session.b, 16);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static void note_base_damage(void *ctx, const envlog_damage *d, bool torn)
{
    build_ctx *b = ctx;
    b->damage = true;
    if (b->o->on_damage)
        b->o->on_damage(b->o->ctx, d, torn);
}

/* The snapshot the new one is built on (see envlog_build_opts.strict). */
static envlog_err build_base(envlog_env *env, const envlog_build_opts *o, build_ctx *b,
                             envlog_snap **snap, envlog_build_result *res)
{
    *snap = NULL;
    res->base_gen = ENVLOG_GEN_NONE;
    if (!o->strict) {
        envlog_err e = envlog_snap_pick(env, true, note_base_damage, b, snap, &res->base_gen);
        if (!e && *snap)
            res->base_id = envlog_snap_id(*snap);
        return e;
    }
    envlog_err e = envlog_snap_map_file(env, "current", true, snap);
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
        return e;
    if (e)
        return envlog__fail(e, "%s; `envlog verify --fix` puts the generation before it "
                            "back", envlog_errmsg());
    envlog_snap_counts c;
    if (*snap && !(envlog_snap_read_counts(*snap, &c) && c.intact)) {
        /* Nothing smaller is ever written over a snapshot that does not
         * read whole. */
        const envlog_damage *d = envlog_snap_first_damage(*snap);
        e = envlog__fail(ENVLOG_CORRUPT,
                         "snapshot/current is damaged (%llu damaged places, %llu entries "
                         "lost%s%s); nothing is built on it: `envlog verify --fix` puts the "
                         "generation before it back",
                         (unsigned long long)envlog_snap_bad_records(*snap),
                         (unsigned long long)c.lost, d ? ", the first: " : "",
                         d ? d->reason : "");
        envlog_snap_unmap(*snap);
        *snap = NULL;
        return e;
    }
    if (!*snap) {
        envlog_snap *prev = NULL;
        e = envlog_snap_map_file(env, "previous", false, &prev);
        bool there = prev || (e != ENVLOG_OK && e != ENVLOG_NOMEM && e != ENVLOG_IO);
        envlog_snap_unmap(prev);
        if (there)
            return envlog__fail(ENVLOG_CORRUPT,
                                "snapshot/current is missing while snapshot/previous is "
                                "there; `envlog verify --fix` puts it back");
        return e == ENVLOG_NOMEM || e == ENVLOG_IO ? e : ENVLOG_OK;
    }
    res->base_gen = ENVLOG_GEN_CURRENT;
    res->base_id = envlog_snap_id(*snap);
    return ENVLOG_OK;
}

/* The base's watermarks carry over: a session it folded stays folded as
 * far as it was, whatever of its records the new snapshot keeps. */
static envlog_err carry_watermarks(build_ctx *b, const envlog_snap *snap)
{
    if (!snap)
        return ENVLOG_OK;
    const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
    for (size_t i = 0; i < m->n_wms; i++) {
        envlog_stamp st = {m->wms[i].session, m->wms[i].last_seq, 0};
        envlog_err e = track_seq(b, &st);
        if (e)
            return e;
        /* (of several environments' snapshots, one that reached its end
         * says so whatever the others folded) */
        if (b->ss[b->last_ss].last_seq == m->wms[i].last_seq)
            b->ss[b->last_ss].complete |= m->wms[i].complete;
    }
    return ENVLOG_OK;
}

static envlog_err copy_watermarks(envlog_build_result *res, const envlog_snap *snap)
{
    if (!snap)
        return ENVLOG_OK;
    const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
    if (!m->n_wms)
        return ENVLOG_OK;
    if (!(res->base_wms = envlog_calloc(m->n_wms, sizeof *res->base_wms)))
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    for (size_t i = 0; i < m->n_wms; i++)
        res->base_wms[i] = (envlog_build_session){m->wms[i].session, m->wms[i].last_seq,
                                                   m->wms[i].complete};
    res->n_base_wms = m->n_wms;
    return ENVLOG_OK;
}

/* A watermark at the last seq of a session known sealed is complete. */
static void mark_complete(build_ctx *b, const envlog_build_opts *o)
{
    for (size_t i = 0; i < b->n_ss; i++)
        for (size_t k = 0; k < o->n_sealed; k++)
            if (!memcmp(b->ss[i].id.b, o->sealed[k].id.b, 16) &&
                b->ss[i].last_seq == o->sealed[k].last_seq)
                b->ss[i].complete = true;
}

/* ------------------------------------------------------------ retention */

/* Which sessions keep their history: the newest history_sessions of those
 * the snapshot knows, younger than history_age_ns (each when set); and the
 * sessions that set a standing entry keep their own session record. */
typedef struct retention {
    bool all;                 /* no retention: everything stays */
    bool none;                /* max_size: no history but the setters' */
    bool cut;                 /* max_size: no history of sessions before */
    envlog_id128 cut_at;      /* this one */
    envlog_id128 *young;      /* sorted */
    size_t n_young;
    const envlog_stamp *setters; /* the entries' stamps, sorted by session */
    size_t n_setters;
    const envlog_build_opts *o;
} retention;

static int id_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

static uint64_t id_unix_ns(const envlog_id128 *id)
{
    uint64_t ms = 0;
    for (int i = 0; i < 6; i++)
        ms = ms << 8 | id->b[i];
    return ms * 1000000u;
}

/* What the size bound takes of the history (keep_under). */
typedef struct history_cut {
    bool all;                 /* every session's */
    bool some;                /* or that of the sessions before `at` */
    envlog_id128 at;
} history_cut;

static envlog_err retention_begin(retention *rt, const build_ctx *b, const envlog_build_opts *o,
                                  const envlog_stamp *setters, size_t n_setters,
                                  const history_cut *cut)
{
    memset(rt, 0, sizeof *rt);
    rt->o = o;
    rt->setters = setters;
    rt->n_setters = n_setters;
    rt->none = cut->all;
    rt->cut = cut->some;
    rt->cut_at = cut->at;
    rt->all = !rt->none && !rt->cut && !o->history_sessions && !o->history_age_ns;
    if (rt->all || rt->none || !b->n_ss)
        return ENVLOG_OK;
    if (!(rt->young = envlog_malloc(b->n_ss * sizeof *rt->young)))
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    for (size_t i = 0; i < b->n_ss; i++)
        rt->young[i] = b->ss[i].id;
    qsort(rt->young, b->n_ss, sizeof *rt->young, id_cmp);
    /* Ids sort by creation: the newest are at the end. */
    size_t from = 0;
    if (o->history_sessions && b->n_ss > o->history_sessions)
        from = b->n_ss - (size_t)o->history_sessions;
    uint64_t now = envlog_clock_unix_ns();
    if (o->history_age_ns)
        while (from < b->n_ss && now > o->history_age_ns &&
               id_unix_ns(&rt->young[from]) < now - o->history_age_ns)
            from++;
    while (rt->cut && from < b->n_ss && memcmp(rt->young[from].b, rt->cut_at.b, 16) < 0)
        from++;
    memmove(rt->young, rt->young + from, (b->n_ss - from) * sizeof *rt->young);
    rt->n_young = b->n_ss - from;
    return ENVLOG_OK;
}

static bool is_young(const retention *rt, const envlog_id128 *id)
{
    if (rt->all)
        return true;
    return !rt->none && rt->n_young &&
           bsearch(id, rt->young, rt->n_young, sizeof *rt->young, id_cmp);
}

static bool is_setter(const retention *rt, const envlog_id128 *id)
{
    for (size_t lo = 0, hi = rt->n_setters; lo < hi;) {
        size_t mid = lo + (hi - lo) / 2;
        int c = memcmp(rt->setters[mid].session.b, id->b, 16);
        if (!c)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static bool retention_keeps(const retention *rt, const hist_rec *h)
{
    const envlog_id128 *id = &h->item.stamp.session;
    return is_young(rt, id) || (h->is_session && is_setter(rt, id));
}

/* A watermark goes with its session's history once its directory is gone
 * (nothing is left to fold twice); while the directory is there it stays. */
static bool retention_keeps_watermark(const retention *rt, const envlog_id128 *id)
{
    if (rt->all || is_young(rt, id) || is_setter(rt, id))
        return true;
    return rt->o->n_present &&
           bsearch(id, rt->o->present, rt->o->n_present, sizeof *rt->o->present, id_cmp);
}

/* A session's share of the history (keep_under). */
typedef struct session_bytes {
    envlog_id128 id;
    uint64_t bytes;
} session_bytes;

static int sb_cmp(const void *a, const void *b)
{
    return memcmp(((const session_bytes *)a)->id.b, ((const session_bytes *)b)->id.b, 16);
}

/* What a record of history weighs in a snapshot: its payload, its EVIDENCE
 * wrapper and framing, rounded up (envlog(5), MAINTENANCE). */
#define HISTORY_WEIGHT(size) ((uint64_t)(size) + 64)

/* How much history must go for `fixed` bytes (the entries and the head) and
 * the history to fit in `budget`: that of the oldest sessions first (by id,
 * which sorts by when a session began), as few as will do. */
static envlog_err cut_history(const build_ctx *b, uint64_t fixed, uint64_t budget,
                              history_cut *cut)
{
    uint64_t hist = 0;
    for (size_t i = 0; i < b->n_h; i++)
        hist += HISTORY_WEIGHT(b->h[i].item.record.size);
    if (fixed + hist <= budget)
        return ENVLOG_OK;
    if (fixed >= budget || !b->n_h) {
        cut->all = true;
        return ENVLOG_OK;
    }
    session_bytes *v = envlog_malloc(b->n_h * sizeof *v);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "keeping the snapshot under max_size");
    for (size_t i = 0; i < b->n_h; i++)
        v[i] = (session_bytes){b->h[i].item.stamp.session,
                               HISTORY_WEIGHT(b->h[i].item.record.size)};
    qsort(v, b->n_h, sizeof *v, sb_cmp);
    size_t i = 0;
    while (i < b->n_h && fixed + hist > budget) {
        envlog_id128 id = v[i].id;
        for (; i < b->n_h && !memcmp(v[i].id.b, id.b, 16); i++)
            hist -= v[i].bytes;
    }
    if (i == b->n_h)
        cut->all = true;
    else {
        cut->some = true;
        cut->at = v[i].id;
    }
    envlog_free(v);
    return ENVLOG_OK;
}

/* The size bound: the history of the oldest sessions goes first, then, if
 * the entries alone do not fit, all history and entries, least recently set
 * first, until the new snapshot takes half of max_size (two generations are
 * kept).  Sizes are estimated from above: each entry and record of history
 * as its payload and a wrapper, the head as 8 KiB and a watermark per
 * session; the session records of every session are counted as kept. */
static envlog_err keep_under(envlog_env *env, const envlog_build_opts *o, build_ctx *b,
                             envlog_build_result *res, history_cut *cut)
{
    uint64_t budget = o->max_size / 2;
    uint64_t head = 8192 + 48 * (uint64_t)b->n_ss, sessions = 0;
    for (size_t i = 0; i < b->n_h; i++)
        if (b->h[i].is_session)
            sessions += HISTORY_WEIGHT(b->h[i].item.record.size);
    uint64_t entries = envlog_state_bytes(b->st);
    envlog_err e = cut_history(b, entries + head, budget, cut);
    if (e || !cut->all || entries + head + sessions <= budget)
        return e;
    envlog_evict_result r;
    if ((e = envlog_evict(env, b->st, budget, head + sessions, o, &r)))
        return e;
    res->evicted = r.evicted;
    res->evicted_bytes = r.bytes;
    if (r.wrote) {
        /* The evict session is folded whole: its watermark is complete. */
        envlog_stamp st = {r.session, r.last_seq, 0};
        if ((e = track_seq(b, &st)))
            return e;
        b->ss[b->last_ss].complete = true;
    }
    return ENVLOG_OK;
}

void envlog_build_result_free(envlog_build_result *r)
{
    envlog_buf_free(&r->file);
    envlog_free(r->sessions);
    envlog_free(r->base_wms);
    memset(r, 0, sizeof *r);
}

envlog_err envlog_snapshot_build(envlog_env *env, const envlog_build_opts *o,
                                 envlog_build_result *res)
{
    memset(res, 0, sizeof *res);
    build_ctx b = {.o = o};
    items_ctx ic = {.b = &b};
    envlog_snapw w = {0};
    envlog_stamp *entry_stamps = NULL;
    retention rt = {0};
    envlog_err e = envlog_state_new_x(true, &b.st);
    if (e)
        return e;
    fold_watch watch = {o};
    /* The environment built from and those folded with it (o->more), each
     * under its shared lock, each read past its own snapshot. */
    size_t n_src = 1 + o->n_more;
    envlog_merge_src *src = envlog_calloc(n_src, sizeof *src);
    int *lk = envlog_malloc(n_src * sizeof *lk);
    size_t n_locked = 0;
    if (!src || !lk)
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    if (!e && o->list_sources &&
        !(b.sources = envlog_arena_alloc(&b.arena, n_src * sizeof *b.sources)))
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    if (b.sources)
        memset(b.sources, 0, n_src * sizeof *b.sources);
    for (size_t i = 0; !e && i < n_src; i++) {
        src[i].env = i ? o->more[i - 1] : env;
        if ((e = envlog_env_lock(src[i].env, false, &lk[i])))
            break;
        n_locked++;
        if (!i) {
            e = build_base(env, o, &b, &src[0].snap, res);
            if (!e)
                e = copy_watermarks(res, src[0].snap);
        } else {
            int gen;
            e = envlog_snap_pick(src[i].env, true, note_base_damage, &b, &src[i].snap, &gen);
        }
        if (!e)
            e = carry_watermarks(&b, src[i].snap);
    }
    if (!e)
        e = envlog_replay_merge(src, n_src, &(envlog_replay_opts){
                                    .on_damage = !o->on_progress ? o->on_damage
                                                 : o->on_damage ? damaged : NULL,
                                    .on_progress = o->on_progress ? reading : NULL,
                                    .ctx = o->on_progress ? (void *)&watch : o->ctx},
                                true, true, build_visit, &b);
    for (size_t i = 0; src && i < n_src; i++)
        envlog_snap_unmap(src[i].snap);
    for (size_t i = 0; i < n_locked; i++)
        envlog_env_unlock(lk[i]);
    envlog_free(src);
    envlog_free(lk);
    if (e == ENVLOG_STATE)
        e = b.err;
    if (!e)
        e = b.err;
    if (!e)
        mark_complete(&b, o);
    history_cut cut = {0};
    if (!e && o->max_size)
        e = keep_under(env, o, &b, res, &cut);
    if (!e && !o->n_prefixes)
        e = envlog_state_digest(b.st, &res->digest);

    if (!e) {
        e = envlog_state_items(b.st, take_item, &ic);
        if (e == ENVLOG_STATE)
            e = b.err;
    }
    if (e)
        goto out;
    /* History records that are an entry's own record are the entry. */
    if (ic.n && !(entry_stamps = envlog_malloc(ic.n * sizeof *entry_stamps))) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        goto out;
    }
    for (size_t i = 0; i < ic.n; i++)
        entry_stamps[i] = ic.v[i].item.stamp;
    if (ic.n) /* qsort of NULL is undefined, even of nothing */
        qsort(entry_stamps, ic.n, sizeof *entry_stamps, stamp_cmp);
    size_t n_entries = ic.n;
    if ((e = retention_begin(&rt, &b, o, entry_stamps, n_entries, &cut)))
        goto out;
    for (size_t i = 0; i < b.n_h; i++) {
        hist_rec *h = &b.h[i];
        /* (guarded by the pointer itself: GCC's nonnull check of bsearch's
         * base, under UBSan at -O1, is made before the count's test) */
        if (entry_stamps && bsearch(&h->item.stamp, entry_stamps, n_entries,
                                    sizeof *entry_stamps, stamp_cmp))
            continue;
        if (!retention_keeps(&rt, h)) {
            res->history_dropped++;
            if (o->on_removal) {
                int kind = envlog_payload_kind(b.data.p + h->off, h->item.record.size);
                envlog_removal rm = {ENVLOG_REMOVED_HISTORY, h->item.stamp, h->item.unix_ns,
                                     (envlog_kind)kind, 0, NULL, NULL, 0,
                                     h->item.record.size};
                o->on_removal(o->ctx_removal, &rm);
            }
            continue;
        }
        if ((e = grow((void **)&ic.v, &ic.cap, ic.n, sizeof *ic.v)))
            goto out;
        item_ref *r = &ic.v[ic.n++];
        memset(r, 0, sizeof *r);
        r->item = h->item;
        r->item.record.data = b.data.p + h->off;
    }
    if (ic.n)
        qsort(ic.v, ic.n, sizeof *ic.v, item_cmp);
    for (size_t i = 0; i < ic.n; i++)
        if ((e = envlog_snapw_add_ref(&w, &ic.v[i].item, ic.v[i].indexed && !o->no_index,
                                      ic.v[i].hash)))
            goto out;
    if (ic.n_nss)
        qsort(ic.nss, ic.n_nss, sizeof *ic.nss, str_cmp);
    envlog_snap_wm *wms = b.n_ss ? envlog_arena_alloc(&b.arena, b.n_ss * sizeof *wms) : NULL;
    if (b.n_ss && !wms) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        goto out;
    }
    size_t n_wms = 0;
    for (size_t i = 0; i < b.n_ss; i++)
        if (retention_keeps_watermark(&rt, &b.ss[i].id))
            wms[n_wms++] = (envlog_snap_wm){b.ss[i].id, b.ss[i].last_seq, b.ss[i].complete};
    envlog_snap_manifest m = {
        .schema = ENVLOG_BUNDLE_SCHEMA,
        .name = o->name ? o->name : "",
        .envlog_version = ENVLOG_VERSION_STRING,
        .created_unix_ns = envlog_clock_unix_ns(),
        .runtimes = b.runtimes, .n_runtimes = b.n_runtimes,
        .envs = b.envs, .n_envs = b.n_envs,
        .wms = wms, .n_wms = n_wms,
        .tunes = ic.tunes, .kernels = ic.kernels, .users = ic.users,
        .evidence = ic.n - n_entries,
        .evidence_level = (int)o->evidence,
        .namespaces = ic.nss, .n_namespaces = ic.n_nss,
        .compacted_by = o->reason,
        .sources = b.sources, .n_sources = b.sources ? 1 + o->n_more : 0,
    };
    for (size_t i = 0; b.sources && i < 1 + o->n_more; i++)
        b.sources[i].path = o->anonymous ? "" : source_path(&b, i ? o->more[i - 1] : env);
    envlog_id128 id;
    if (b.err || (e = envlog_id_new(&id)) ||
        (e = o->sink ? envlog_snapw_finish_to(&w, &m, &id, o->content, o->sink)
                     : envlog_snapw_finish(&w, &m, &id, o->content, &res->file)))
        goto out;
    res->entries = n_entries;
    res->evidence = ic.n - n_entries;
    res->sessions = b.ss;
    res->n_sessions = b.n_ss;
    res->damage = b.damage;
    b.ss = NULL;
out:
    envlog_free(rt.young);
    if (!e && b.err)
        e = b.err;
    for (size_t i = 0; i < ic.n; i++)
        envlog_free(ic.v[i].owned);
    envlog_free(ic.v);
    envlog_free(ic.nss);
    envlog_free(entry_stamps);
    envlog_snapw_free(&w);
    envlog_state_close(b.st);
    envlog_free(b.ss);
    envlog_free(b.h);
    envlog_buf_free(&b.data);
    envlog_free(b.runtimes);
    envlog_free(b.envs);
    envlog_arena_free(&b.arena);
    if (e)
        envlog_build_result_free(res);
    return e;
}
