/* SPDX-License-Identifier: MIT */
/*
 * state_int.h - replay's cache state inside: what its files share.
 *
 * The way through them, top to bottom (a file calls only those below it):
 *   state.c      opening (sources -> merge -> fold), the live state,
 *                lookups, statistics
 *   statewalk.c  every entry in canonical order: each, dump, items, digest
 *   fold.c       the fold rules: what a record does to the entries
 *   known.c      an entry by key: the table's, else the snapshot's
 *   view.c       the public entry a lookup hands out, made from its record
 *   entry.c      entries made from records: bytes kept or copied,
 *                namespaces interned
 *   table.c      keys to entries
 */
#ifndef ENVLOG_STATE_INT_H
#define ENVLOG_STATE_INT_H

#include "table.h"

#include <pthread.h>

/* Bytes the state holds for its entries' records: a session segment's
 * mapping or read copy handed over by the reader (the merge's keeper). */
typedef struct envlog_kept {
    void *p;
    size_t n;
    bool mapped;
} envlog_kept;

typedef struct envlog_user_rec {
    char *kind;
    uint8_t *body;
    size_t size;
    envlog_stamp stamp;
    uint64_t unix_ns;
    const uint8_t *payload;  /* the record (kept, or copied into `bytes`) */
    size_t payload_len;
} envlog_user_rec;

/* Tune entries of one tune set share its candidate names: the names are
 * made once per distinct list, found through a small cache by checksum. */
#define ENVLOG_CANDS_CACHE 64
typedef struct envlog_cands_ref {
    const char *const *v;
    size_t n;
    uint64_t checksum;
} envlog_cands_ref;

/* Strings (or ids) the state keeps once, however many entries hold them:
 * a set by hash, and the last one asked for (most records share it).
 * Each is kept after its length (envlog_interned_len) and before a NUL. */
typedef struct envlog_intern {
    const char **set;
    size_t slots, n;
    const char *last;
    size_t last_len;
} envlog_intern;

struct envlog_state {
    pthread_rwlock_t lock;   /* the table; lookups read, folds write */
    envlog_entry_table tab;
    envlog_arena mem;        /* entries, interned namespaces, keys of misses */
    envlog_arena bytes;      /* records nothing else keeps (live ones, ...) */
    envlog_intern ns;        /* namespaces, interned */
    envlog_intern sessions;  /* the ids of the sessions entries came from */
    envlog_kept *kept;
    size_t n_kept, cap_kept;
    bool keep_failed;        /* a segment could not be listed as kept: the
                                open fails (ENVLOG_NOMEM) */
    /* Public entries made from records (view.c), under their own lock: a
     * lookup that holds the table's read lock may make one. */
    pthread_mutex_t view_mu;
    envlog_arena views;
    envlog_cands_ref cands[ENVLOG_CANDS_CACHE];
    envlog_user_rec *users;
    size_t n_users, cap_users;
    envlog_state_stats st;
    envlog_snap *snap;       /* the checkpoint under the folded sessions */
    bool snap_loaded;        /* every snapshot entry is in the table */
    int snap_gen;            /* which generation snap is (ENVLOG_GEN_*) */
    uint64_t snap_reported;  /* damaged snapshot records reported at open */
    uint64_t snap_lost;      /* entries the snapshot claims that did not read */
    uint64_t snap_users;     /* user records read from the snapshot */
    envlog_snap *held;       /* a snapshot whose records were folded (up to a
                                point in time): held for the bytes entries
                                point at, never asked */
    void *owned;             /* a buffer the snapshot lives in, freed at close */
    /* What the live state held before it was folded again
     * (envlog_env_state_refold()): kept for what lookups gave out, closed
     * with it. */
    envlog_state *retired;
};

/* What a record brings to the fold: the record (its numbers and flags in
 * rec->u; its text fields as strings there, or as slices), where it stands
 * in time, the snapshot ENTRY or EVIDENCE around it, and whether its bytes
 * outlive the state without a copy. */
typedef struct envlog_fold_in {
    const envlog_record *rec;
    const envlog_text *slices;   /* NULL: text fields are rec->u's strings */
    uint64_t unix_ns;
    const envlog_snap_item *item;
    const uint8_t *kept;         /* where rec->payload's bytes stay (the
                                    same bytes, maybe another address) */
    const envlog_frag_loc *loc;  /* else, where a kept segment holds it in
                                    fragments (NULL: it must be copied) */
    uint64_t key_hash;           /* the hash of the key it sets, when */
    bool has_key_hash;           /* worked out already (the fold's hint) */
} envlog_fold_in;

/* A text field of a fold input (field `index` of its kind's schema): its
 * slice, or its string's. */
envlog_text envlog_fold_text(const envlog_fold_in *in, size_t index, const char *str);

/* ------------------------------------------------------------ entry.c */

/* The copy in `set` of the `n` bytes at `p`, made the first time
 * (ENVLOG_NOMEM). */
envlog_err envlog_state_intern(envlog_state *st, envlog_intern *set, const void *p, size_t n,
                               const char **out);
/* A new entry for the record of `in` (its bytes referenced when kept,
 * else copied), of key `k`, as origin and rule say. */
envlog_err envlog_entry_from(envlog_state *st, const envlog_fold_in *in,
                             const envlog_key_ref *k, envlog_origin origin, envlog_rule rule,
                             envlog_entry_x **out);
/* A known miss of key `k`: stops lookups from falling through to the
 * snapshot again. */
envlog_err envlog_entry_miss(envlog_state *st, const envlog_key_ref *k, envlog_entry_x **out);
/* Keeps the user record of `in` (carried through replay as it is). */
envlog_err envlog_state_add_user(envlog_state *st, const envlog_fold_in *in);
/* The record of an entry, whole (put together from its fragments, kept
 * after the first time, when it lies at a location).  The view lock is
 * held. */
envlog_err envlog_entry_bytes(envlog_state *st, envlog_entry_x *e, envlog_bytes *out);

/* ------------------------------------------------------------- view.c */

/* The public entry of `e` (made the first time; kept with the state). */
envlog_err envlog_entry_view(envlog_state *st, envlog_entry_x *e, const void **view);
/* Makes the public entry of `e` from `rec` itself, for a record that has
 * no bytes to make it from later (recorded at level off): its strings and
 * binary copied. */
envlog_err envlog_entry_view_of(envlog_state *st, envlog_entry_x *e, const envlog_record *rec);

/* ------------------------------------------------------------ known.c */

/* The entry of key `k`: the table's, or the snapshot's brought in (a known
 * miss when it has none); NULL when neither knows it.  Write lock held. */
envlog_err envlog_state_known(envlog_state *st, const envlog_key_ref *k, envlog_entry_x **out);
/* Brings every snapshot entry into the table, for walks over all of them
 * (write lock held). */
envlog_err envlog_state_load_all(envlog_state *st);
/* The snapshot's user records, which come before every session's. */
envlog_err envlog_state_load_users(envlog_state *st);

/* ------------------------------------------------------------- fold.c */

/* What a record does to the entries (write lock held). */
envlog_err envlog_state_fold_in(envlog_state *st, const envlog_fold_in *in);

#endif /* ENVLOG_STATE_INT_H */
