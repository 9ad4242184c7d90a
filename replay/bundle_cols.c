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
 * again.  This file is what they share: the contexts, and the walk that
 * sends each item to one.
 */
#include "bundle_cols_int.h"

#include <string.h>

/* Items nest at most this deep in a snapshot record: an ENTRY holds a
 * record, which counts its own depth from 0 (envlog(5), CBOR limits). */
#define NEST_MAX (2 * ENVLOG_CBOR_MAX_DEPTH + 2)

/* ------------------------------------------------------------- contexts */

/* Steps from a context to a child: ELEM(i) is i (i < 16), ELEM(*) 16,
 * TAGGED 17; KEY(T) and VAL(T, k) carry the map's type T (0 untyped, else
 * its type + 1) and the key k + 1 (0: any other key). */
#define STEP_ELEMS 16
#define STEP_TAGGED 17
#define STEP_KEY(T) ((1ull << 44) | (uint64_t)(T))
#define STEP_VAL(T, k) ((2ull << 44) | ((uint64_t)(T) << 25) | (uint64_t)(k))
#define TYPE_MAX (1u << 16)  /* types below it type a map */
#define VKEY_MAX (1u << 24)  /* keys below it have contexts of their own */
#define SLOTS_FIRST 256   /* the table of children starts small (in L1): 2^8 */

/* The slot of `key` in a table of 2^bits (the top bits of the product:
 * every bit of the key reaches them). */
static uint32_t slot_of(uint64_t key, unsigned bits)
{
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

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
        uint32_t j = slot_of(t->slots[i].key, t->bits + 1);
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

/* The child of `parent` by `step`: the parent itself at depth D or once
 * ENVLOG_COLS_CONTEXTS_MAX contexts are made. */
static envlog_err child(cxtree *t, uint32_t parent, uint64_t step, uint32_t *out)
{
    *out = parent;
    if (t->v[parent].depth >= t->depth)
        return ENVLOG_OK;
    uint64_t k = (uint64_t)parent << 48 | step;
    uint32_t i = slot_of(k, t->bits);
    for (; t->slots[i].child; i = (i + 1) & (t->n_slots - 1))
        if (t->slots[i].key == k) {
            *out = t->slots[i].child - 1;
            return ENVLOG_OK;
        }
    if (t->n == ENVLOG_COLS_CONTEXTS_MAX)
        return ENVLOG_OK;
    envlog_err e;
    if (2 * (t->n + 1) > t->n_slots) {
        if ((e = more_slots(t)))
            return e;
        for (i = slot_of(k, t->bits); t->slots[i].child; i = (i + 1) & (t->n_slots - 1))
            ;
    }
    if (!(e = envlog_cols_new_ctx(t, t->v[parent].depth + 1, out)))
        t->slots[i] = (slot){k, *out + 1};
    return e;
}

/* The step to a map value: the key's own context when the key (its
 * `u` when an unsigned integer, else NO_KEY) is a small one. */
#define NO_KEY UINT64_MAX
static uint64_t val_step(uint32_t type, uint64_t key)
{
    return STEP_VAL(type, key < VKEY_MAX ? (uint32_t)key + 1 : 0);
}

/* A map whose first key is 0 with an unsigned integer value below
 * TYPE_MAX is typed by it. */
static uint32_t map_type(uint64_t key, const envlog_tok *val)
{
    return key == 0 && val->type == ENVLOG_TOK_UINT && val->u < TYPE_MAX
               ? (uint32_t)val->u + 1
               : 0;
}

/* A container being walked: what its next item is and where it goes. */
typedef struct open_item {
    uint32_t ctx, type;   /* its context; a map's type */
    uint64_t n, i;        /* its items (pairs of a map); those begun */
    envlog_tok_type kind; /* array, map or tag */
    bool value_next;      /* a map's: the next item is a value */
    uint64_t key;         /* a map's: the key of the pair begun (NO_KEY
                             when not an unsigned integer) */
} open_item;

/* One item and everything it holds, depth first, each in its context: the
 * writer and the reader both walk so, and so cannot disagree on where an
 * item goes.  (A stack of the containers open, not recursion: an item is a
 * few bytes, and this runs for each of them.) */
envlog_err envlog_cols_walk(cxtree *tree, item_fn item, void *side)
{
    open_item st[NEST_MAX + 1];
    int top = -1;
    uint32_t ctx = 0;
    envlog_err e;
    for (;;) {
        envlog_tok t;
        if ((e = item(side, ctx, &t)))
            return e;
        if (top >= 0 && st[top].kind == ENVLOG_TOK_MAP) {
            open_item *m = &st[top];
            if (m->value_next)
                m->key = t.type == ENVLOG_TOK_UINT ? t.u : NO_KEY;
            else if (m->i == 1)
                m->type = map_type(m->key, &t);
        }
        uint64_t n = t.type == ENVLOG_TOK_TAG ? 1 : t.u;
        if ((t.type == ENVLOG_TOK_ARRAY || t.type == ENVLOG_TOK_MAP ||
             t.type == ENVLOG_TOK_TAG) && n) {
            if (top == NEST_MAX)
                return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: a record nested more "
                                    "than %d deep", NEST_MAX);
            st[++top] = (open_item){ctx, 0, n, 0, t.type, false, NO_KEY};
        }
        /* The context of the next item: of the innermost container that
         * has one more. */
        for (;; top--) {
            if (top < 0)
                return ENVLOG_OK;
            open_item *o = &st[top];
            uint64_t step;
            if (o->kind == ENVLOG_TOK_MAP && o->value_next) {
                step = val_step(o->type, o->key);
                o->value_next = false;
            } else if (o->i == o->n) {
                continue;
            } else if (o->kind == ENVLOG_TOK_MAP) {
                step = STEP_KEY(o->type);
                o->value_next = true;
                o->i++;
            } else {
                step = o->kind == ENVLOG_TOK_TAG ? STEP_TAGGED
                       : o->i < STEP_ELEMS       ? o->i
                                                 : STEP_ELEMS;
                o->i++;
            }
            if ((e = child(tree, o->ctx, step, &ctx)))
                return e;
            break;
        }
    }
}
