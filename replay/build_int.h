/* SPDX-License-Identifier: MIT */
/*
 * build_int.h - what building a snapshot (build.c) shares with the items it
 * lays out (build_items.c) and the history it keeps (retention.c); nothing
 * else includes it.
 */
#ifndef ENVLOG_BUILD_INT_H
#define ENVLOG_BUILD_INT_H

#include "replay_int.h"

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
    const envlog_merge_src *src;   /* what is folded; its snapshots stay mapped */
} build_ctx;

/* An item of the new snapshot: an entry or a piece of history. */
typedef struct item_ref {
    envlog_snap_item item;
    bool indexed;
    uint64_t hash;
    bool stripped;  /* its record re-encoded without its trials (--evidence
                       none), at strip_at in items_ctx.stripped */
    size_t strip_at;
    const char *ns; /* a tune or kernel entry's namespace */
} item_ref;

typedef struct items_ctx {
    build_ctx *b;
    item_ref *v;
    size_t n, cap;
    const char **nss;
    size_t n_nss;
    uint64_t tunes, kernels, users;
    /* the records re-encoded without their trials, one after another, and
     * what re-encoding one takes (reused) */
    envlog_buf stripped, scratch;
    envlog_arena strip_mem;
} items_ctx;

/* What the items are sorted by, apart from them: sorting the items
 * themselves (over 100 bytes each) moved them several times over. */
typedef struct item_key {
    uint64_t unix_ns, seq;
    envlog_id128 session;
    uint32_t kind, at; /* the item's kind, its place in items_ctx.v */
} item_key;

bool envlog_build_ns_taken(const envlog_build_opts *o, const char *ns);
/* Grows *v (of *cap elements of `elem` bytes) to hold n + 1. */
envlog_err envlog_build_grow(void **v, size_t *cap, size_t n, size_t elem);
int envlog_build_str_cmp(const void *a, const void *b);
/* The standing entries of b->st (and the user records) into `ic`, with
 * their namespaces (ic->nss: each once, sorted). */
envlog_err envlog_build_items(build_ctx *b, items_ctx *ic);
/* Frees what envlog_build_items() took. */
void envlog_build_items_free(items_ctx *ic);
/* The items' places in the total order (then by kind); NULL: no memory. */
item_key *envlog_build_items_order(const items_ctx *ic);

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

/* What the size bound takes of the history (keep_under). */
typedef struct history_cut {
    bool all;                 /* every session's */
    bool some;                /* or that of the sessions before `at` */
    envlog_id128 at;
} history_cut;

/* The retention of `o` over what `b` folded: setters are the standing
 * entries' stamps (sorted), `cut` what the size bound takes. */
envlog_err envlog_retention_begin(retention *rt, const build_ctx *b, const envlog_build_opts *o,
                                  const envlog_stamp *setters, size_t n_setters,
                                  const history_cut *cut);
/* Whether the record of history `h`, or the watermark of session `id`,
 * stays. */
bool envlog_retention_keeps(const retention *rt, const hist_rec *h);
bool envlog_retention_keeps_watermark(const retention *rt, const envlog_id128 *id);
/* The size bound (o->max_size): what goes of the history, into `cut`, and
 * the entries evicted when the history alone is not enough, into *ev (its
 * session, when one was written, for the build to take as folded). */
envlog_err envlog_keep_under(envlog_env *env, const envlog_build_opts *o, const build_ctx *b,
                             history_cut *cut, envlog_evict_result *ev);

/* Whether the tune record `in` holds no trials and is laid out as envlog
 * writes one (its trials stripped, it would encode the same bytes): by a
 * plain path over the shapes a tune record's values take, the walk of
 * every item deciding the rest; with `walk_only` by the walk alone (the
 * tests hold the two to the same answer). */
bool envlog_build_no_trials(const envlog_bytes *in, bool walk_only);
/* The plain path's yes alone (false: not plain, or not without trials). */
bool envlog_build_no_trials_plain(const envlog_bytes *in);

#endif
