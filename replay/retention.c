/* SPDX-License-Identifier: MIT */
/*
 * retention.c - what a new snapshot keeps of the history: the retention
 * policy (the newest sessions' history, younger than an age; the setters
 * of the standing entries keep their session records) and the size bound
 * (history first, then entries least recently set, until the snapshot
 * takes half of max_size).
 */
#include "build_int.h"

#include <stdlib.h>
#include <string.h>

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

envlog_err envlog_retention_begin(retention *rt, const build_ctx *b, const envlog_build_opts *o,
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

bool envlog_retention_keeps(const retention *rt, const hist_rec *h)
{
    const envlog_id128 *id = &h->item.stamp.session;
    return is_young(rt, id) || (h->is_session && is_setter(rt, id));
}

/* A watermark goes with its session's history once its directory is gone
 * (nothing is left to fold twice); while the directory is there it stays. */
bool envlog_retention_keeps_watermark(const retention *rt, const envlog_id128 *id)
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
envlog_err envlog_keep_under(envlog_env *env, const envlog_build_opts *o, const build_ctx *b,
                             history_cut *cut, envlog_evict_result *ev)
{
    memset(ev, 0, sizeof *ev);
    uint64_t budget = o->max_size / 2;
    uint64_t head = 8192 + 48 * (uint64_t)b->n_ss, sessions = 0;
    for (size_t i = 0; i < b->n_h; i++)
        if (b->h[i].is_session)
            sessions += HISTORY_WEIGHT(b->h[i].item.record.size);
    uint64_t entries = envlog_state_bytes(b->st);
    envlog_err e = cut_history(b, entries + head, budget, cut);
    if (e || !cut->all || entries + head + sessions <= budget)
        return e;
    return envlog_evict(env, b->st, budget, head + sessions, o, ev);
}
