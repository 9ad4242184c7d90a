/* SPDX-License-Identifier: MIT */
/*
 * build.c - laying out a snapshot of an environment: the standing entries
 * with the records that set them, the sessions' own records as evidence (so
 * `envlog why` can still say where and on what a winner was chosen), all of
 * the history with --evidence all, and a watermark per session folded.
 * Compaction writes the result as the checkpoint; export compresses it.
 */
#include "build_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (!seen && !envlog_build_grow((void **)&b->runtimes, &b->cap_runtimes, b->n_runtimes,
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
    if (envlog_build_grow((void **)&b->envs, &b->cap_envs, b->n_envs, sizeof *b->envs)) {
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

/* Notes that the session of `st` is folded up to its seq (watermarks). */
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
    envlog_err e = envlog_build_grow((void **)&b->ss, &b->cap_ss, b->n_ss, sizeof *b->ss);
    if (e)
        return e;
    b->ss[b->n_ss] = (envlog_build_session){st->session, st->seq, false};
    b->last_ss = b->n_ss++;
    return ENVLOG_OK;
}

/* The namespace a record is under, as a string (in `buf` when the merge
 * gave it as a slice and it fits; NULL when it has none or does not fit:
 * namespaces are far shorter than `buf`). */
static const char *record_ns(const envlog_merge_rec *m, char *buf, size_t size)
{
    const envlog_record *rec = m->r.rec;
    const char *s = NULL;
    switch (rec->kind) {
    case ENVLOG_KIND_TUNE: s = rec->u.tune.ns; break;
    case ENVLOG_KIND_COMPILE: s = rec->u.compile.ns; break;
    case ENVLOG_KIND_FORGET:
        return rec->u.forget.under ? rec->u.forget.under : rec->u.forget.ns;
    default: return NULL;
    }
    if (s || !m->slices)
        return s;
    /* The namespace is the first field of both kinds' schemas. */
    envlog_text t = m->slices[0];
    if (!t.p || t.n >= size)
        return NULL;
    memcpy(buf, t.p, t.n);
    buf[t.n] = 0;
    return buf;
}

/* Sessions' bytes stay with the state, which keeps their segments;
 * snapshots stay mapped until the build ends: a record read in place is
 * referred to, one reassembled from fragments copied (the merge says which). */
static bool build_coming(void *ctx, const envlog_merge_rec *m, uint64_t *hash)
{
    return envlog_state_fold_hint(((const build_ctx *)ctx)->st, m, hash);
}

