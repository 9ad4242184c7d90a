/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - reading a snapshot file through its index without folding
 * it, and checking every byte of it when asked.
 *
 * Lookups binary search the INDEX's sorted (key hash, offset) pairs and
 * decode only the ENTRY records with that hash, checking the fragments they
 * read.  The full check (bundles, verify, compaction) reads every record
 * and counts what it cannot read; envlog(5) says what each damage costs.
 *
 * A snapshot opened from its file for lookups reads what they need (its
 * head, its tail, an index block, an entry) by pread, block by block, into
 * a few buffers of its own; walks read the mapping.  A first touch of a
 * mapped page costs a page fault, and unmapping what was touched costs
 * more: on a virtual machine tens of microseconds each, most of a cold
 * lookup when the four places it reads are mapped.
 */
#include "replay_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /* Without check_all the pairs are read in place, in the mapped file:
     * the INDEX record starts at idx_pos, its pairs at idx_base of its
     * payload; each block's fragment is checked the first time a lookup
     * reads from it (idx_ok, one flag per block from idx_pos's). */
    size_t idx_pos;
    uint64_t idx_base;
    uint8_t *idx_ok;
    size_t idx_blocks;
    size_t items_start;        /* where ENTRY/EVIDENCE records begin */
    uint64_t chain0;           /* the chain value at items_start, */
    bool chain0_known;         /* worked out by the first walk that needs it */
    bool chain_pending;        /* a rewind left the walk's chain to set */
    envlog_frame_reader fr;
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
    envlog_stamp walk_last;
    uint64_t walk_last_ns;
    envlog_h128 walk_hash;
    uint64_t walk_tunes, walk_kernels, walk_users, walk_evidence;
    void *map;                 /* when mapped from a file */
    size_t map_len;
    /* Lookups' reads (blk): by pread from fd when >= 0, else from p. */
    int fd;
    int io_err;                /* the errno of a pread that failed */
    struct snap_slot {
        uint8_t *b;
        size_t no, len;        /* which block, how many bytes it has */
    } slot[SNAP_SLOTS];
    unsigned slot_next;
    envlog_buf rec;            /* a record read from several blocks */
    uint8_t *near;             /* a record read from its page (frag_near) */
};

static void note_first(envlog_snap *s, size_t off, size_t bytes, const char *why)
{
    if (s->any_bad)
        return;
    s->any_bad = true;
    memset(&s->first_bad, 0, sizeof s->first_bad);
    s->first_bad.session = s->id;
    s->first_bad.offset = off;
    s->first_bad.bytes = bytes;
    snprintf(s->first_bad.reason, sizeof s->first_bad.reason, "%s", why);
}

/* Damage a walk in file order met at `off`. */
static void note_bad(envlog_snap *s, size_t off, size_t bytes, const char *why)
{
    note_first(s, off, bytes, why);
    if (off < s->bad_seen_to)
        return;
    s->bad++;
    s->bad_seen_to = off + (bytes ? bytes : 1);
    if (s->n_dmg < ENVLOG_SNAP_DAMAGE_KEPT) {
        envlog_damage *d = &s->dmg[s->n_dmg++];
        memset(d, 0, sizeof *d);
        d->session = s->id;
        d->offset = off;
        d->bytes = bytes;
        snprintf(d->reason, sizeof d->reason, "%s", why);
    }
}

size_t envlog_snap_damages(const envlog_snap *s, const envlog_damage **v)
{
    *v = s->dmg;
    return s->n_dmg;
}

/* Block `b` of the file (its `*len` bytes): in the mapping, or read by
 * pread into one of the slots (kept until SNAP_SLOTS other blocks are
 * read).  NULL past the end, or when the read fails (io_err says why). */
static const uint8_t *blk(envlog_snap *s, size_t b, size_t *len)
{
    size_t off = b * ENVLOG_BLOCK;
    if (off >= s->n)
        return NULL;
    *len = s->n - off < ENVLOG_BLOCK ? s->n - off : ENVLOG_BLOCK;
    if (s->fd < 0)
        return s->p + off;
    for (unsigned i = 0; i < SNAP_SLOTS; i++)
        if (s->slot[i].b && s->slot[i].no == b && s->slot[i].len == *len)
            return s->slot[i].b;
    struct snap_slot *sl = &s->slot[s->slot_next++ % SNAP_SLOTS];
    if (!sl->b && !(sl->b = envlog_malloc(ENVLOG_BLOCK))) {
        s->io_err = ENOMEM;
        return NULL;
    }
    sl->len = 0;
    if (envlog_pread_full(s->fd, sl->b, *len, (off_t)off)) {
        s->io_err = errno ? errno : EIO;
        return NULL;
    }
    sl->no = b;
    sl->len = *len;
    return sl->b;
}

/* The fragment at file offset `at` when it is whole and passes its
 * checksum: its type, payload length and payload; 0 otherwise. */
static int frag_at(envlog_snap *s, size_t at, size_t *len, const uint8_t **payload)
{
    size_t bl;
    const uint8_t *bp = blk(s, at / ENVLOG_BLOCK, &bl);
    if (!bp)
        return 0;
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, bp, bl, s->seed, 0);
    int type = envlog_frag_check(&fr, at % ENVLOG_BLOCK, len);
    if (type)
        *payload = bp + at % ENVLOG_BLOCK + ENVLOG_FRAG_HDR;
    return type;
}

/* The fragment at `at` (as frag_at()) read by pread with what follows it
 * to the end of its page and the next (at most its block's end): 0 when it
 * does not end there. */
static int frag_near(envlog_snap *s, size_t at, size_t *len, const uint8_t **payload)
{
    size_t end = (at / 4096 + 2) * 4096, bend = (at / ENVLOG_BLOCK + 1) * ENVLOG_BLOCK;
    if (end > bend)
        end = bend;
    if (end > s->n)
        end = s->n;
    if (at >= end || (!s->near && !(s->near = envlog_malloc(8192))))
        return 0;
    if (envlog_pread_full(s->fd, s->near, end - at, (off_t)at))
        return 0; /* frag_at() reads it again, and says why */
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, s->near, end - at, s->seed, 0);
    int type = envlog_frag_check(&fr, 0, len);
    if (type)
        *payload = s->near + ENVLOG_FRAG_HDR;
    return type;
}

