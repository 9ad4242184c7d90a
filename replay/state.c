/* SPDX-License-Identifier: MIT */
/*
 * state.c - the cache state: opened by merging its sources (the snapshot
 * and the sessions past it, in the total order) into the fold, kept
 * current by the records of this process's sessions, and asked by
 * lookups.  The way through the state's files is in state_int.h.
 *
 * The bytes of the records entries point at are held here: the segments
 * the merge's readers hand over (kept mapped, so the fold copies nothing),
 * the snapshot, and copies of what nothing else holds.
 */
#include "state_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *envlog_rule_name(envlog_rule rule)
{
    switch (rule) {
    case ENVLOG_RULE_FIRST_LOCAL: return "first local value stands";
    case ENVLOG_RULE_LOCAL_OVER_IMPORTED: return "local value replaced an imported one";
    case ENVLOG_RULE_IMPORTED: return "imported; nothing local since";
    case ENVLOG_RULE_FORGOTTEN: return "forgotten";
    case ENVLOG_RULE_NOT_STORED: return "not stored: the pick was not measured";
    case ENVLOG_RULE_KEPT_FIRST: return "a later local value; the first one stands";
    case ENVLOG_RULE_IMPORT_IGNORED: return "imported value ignored: an entry existed";
    }
    return "unknown rule";
}

envlog_err envlog_state_new(envlog_state **out)
{
    envlog_state *st = envlog_calloc(1, sizeof *st);
    if (!st)
        return envlog__fail(ENVLOG_NOMEM, "creating a state");
    envlog_err e = envlog_table_init(&st->tab);
    if (e) {
        envlog_free(st);
        return e;
    }
    pthread_rwlock_init(&st->lock, NULL);
    pthread_mutex_init(&st->view_mu, NULL);
    *out = st;
    return ENVLOG_OK;
}

envlog_err envlog_state_from_snap(envlog_snap *snap, void *owned, envlog_state **out)
{
    envlog_err e = envlog_state_new(out);
    if (e) {
        envlog_snap_unmap(snap);
        envlog_free(owned);
        return e;
    }
    envlog_state *st = *out;
    const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
    st->snap = snap;
    st->owned = owned;
    st->tab.n_tunes = (size_t)m->tunes;
    st->tab.n_kernels = (size_t)m->kernels;
    if (m->users && (e = envlog_state_load_users(st))) {
        envlog_state_close(st);
        *out = NULL;
    }
    return e;
}

void envlog_state_close(envlog_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_users; i++) {
        envlog_free(st->users[i].kind);
        envlog_free(st->users[i].body);
    }
    envlog_free(st->users);
    envlog_table_free(&st->tab);
    envlog_arena_free(&st->mem);
    envlog_arena_free(&st->bytes);
    envlog_arena_free(&st->views);
    envlog_free(st->ns.set);
    envlog_free(st->sessions.set);
    for (size_t i = 0; i < st->n_kept; i++) {
        if (st->kept[i].mapped)
            envlog_io_get()->munmap(st->kept[i].p, st->kept[i].n);
        else
            envlog_free(st->kept[i].p);
    }
    envlog_free(st->kept);
    envlog_snap_unmap(st->snap);
    envlog_snap_unmap(st->held);
    envlog_free(st->owned);
    envlog_state_close(st->retired);
    pthread_mutex_destroy(&st->view_mu);
    pthread_rwlock_destroy(&st->lock);
    envlog_free(st);
}

void envlog_state_wrlock(envlog_state *st) { pthread_rwlock_wrlock(&st->lock); }
void envlog_state_unlock(envlog_state *st) { pthread_rwlock_unlock(&st->lock); }

/* --------------------------------------------------------------- opening */

typedef struct open_ctx {
    envlog_state *st;
    const envlog_replay_opts *user;
} open_ctx;

static envlog_err fold_one(void *ctx, const envlog_merge_rec *m)
{
    return envlog_state_fold_merged(((open_ctx *)ctx)->st, m);
}

