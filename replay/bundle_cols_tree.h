/* SPDX-License-Identifier: MIT */
/*
 * bundle_cols_tree.h - the tree of contexts of the column image, each with
 * its columns (bundle_cols.c makes it), under the walk of
 * bundle_cols_int.h that the writer and the reader share.
 */
#ifndef ENVLOG_BUNDLE_COLS_TREE_H
#define ENVLOG_BUNDLE_COLS_TREE_H

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

/* The slot of `key` in a table of 2^bits (the top bits of the product:
 * every bit of the key reaches them). */
static inline uint32_t cols_slot_of(uint64_t key, unsigned bits)
{
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* A new child of `parent`, whose key `k` (parent << 48 | step) has no slot
 * from slot `i` on, into *out: the parent itself once
 * ENVLOG_COLS_CONTEXTS_MAX contexts are made. */
envlog_err envlog_cols_child_new(cxtree *t, uint32_t parent, uint64_t k, uint32_t i,
                                 uint32_t *out);

#endif /* ENVLOG_BUNDLE_COLS_TREE_H */