/* The shape of the fragment at `at` from its header alone (envlog_frag_peek). */
static int peek_at(envlog_snap *s, size_t at, size_t *len)
{
    if (s->fd < 0)
        return envlog_frag_peek(s->p, s->n, at, len);
    uint8_t h[ENVLOG_FRAG_HDR];
    if (at > s->n || s->n - at < sizeof h)
        return 0;
    if (envlog_pread_full(s->fd, h, sizeof h, (off_t)at)) {
        s->io_err = errno ? errno : EIO;
        return 0;
    }
    return envlog_frag_head(h, at, s->n, len);
}

/* The failure of a lookup's read: the pread's, else the damage `what`. */
static envlog_err read_fail(envlog_snap *s, const char *what)
{
    int err = s->io_err;
    s->io_err = 0;
    if (err == ENOMEM)
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    if (err) { /* the disk's failure, never the data's */
        envlog__fail_errno(err, "reading the snapshot");
        return ENVLOG_IO;
    }
    return envlog__fail(ENVLOG_CORRUPT, "%s", what);
}

/* The record that starts at `at`, its fragments checked: in place when it
 * is one fragment, else gathered from its blocks into s->rec. */
static envlog_err read_record(envlog_snap *s, size_t at, const uint8_t **p, size_t *n)
{
    size_t len, from = at;
    const uint8_t *pl;
    int type;
    /* By pread, a record of one fragment (an entry, most of all) is read
     * from its page on, without the rest of its block. */
    if (s->fd >= 0 && (type = frag_near(s, at, &len, &pl)) == ENVLOG_FRAG_FULL) {
        *p = pl;
        *n = len;
        return ENVLOG_OK;
    }
    type = frag_at(s, at, &len, &pl);
    if (type == ENVLOG_FRAG_FULL) {
        *p = pl;
        *n = len;
        return ENVLOG_OK;
    }
    s->rec.len = 0;
    /* A FIRST and every MIDDLE fill their blocks to the end. */
    for (int want = ENVLOG_FRAG_FIRST;
         type == want && at % ENVLOG_BLOCK + ENVLOG_FRAG_HDR + len == ENVLOG_BLOCK;
         want = ENVLOG_FRAG_MIDDLE) {
        if (envlog_buf_append(&s->rec, pl, len))
            return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
        at = (at / ENVLOG_BLOCK + 1) * ENVLOG_BLOCK;
        type = frag_at(s, at, &len, &pl);
        if (type == ENVLOG_FRAG_LAST) {
            if (envlog_buf_append(&s->rec, pl, len))
                return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
            *p = s->rec.p;
            *n = s->rec.len;
            return ENVLOG_OK;
        }
    }
    char what[80];
    snprintf(what, sizeof what, "snapshot record at offset %zu is damaged", from);
    return read_fail(s, what);
}

static envlog_err decode_as(const uint8_t *p, size_t n, const envlog_schema *sc,
                            void *out, envlog_arena *a, uint64_t kind)
{
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    memset(out, 0, sc->size);
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e)
        e = envlog_struct_decode(&pl, &t, sc, out, a);
    if (!e && *(const uint64_t *)out != kind)
        e = envlog__fail(ENVLOG_BAD_DATA, "expected a %s record", sc->name);
    if (!e && pl.pos != n)
        e = envlog__fail(ENVLOG_BAD_DATA, "bytes after the %s record", sc->name);
    return e;
}

/* Decodes an ENTRY/EVIDENCE payload and the record inside it, and checks
 * that it is one envlog(5) allows: a record that decodes as an event
 * record, its envelope agreeing with the stamp, and for an ENTRY a value
 * that stands (a stored tune with a winner, a compiled kernel with its
 * binary, a user record) of its table's kind, whose origin is its record's
 * own.  Anything else is damage: no reader ever takes it. */
static envlog_err decode_item(envlog_snap *s, const uint8_t *p, size_t n,
                              envlog_snap_item *it, envlog_record *rec)
{
    envlog_arena_reset(&s->arena);
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    memset(it, 0, sizeof *it);
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e)
        e = envlog_struct_decode(&pl, &t, &envlog_snap_item_schema, it, &s->arena);
    if (!e && pl.pos != n)
        e = envlog__fail(ENVLOG_BAD_DATA, "bytes after the record");
    if (e)
        return e;
    bool entry = it->kind == ENVLOG_KIND_ENTRY;
    if ((!entry && it->kind != ENVLOG_KIND_EVIDENCE) || !it->record.size)
        return envlog__fail(ENVLOG_BAD_DATA, "not an entry or evidence record");
    if (entry && it->rule > ENVLOG_RULE_IMPORTED)
        return envlog__fail(ENVLOG_BAD_DATA, "an entry whose rule does not make it stand");
    if ((e = envlog_event_decode(it->record.data, it->record.size, rec, &s->arena)))
        return e;
    if (rec->stamp.seq != it->stamp.seq || rec->stamp.offset_ns != it->stamp.offset_ns)
        return envlog__fail(ENVLOG_BAD_DATA, "a record whose stamp is not its own");
    rec->stamp = it->stamp;
    if (!entry)
        return ENVLOG_OK;
    const char *why = NULL;
    bool imported = false;
    if (it->table == ENVLOG_TABLE_TUNE) {
        const envlog_tune *tu = &rec->u.tune;
        imported = tu->imported;
        if (rec->kind != ENVLOG_KIND_TUNE || !tu->ns || !tu->key)
            why = "a tune entry that holds no tune";
        else if (!tu->stored || tu->winner < 0)
            why = "a tune entry without a stored winner";
    } else if (it->table == ENVLOG_TABLE_KERNEL) {
        const envlog_compile *c = &rec->u.compile;
        imported = c->imported;
        if (rec->kind != ENVLOG_KIND_COMPILE || !c->ns)
            why = "a kernel entry that holds no compile";
        else if (c->outcome != ENVLOG_COMPILED || !c->binary.size)
            why = "a kernel entry without its binary";
    } else if (rec->kind != ENVLOG_KIND_USER) {
        why = "a user entry that holds no user record";
    }
    if (!why && it->table != ENVLOG_TABLE_USER && it->origin != (int)imported)
        why = "an entry whose origin is not its record's";
    return why ? envlog__fail(ENVLOG_BAD_DATA, "%s", why) : ENVLOG_OK;
}

