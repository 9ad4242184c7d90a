/* SPDX-License-Identifier: MIT */
/*
 * bundle_cols.c - the column image of a format 2 bundle (envlog(5),
 * BUNDLES, "Format 2").
 *
 * A bundle's entries repeat themselves field by field (every tune of a
 * tune set names the same candidates, stamps count up one by one), but in
 * a snapshot those fields lie a record apart, between checksums that never
 * repeat: a fast zstd level finds little there.  The image lays every CBOR
 * item of every record in the column of its context (where it sits in its
 * record: under which keys of which kind of map, at which place of an
 * array), unsigned integers as the difference from the last one of their
 * context, and drops the framing, which the records and the snapshot's id
 * determine.  Records are read as generic CBOR, so the image does not
 * depend on what the records hold.
 *
 * The writer (bundle_colenc.c) takes the snapshot as a snapshot writer's
 * sink hands it out (framed) and takes the framing off; the reader
 * (bundle_coldec.c) rebuilds the records from the columns and frames them
 * again.  This file is what they share: the tree of contexts
 * (bundle_cols_tree.h), made as the walk (bundle_cols_int.h, inline in
 * each side) meets them.
 */
#include "bundle_cols_tree.h"

#include <string.h>

#define SLOTS_FIRST 256   /* the table of children starts small (in L1): 2^8 */

envlog_err envlog_cols_tree_init(cxtree *t, uint32_t depth, uint32_t max_cols)
{
    memset(t, 0, sizeof *t);
    t->depth = depth;
    t->max_cols = max_cols;
    t->v = envlog_malloc(ENVLOG_COLS_CONTEXTS_MAX * sizeof *t->v);
    t->slots = envlog_calloc(SLOTS_FIRST, sizeof *t->slots);
    t->n_slots = SLOTS_FIRST;
    t->bits = 8;
    if (!t->v || !t->slots)
        return envlog__fail(ENVLOG_NOMEM, "bundle columns");
    return ENVLOG_OK;
}

void envlog_cols_tree_free(cxtree *t)
{
    envlog_free(t->v);
    envlog_free(t->slots);
    memset(t, 0, sizeof *t);
}

static envlog_err more_slots(cxtree *t)
{
    uint32_t n = 2 * t->n_slots;
    slot *s = envlog_calloc(n, sizeof *s);
    if (!s)
        return envlog__fail(ENVLOG_NOMEM, "bundle columns");
    for (uint32_t i = 0; i < t->n_slots; i++) {
        if (!t->slots[i].child)
            continue;
        uint32_t j = cols_slot_of(t->slots[i].key, t->bits + 1);
        while (s[j].child)
            j = (j + 1) & (n - 1);
        s[j] = t->slots[i];
    }
    envlog_free(t->slots);
    t->slots = s;
    t->n_slots = n;
    t->bits++;
    return ENVLOG_OK;
}

envlog_err envlog_cols_new_col(cxtree *t, uint32_t *col)
{
    if (t->n_cols == t->max_cols)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: its records use more than the %u "
                            "columns it lists", t->max_cols);
    *col = t->n_cols++;
    return ENVLOG_OK;
}

envlog_err envlog_cols_new_ctx(cxtree *t, uint32_t depth, uint32_t *id)
{
    cx *x = &t->v[t->n];
    x->nums = NO_COL;
    x->depth = depth;
    x->prev = 0;
    x->last_len = 0;
    envlog_err e = envlog_cols_new_col(t, &x->bytes);
    if (!e)
        *id = t->n++;
    return e;
}

envlog_err envlog_cols_child_new(cxtree *t, uint32_t parent, uint64_t k, uint32_t i,
                                 uint32_t *out)
{
    *out = parent;
    if (t->n == ENVLOG_COLS_CONTEXTS_MAX)
        return ENVLOG_OK;
    envlog_err e;
    if (2 * (t->n + 1) > t->n_slots) {
        if ((e = more_slots(t)))
            return e;
        for (i = cols_slot_of(k, t->bits); t->slots[i].child; i = (i + 1) & (t->n_slots - 1))
            ;
    }
    if (!(e = envlog_cols_new_ctx(t, t->v[parent].depth + 1, out)))
        t->slots[i] = (slot){k, *out + 1};
    return e;
}

