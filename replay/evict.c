/* SPDX-License-Identifier: MIT */
/*
 * evict.c - keeping an environment under its size bound (envlog(5),
 * MAINTENANCE): the standing entries of a compaction's fold, least recently
 * set first, are forgotten until the snapshot fits, each by a forget record
 * of a session of its own (labelled "evict"), so `why` says what was
 * evicted and when, the generation kept with the sessions beside it still
 * folds to the new state, and nothing is ever dropped silently.
 */
#include "replay_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an entry weighs beyond its record: its ENTRY wrapper, framing and
 * INDEX pair, rounded up (envlog(5), MAINTENANCE). */
#define ENTRY_WEIGHT 96

typedef struct candidate {
    uint64_t unix_ns;
    envlog_stamp stamp;
    uint64_t bytes;
    envlog_table table;
    char *ns;
    char *key;         /* the tune key, or the kernel key in hex */
    uint64_t checksum;
} candidate;

typedef struct collect {
    candidate *v;
    size_t n, cap;
    uint64_t bytes;
} collect;

static envlog_err take(void *ctx, const envlog_state_item *it)
{
    collect *c = ctx;
    if (it->table == ENVLOG_TABLE_USER) {
        c->bytes += it->payload.size + ENTRY_WEIGHT;
        return ENVLOG_OK;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        candidate *v = envlog_realloc(c->v, cap * sizeof *v);
        if (!v)
            return envlog__fail(ENVLOG_NOMEM, "choosing what to evict");
        c->v = v;
        c->cap = cap;
    }
    envlog_record rec;
    envlog_arena a = {0};
    envlog_err e = envlog_event_decode_fold(it->payload.data, it->payload.size, &rec, &a);
    if (e) {
        envlog_arena_free(&a);
        return e;
    }
    candidate *x = &c->v[c->n];
    memset(x, 0, sizeof *x);
    x->unix_ns = it->unix_ns;
    x->stamp = it->stamp;
    x->bytes = it->payload.size + ENTRY_WEIGHT;
    x->table = (envlog_table)it->table;
    x->ns = envlog_strdup(it->ns);
    char hex[33];
    if (it->table == ENVLOG_TABLE_TUNE) {
        x->key = envlog_strdup(rec.u.tune.key ? rec.u.tune.key : "");
        x->checksum = rec.u.tune.checksum;
    } else {
        envlog_id_format(&rec.u.compile.kernel_key, hex);
        x->key = envlog_strdup(hex);
    }
    envlog_arena_free(&a);
    if (!x->ns || !x->key) {
        envlog_free(x->ns);
        envlog_free(x->key);
        return envlog__fail(ENVLOG_NOMEM, "choosing what to evict");
    }
    c->bytes += x->bytes;
    c->n++;
    return ENVLOG_OK;
}

static void free_candidates(collect *c)
{
    for (size_t i = 0; i < c->n; i++) {
        envlog_free(c->v[i].ns);
        envlog_free(c->v[i].key);
    }
    envlog_free(c->v);
}

/* Least recently set first; ties in the total order. */
static int oldest_first(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    return envlog_order_cmp(x->unix_ns, &x->stamp.session, x->stamp.seq, y->unix_ns,
                            &y->stamp.session, y->stamp.seq);
}

uint64_t envlog_state_bytes(envlog_state *st)
{
    collect c = {0};
    envlog_state_items(st, take, &c);
    free_candidates(&c);
    return c.bytes;
}

envlog_err envlog_evict(envlog_env *env, envlog_state *st, uint64_t budget, uint64_t fixed,
                        const envlog_build_opts *o, envlog_evict_result *r)
{
    memset(r, 0, sizeof *r);
    collect c = {0};
    envlog_err e = envlog_state_items(st, take, &c);
    envlog_session *s = NULL;
    if (e)
        goto out;
    uint64_t total = c.bytes + fixed;
    if (total <= budget)
        goto out;
    qsort(c.v, c.n, sizeof *c.v, oldest_first);
    char reason[160];
    snprintf(reason, sizeof reason, "evicted: the environment is over its max_size of %" PRIu64
             " bytes; least recently set first", o->max_size);
    for (size_t i = 0; i < c.n && total > budget; i++) {
        candidate *x = &c.v[i];
        envlog_removal rm = {ENVLOG_REMOVED_EVICTED, x->stamp, x->unix_ns, 0, x->table,
                             x->ns, x->key, x->checksum, x->bytes};
        if (o->on_removal)
            o->on_removal(o->ctx_removal, &rm);
        total -= x->bytes;
        r->evicted++;
        r->bytes += x->bytes;
        envlog_forget f = {x->table, x->ns, x->key, x->checksum, reason, NULL};
        envlog_record rec;
        memset(&rec, 0, sizeof rec);
        rec.kind = ENVLOG_KIND_FORGET;
        rec.effect = ENVLOG_CHANGED;
        rec.u.forget = f;
        if (o->dry_run) {
            /* Folded all the same, so the rest of the run (what history
             * goes with the entries) is what the real one would do. */
            if ((e = envlog_state_fold(st, &rec, envlog_clock_unix_ns())))
                goto out;
            continue;
        }
        if (!s) {
            envlog_session_opts so;
            envlog_session_opts_init(&so);
            so.label = "evict";
            so.runtime = "envlog";
            so.runtime_version = ENVLOG_VERSION_STRING;
            so.auto_compact = -1;
            if ((e = envlog_session_begin(env, &so, &s)))
                goto out;
        }
        envlog_stamp stamp;
        if ((e = envlog_record_forget(s, &f, &stamp)))
            goto out;
        /* The fold the new snapshot is made of takes it too. */
        rec.stamp = stamp;
        if ((e = envlog_state_fold(st, &rec, envlog_clock_unix_ns())))
            goto out;
        r->session = stamp.session;
        r->last_seq = stamp.seq;
        r->wrote = true;
    }
out:
    if (s) {
        /* (its auto_compact is -1: no upkeep is asked of it) */
        int want;
        envlog_err end = envlog_session_finish(s, &want);
        if (!e)
            e = end;
    }
    free_candidates(&c);
    return e;
}