void envlog_snap_free(envlog_snap *s)
{
    if (!s)
        return;
    envlog_arena_free(&s->marena);
    envlog_arena_free(&s->arena);
    envlog_buf_free(&s->index);
    envlog_free(s->idx_ok);
    envlog_free(s->wm_sorted);
    envlog_frame_reader_free(&s->fr);
    envlog_h128_free(&s->walk_hash);
    for (unsigned i = 0; i < SNAP_SLOTS; i++)
        envlog_free(s->slot[i].b);
    envlog_buf_free(&s->rec);
    envlog_free(s->near);
    if (s->fd >= 0)
        envlog_io_get()->close(s->fd);
    envlog_free(s);
}

static envlog_err check_all_items(envlog_snap *s);

/* The INDEX read whole, through the frame reader, and checked: sorted,
 * every offset inside the file (check_all). */
static envlog_err load_index(envlog_snap *s)
{
    size_t n = s->n;
    envlog_fr_status st = envlog_frame_reader_next(&s->fr);
    if (st == ENVLOG_FR_NOMEM)
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot index");
    if (st != ENVLOG_FR_RECORD)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
    envlog_snap_index ir;
    envlog_arena tmp = {0};
    envlog_err e = decode_as(s->fr.out, s->fr.out_len, &envlog_snap_index_schema, &ir, &tmp, ENVLOG_KIND_INDEX);
    if (!e && (ir.count > n / 16 || ir.pairs.size != ir.count * 16))
        e = envlog__fail(ENVLOG_BAD_DATA, "snapshot index claims %llu entries",
                         (unsigned long long)ir.count);
    if (!e && ir.count)
        e = envlog_buf_append(&s->index, ir.pairs.data, ir.pairs.size);
    envlog_arena_free(&tmp);
    if (e)
        return e;
    s->n_index = ir.count;
    for (uint64_t i = 0; i < s->n_index; i++)
        if (envlog_get_be64(s->index.p + 16 * i + 8) >= n ||
            (i && memcmp(s->index.p + 16 * (i - 1), s->index.p + 16 * i, 16) > 0))
            return envlog__fail(ENVLOG_BAD_DATA,
                                "snapshot index is not sorted or points outside");
    return ENVLOG_OK;
}

/* File offset of byte `at` of the INDEX record's payload.  The writer's
 * framing is fixed (envlog(5)): the first fragment fills what is left of
 * its block, every later one a block from its start. */
static size_t idx_file_off(const envlog_snap *s, uint64_t at)
{
    uint64_t room0 = ENVLOG_BLOCK - s->idx_pos % ENVLOG_BLOCK - ENVLOG_FRAG_HDR;
    if (at < room0)
        return s->idx_pos + ENVLOG_FRAG_HDR + (size_t)at;
    at -= room0;
    uint64_t per = ENVLOG_BLOCK - ENVLOG_FRAG_HDR;
    uint64_t block = s->idx_pos / ENVLOG_BLOCK + 1 + at / per;
    return (size_t)(block * ENVLOG_BLOCK + ENVLOG_FRAG_HDR + at % per);
}

/* Checks, once, the INDEX fragment holding file offset `off`. */
static bool idx_block_ok(envlog_snap *s, size_t off)
{
    size_t b = off / ENVLOG_BLOCK - s->idx_pos / ENVLOG_BLOCK, len;
    if (b >= s->idx_blocks)
        return false;
    if (s->idx_ok[b])
        return true;
    size_t at = b ? (s->idx_pos / ENVLOG_BLOCK + b) * ENVLOG_BLOCK : s->idx_pos;
    const uint8_t *pl;
    int type = frag_at(s, at, &len, &pl);
    bool ok = b ? type == ENVLOG_FRAG_MIDDLE || type == ENVLOG_FRAG_LAST
                : type == ENVLOG_FRAG_FIRST || type == ENVLOG_FRAG_FULL;
    if (ok && off >= at + ENVLOG_FRAG_HDR && off < at + ENVLOG_FRAG_HDR + len)
        s->idx_ok[b] = 1;
    return s->idx_ok[b];
}

/* Pair `i` of the index: its key hash and record offset.  False when the
 * fragment it is in fails its check. */
static bool pair_at(envlog_snap *s, uint64_t i, uint64_t *hash, uint64_t *off)
{
    if (!s->idx_ok) { /* reassembled by load_index or index_item */
        *hash = envlog_get_be64(s->index.p + 16 * i);
        *off = envlog_get_be64(s->index.p + 16 * i + 8);
        return true;
    }
    uint8_t b[16];
    uint64_t at = s->idx_base + 16 * i;
    /* A pair may straddle a block boundary: gathered byte by byte then. */
    size_t f0 = idx_file_off(s, at), f15 = idx_file_off(s, at + 15);
    if (!idx_block_ok(s, f0) || !idx_block_ok(s, f15))
        return false;
    size_t bl;
    const uint8_t *bp;
    if (f15 == f0 + 15) {
        if (!(bp = blk(s, f0 / ENVLOG_BLOCK, &bl)))
            return false;
        memcpy(b, bp + f0 % ENVLOG_BLOCK, 16);
    } else {
        for (int k = 0; k < 16; k++) {
            size_t f = idx_file_off(s, at + (uint64_t)k);
            if (!(bp = blk(s, f / ENVLOG_BLOCK, &bl)))
                return false;
            b[k] = bp[f % ENVLOG_BLOCK];
        }
    }
    *hash = envlog_get_be64(b);
    *off = envlog_get_be64(b + 8);
    return true;
}