static bool fold_coming(void *ctx, const envlog_merge_rec *m, uint64_t *hash)
{
    return envlog_state_fold_hint(((open_ctx *)ctx)->st, m, hash);
}

static void count_damage(void *ctx, const envlog_damage *d, bool torn)
{
    open_ctx *f = ctx;
    f->st->st.damaged++;
    if (d->file == ENVLOG_DAMAGE_SNAPSHOT || d->file == ENVLOG_DAMAGE_PREVIOUS)
        f->st->snap_reported++;
    if (f->user && f->user->on_damage)
        f->user->on_damage(f->user->ctx, d, torn);
}

static void pass_progress(void *ctx, uint64_t done, uint64_t total)
{
    open_ctx *f = ctx;
    if (f->user && f->user->on_progress)
        f->user->on_progress(f->user->ctx, done, total);
}

envlog_err envlog_state_open_on(envlog_env *env, const envlog_replay_opts *opts,
                                const char *base, envlog_state **out)
{
    envlog_state *st;
    *out = NULL;
    envlog_err e = envlog_state_new(&st);
    if (e)
        return e;
    int lk = -1;
    envlog_snap *snap = NULL;
    open_ctx f = {st, opts};
    envlog_replay_opts o = {0};
    if (opts)
        o = *opts;
    o.on_damage = count_damage;
    o.on_progress = opts && opts->on_progress ? pass_progress : NULL;
    o.ctx = &f;
    /* No compaction removes a session between the snapshot mapped here and
     * the end of the fold (see envlog_env_lock). */
    if ((e = envlog_env_lock(env, false, &lk)))
        goto fail;
    if (base) {
        /* A given generation, read whole, as far as it reads. */
        if ((e = envlog_snap_map_file(env, base, true, &snap)))
            goto fail;
        st->snap_gen = !snap ? ENVLOG_GEN_NONE : strcmp(base, "previous")
                                                     ? ENVLOG_GEN_CURRENT
                                                     : ENVLOG_GEN_PREVIOUS;
        if (snap)
            st->snap_reported += envlog_snap_bad_records(snap);
    } else if ((e = envlog_snap_pick(env, o.check_snapshot, count_damage, &f, &snap,
                                     &st->snap_gen))) {
        goto fail;
    }
    /* Up to a point in time, the snapshot's own records are folded with the
     * sessions (and it is held only for their bytes); otherwise it stands
     * as the layer under them, read through its index. */
    bool until = opts && (opts->until_time || opts->until_stamp);
    if (snap && !until) {
        const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
        st->snap = snap;
        st->tab.n_tunes = (size_t)m->tunes;
        st->tab.n_kernels = (size_t)m->kernels;
        if (m->users && (e = envlog_state_load_users(st)))
            goto fail;
    } else {
        st->held = snap;
    }
    envlog_merge_src src = {env, snap};
    envlog_keeper keep = {envlog_state_keep, st, true};
    e = envlog_replay_merge(&src, 1, &o, until, true, &keep, fold_one, fold_coming, &f);
    envlog_env_unlock(env, lk);
    lk = -1;
    /* What the walk of its records met and nobody reported yet. */
    if (until && snap && !o.check_snapshot)
        st->snap_reported += envlog_snap_bad_records(snap);
    if (!e && st->keep_failed)
        e = envlog__fail(ENVLOG_NOMEM, "keeping the segments read");
    if (e)
        goto fail;
    *out = st;
    return ENVLOG_OK;
fail:
    envlog_env_unlock(env, lk);
    if (!st->snap && !st->held)
        envlog_snap_unmap(snap);
    envlog_state_close(st);
    return e;
}

envlog_err envlog_state_open(envlog_env *env, const envlog_replay_opts *opts,
                             envlog_state **out)
{
    return envlog_state_open_on(env, opts, NULL, out);
}

/* --------------------------------------------------- the live env state */

/* The record a session of this process accepted, as the fold of its log
 * would take it (its bytes copied: the session reuses its buffer). */
