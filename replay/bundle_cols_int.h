/* SPDX-License-Identifier: MIT */
/*
 * bundle_cols_int.h - what the column image's writer (bundle_colenc.c) and
 * reader (bundle_coldec.c) share: the tree of contexts
 * (bundle_cols_tree.h), each with its columns, and the walk (here, inline)
 * that says in which context each item of a record lies.  Only those two
 * files include it.
 */
#ifndef ENVLOG_BUNDLE_COLS_INT_H
#define ENVLOG_BUNDLE_COLS_INT_H

#include "bundle_cols_tree.h"

/* An unsigned integer whose head has its value in 1 to 8 more bytes: the
 * ones a column holds as a difference. */
static inline bool is_delta_head(uint8_t ib)
{
    return ib >> 5 == 0 && (ib & 31) >= 24 && (ib & 31) <= 27;
}

/* A byte or text string, or a float: what a column may give again with
 * REPEAT, a byte no CBOR item begins with. */
#define REPEAT 0xfc
static inline bool repeatable(uint8_t ib)
{
    return ib >> 5 == 2 || ib >> 5 == 3 || (ib >= 0xf9 && ib <= 0xfb);
}

/* Writes or reads one item's own bytes in context `ctx` (the writer from a
 * record into the columns, the reader back) and says in *t what it is. */
typedef envlog_err (*item_fn)(void *side, uint32_t ctx, envlog_tok *t);

/* Items nest at most this deep in a snapshot record: an ENTRY holds a
 * record, which counts its own depth from 0 (envlog(5), CBOR limits). */
#define COLS_NEST_MAX (2 * ENVLOG_CBOR_MAX_DEPTH + 2)

/* Steps from a context to a child: ELEM(i) is i (i < 16), ELEM(*) 16,
 * TAGGED 17; KEY(T) and VAL(T, k) carry the map's type T (0 untyped, else
 * its type + 1) and the key k + 1 (0: any other key). */
#define STEP_ELEMS 16
#define STEP_TAGGED 17
#define STEP_KEY(T) ((1ull << 44) | (uint64_t)(T))
#define STEP_VAL(T, k) ((2ull << 44) | ((uint64_t)(T) << 25) | (uint64_t)(k))
#define TYPE_MAX (1u << 16)  /* types below it type a map */
#define VKEY_MAX (1u << 24)  /* keys below it have contexts of their own */
#define NO_KEY UINT64_MAX

/* The child of `parent` by `step`: the parent itself at depth D. */
static inline envlog_err cols_child(cxtree *t, uint32_t parent, uint64_t step, uint32_t *out)
{
    *out = parent;
    if (t->v[parent].depth >= t->depth)
        return ENVLOG_OK;
    uint64_t k = (uint64_t)parent << 48 | step;
    uint32_t i = cols_slot_of(k, t->bits);
    for (; t->slots[i].child; i = (i + 1) & (t->n_slots - 1))
        if (t->slots[i].key == k) {
            *out = t->slots[i].child - 1;
            return ENVLOG_OK;
        }
    return envlog_cols_child_new(t, parent, k, i, out);
}

/* The step to a map value: the key's own context when the key (its `u`
 * when an unsigned integer, else NO_KEY) is a small one. */
static inline uint64_t cols_val_step(uint32_t type, uint64_t key)
{
    return STEP_VAL(type, key < VKEY_MAX ? (uint32_t)key + 1 : 0);
}

/* A map whose first key is 0 with an unsigned integer value below
 * TYPE_MAX is typed by it. */
static inline uint32_t cols_map_type(uint64_t key, const envlog_tok *val)
{
    return key == 0 && val->type == ENVLOG_TOK_UINT && val->u < TYPE_MAX
               ? (uint32_t)val->u + 1
               : 0;
}

/* A container being walked: what its next item is and where it goes. */
typedef struct cols_open {
    uint32_t ctx, type;   /* its context; a map's type */
    uint64_t n, i;        /* its items (pairs of a map); those begun */
    envlog_tok_type kind; /* array, map or tag */
    bool value_next;      /* a map's: the next item is a value */
    uint64_t key;         /* a map's: the key of the pair begun (NO_KEY
                             when not an unsigned integer) */
} cols_open;

/* One item and everything it holds, depth first, each in its context, the
 * first in the root (0): the writer and the reader both walk so, and so
 * cannot disagree on where an item goes.  Stops at the first code other
 * than ENVLOG_OK, of `item` or its own (ENVLOG_BAD_DATA: nested too deep;
 * ENVLOG_NOMEM).  (A stack of the containers open, not recursion: an item
 * is a few bytes, and this runs for each of them; inline, so that each
 * side's `item` is called without a call through a pointer.) */
static inline __attribute__((always_inline)) envlog_err
envlog_cols_walk(cxtree *tree, item_fn item, void *side)
{
    cols_open st[COLS_NEST_MAX + 1];
    int top = -1;
    uint32_t ctx = 0;
    envlog_err e;
    for (;;) {
        envlog_tok t;
        if ((e = item(side, ctx, &t)))
            return e;
        if (top >= 0 && st[top].kind == ENVLOG_TOK_MAP) {
            cols_open *m = &st[top];
            if (m->value_next)
                m->key = t.type == ENVLOG_TOK_UINT ? t.u : NO_KEY;
            else if (m->i == 1)
                m->type = cols_map_type(m->key, &t);
        }
        uint64_t n = t.type == ENVLOG_TOK_TAG ? 1 : t.u;
        if ((t.type == ENVLOG_TOK_ARRAY || t.type == ENVLOG_TOK_MAP ||
             t.type == ENVLOG_TOK_TAG) && n) {
            if (top == COLS_NEST_MAX)
                return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: a record nested more "
                                    "than %d deep", COLS_NEST_MAX);
            st[++top] = (cols_open){ctx, 0, n, 0, t.type, false, NO_KEY};
        }
        /* The context of the next item: of the innermost container that
         * has one more. */
        for (;; top--) {
            if (top < 0)
                return ENVLOG_OK;
            cols_open *o = &st[top];
            uint64_t step;
            if (o->kind == ENVLOG_TOK_MAP && o->value_next) {
                step = cols_val_step(o->type, o->key);
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
            if ((e = cols_child(tree, o->ctx, step, &ctx)))
                return e;
            break;
        }
    }
}

#endif /* ENVLOG_BUNDLE_COLS_INT_H */
