/* SPDX-License-Identifier: MIT */
/*
 * table.c - the table of entries under replay's state: keys to entries by
 * open addressing, counts of what stands.  It knows nothing of records,
 * rules or snapshots: fold.c decides what goes in, state.c and
 * statewalk.c read it out.
 *
 * An entry never changes once installed: a replacement is a new entry in
 * the old one's slot, and the old one stays allocated until the state
 * closes, so a pointer a lookup handed out is never left dangling.
 */
#include "table.h"

#include <string.h>

void envlog_key_ref_hash(envlog_key_ref *k)
{
    k->hash = k->table == ENVLOG_TABLE_TUNE
                  ? envlog_entry_key_hash_n(ENVLOG_TABLE_TUNE, k->ns.p, k->ns.n, k->key.p,
                                            k->key.n, k->checksum)
                  : envlog_entry_key_hash_n(ENVLOG_TABLE_KERNEL, k->ns.p, k->ns.n,
                                            k->kernel_key->b, 16, 0);
}

envlog_err envlog_table_init(envlog_entry_table *t)
{
    memset(t, 0, sizeof *t);
    t->n_slots = 64; /* a lookup-only state stays small; a fold grows it */
    if (!(t->slots = envlog_calloc(t->n_slots, sizeof *t->slots)))
        return envlog__fail(ENVLOG_NOMEM, "creating a state");
    return ENVLOG_OK;
}

void envlog_table_free(envlog_entry_table *t)
{
    envlog_free(t->slots);
    t->slots = NULL;
}

envlog_key_ref envlog_entry_key(const envlog_entry_x *e)
{
    envlog_key_ref k = {.table = (envlog_table)e->table,
                        .ns = {e->ns, envlog_interned_len(e->ns)}};
    if (e->table == ENVLOG_TABLE_TUNE) {
        k.key = (envlog_text){e->key, e->key_len};
        k.checksum = e->k.checksum;
    } else {
        k.kernel_key = &e->k.kernel_key;
    }
    envlog_key_ref_hash(&k);
    return k;
}

bool envlog_entry_has_key(const envlog_entry_x *e, const envlog_key_ref *k)
{
    if (e->table != k->table || envlog_interned_len(e->ns) != k->ns.n ||
        memcmp(e->ns, k->ns.p, k->ns.n))
        return false;
    if (k->table == ENVLOG_TABLE_KERNEL)
        return !memcmp(e->k.kernel_key.b, k->kernel_key->b, 16);
    return e->k.checksum == k->checksum && e->key_len == k->key.n &&
           !memcmp(e->key, k->key.p, k->key.n);
}

envlog_entry_x *envlog_table_find(const envlog_entry_table *t, const envlog_key_ref *k)
{
    size_t mask = t->n_slots - 1;
    for (size_t i = k->hash & mask; t->slots[i].e; i = (i + 1) & mask)
        if (t->slots[i].hash == k->hash && envlog_entry_has_key(t->slots[i].e, k))
            return t->slots[i].e;
    return NULL;
}

static void put_slot(envlog_table_slot *slots, size_t n, uint64_t h, envlog_entry_x *e)
{
    size_t i = h & (n - 1);
    while (slots[i].e)
        i = (i + 1) & (n - 1);
    slots[i].hash = h;
    slots[i].e = e;
}

/* The slots moved to a table of `n` (a power of two, more than hold them). */
static envlog_err resize(envlog_entry_table *t, size_t n)
{
    envlog_table_slot *v = envlog_malloc_big(n * sizeof *v, true);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "growing the state");
    for (size_t i = 0; i < t->n_slots; i++)
        if (t->slots[i].e)
            put_slot(v, n, t->slots[i].hash, t->slots[i].e);
    envlog_free(t->slots);
    t->slots = v;
    t->n_slots = n;
    return ENVLOG_OK;
}

envlog_err envlog_table_expect(envlog_entry_table *t, size_t more)
{
    size_t want = t->n_known + more, n = t->n_slots;
    if (want > (SIZE_MAX / sizeof *t->slots) / 4)
        return ENVLOG_OK; /* beyond what could be held: grown as they come */
    while (2 * want > n)
        n *= 2;
    return n > t->n_slots ? resize(t, n) : ENVLOG_OK;
}

static void count(envlog_entry_table *t, uint8_t table, int d)
{
    if (table == ENVLOG_TABLE_TUNE)
        t->n_tunes += (size_t)(ptrdiff_t)d;
    else
        t->n_kernels += (size_t)(ptrdiff_t)d;
}

void envlog_table_kill(envlog_entry_table *t, envlog_entry_x *e)
{
    if (e->live)
        count(t, e->table, -1);
    e->live = false;
}

envlog_err envlog_table_install(envlog_entry_table *t, envlog_entry_x *e, uint64_t hash,
                                envlog_entry_x *old, bool counted)
{
    if (old) {
        /* Same key, same hash: the new entry takes the old one's slot. */
        size_t mask = t->n_slots - 1, i = hash & mask;
        while (t->slots[i].e != old)
            i = (i + 1) & mask;
        t->slots[i].e = e;
        if (old->live && e->live)
            counted = true;
        else if (old->live)
            count(t, old->table, -1);
    } else {
        envlog_err err;
        if (2 * (t->n_known + 1) > t->n_slots && (err = envlog_table_expect(t, 1)))
            return err;
        put_slot(t->slots, t->n_slots, hash, e);
        t->n_known++;
    }
    if (e->live && !counted)
        count(t, e->table, +1);
    return ENVLOG_OK;
}