static envlog_err build_visit(void *ctx, const envlog_merge_rec *m)
{
    build_ctx *b = ctx;
    const envlog_replay_rec *r = &m->r;
    const envlog_record *rec = r->rec;
    size_t source = m->source;
    envlog_err e;
    if ((e = envlog_state_fold_merged(b->st, m)) ||
        (e = track_seq(b, &rec->stamp)))
        return e;
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
    char nsbuf[1024];
    const char *ns = record_ns(m, nsbuf, sizeof nsbuf);
    /* A tombstone explains an absence: it is history at every level. */
    bool keep = (session && !b->o->anonymous) ||
                (rec->kind == ENVLOG_KIND_FORGET && (!ns || envlog_build_ns_taken(b->o, ns))) ||
                (b->o->evidence == ENVLOG_EVIDENCE_ALL && (!ns || envlog_build_ns_taken(b->o, ns)));
    if (!keep)
        return b->err;
    if ((e = envlog_build_grow((void **)&b->h, &b->cap_h, b->n_h, sizeof *b->h)))
        return e;
    hist_rec *h = &b->h[b->n_h];
    memset(h, 0, sizeof *h);
    h->item.kind = ENVLOG_KIND_EVIDENCE;
    h->item.stamp = rec->stamp;
    h->item.unix_ns = r->unix_ns;
    h->item.record.size = rec->payload.size;
    h->off = b->data.len;
    h->is_session = session;
    if ((e = envlog_buf_append(&b->data, rec->payload.data, rec->payload.size)))
        return e;
    b->n_h++;
    return ENVLOG_OK;
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

static int stamp_cmp(const void *a, const void *b)
{
    const envlog_stamp *x = a, *y = b;
    int c = memcmp(x->session.b, y->session.b, 16);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* stamp_cmp()'s order as three numbers (the session's bytes read as two
 * big-endian numbers compare as memcmp() compares them). */
static uint64_t stamp_session_hi(const void *a)
{
    return envlog_get_be64(((const envlog_stamp *)a)->session.b);
}

static uint64_t stamp_session_lo(const void *a)
{
    return envlog_get_be64(((const envlog_stamp *)a)->session.b + 8);
}

static uint64_t stamp_seq(const void *a)
{
    return ((const envlog_stamp *)a)->seq;
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

/* The size bound (retention.c); the evict session it writes, if any, is
 * folded whole: its watermark is complete. */
static envlog_err keep_under(envlog_env *env, const envlog_build_opts *o, build_ctx *b,
                             envlog_build_result *res, history_cut *cut)
{
    envlog_evict_result ev;
    envlog_err e = envlog_keep_under(env, o, b, cut, &ev);
    if (e)
        return e;
    res->evicted = ev.evicted;
    res->evicted_bytes = ev.bytes;
    if (!ev.wrote)
        return ENVLOG_OK;
    envlog_stamp st = {ev.session, ev.last_seq, 0};
    if ((e = track_seq(b, &st)))
        return e;
    b->ss[b->last_ss].complete = true;
    return ENVLOG_OK;
}

void envlog_build_result_free(envlog_build_result *r)
{
    envlog_buf_free(&r->file);
    envlog_free(r->sessions);
    envlog_free(r->base_wms);
    envlog_free(r->ns_entries);
    memset(r, 0, sizeof *r);
}

envlog_err envlog_snapshot_build(envlog_env *env, const envlog_build_opts *o,
                                 envlog_build_result *res)
{
    memset(res, 0, sizeof *res);
    build_ctx b = {.o = o};
    items_ctx ic = {0};
    envlog_snapw w = {.hold = o->hold_encodings ? ENVLOG_SNAPW_HOLD : 0};
    envlog_stamp *entry_stamps = NULL;
    item_key *order = NULL;
    retention rt = {0};
    envlog_err e = envlog_state_new(&b.st);
    if (e)
        return e;
    fold_watch watch = {o};
    /* The environment built from and those folded with it (o->more), each
     * under its shared lock, each read past its own snapshot. */
    size_t n_src = 1 + o->n_more;
    envlog_merge_src *src = envlog_calloc(n_src, sizeof *src);
    b.src = src;
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
                                true, true, &(envlog_keeper){envlog_state_keep, b.st, false},
                                build_visit, build_coming, &b);
    for (size_t i = 0; i < n_locked; i++)
        envlog_env_unlock(src[i].env, lk[i]);
    envlog_free(lk);
    if (!e)
        e = b.err;
    if (!e)
        mark_complete(&b, o);
    history_cut cut = {0};
    if (!e && o->max_size)
        e = keep_under(env, o, &b, res, &cut);
    if (!e && !o->n_prefixes && !o->no_digest)
        e = envlog_state_digest(b.st, &res->digest);

    if (!e)
        e = envlog_build_items(&b, &ic);
    if (e)
        goto out;
    /* History records that are an entry's own record are the entry. */
    if (ic.n && !(entry_stamps = envlog_malloc_big(ic.n * sizeof *entry_stamps, false))) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        goto out;
    }
    for (size_t i = 0; i < ic.n; i++)
        entry_stamps[i] = ic.v[i].item.stamp;
    static const envlog_sort_key by_stamp[] = {stamp_session_hi, stamp_session_lo, stamp_seq};
    if (ic.n) /* qsort of NULL is undefined, even of nothing */
        envlog_sort_keyed(entry_stamps, ic.n, sizeof *entry_stamps, by_stamp, 3, stamp_cmp,
                          true);
    size_t n_entries = ic.n;
    if ((e = envlog_retention_begin(&rt, &b, o, entry_stamps, n_entries, &cut)))
        goto out;
    for (size_t i = 0; i < b.n_h; i++) {
        hist_rec *h = &b.h[i];
        /* (guarded by the pointer itself: GCC's nonnull check of bsearch's
         * base, under UBSan at -O1, is made before the count's test) */
        if (entry_stamps && bsearch(&h->item.stamp, entry_stamps, n_entries,
                                    sizeof *entry_stamps, stamp_cmp))
            continue;
        if (!envlog_retention_keeps(&rt, h)) {
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
        if ((e = envlog_build_grow((void **)&ic.v, &ic.cap, ic.n, sizeof *ic.v)))
            goto out;
        item_ref *r = &ic.v[ic.n++];
        memset(r, 0, sizeof *r);
        r->item = h->item;
        r->item.record.data = b.data.p + h->off;
    }
    if (ic.n > UINT32_MAX) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot: %zu records", ic.n);
        goto out;
    }
    if (ic.n && !(order = envlog_build_items_order(&ic))) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        goto out;
    }
    if ((e = envlog_snapw_expect(&w, ic.n)))
        goto out;
    for (size_t i = 0; i < ic.n; i++) {
        const item_ref *r = &ic.v[order[i].at];
        if ((e = envlog_snapw_add_ref(&w, &r->item, r->indexed && !o->no_index, r->hash)))
            goto out;
    }
    /* The entries under each namespace (a bundle's description). */
    if (ic.n_nss && !(res->ns_entries = envlog_calloc(ic.n_nss, sizeof *res->ns_entries))) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        goto out;
    }
    res->n_ns_entries = ic.n_nss;
    for (size_t i = 0; i < ic.n; i++) {
        const char **at = ic.v[i].ns ? bsearch(&ic.v[i].ns, ic.nss, ic.n_nss, sizeof *ic.nss,
                                               envlog_build_str_cmp)
                                     : NULL;
        if (at)
            res->ns_entries[at - ic.nss]++;
    }
    envlog_snap_wm *wms = b.n_ss ? envlog_arena_alloc(&b.arena, b.n_ss * sizeof *wms) : NULL;
    if (b.n_ss && !wms) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        goto out;
    }
    size_t n_wms = 0;
    for (size_t i = 0; i < b.n_ss; i++)
        if (envlog_retention_keeps_watermark(&rt, &b.ss[i].id))
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
    envlog_build_items_free(&ic);
    envlog_free(entry_stamps);
    envlog_free(order);
    envlog_snapw_free(&w);
    envlog_state_close(b.st);
    for (size_t i = 0; src && i < n_src; i++)
        envlog_snap_unmap(src[i].snap);
    envlog_free(src);
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