static void live_hook(void *ctx, const envlog_record *rec, uint64_t unix_ns)
{
    envlog_state *st = ctx;
    pthread_rwlock_wrlock(&st->lock);
    /* A state that cannot take the record (out of memory) only misses a
     * cache entry; the record itself is already in the log. */
    (void)envlog_state_fold(st, rec, unix_ns);
    pthread_rwlock_unlock(&st->lock);
}

static void live_free(void *ctx)
{
    envlog_state_close(ctx);
}

envlog_err envlog_env_state(envlog_env *env, envlog_state **out)
{
    *out = NULL;
    if (!env)
        return envlog__fail(ENVLOG_INVALID_ARG, "no environment");
    pthread_mutex_lock(&env->state_mu);
    envlog_err e = ENVLOG_OK;
    if (!env->state) {
        envlog_state *st;
        if (!(e = envlog_state_open(env, NULL, &st))) {
            env->state = st;
            env->state_free = live_free;
            /* Published last: sessions read the hook without the mutex. */
            __atomic_store_n(&env->state_hook, live_hook, __ATOMIC_RELEASE);
        }
    }
    *out = env->state;
    pthread_mutex_unlock(&env->state_mu);
    return e;
}

static void swap_bytes(void *a, void *b, size_t n)
{
    uint8_t t[256], *x = a, *y = b;
    for (size_t k; n; n -= k, x += k, y += k) {
        k = n < sizeof t ? n : sizeof t;
        memcpy(t, x, k);
        memcpy(x, y, k);
        memcpy(y, t, k);
    }
}

/* Everything two states hold but their locks. */
_Static_assert(offsetof(envlog_state, lock) == 0 &&
                   offsetof(envlog_state, view_mu) > sizeof(pthread_rwlock_t),
               "swap_contents() swaps what follows the rwlock and view_mu");
static void swap_contents(envlog_state *a, envlog_state *b)
{
    size_t from = offsetof(envlog_state, lock) + sizeof a->lock;
    swap_bytes((uint8_t *)a + from, (uint8_t *)b + from, offsetof(envlog_state, view_mu) - from);
    from = offsetof(envlog_state, view_mu) + sizeof a->view_mu;
    swap_bytes((uint8_t *)a + from, (uint8_t *)b + from, sizeof *a - from);
}

envlog_err envlog_env_state_refold(envlog_env *env)
{
    pthread_mutex_lock(&env->state_mu);
    envlog_state *live = env->state, *fresh;
    envlog_err e = live ? envlog_state_open(env, NULL, &fresh) : ENVLOG_OK;
    if (live && !e) {
        /* A lookup or a session's record waits for the swap; what lookups
         * were given stays where it is until the environment closes. */
        pthread_rwlock_wrlock(&live->lock);
        swap_contents(live, fresh);
        live->retired = fresh; /* (which holds the older ones) */
        pthread_rwlock_unlock(&live->lock);
    }
    pthread_mutex_unlock(&env->state_mu);
    return e;
}

/* --------------------------------------------------------------- lookups */

/* A lookup: the read lock for the table; the write lock only when the
 * snapshot must be asked (once per key: the answer is kept).  The public
 * entry is made from the record the first time (view.c). */
static envlog_err find(envlog_state *st, envlog_key_ref *k, envlog_entry_x **out)
{
    envlog_key_ref_hash(k);
    pthread_rwlock_rdlock(&st->lock);
    envlog_entry_x *e = envlog_table_find(&st->tab, k);
    pthread_rwlock_unlock(&st->lock);
    envlog_err err = ENVLOG_OK;
    if (!e && st->snap && !st->snap_loaded) {
        pthread_rwlock_wrlock(&st->lock);
        err = envlog_state_known(st, k, &e);
        pthread_rwlock_unlock(&st->lock);
    }
    *out = !err && e && e->live ? e : NULL;
    return err;
}

static envlog_err lookup(envlog_state *st, envlog_key_ref *k, const void **view)
{
    envlog_entry_x *e;
    envlog_err err = find(st, k, &e);
    *view = NULL;
    return !err && e ? envlog_entry_view(st, e, view) : err;
}

