/* SPDX-License-Identifier: MIT */
/*
 * snap_int.h - what the files that read a snapshot share; nothing else
 * includes it.
 *
 * From the ground up: reading its places (snapread.c: blocks by pread or
 * from the mapping, fragments, records, the damage noted), its INDEX and
 * lookups through it (snapindex.c), and opening it, its manifest and its
 * walks (snapshot.c).  The writer is snapwrite.c, the format's shared
 * pieces (the INDEX's key hash among them) snapfmt.c.
 */
#ifndef ENVLOG_SNAP_INT_H
#define ENVLOG_SNAP_INT_H

#include "replay_int.h"

/* Blocks read by pread held at once: an index pair straddling two blocks
 * and the entry it names. */
#define SNAP_SLOTS 4

struct envlog_snap {
    const uint8_t *p;
    size_t n;
    uint64_t seed;
    envlog_id128 id;
    envlog_snap_manifest m;
    envlog_arena marena;       /* the manifest's strings */
    envlog_bytes mraw;         /* the manifest record (in marena) */
    envlog_buf index;          /* the pairs, reassembled (check_all) */
    uint64_t n_index;
    /* The INDEX record starts at idx_pos (every walk starts there and
     * reads it as a record).  Without check_all its pairs are read in
     * place: at open nothing of it is read; a lookup first reads pairs
     * where the writer's framing puts them for the MANIFEST's count
     * (n_claimed), unchecked, and trusts only the ENTRY they lead to.
     * When that finds nothing, the INDEX is found for certain
     * (idx_ready: its pairs at idx_base of its payload, n_index of
     * them, items_start after it) and each block's fragment is checked
     * the first time a lookup reads from it (idx_ok, one flag per block
     * from idx_pos's). */
    size_t idx_pos;
    uint64_t n_claimed;
    bool idx_ready;
    uint64_t idx_base;
    uint8_t *idx_ok;
    size_t idx_blocks;
    size_t items_start;        /* where ENTRY/EVIDENCE records begin (idx_ready) */
    uint64_t chain0;           /* the chain value at items_start, */
    bool chain0_known;         /* worked out by the first walk that needs it */
    bool chain_pending;        /* a rewind left the walk's chain to set */
    envlog_frame_reader fr;
    /* Fed while written (envlog_snap_load_fed()): n and fr.n are what is
     * written so far until fed_all. */
    envlog_snap_feed feed;
    bool fed_all;
    envlog_arena arena;        /* per lookup */
    /* Damage found by walks in file order (the full check, envlog_snap_next),
     * each place counted once however many walks pass it: bad_seen_to is
     * where the last one counted ends. */
    uint64_t bad;
    size_t bad_seen_to;
    uint64_t lookup_bad;       /* damaged records lookups met */
    envlog_damage first_bad;   /* the first damage found, by anyone */
    bool any_bad;
    envlog_damage dmg[ENVLOG_SNAP_DAMAGE_KEPT]; /* the first walk damages */
    size_t n_dmg;
    const envlog_snap_wm **wm_sorted; /* the watermarks by session id */
    /* The last walk from the start to the end (the full check is one):
     * what it found */
    bool checked, sealed, content_ok, index_bad;
    uint64_t read_tunes, read_kernels, read_users, read_evidence;
    /* The walk in progress */
    uint64_t walk_count;
    bool walk_have_last, walk_hashing, walk_from_start;
    bool walk_fold;            /* this walk decodes for the fold (envlog_snap_rewind_fold) */
    envlog_stamp walk_last;
    uint64_t walk_last_ns;
    envlog_h128 walk_hash;
    uint64_t walk_tunes, walk_kernels, walk_users, walk_evidence;
    void *map;                 /* when mapped from a file */
    size_t map_len;
    /* Lookups' reads (envlog_snap_block()): by pread from fd when >= 0, else from p. */
    int fd;
    int io_err;                /* the errno of a pread that failed */
    struct snap_slot {
        uint8_t *b;
        size_t no, len;        /* which block, how many bytes it has */
    } slot[SNAP_SLOTS];
    unsigned slot_next;
    envlog_buf rec;            /* a record read from several blocks */
    uint8_t *near;             /* a record read from its page (frag_near) */
    /* INDEX pages read unchecked by a lookup's first search: file bytes
     * [raw_off, raw_off + raw_len) */
    uint8_t *raw;
    size_t raw_off, raw_len;
    /* Lookups the unchecked search answered, and those it could not: a
     * reader whose keys are mostly absent (a fold of new keys) tries it
     * for one lookup in 16 only, since each of its misses costs a read
     * more. */
    uint64_t first_found, first_failed, lookups;
};

