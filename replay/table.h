/* SPDX-License-Identifier: MIT */
/*
 * table.h - the table of entries the fold keeps: what replay's state is
 * made of below its rules (fold.c), its sources (the merge) and its public
 * face (state.c, statewalk.c).
 *
 * An entry does not copy its record: it points at the record's bytes where
 * they lie (a session's segment kept mapped, a snapshot, or memory the
 * state owns), with its namespace interned and its key found in place, so
 * folding a record takes a hundred bytes of fresh memory, not a copy of
 * everything it says.  What a lookup hands out (envlog_tune_entry,
 * envlog_kernel_entry) is made from that record the first time it is
 * asked for (view.c) and kept.
 */
#ifndef ENVLOG_TABLE_H
#define ENVLOG_TABLE_H

#include "replay_int.h"

#include <string.h>

typedef struct envlog_entry_x {
    const char *ns;          /* interned, NUL-terminated, its length kept
                                before it (envlog_interned_len) */
    union {
        const uint8_t *rec;  /* the record that set it, whole (NULL: a
                                known miss) */
        const envlog_frag_loc *loc; /* at_loc: where a kept segment holds
                                       it in fragments, not read yet */
    } at;
    const char *key;         /* a tune's key text (in rec, or a copy), */
    void *view;              /* the public entry, once made (view.c) */
    union {
        uint64_t checksum;   /* tune */
        envlog_hash128 kernel_key; /* kernel */
    } k;
    /* The stamp of the record that set it, its session interned (most
     * entries share a few sessions). */
    const envlog_id128 *session;
    uint64_t seq, offset_ns;
    uint64_t unix_ns;
    uint32_t rec_len;
    uint32_t key_len;        /* (the key is not NUL-terminated) */
    uint8_t table;           /* envlog_table */
    bool live;               /* false: a tombstone or a known miss, kept in
                                its slot so a lookup does not fall through
                                to the snapshot */
    bool miss;               /* a known miss: the snapshot had nothing */
    bool at_loc;             /* at.loc, not at.rec */
    uint8_t origin, rule;    /* envlog_origin, envlog_rule */
} envlog_entry_x;
/* A million standing entries are this many megabytes of resident memory:
 * the fields are laid out without holes, and what other fields or the
 * table give (the key's hash, the namespace's length) is not kept twice. */
_Static_assert(sizeof(envlog_entry_x) <= 96, "an entry is 96 bytes at most");

/* The length of a string the state interned (kept before it). */
static inline size_t envlog_interned_len(const char *s)
{
    uint32_t n;
    memcpy(&n, s - sizeof n, sizeof n);
    return n;
}

/* The stamp of the record that set entry `e`. */
static inline envlog_stamp envlog_entry_stamp(const envlog_entry_x *e)
{
    return (envlog_stamp){*e->session, e->seq, e->offset_ns};
}

/* A key being looked for: its hash, table, namespace and key (a tune's key
 * text and checksum, or a kernel key). */
typedef struct envlog_key_ref {
    uint64_t hash;
    envlog_table table;
    envlog_text ns;
    envlog_text key;
    uint64_t checksum;
    const envlog_hash128 *kernel_key;
} envlog_key_ref;

/* Fills the hash of `k` from its other fields. */
void envlog_key_ref_hash(envlog_key_ref *k);

/* Open addressing with linear probing, half full at most; a slot holds the
 * hash beside the entry, so a probe that misses never touches an entry. */
typedef struct envlog_table_slot {
    uint64_t hash;
    envlog_entry_x *e;
} envlog_table_slot;

typedef struct envlog_entry_table {
    envlog_table_slot *slots;
    size_t n_slots;
    size_t n_known;          /* entries, tombstones and misses in slots */
    size_t n_tunes, n_kernels; /* standing entries */
} envlog_entry_table;

envlog_err envlog_table_init(envlog_entry_table *t);
void envlog_table_free(envlog_entry_table *t);
/* The entry of key `k`, live or not, or NULL. */
envlog_entry_x *envlog_table_find(const envlog_entry_table *t, const envlog_key_ref *k);
/* Asks the processor for the slot a key of hash `hash` is looked for in
 * first (for writing: a new key is put there). */
static inline void envlog_table_prefetch(const envlog_entry_table *t, uint64_t hash)
{
    __builtin_prefetch(&t->slots[hash & (t->n_slots - 1)], 1);
}
/* Puts `e`, of key hash `hash`, in place of `old` (NULL: a new key).
 * `counted`: e is counted already (a snapshot's entry, whose count the
 * table began with). */
envlog_err envlog_table_install(envlog_entry_table *t, envlog_entry_x *e, uint64_t hash,
                                envlog_entry_x *old, bool counted);
/* Grows the table at once to hold `more` new keys besides those it knows
 * (a table grown step by step moves every slot at each doubling). */
envlog_err envlog_table_expect(envlog_entry_table *t, size_t more);
/* Turns a standing entry into a tombstone. */
void envlog_table_kill(envlog_entry_table *t, envlog_entry_x *e);
/* The key of entry `e`, its hash filled. */
envlog_key_ref envlog_entry_key(const envlog_entry_x *e);
/* Whether entry `e` has key `k`. */
bool envlog_entry_has_key(const envlog_entry_x *e, const envlog_key_ref *k);

#endif /* ENVLOG_TABLE_H */