/* The key of a tune (key, checksum) or, for ENVLOG_TABLE_KERNEL, a
 * kernel (kernel_key) in namespace `ns`. */
static envlog_key_ref key_of(envlog_table table, const char *ns, const char *key,
                             uint64_t checksum, const envlog_hash128 *kernel_key)
{
    envlog_key_ref k = {.table = table, .ns = {ns, strlen(ns)}};
    if (table == ENVLOG_TABLE_TUNE) {
        k.key = (envlog_text){key, strlen(key)};
        k.checksum = checksum;
    } else {
        k.kernel_key = kernel_key;
    }
    return k;
}

envlog_err envlog_state_holds(envlog_state *st, envlog_table table, const char *ns,
                              const char *key, uint64_t checksum,
                              const envlog_hash128 *kernel_key, bool *held)
{
    envlog_key_ref k = key_of(table, ns, key, checksum, kernel_key);
    envlog_entry_x *e;
    envlog_err err = find(st, &k, &e);
    *held = e != NULL;
    return err;
}

envlog_err envlog_state_expect(envlog_state *st, size_t more)
{
    pthread_rwlock_wrlock(&st->lock);
    envlog_err e = envlog_table_expect(&st->tab, more);
    pthread_rwlock_unlock(&st->lock);
    return e;
}

envlog_err envlog_state_winner(envlog_state *st, const char *ns, const char *key,
                               uint64_t checksum, envlog_tune_entry *out)
{
    if (!st || !ns || !key || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "winner lookup needs ns and key");
    envlog_key_ref k = key_of(ENVLOG_TABLE_TUNE, ns, key, checksum, NULL);
    const void *v;
    envlog_err err = lookup(st, &k, &v);
    if (err)
        return err;
    if (!v)
        return envlog__fail(ENVLOG_NOT_FOUND, "no winner for %s in %s", key, ns);
    *out = *(const envlog_tune_entry *)v; /* views never change once made */
    return ENVLOG_OK;
}

envlog_err envlog_state_kernel(envlog_state *st, const char *ns,
                               const envlog_hash128 *kernel_key,
                               envlog_kernel_entry *out)
{
    if (!st || !ns || !kernel_key || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "kernel lookup needs ns and key");
    envlog_key_ref k = key_of(ENVLOG_TABLE_KERNEL, ns, NULL, 0, kernel_key);
    const void *v;
    envlog_err err = lookup(st, &k, &v);
    if (err)
        return err;
    if (!v)
        return envlog__fail(ENVLOG_NOT_FOUND, "no kernel in %s", ns);
    *out = *(const envlog_kernel_entry *)v;
    return ENVLOG_OK;
}

void envlog_state_stats_get(envlog_state *st, envlog_state_stats *out)
{
    pthread_rwlock_rdlock(&st->lock);
    *out = st->st;
    out->tunes = st->tab.n_tunes;
    out->kernels = st->tab.n_kernels;
    out->user_records = st->n_users;
    out->snapshot_generation = st->snap_gen;
    out->snapshot_damaged = st->snap_reported;
    out->snapshot_lost = st->snap_lost;
    if (st->snap) {
        const envlog_snap_manifest *m = envlog_snap_manifest_get(st->snap);
        out->snapshot_bytes = envlog_snap_size(st->snap);
        out->snapshot_entries = m->tunes + m->kernels + m->users - st->snap_lost;
        out->snapshot_sessions = m->n_wms;
        if (!out->last_change_unix_ns)
            out->last_change_unix_ns = m->created_unix_ns;
        /* Damage met since opening, by lookups and walks, and not yet
         * counted: without check_snapshot the snapshot is read as needed. */
        uint64_t walked = envlog_snap_bad_records(st->snap) +
                          envlog_snap_lookup_damage(st->snap);
        if (walked > out->snapshot_damaged)
            out->snapshot_damaged = walked;
    }
    pthread_rwlock_unlock(&st->lock);
}