/* Where a record that an INDEX pair points at begins: a pair may point at
 * the zero bytes that end the block before its first fragment (fewer than
 * a fragment header's were left there). */
static inline uint64_t envlog_snap_record_start(uint64_t off)
{
    uint64_t left = ENVLOG_BLOCK - off % ENVLOG_BLOCK;
    return left < ENVLOG_FRAG_HDR ? off + left : off;
}

/* ------------------------------------------------- snapread.c */

/* The first damage anyone found (kept once), and a damaged place a walk
 * met (counted once per place, the first ENVLOG_SNAP_DAMAGE_KEPT kept). */
void envlog_snap_note_first(envlog_snap *s, size_t off, size_t bytes, const char *why);
void envlog_snap_note_bad(envlog_snap *s, size_t off, size_t bytes, const char *why);
/* Block `b` of the file (its *len bytes): in the mapping, or read by pread
 * into one of the slots.  NULL past the end or when the read fails. */
const uint8_t *envlog_snap_block(envlog_snap *s, size_t b, size_t *len);
/* The fragment at file offset `at` when whole and checksummed right: its
 * type, payload length and payload; 0 otherwise. */
int envlog_snap_frag(envlog_snap *s, size_t at, size_t *len, const uint8_t **payload);
/* The fragment at `at` from its header alone (envlog_frag_peek()). */
int envlog_snap_peek(envlog_snap *s, size_t at, size_t *len);
/* A failed read's error: the pread's (ENVLOG_IO, ENVLOG_NOMEM), else
 * ENVLOG_CORRUPT saying `what`. */
envlog_err envlog_snap_read_fail(envlog_snap *s, const char *what);
/* The record that starts at `at`, its fragments checked. */
envlog_err envlog_snap_record(envlog_snap *s, size_t at, const uint8_t **p, size_t *n);
/* [p, p+n) decoded as one record of schema `sc` and kind `kind`. */
envlog_err envlog_snap_decode_as(const uint8_t *p, size_t n, const envlog_schema *sc,
                                 void *out, envlog_arena *a, uint64_t kind);
/* An ENTRY or EVIDENCE payload and the record inside it, checked as
 * envlog(5) requires of a record any reader takes; `fold`: the record as
 * envlog_event_decode_fold() gives it (its detail skipped by length, which
 * drops no record), else whole; its strings in `a`, reset first. */
envlog_err envlog_snap_decode_item(envlog_arena *a, const uint8_t *p, size_t n, bool fold,
                                   envlog_snap_item *it, envlog_record *rec);

/* ------------------------------------------------ snapindex.c */

/* The INDEX read whole and checked (check_all); or, for lookups, only
 * where it starts noted, after the SEAL at the file's end is checked. */
envlog_err envlog_snap_index_load(envlog_snap *s);
envlog_err envlog_snap_index_locate(envlog_snap *s);
/* A bundle's pairs, made as its entries are read: the pair of item `it`
 * (a record at `off`) added to the snapshot's index. */
envlog_err envlog_snap_index_item(envlog_snap *s, const envlog_snap_item *it,
                                  const envlog_record *rec, size_t off);
/* The stored pairs name exactly the entries read, in the same order. */
bool envlog_snap_index_agrees(const envlog_buf *stored, uint64_t n_stored,
                              const envlog_buf *read, uint64_t n_read);

/* Whether the snapshot ends in its SEAL (read from its last bytes). */
envlog_err envlog_snap_check_sealed(envlog_snap *s);

#endif /* ENVLOG_SNAP_INT_H */
