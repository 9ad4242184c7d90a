/* SPDX-License-Identifier: MIT */
/*
 * known.c - an entry by its key: the table's, else the snapshot's, brought
 * into the table the first time anyone asks (read through the snapshot's
 * INDEX, not by folding it), else a known miss, so the snapshot is asked
 * once per key.  Walks over every entry bring the whole snapshot in first.
 */
#include "state_int.h"

#include <string.h>

/* What the snapshot's record of an entry brings: its bytes stay where
 * they are when the snapshot holds them (the state holds the snapshot). */
static envlog_fold_in snap_in(const envlog_state *st, const envlog_snap_item *it,
                              const envlog_record *rec)
{
    return (envlog_fold_in){
        .rec = rec,
        .unix_ns = it->unix_ns,
        .item = it,
        .kept = envlog_snap_holds(st->snap, it->record.data, it->record.size),
    };
}

/* The key of a snapshot entry's record. */
static bool snap_key(const envlog_snap_item *it, const envlog_record *rec, envlog_key_ref *k)
{
    memset(k, 0, sizeof *k);
    if (it->table == ENVLOG_TABLE_TUNE) {
        const envlog_tune *t = &rec->u.tune;
        k->table = ENVLOG_TABLE_TUNE;
        k->ns = (envlog_text){t->ns, strlen(t->ns)};
        k->key = (envlog_text){t->key, strlen(t->key)};
        k->checksum = t->checksum;
    } else if (it->table == ENVLOG_TABLE_KERNEL) {
        const envlog_compile *c = &rec->u.compile;
        k->table = ENVLOG_TABLE_KERNEL;
        k->ns = (envlog_text){c->ns, strlen(c->ns)};
        k->kernel_key = &c->kernel_key;
    } else {
        return false;
    }
    envlog_key_ref_hash(k);
    return true;
}

/* Brings the snapshot's entry for a key (or a known miss) into the table. */
static envlog_err materialize(envlog_state *st, const envlog_key_ref *k, envlog_entry_x **out)
{
    envlog_snap_item it;
    envlog_record rec;
    *out = NULL;
    /* The snapshot's lookup takes strings. */
    char *ns = envlog_malloc(k->ns.n + 1 + k->key.n + 1);
    if (!ns)
        return envlog__fail(ENVLOG_NOMEM, "looking up the snapshot");
    memcpy(ns, k->ns.p, k->ns.n);
    ns[k->ns.n] = 0;
    char *key = ns + k->ns.n + 1;
    if (k->table == ENVLOG_TABLE_TUNE)
        memcpy(key, k->key.p, k->key.n);
    key[k->key.n] = 0;
    envlog_err e = envlog_snap_find(st->snap, k->table, ns, key, k->kernel_key, k->checksum,
                                    &it, &rec);
    envlog_free(ns);
    envlog_entry_x *n = NULL;
    if (e == ENVLOG_NOT_FOUND || e == ENVLOG_CORRUPT) {
        /* A damaged snapshot entry is a miss; the damage shows in verify. */
        if (!(e = envlog_entry_miss(st, k, &n)))
            e = envlog_table_install(&st->tab, n, k->hash, NULL, true);
    } else if (!e) {
        envlog_fold_in in = snap_in(st, &it, &rec);
        e = envlog_entry_from(st, &in, k, (envlog_origin)it.origin, (envlog_rule)it.rule, &n);
        if (!e)
            e = envlog_table_install(&st->tab, n, k->hash, NULL, true);
    }
    if (!e)
        *out = n;
    return e;
}

envlog_err envlog_state_known(envlog_state *st, const envlog_key_ref *k, envlog_entry_x **out)
{
    *out = envlog_table_find(&st->tab, k);
    if (*out || !st->snap || st->snap_loaded)
        return ENVLOG_OK;
    return materialize(st, k, out);
}

envlog_err envlog_state_load_all(envlog_state *st)
{
    if (!st->snap || st->snap_loaded)
        return ENVLOG_OK;
    envlog_snap_item it;
    envlog_record rec;
    envlog_err e = ENVLOG_OK;
    uint64_t read[2] = {0, 0};
    envlog_snap_rewind_fold(st->snap);
    while (!e && !(e = envlog_snap_next(st->snap, &it, &rec))) {
        envlog_key_ref k;
        if (it.kind != ENVLOG_KIND_ENTRY || !snap_key(&it, &rec, &k))
            continue;
        /* The walk hands out only entries that stand (decode_item). */
        read[it.table]++;
        envlog_entry_x *old = envlog_table_find(&st->tab, &k);
        /* What sessions set or forgot since stands; a miss a lookup could
         * not resolve through a damaged INDEX does not. */
        if (old && !old->miss)
            continue;
        envlog_entry_x *n;
        envlog_fold_in in = snap_in(st, &it, &rec);
        if (!(e = envlog_entry_from(st, &in, &k, (envlog_origin)it.origin,
                                    (envlog_rule)it.rule, &n)))
            e = envlog_table_install(&st->tab, n, k.hash, old, true);
    }
    if (e == ENVLOG_END)
        e = ENVLOG_OK;
    if (e)
        return e;
    /* The counts began as the MANIFEST's claims: now they are what was read
     * (entries that do not read are lost, and said so in the stats). */
    const envlog_snap_manifest *m = envlog_snap_manifest_get(st->snap);
    st->tab.n_tunes += (size_t)read[0] - (size_t)m->tunes;
    st->tab.n_kernels += (size_t)read[1] - (size_t)m->kernels;
    uint64_t claimed = m->tunes + m->kernels, got = read[0] + read[1];
    st->snap_lost = claimed > got ? claimed - got : 0;
    if (m->users > st->snap_users)
        st->snap_lost += m->users - st->snap_users;
    st->snap_loaded = true;
    return ENVLOG_OK;
}

envlog_err envlog_state_load_users(envlog_state *st)
{
    envlog_snap_item it;
    envlog_record rec;
    envlog_err e = ENVLOG_OK;
    envlog_snap_rewind_fold(st->snap);
    while (!e && !(e = envlog_snap_next(st->snap, &it, &rec))) {
        if (it.kind != ENVLOG_KIND_ENTRY || it.table != ENVLOG_TABLE_USER)
            continue;
        envlog_fold_in in = snap_in(st, &it, &rec);
        if (!(e = envlog_state_add_user(st, &in)))
            st->snap_users++;
    }
    return e == ENVLOG_END ? ENVLOG_OK : e;
}