/* The INDEX record's extent from its first fragment (at `pos`, `len`
 * payload bytes, the pairs' byte string head at `head` of it) and its
 * count, given the writer's fixed framing (idx_file_off): true, with its
 * length, end and blocks, when the byte string holds exactly the pairs and
 * the last block's header says what the framing implies. */
static bool index_extent(envlog_snap *s, size_t pos, const uint8_t *r, size_t len,
                         size_t head, uint64_t count, uint64_t *total, size_t *end,
                         size_t *blocks)
{
    size_t at = head + 1; /* past key 5 */
    if (at >= len || r[at] >> 5 != 2 || (r[at] & 31) > 27 || count > s->n / 16)
        return false;
    unsigned ai = r[at] & 31;
    size_t hb = ai < 24 ? 1 : 1 + ((size_t)1 << (ai - 24));
    if (at + hb > len)
        return false;
    uint64_t l = ai < 24 ? ai : 0;
    for (size_t i = 1; i < hb; i++)
        l = l << 8 | r[at + i];
    if (l != count * 16)
        return false;
    uint64_t all = at + hb + l, per = ENVLOG_BLOCK - ENVLOG_FRAG_HDR;
    if (all <= len)
        return false;
    uint64_t rest = all - len, more = (rest + per - 1) / per;
    size_t last_len = (size_t)(rest - (more - 1) * per);
    size_t last = (size_t)((pos / ENVLOG_BLOCK + more) * ENVLOG_BLOCK);
    size_t ll = 0;
    if (peek_at(s, last, &ll) != ENVLOG_FRAG_LAST || ll != last_len)
        return false;
    *total = all;
    *end = last + ENVLOG_FRAG_HDR + last_len;
    *blocks = (size_t)more + 1;
    return true;
}

/* The INDEX found in place: its first fragment is checked and gives the
 * count; the block headers after it give its length, so where the entries
 * start is known without reading the pairs.  Each lookup then reads the few
 * pairs a binary search needs, checking their fragments as it goes: opening
 * costs the same at a thousand entries as at a million. */
static envlog_err map_index(envlog_snap *s)
{
    size_t pos = s->fr.pos, len;
    /* A file cut short would lose the entries past the cut unseen. */
    uint8_t tail[2 * ENVLOG_SEAL_TAIL];
    size_t tl = s->n < sizeof tail ? s->n : sizeof tail;
    bool sealed;
    if (s->fd < 0) {
        sealed = envlog_frames_end_in_seal(s->p, s->n, s->seed);
    } else if (envlog_pread_full(s->fd, tail, tl, (off_t)(s->n - tl))) {
        s->io_err = errno ? errno : EIO;
        return read_fail(s, "");
    } else {
        sealed = envlog_tail_is_seal(tail, tl, s->n, s->seed);
    }
    if (!sealed)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot is cut short: no seal at its end");
    if (ENVLOG_BLOCK - pos % ENVLOG_BLOCK < ENVLOG_FRAG_HDR)
        pos += ENVLOG_BLOCK - pos % ENVLOG_BLOCK; /* the block's zero tail */
    const uint8_t *r = NULL;
    int type = frag_at(s, pos, &len, &r);
    if (type != ENVLOG_FRAG_FULL && type != ENVLOG_FRAG_FIRST)
        return s->io_err ? read_fail(s, "") : envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
    /* The head of the record: {0: kind, 4: count, 5: pairs}, the pairs a
     * byte string that ends the record. */
    envlog_pull pl = {r, len, 0};
    envlog_tok t, k, v;
    uint64_t count = 0;
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e && (t.type != ENVLOG_TOK_MAP || t.u < 2 || t.u > 3))
        e = ENVLOG_BAD_DATA;
    for (int i = 0; !e && i < 2; i++) {
        if (!(e = envlog_pull_next(&pl, &k)) && !(e = envlog_pull_next(&pl, &v)) &&
            (k.type != ENVLOG_TOK_UINT || v.type != ENVLOG_TOK_UINT ||
             k.u != (i ? 4u : 0u) || (!i && v.u != ENVLOG_KIND_INDEX)))
            e = ENVLOG_BAD_DATA;
        count = v.u;
    }
    /* No pairs at all: the byte string is left out (count 0). */
    bool none = !e && t.u == 2;
    if (none && (count || type != ENVLOG_FRAG_FULL || pl.pos != len))
        e = ENVLOG_BAD_DATA;
    if (!e && !none && (pl.pos >= len || pl.p[pl.pos] != 5 || count > s->n / 16 ||
               (pl.pos + 1 < len && pl.p[pl.pos + 1] >> 5 != 2) ||
               (type == ENVLOG_FRAG_FIRST &&
                len != ENVLOG_BLOCK - pos % ENVLOG_BLOCK - ENVLOG_FRAG_HDR)))
        e = ENVLOG_BAD_DATA;
    /* The record's length: its fragments' lengths, from their headers;
     * worked out from the count when the pairs' head is in the first
     * fragment, with only the last header read (the others are checked by
     * the lookups that read their blocks).  Reading every header touched a
     * page per 32 KiB of index: most of what an open cost at 100k entries. */
    uint64_t total = len;
    size_t end = pos + ENVLOG_FRAG_HDR + len;
    size_t blocks = 1;
    if (!e && !none && type == ENVLOG_FRAG_FIRST &&
        index_extent(s, pos, r, len, pl.pos, count, &total, &end, &blocks))
        type = ENVLOG_FRAG_LAST;
    while (!e && type != ENVLOG_FRAG_FULL && type != ENVLOG_FRAG_LAST) {
        size_t at = (pos / ENVLOG_BLOCK + blocks) * ENVLOG_BLOCK, l = 0;
        type = peek_at(s, at, &l);
        if ((type != ENVLOG_FRAG_MIDDLE && type != ENVLOG_FRAG_LAST) ||
            (type == ENVLOG_FRAG_MIDDLE && ENVLOG_FRAG_HDR + l != ENVLOG_BLOCK)) {
            e = ENVLOG_BAD_DATA;
            break;
        }
        total += l;
        end = at + ENVLOG_FRAG_HDR + l;
        blocks++;
    }
    /* The pairs end the record; what is before them is the head read above
     * and the byte string's own head (1 to 9 bytes). */
    if (!e && !none &&
        (total < count * 16 + pl.pos + 2 || total - count * 16 - pl.pos - 1 > 9))
        e = ENVLOG_BAD_DATA;
    if (e == ENVLOG_NOMEM)
        return e;
    if (s->io_err)
        return read_fail(s, "");
    if (e)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
    if (!(s->idx_ok = envlog_calloc(blocks, 1)))
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    s->idx_pos = pos;
    s->idx_base = total - count * 16;
    s->idx_blocks = blocks;
    s->n_index = count;
    s->fr.pos = end;
    return ENVLOG_OK;
}

