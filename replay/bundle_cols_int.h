/* SPDX-License-Identifier: MIT */
/*
 * bundle_cols_int.h - what the column image's writer (bundle_colenc.c) and
 * reader (bundle_coldec.c) share: the tree of contexts, each with its
 * columns, and the walk (bundle_cols.c) that says in which context each
 * item of a record lies.  Only those three files include it.
 */
#ifndef ENVLOG_BUNDLE_COLS_INT_H
#define ENVLOG_BUNDLE_COLS_INT_H

#include "bundle_cols.h"

#define NO_COL UINT32_MAX

typedef struct cx {
    uint32_t bytes, nums; /* its columns (nums: NO_COL until made) */
    uint32_t depth;
    uint64_t prev;        /* the last unsigned integer of the context */
    const uint8_t *last;  /* the last string or float, in its column */
    size_t last_len;
} cx;

typedef struct slot {
    uint64_t key;         /* parent << 48 | step */
    uint32_t child;       /* + 1; 0: empty */
} slot;

typedef struct cxtree {
    cx *v;
    uint32_t n;
    slot *slots;          /* the children made, kept at most half full */
    uint32_t n_slots;     /* 2^bits */
    unsigned bits;
    uint32_t depth;       /* D */
    uint32_t n_cols, max_cols;
} cxtree;

/* A tree with room for ENVLOG_COLS_CONTEXTS_MAX contexts of at most
 * `depth` below the root, and `max_cols` columns; the root is made by
 * envlog_cols_new_ctx(). */
envlog_err envlog_cols_tree_init(cxtree *t, uint32_t depth, uint32_t max_cols);
void envlog_cols_tree_free(cxtree *t);
/* The next column into *col: ENVLOG_BAD_DATA past max_cols. */
envlog_err envlog_cols_new_col(cxtree *t, uint32_t *col);
/* A new context at `depth`, its bytes column made, into *id. */
envlog_err envlog_cols_new_ctx(cxtree *t, uint32_t depth, uint32_t *id);

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

/* One item and everything it holds, depth first, each in its context, the
 * first in the root (0): the writer and the reader both walk so, and so
 * cannot disagree on where an item goes.  Stops at the first code other
 * than ENVLOG_OK, of `item` or its own (ENVLOG_BAD_DATA: nested too deep;
 * ENVLOG_NOMEM). */
envlog_err envlog_cols_walk(cxtree *tree, item_fn item, void *side);

#endif /* ENVLOG_BUNDLE_COLS_INT_H */