/* The HEADER and the MANIFEST through `fr`: their statuses. */
static envlog_fr_status read_head(envlog_frame_reader *fr, envlog_fr_status *manifest)
{
    envlog_fr_status st = envlog_frame_reader_next(fr);
    *manifest = st == ENVLOG_FR_RECORD ? envlog_frame_reader_next(fr) : st;
    return st;
}

envlog_err envlog_snap_load(const uint8_t *p, size_t n, bool check_all,
                            envlog_snap **out)
{
    return envlog_snap_load_fd(p, n, -1, check_all, out);
}

envlog_err envlog_snap_load_fd(const uint8_t *p, size_t n, int fd, bool check_all,
                               envlog_snap **out)
{
    *out = NULL;
    if (fd >= 0 && check_all) {
        envlog_io_get()->close(fd); /* a full check reads the mapping */
        fd = -1;
    }
    envlog_snap *s = envlog_calloc(1, sizeof *s);
    if (!s) {
        if (fd >= 0)
            envlog_io_get()->close(fd);
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    }
    s->p = p;
    s->n = n;
    s->fd = fd;
    envlog_err e = ENVLOG_OK;
    if (n < ENVLOG_FRAG_HDR) {
        e = envlog__fail(ENVLOG_FORMAT, "too short to be a snapshot (%zu bytes)", n);
        goto fail;
    }
    /* The seed comes from the id in the HEADER, so the header's fragment is
     * decoded first and its checksum checked with the seed it names. */
    size_t hl = 0, b0l = 0;
    envlog_seg_header h;
    const uint8_t *b0 = blk(s, 0, &b0l);
    if (!b0) {
        e = read_fail(s, "");
        goto fail;
    }
    if (envlog_frag_peek(b0, b0l, 0, &hl) != ENVLOG_FRAG_FULL ||
        (e = decode_as(b0 + ENVLOG_FRAG_HDR, hl, &envlog_seg_header_schema, &h, &s->marena,
                       ENVLOG_KIND_HEADER)) ||
        !h.magic || strcmp(h.magic, ENVLOG_MAGIC)) {
        if (e != ENVLOG_NOMEM) /* out of memory is not the data's fault */
            e = envlog__fail(ENVLOG_FORMAT, "not an envlog snapshot or bundle (bad header)");
        goto fail;
    }
    if (h.version < ENVLOG_LOG_VERSION_MIN || h.version > ENVLOG_LOG_VERSION) {
        e = envlog__fail(ENVLOG_FORMAT, "log format version %llu is unknown",
                         (unsigned long long)h.version);
        goto fail;
    }
    s->id = h.id;
    s->seed = envlog_seg_seed(&h.id, 0);
    envlog_frame_reader_init(&s->fr, p, n, s->seed, 0);
    const uint8_t *rp;
    size_t rn;
    /* Read by pread, the head is read from the first block when the
     * MANIFEST ends in it (as it does but for thousands of sessions); else,
     * and from a mapping, from the file. */
    envlog_frame_reader fr0, *fr = &s->fr;
    envlog_frame_reader_init(&fr0, b0, b0l, s->seed, 0);
    envlog_fr_status st, hs = ENVLOG_FR_END;
    if (s->fd >= 0 && (hs = read_head(&fr0, &st)) == ENVLOG_FR_RECORD &&
        st == ENVLOG_FR_RECORD) {
        fr = &fr0;
        s->fr.pos = fr0.pos;
        s->fr.chain = fr0.chain;
        s->fr.chain_start = fr0.chain_start;
    } else {
        hs = read_head(&s->fr, &st);
    }
    if (hs != ENVLOG_FR_RECORD) {
        envlog_frame_reader_free(&fr0);
        e = envlog__fail(ENVLOG_FORMAT, "snapshot header fails its checksum");
        goto fail;
    }
    if (st != ENVLOG_FR_RECORD) {
        e = st == ENVLOG_FR_NOMEM ? envlog__fail(ENVLOG_NOMEM, "reading a snapshot manifest")
                                  : envlog__fail(ENVLOG_BAD_DATA, "snapshot manifest is damaged");
        goto fail;
    }
    rp = fr->out;
    rn = fr->out_len;
    /* The manifest's strings outlive the frame buffer: copied by decode. */
    uint8_t *mcopy = envlog_arena_alloc(&s->marena, rn);
    if (mcopy)
        memcpy(mcopy, rp, rn);
    envlog_frame_reader_free(&fr0);
    if (!mcopy) {
        e = envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
        goto fail;
    }
    s->mraw.data = mcopy;
    s->mraw.size = rn;
    if ((e = decode_as(mcopy, rn, &envlog_snap_manifest_schema, &s->m, &s->marena, ENVLOG_KIND_MANIFEST))) {
        if (e != ENVLOG_NOMEM)
            e = envlog__fail(ENVLOG_BAD_DATA, "snapshot manifest: %s", envlog_errmsg());
        goto fail;
    }
    if (s->m.schema != ENVLOG_BUNDLE_SCHEMA) {
        e = envlog__fail(ENVLOG_FORMAT, "bundle schema %llu is unknown (this envlog reads %d)",
                         (unsigned long long)s->m.schema, ENVLOG_BUNDLE_SCHEMA);
        goto fail;
    }
    e = check_all ? load_index(s) : map_index(s);
    if (e)
        goto fail;
    s->items_start = s->fr.pos;
    if (check_all && (e = check_all_items(s)))
        goto fail;
    if (!check_all)
        envlog_snap_rewind(s);
    *out = s;
    return ENVLOG_OK;
fail:
    envlog_snap_free(s);
    return e;
}

envlog_bytes envlog_snap_manifest_raw(const envlog_snap *s)
{
    return s->mraw;
}

const envlog_snap_manifest *envlog_snap_manifest_get(const envlog_snap *s)
{
    return &s->m;
}

uint64_t envlog_snap_bad_records(const envlog_snap *s) { return s->bad; }
uint64_t envlog_snap_lookup_damage(const envlog_snap *s) { return s->lookup_bad; }
const envlog_damage *envlog_snap_first_damage(const envlog_snap *s)
{
    return s->any_bad ? &s->first_bad : NULL;
}
envlog_id128 envlog_snap_id(const envlog_snap *s) { return s->id; }

bool envlog_snap_read_counts(const envlog_snap *s, envlog_snap_counts *c)
{
    memset(c, 0, sizeof *c);
    if (!s->checked)
        return false;
    c->tunes = s->read_tunes;
    c->kernels = s->read_kernels;
    c->users = s->read_users;
    c->evidence = s->read_evidence;
    c->sealed = s->sealed;
    c->content_ok = s->content_ok;
    uint64_t want = s->m.tunes + s->m.kernels + s->m.users, got = c->tunes + c->kernels + c->users;
    c->lost = want > got ? want - got : 0;
    c->intact = !s->bad && !s->index_bad && s->sealed && s->content_ok && !c->lost &&
                c->evidence == s->m.evidence && c->tunes == s->m.tunes &&
                c->kernels == s->m.kernels && c->users == s->m.users;
    return true;
}
uint64_t envlog_snap_size(const envlog_snap *s) { return s->n; }
bool envlog_snap_content_ok(const envlog_snap *s) { return s->content_ok; }

static int wm_cmp(const void *a, const void *b)
{
    const envlog_snap_wm *const *x = a, *const *y = b;
    return memcmp((*x)->session.b, (*y)->session.b, 16);
}

bool envlog_snap_watermark_x(envlog_snap *s, const envlog_id128 *session,
                             uint64_t *last_seq, bool *complete)
{
    /* Sorted once, on the first question: thousands of sessions are each
     * asked about at every open. */
    if (!s->wm_sorted && s->m.n_wms > 8) {
        s->wm_sorted = envlog_malloc(s->m.n_wms * sizeof *s->wm_sorted);
        if (s->wm_sorted) {
            for (size_t i = 0; i < s->m.n_wms; i++)
                s->wm_sorted[i] = &s->m.wms[i];
            qsort(s->wm_sorted, s->m.n_wms, sizeof *s->wm_sorted, wm_cmp);
        }
    }
    const envlog_snap_wm *w = NULL;
    if (s->wm_sorted) {
        size_t lo = 0, hi = s->m.n_wms;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = memcmp(s->wm_sorted[mid]->session.b, session->b, 16);
            if (!c) {
                w = s->wm_sorted[mid];
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    } else {
        for (size_t i = 0; i < s->m.n_wms && !w; i++)
            if (!memcmp(s->m.wms[i].session.b, session->b, 16))
                w = &s->m.wms[i];
    }
    if (!w)
        return false;
    *last_seq = w->last_seq;
    if (complete)
        *complete = w->complete;
    return true;
}

bool envlog_snap_watermark(envlog_snap *s, const envlog_id128 *session, uint64_t *last_seq)
{
    return envlog_snap_watermark_x(s, session, last_seq, NULL);
}

static bool key_matches(const envlog_record *rec, envlog_table table, const char *ns,
                        const char *key, const envlog_hash128 *kkey, uint64_t checksum)
{
    if (table == ENVLOG_TABLE_TUNE)
        return rec->kind == ENVLOG_KIND_TUNE && rec->u.tune.ns && rec->u.tune.key &&
               rec->u.tune.checksum == checksum && !strcmp(rec->u.tune.ns, ns) &&
               !strcmp(rec->u.tune.key, key);
    return rec->kind == ENVLOG_KIND_COMPILE && rec->u.compile.ns &&
           !memcmp(rec->u.compile.kernel_key.b, kkey->b, 16) &&
           !strcmp(rec->u.compile.ns, ns);
}

/* The first pair whose hash is not below `h` (n_index when none is), into
 * *at.  Key hashes are uniform, so the pair's place is guessed from `h`
 * itself and the guess's neighbourhood searched, widening: at a million
 * entries a lookup reads one or two index blocks, where a binary search
 * from the middle reads about ten, each checked before it is trusted.
 * False when a block it reads fails its check. */
static bool index_lower_bound(envlog_snap *s, uint64_t h, uint64_t *at)
{
    uint64_t n = s->n_index, lo = 0, hi = n, ph, po;
    if (!n) {
        *at = 0;
        return true;
    }
    double g = (double)h / 18446744073709551616.0 * (double)n;
    uint64_t guess = g < (double)(n - 1) ? (uint64_t)g : n - 1;
    if (!pair_at(s, guess, &ph, &po))
        return false;
    if (ph < h) {
        /* Past the guess: widen until a pair is not below h. */
        lo = guess + 1;
        for (uint64_t step = 64; lo < hi; step *= 2) {
            uint64_t probe = hi - lo > step ? lo + step : hi - 1;
            if (!pair_at(s, probe, &ph, &po))
                return false;
            if (ph >= h) {
                hi = probe;
                break;
            }
            lo = probe + 1;
        }
    } else {
        hi = guess;
        for (uint64_t step = 64; lo < hi; step *= 2) {
            uint64_t probe = hi - lo > step ? hi - step : lo;
            if (!pair_at(s, probe, &ph, &po))
                return false;
            if (ph < h) {
                lo = probe + 1;
                break;
            }
            hi = probe;
        }
    }
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (!pair_at(s, mid, &ph, &po))
            return false;
        if (ph < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return true;
}

envlog_err envlog_snap_find(envlog_snap *s, envlog_table table, const char *ns,
                            const char *key, const envlog_hash128 *kkey,
                            uint64_t checksum, envlog_snap_item *item,
                            envlog_record *rec)
{
    uint64_t h = table == ENVLOG_TABLE_TUNE
                     ? envlog_entry_key_hash(table, ns, key, strlen(key), checksum)
                     : envlog_entry_key_hash(table, ns, kkey->b, 16, 0);
    uint64_t lo, ph, po;
    if (!index_lower_bound(s, h, &lo))
        return read_fail(s, "snapshot index is damaged");
    for (; lo < s->n_index; lo++) {
        if (!pair_at(s, lo, &ph, &po))
            return read_fail(s, "snapshot index is damaged");
        if (ph != h)
            break;
        const uint8_t *p = NULL;
        size_t n = 0;
        envlog_err e = po < s->items_start || po >= s->n
                           ? envlog__fail(ENVLOG_CORRUPT, "snapshot index points outside")
                           : read_record(s, (size_t)po, &p, &n);
        if (!e)
            e = decode_item(s, p, n, item, rec);
        if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
            return e;
        if (e) {
            char why[96];
            snprintf(why, sizeof why, "%s", envlog_errmsg());
            note_first(s, (size_t)po, n, why);
            s->lookup_bad++;
            return envlog__fail(ENVLOG_CORRUPT, "snapshot entry at offset %llu: %s",
                                (unsigned long long)po, why);
        }
        if (item->kind == ENVLOG_KIND_ENTRY && (int)table == item->table &&
            key_matches(rec, table, ns, key, kkey, checksum))
            return ENVLOG_OK;
    }
    return ENVLOG_NOT_FOUND;
}

/* ------------------------------------------------------------- walks
 *
 * One walk serves every reader that reads the records one by one (the fold
 * of `replay --until`, compaction, export, import, `verify`): the records
 * after the INDEX in file order, each ENTRY or EVIDENCE that passes every
 * check handed out once, in the total order; damage noted once per place;
 * at the end, the SEAL's count and chain and the content hash checked.
 * The full check is a walk from the start with nothing handed out. */

/* The chain value after the INDEX, which the SEAL's chain continues: read
 * from the fragment headers from the MANIFEST up to the entries (their
 * checksums were checked when the snapshot was loaded, or are by a lookup
 * before it trusts them; a wrong one only makes the SEAL disagree). */
static uint64_t chain_before_items(const envlog_snap *s)
{
    size_t hl = 0; /* the HEADER's fragment is not chained */
    envlog_frag_peek(s->p, s->n, 0, &hl);
    return envlog_frags_chain(s->p, s->n, ENVLOG_FRAG_HDR + hl, s->items_start, 0);
}

/* Sets the walk's chain to its value at the entries, worked out once (it
 * reads a header per block before them: a lookup never needs it). */
static void walk_chain(envlog_snap *s)
{
    if (!s->chain0_known) {
        s->chain0 = chain_before_items(s);
        s->chain0_known = true;
    }
    s->fr.chain = s->fr.chain_start = s->chain0;
    s->chain_pending = false;
}

void envlog_snap_rewind(envlog_snap *s)
{
    s->fr.pos = s->items_start;
    s->chain_pending = true;
    s->walk_count = 2; /* the MANIFEST and the INDEX */
    s->walk_have_last = false;
    envlog_h128_free(&s->walk_hash);
    s->walk_hashing = envlog_h128_begin(&s->walk_hash) == ENVLOG_OK;
    s->walk_from_start = true;
    s->walk_tunes = s->walk_kernels = s->walk_users = s->walk_evidence = 0;
}

/* The end of a walk: the SEAL (when one was read) checked, and, when the
 * walk read everything from the start, what it found kept as the
 * snapshot's own. */
static void walk_end(envlog_snap *s, const uint8_t *seal, size_t seal_len, size_t off)
{
    bool sealed = false;
    if (seal) {
        envlog_seg_seal sl;
        if (decode_as(seal, seal_len, &envlog_seg_seal_schema, &sl, NULL, ENVLOG_KIND_SEAL))
            note_bad(s, off, seal_len, "undecodable seal");
        else if (sl.count != s->walk_count || sl.chain != s->fr.chain_start)
            note_bad(s, off, 0, "the seal does not count the records read");
        else
            sealed = true;
    } else {
        note_bad(s, s->n, 0, "no seal ends the snapshot");
    }
    envlog_hash128 h = envlog_h128_end(&s->walk_hash);
    if (s->walk_from_start && s->walk_hashing) {
        s->checked = true;
        s->sealed = sealed;
        s->content_ok = !memcmp(h.b, s->m.content_hash.b, 16);
        s->read_tunes = s->walk_tunes;
        s->read_kernels = s->walk_kernels;
        s->read_users = s->walk_users;
        s->read_evidence = s->walk_evidence;
    }
    s->walk_from_start = false;
    s->fr.pos = s->n;
}

envlog_err envlog_snap_next(envlog_snap *s, envlog_snap_item *it, envlog_record *rec)
{
    if (s->chain_pending)
        walk_chain(s);
    for (;;) {
        if (s->fr.pos >= s->n && !s->walk_from_start)
            return ENVLOG_END;
        envlog_fr_status st = envlog_frame_reader_next(&s->fr);
        if (st == ENVLOG_FR_NOMEM)
            return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
        if (st == ENVLOG_FR_END || st == ENVLOG_FR_TAIL) {
            if (st == ENVLOG_FR_TAIL)
                note_bad(s, s->fr.bad_off, s->fr.bad_len, s->fr.why);
            walk_end(s, NULL, 0, 0);
            return ENVLOG_END;
        }
        if (st == ENVLOG_FR_BAD) {
            note_bad(s, s->fr.bad_off, s->fr.bad_len, s->fr.why);
            continue;
        }
        const uint8_t *p = s->fr.out;
        size_t n = s->fr.out_len, off = s->fr.rec_off;
        int kind = envlog_payload_kind(p, n);
        if (kind == ENVLOG_KIND_SEAL) {
            s->fr.chain = s->fr.chain_start; /* the SEAL is not in the chain */
            walk_end(s, p, n, off);
            return ENVLOG_END;
        }
        s->walk_count++;
        if (kind == ENVLOG_KIND_ENTRY || kind == ENVLOG_KIND_EVIDENCE) {
            uint8_t len[4];
            envlog_put_le32(len, (uint32_t)n);
            envlog_h128_update(&s->walk_hash, len, 4);
            envlog_h128_update(&s->walk_hash, p, n);
        }
        envlog_err e = decode_item(s, p, n, it, rec);
        if (e == ENVLOG_NOMEM)
            return e; /* not damage: the caller must not skip the record */
        if (!e && s->walk_have_last &&
            envlog_order_cmp(it->unix_ns, &it->stamp.session, it->stamp.seq,
                             s->walk_last_ns, &s->walk_last.session, s->walk_last.seq) <= 0)
            e = envlog__fail(ENVLOG_BAD_DATA, "a record out of the total order");
        if (e) {
            char why[96];
            snprintf(why, sizeof why, "%s", envlog_errmsg());
            note_bad(s, off, n, why);
            continue;
        }
        s->walk_have_last = true;
        s->walk_last = it->stamp;
        s->walk_last_ns = it->unix_ns;
        if (it->kind == ENVLOG_KIND_EVIDENCE)
            s->walk_evidence++;
        else if (it->table == ENVLOG_TABLE_TUNE)
            s->walk_tunes++;
        else if (it->table == ENVLOG_TABLE_KERNEL)
            s->walk_kernels++;
        else
            s->walk_users++;
        return ENVLOG_OK;
    }
}

/* A bundle's INDEX is empty (its pairs are random bytes that do not
 * compress): the pairs of its entries are made here, as they are read. */
static envlog_err index_item(envlog_snap *s, const envlog_snap_item *it,
                             const envlog_record *rec, size_t off)
{
    uint64_t h;
    if (it->table == ENVLOG_TABLE_TUNE)
        h = envlog_entry_key_hash(ENVLOG_TABLE_TUNE, rec->u.tune.ns, rec->u.tune.key,
                                  strlen(rec->u.tune.key), rec->u.tune.checksum);
    else if (it->table == ENVLOG_TABLE_KERNEL)
        h = envlog_entry_key_hash(ENVLOG_TABLE_KERNEL, rec->u.compile.ns,
                                  rec->u.compile.kernel_key.b, 16, 0);
    else
        return ENVLOG_OK;
    uint8_t pair[16];
    envlog_put_be64(pair, h);
    envlog_put_be64(pair + 8, off);
    envlog_err e = envlog_buf_append(&s->index, pair, 16);
    if (!e)
        s->n_index++;
    return e;
}

/* Where a record that an INDEX pair points at begins: a pair may point at
 * the zero bytes that end the block before its first fragment. */
static uint64_t record_start(uint64_t off)
{
    uint64_t left = ENVLOG_BLOCK - off % ENVLOG_BLOCK;
    return left < ENVLOG_FRAG_HDR ? off + left : off;
}

/* The stored pairs name exactly the entries read, in the same order. */
static bool index_agrees(const envlog_buf *stored, uint64_t n_stored, const envlog_buf *read,
                         uint64_t n_read)
{
    if (n_stored != n_read)
        return false;
    for (uint64_t i = 0; i < n_read; i++) {
        const uint8_t *a = stored->p + 16 * i, *b = read->p + 16 * i;
        if (memcmp(a, b, 8) ||
            record_start(envlog_get_be64(a + 8)) != envlog_get_be64(b + 8))
            return false;
    }
    return true;
}

/* Reads every record: checksums, the decode and checks of each item, the
 * total order, the SEAL's count and chain, the content hash. */
static envlog_err check_all_items(envlog_snap *s)
{
    bool rebuild = s->n_index == 0 && s->m.tunes + s->m.kernels > 0;
    envlog_snap_rewind(s);
    if (!s->walk_hashing)
        return envlog__fail(ENVLOG_NOMEM, "checking a snapshot");
    /* The pairs the entries read give, to hold against the INDEX: a pair
     * that points elsewhere would make a lookup miss an entry that reads. */
    envlog_buf stored = s->index;
    uint64_t n_stored = s->n_index;
    if (!rebuild) {
        s->index = (envlog_buf){0};
        s->n_index = 0;
    }
    envlog_snap_item it;
    envlog_record rec;
    envlog_err e;
    while (!(e = envlog_snap_next(s, &it, &rec)))
        if (it.kind == ENVLOG_KIND_ENTRY && (e = index_item(s, &it, &rec, s->fr.rec_off)))
            break;
    if (e == ENVLOG_END) {
        e = ENVLOG_OK;
        if (s->n_index)
            qsort(s->index.p, (size_t)s->n_index, 16, envlog_snap_pair_cmp);
        if (!rebuild && !index_agrees(&stored, n_stored, &s->index, s->n_index)) {
            /* Past the walk's places: counted on its own. */
            size_t seen = s->bad_seen_to;
            s->bad_seen_to = 0;
            note_bad(s, s->items_start, 0, "the INDEX does not match the entries");
            s->bad_seen_to = seen;
            s->index_bad = true;
        }
    }
    if (!rebuild) {
        envlog_buf_free(&s->index);
        s->index = stored;
        s->n_index = n_stored;
    }
    if (e)
        return e;
    envlog_snap_rewind(s);
    return ENVLOG_OK;
}

/* ------------------------------------------------------------- the file */

void envlog_snap_own_map(envlog_snap *s, void *map, size_t len)
{
    s->map = map;
    s->map_len = len;
}

bool envlog_snap_holds(const envlog_snap *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    return s && b >= s->p && b <= s->p + s->n && n <= (size_t)(s->p + s->n - b);
}

void envlog_snap_unmap(envlog_snap *s)
{
    if (!s)
        return;
    void *map = s->map;
    size_t len = s->map_len;
    envlog_snap_free(s);
    if (map)
        envlog_io_get()->munmap(map, len);
}
