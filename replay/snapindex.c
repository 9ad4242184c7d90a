/* SPDX-License-Identifier: MIT */
/*
 * snapindex.c - a snapshot's INDEX and the lookups through it.
 *
 * The INDEX holds (key hash, offset) pairs sorted by hash (the hash is the
 * format's, snapfmt.c).  Read whole and checked for the full check, or
 * read in place for lookups, in two searches (envlog(5), INDEX): first
 * pairs read unchecked, trusting only the ENTRY they lead to; then, when
 * that finds nothing, the INDEX found for certain (its extent worked out
 * from its count and the writer's fixed framing) and each block's
 * fragment checked the first time a lookup reads from it.  Both guess the
 * pair's place from the key's hash, search around the guess, and decode
 * only the ENTRY records with that hash.
 */
#include "snap_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The INDEX read whole, through the frame reader, and checked: sorted,
 * every offset inside the file (check_all). */
envlog_err envlog_snap_index_load(envlog_snap *s)
{
    size_t n = s->n;
    envlog_fr_status st = envlog_frame_reader_next(&s->fr);
    if (st == ENVLOG_FR_NOMEM)
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot index");
    if (st != ENVLOG_FR_RECORD)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
    envlog_snap_index ir;
    envlog_arena tmp = {0};
    envlog_err e = envlog_snap_decode_as(s->fr.out, s->fr.out_len, &envlog_snap_index_schema, &ir, &tmp, ENVLOG_KIND_INDEX);
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
    s->items_start = s->fr.pos;
    s->idx_ready = true;
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
    int type = envlog_snap_frag(s, at, &len, &pl);
    bool ok = b ? type == ENVLOG_FRAG_MIDDLE || type == ENVLOG_FRAG_LAST
                : type == ENVLOG_FRAG_FIRST || type == ENVLOG_FRAG_FULL;
    if (ok && off >= at + ENVLOG_FRAG_HDR && off < at + ENVLOG_FRAG_HDR + len)
        s->idx_ok[b] = 1;
    return s->idx_ok[b];
}

/* Where the `len` bytes at file offset `off` are held for a pair's read
 * (block_at, raw_at), or NULL. */
typedef const uint8_t *(*pair_src)(envlog_snap *s, size_t off, size_t len);

/* From the block they are in (envlog_snap_block): what a pair read
 * checked takes, its blocks checked first. */
static const uint8_t *block_at(envlog_snap *s, size_t off, size_t len)
{
    size_t bl;
    const uint8_t *bp = envlog_snap_block(s, off / ENVLOG_BLOCK, &bl);
    return bp && off % ENVLOG_BLOCK + len <= bl ? bp + off % ENVLOG_BLOCK : NULL;
}

/* Pair `i` of an INDEX whose pairs start at `base` of its payload, its
 * bytes from `src`: its key hash and record offset. */
static bool read_pair(envlog_snap *s, uint64_t base, uint64_t i, pair_src src,
                      uint64_t *hash, uint64_t *off)
{
    uint64_t at = base + 16 * i;
    size_t f0 = idx_file_off(s, at);
    uint8_t b[16];
    const uint8_t *p;
    if (idx_file_off(s, at + 15) == f0 + 15) {
        if (!(p = src(s, f0, 16)))
            return false;
        memcpy(b, p, 16);
    } else { /* across a block's header: gathered byte by byte */
        for (int k = 0; k < 16; k++) {
            if (!(p = src(s, idx_file_off(s, at + (uint64_t)k), 1)))
                return false;
            b[k] = *p;
        }
    }
    *hash = envlog_get_be64(b);
    *off = envlog_get_be64(b + 8);
    return true;
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
    uint64_t at = s->idx_base + 16 * i;
    return idx_block_ok(s, idx_file_off(s, at)) && idx_block_ok(s, idx_file_off(s, at + 15)) &&
           read_pair(s, s->idx_base, i, block_at, hash, off);
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
    if (envlog_snap_peek(s, last, &ll) != ENVLOG_FRAG_LAST || ll != last_len)
        return false;
    *total = all;
    *end = last + ENVLOG_FRAG_HDR + last_len;
    *blocks = (size_t)more + 1;
    return true;
}

/* The INDEX found for certain: its first fragment is checked and gives
 * the count; the block headers after it give its length, so where the
 * entries start is known without reading the pairs.  Each lookup then
 * reads the few pairs a binary search needs, checking their fragments as
 * it goes: this costs the same at a thousand entries as at a million. */
static envlog_err index_ready(envlog_snap *s)
{
    if (s->idx_ready)
        return ENVLOG_OK;
    size_t pos = s->idx_pos, len;
    const uint8_t *r = NULL;
    int type = envlog_snap_frag(s, pos, &len, &r);
    if (type != ENVLOG_FRAG_FULL && type != ENVLOG_FRAG_FIRST)
        return s->io_err ? envlog_snap_read_fail(s, "") : envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
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
        type = envlog_snap_peek(s, at, &l);
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
        return envlog_snap_read_fail(s, "");
    if (e)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
    /* An INDEX may be empty (a bundle's); one that is not counts the
     * MANIFEST's tune and kernel entries. */
    if (count && count != s->n_claimed)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot index holds %llu entries, its manifest %llu",
                            (unsigned long long)count, (unsigned long long)s->n_claimed);
    if (!(s->idx_ok = envlog_calloc(blocks, 1)))
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    s->idx_base = total - count * 16;
    s->idx_blocks = blocks;
    s->n_index = count;
    s->items_start = end;
    s->idx_ready = true;
    return ENVLOG_OK;
}

envlog_err envlog_snap_check_sealed(envlog_snap *s)
{
    uint8_t tail[2 * ENVLOG_SEAL_TAIL];
    size_t tl = s->n < sizeof tail ? s->n : sizeof tail;
    bool sealed;
    if (s->fd < 0) {
        sealed = envlog_frames_end_in_seal(s->p, s->n, s->seed);
    } else if (envlog_pread_full(s->fd, tail, tl, (off_t)(s->n - tl))) {
        s->io_err = errno ? errno : EIO;
        return envlog_snap_read_fail(s, "");
    } else {
        sealed = envlog_tail_is_seal(tail, tl, s->n, s->seed);
    }
    return sealed ? ENVLOG_OK
                  : envlog__fail(ENVLOG_BAD_DATA, "snapshot is cut short: no seal at its end");
}

envlog_err envlog_snap_index_locate(envlog_snap *s)
{
    /* A file cut short would lose the entries past the cut unseen (a fed
     * one's end is checked once it is written). */
    envlog_err e = s->feed.wait ? ENVLOG_OK : envlog_snap_check_sealed(s);
    if (e)
        return e;
    s->n_claimed = s->m.tunes + s->m.kernels;
    /* In memory (a bundle) it costs no read: found for certain now, so a
     * damaged INDEX refuses the bundle at once. */
    return s->fd < 0 ? index_ready(s) : ENVLOG_OK;
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

/* The record a pair points at (`po`, not before `from`), its fragments
 * checked and decoded into `item` and `rec` as every reader checks it
 * (*n: its length). */
static envlog_err entry_at(envlog_snap *s, uint64_t po, uint64_t from, envlog_snap_item *item,
                           envlog_record *rec, size_t *n)
{
    const uint8_t *p = NULL;
    *n = 0;
    envlog_err e = po < from || po >= s->n
                       ? envlog__fail(ENVLOG_CORRUPT, "snapshot index points outside")
                       : envlog_snap_record(s, (size_t)po, &p, n);
    /* What a lookup hands on is folded (known.c): the detail is not read. */
    return e ? e : envlog_snap_decode_item(&s->arena, p, *n, true, item, rec);
}

/* Whether what entry_at() read is the entry of the key looked up. */
static bool entry_is(const envlog_snap_item *item, const envlog_record *rec, envlog_table table,
                     const char *ns, const char *key, const envlog_hash128 *kkey,
                     uint64_t checksum)
{
    return item->kind == ENVLOG_KIND_ENTRY && (int)table == item->table &&
           key_matches(rec, table, ns, key, kkey, checksum);
}

/* ------------------------------------------ the first search, unchecked
 *
 * Checking an INDEX block means reading all 32 KiB of it and hashing
 * them, where a lookup needs a few pairs: on a machine whose system calls
 * are slow, most of a cold lookup.  A lookup that finds its ENTRY needs no
 * pair to be right: the ENTRY passes its own checks and its key is
 * compared, and a snapshot holds one ENTRY per key.  So a lookup first
 * searches pairs read unchecked, a few pages around the guess, and trusts
 * only an ENTRY that passes; anything else (no ENTRY found, pairs out of
 * order, a read that fails) and it searches again with every INDEX block
 * it reads checked first (envlog_snap_find), which alone may answer that
 * the key is absent or that the snapshot is damaged. */

/* Bytes read unchecked by the first round of a search, centred on the
 * guess, and by each later one.  The first guess, made from the key's hash
 * alone, is off by some sqrt(n)/2 pairs at most (the spread of a uniform
 * sample's order statistics): at 100k entries 2.5 KiB, at a million 8 KiB.
 * Copying from the page cache costs about what a system call costs here,
 * so reads are kept short and a miss pays another: the next guess, made
 * from the pairs a read held (the hashes' density there), is good to a few
 * dozen pairs.  Past RAW_WIDE entries a first read of RAW_FIRST bytes
 * would miss more often than not (and one wide enough to hit would copy
 * more than a second read costs): it serves to place the second, and reads
 * RAW_PROBE bytes only. */
#define RAW_FIRST 4096
#define RAW_NEXT 2048
#define RAW_PROBE 512
#define RAW_WIDE 262144
#define RAW_BUF (RAW_FIRST > RAW_NEXT ? RAW_FIRST : RAW_NEXT)

/* Payload offset of the INDEX record's first byte at or after file offset
 * `x` (idx_file_off's inverse, rounding up past a fragment header). */
static uint64_t idx_payload_at(const envlog_snap *s, size_t x)
{
    size_t first = s->idx_pos + ENVLOG_FRAG_HDR, blk0 = s->idx_pos / ENVLOG_BLOCK;
    uint64_t room0 = (blk0 + 1) * ENVLOG_BLOCK - first, per = ENVLOG_BLOCK - ENVLOG_FRAG_HDR;
    if (x <= first)
        return 0;
    if (x < (blk0 + 1) * ENVLOG_BLOCK)
        return x - first;
    size_t within = x % ENVLOG_BLOCK;
    return room0 + (uint64_t)(x / ENVLOG_BLOCK - blk0 - 1) * per +
           (within < ENVLOG_FRAG_HDR ? 0 : within - ENVLOG_FRAG_HDR);
}

/* [off, off + len) of the file, unchecked, when the last read holds it;
 * NULL when it does not.  (The first search runs on a snapshot read by
 * pread only: a mapped one is searched checked.) */
static const uint8_t *raw_at(envlog_snap *s, size_t off, size_t len)
{
    if (off > s->n || len > s->n - off)
        return NULL;
    if (s->raw_len && off >= s->raw_off && off + len <= s->raw_off + s->raw_len)
        return s->raw + (off - s->raw_off);
    return NULL;
}

/* Reads the `span` bytes of the file around `centre` (not before the
 * INDEX), unchecked.  False when the read fails. */
static bool raw_read(envlog_snap *s, size_t centre, size_t span)
{
    if (!s->raw && !(s->raw = envlog_malloc(RAW_BUF)))
        return false;
    size_t from = centre > s->idx_pos + span / 2 ? centre - span / 2 : s->idx_pos;
    if (from >= s->n)
        return false;
    size_t len = s->n - from < span ? s->n - from : span;
    s->raw_len = 0;
    if (envlog_pread_full(s->fd, s->raw, len, (off_t)from))
        return false;
    s->raw_off = from;
    s->raw_len = len;
    return true;
}

/* Pair `i` of an INDEX whose pairs start at `base` of its payload, read
 * unchecked (raw_at). */
static bool raw_pair(envlog_snap *s, uint64_t base, uint64_t i, uint64_t *hash, uint64_t *off)
{
    return read_pair(s, base, i, raw_at, hash, off);
}

/* Pair `i`, read first (the bytes around it) when the last read does not
 * hold it. */
static bool raw_next(envlog_snap *s, uint64_t base, uint64_t i, uint64_t *hash, uint64_t *off)
{
    return raw_pair(s, base, i, hash, off) ||
           (raw_read(s, idx_file_off(s, base + 16 * i), RAW_NEXT) &&
            raw_pair(s, base, i, hash, off));
}

/* The hash of pair `i`, which the last read holds: from its bytes when the
 * pair does not cross a block's end, else gathered (raw_pair). */
static uint64_t raw_hash(envlog_snap *s, uint64_t base, uint64_t i)
{
    size_t f0 = idx_file_off(s, base + 16 * i);
    if (f0 % ENVLOG_BLOCK + 16 <= ENVLOG_BLOCK)
        return envlog_get_be64(s->raw + (f0 - s->raw_off));
    uint64_t h = 0, o;
    raw_pair(s, base, i, &h, &o);
    return h;
}

/* The length of a CBOR head for `v`. */
static uint64_t cbor_head_len(uint64_t v)
{
    return v < 24 ? 1 : v < 256 ? 2 : v < 65536 ? 3 : v <= 0xffffffffu ? 5 : 9;
}

/* The first pair whose hash is not below `h`, among `n` pairs at `base`,
 * read unchecked: each round reads the bytes around a guess interpolated
 * between what earlier rounds found, and searches the pairs the read
 * holds whole; at a million entries one or two rounds.  False when it
 * cannot tell (pairs out of order, a read that fails, too many rounds). */
static bool raw_lower_bound(envlog_snap *s, uint64_t base, uint64_t n, uint64_t h,
                            uint64_t *at)
{
    uint64_t lo = 0, hi = n; /* below lo: < h; from hi on: >= h */
    double lo_h = 0, hi_h = 18446744073709551616.0;
    for (int round = 0; round < 8; round++) {
        if (lo >= hi) {
            *at = lo;
            return true;
        }
        double f = ((double)h - lo_h) / (hi_h - lo_h);
        uint64_t g = lo + (uint64_t)((f < 0 ? 0 : f > 1 ? 1 : f) * (double)(hi - lo));
        if (g >= hi)
            g = hi - 1;
        size_t span = round ? RAW_NEXT : n > RAW_WIDE ? RAW_PROBE : RAW_FIRST;
        if (!raw_read(s, idx_file_off(s, base + 16 * g), span))
            return false;
        /* [a, b]: the pairs of [lo, hi) that the read holds whole. */
        uint64_t p0 = idx_payload_at(s, s->raw_off),
                 p1 = idx_payload_at(s, s->raw_off + s->raw_len);
        if (p1 < base + 16)
            return false;
        uint64_t first = p0 <= base ? 0 : (p0 - base + 15) / 16, last = (p1 - base) / 16 - 1;
        uint64_t a = first > lo ? first : lo, b = last < hi - 1 ? last : hi - 1;
        if (a > b || g < a || g > b)
            return false;
        /* The first of [a, b + 1) not below h. */
        uint64_t l = a, r = b + 1;
        while (l < r) {
            uint64_t mid = l + (r - l) / 2;
            if (raw_hash(s, base, mid) < h)
                l = mid + 1;
            else
                r = mid;
        }
        uint64_t ah = raw_hash(s, base, a), bh = raw_hash(s, base, b);
        if (ah > bh || (double)ah < lo_h || (double)bh > hi_h)
            return false; /* out of order: not for this search to judge */
        if (l > a && l <= b) {
            *at = l;
            return true;
        }
        if (l == a) {
            hi = a;
            hi_h = (double)ah;
        } else {
            lo = b + 1;
            lo_h = (double)bh;
        }
    }
    return false;
}

/* The lookup's first search (see above): 1 with `item` and `rec` when it
 * found the key's ENTRY, which passed every check; 0 when it cannot say. */
static int first_search(envlog_snap *s, uint64_t h, envlog_table table, const char *ns,
                        const char *key, const envlog_hash128 *kkey, uint64_t checksum,
                        envlog_snap_item *item, envlog_record *rec)
{
    uint64_t n = s->idx_ready ? s->n_index : s->n_claimed, base = s->idx_base;
    if (!n || n > s->n / 16)
        return 0;
    if (!s->idx_ready) /* where the writer puts the pairs: {0: 35, 4: n, 5: pairs} */
        base = 1 + 1 + 2 + 1 + cbor_head_len(n) + 1 + cbor_head_len(n * 16);
    uint64_t i, ph, po;
    if (!raw_lower_bound(s, base, n, h, &i))
        return 0;
    for (; i < n && raw_next(s, base, i, &ph, &po) && ph == h; i++) {
        size_t len;
        if (entry_at(s, po, s->idx_pos + 1, item, rec, &len))
            return 0;
        if (entry_is(item, rec, table, ns, key, kkey, checksum))
            return 1;
    }
    return 0;
}

/* A lookup that met a damaged INDEX (`why`), or a failed read of it. */
static envlog_err index_damaged(envlog_snap *s, const char *why)
{
    if (s->io_err)
        return envlog_snap_read_fail(s, "");
    char w[96];
    snprintf(w, sizeof w, "%s", why);
    envlog_snap_note_first(s, s->idx_pos, 0, w);
    s->lookup_bad++;
    return envlog__fail(ENVLOG_CORRUPT, "%s", w);
}

envlog_err envlog_snap_find(envlog_snap *s, envlog_table table, const char *ns,
                            const char *key, const envlog_hash128 *kkey,
                            uint64_t checksum, envlog_snap_item *item,
                            envlog_record *rec)
{
    uint64_t h = table == ENVLOG_TABLE_TUNE
                     ? envlog_entry_key_hash(table, ns, key, strlen(key), checksum)
                     : envlog_entry_key_hash(table, ns, kkey->b, 16, 0);
    if (s->fd >= 0 &&
        (s->first_failed <= 2 * s->first_found + 8 || ++s->lookups % 16 == 0)) {
        if (first_search(s, h, table, ns, key, kkey, checksum, item, rec)) {
            s->first_found++;
            return ENVLOG_OK;
        }
        s->first_failed++;
    }
    /* Searched again, every INDEX block read checked: only this search
     * says that a key is absent or that the snapshot is damaged. */
    uint64_t lo, ph, po;
    envlog_err e = index_ready(s);
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
        return e;
    if (e)
        return index_damaged(s, envlog_errmsg());
    if (!index_lower_bound(s, h, &lo))
        return index_damaged(s, "snapshot index is damaged");
    for (; lo < s->n_index; lo++) {
        if (!pair_at(s, lo, &ph, &po))
            return index_damaged(s, "snapshot index is damaged");
        if (ph != h)
            break;
        size_t n;
        e = entry_at(s, po, s->items_start, item, rec, &n);
        if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
            return e;
        if (e) {
            char why[96];
            snprintf(why, sizeof why, "%s", envlog_errmsg());
            envlog_snap_note_first(s, (size_t)po, n, why);
            s->lookup_bad++;
            return envlog__fail(ENVLOG_CORRUPT, "snapshot entry at offset %llu: %s",
                                (unsigned long long)po, why);
        }
        if (entry_is(item, rec, table, ns, key, kkey, checksum))
            return ENVLOG_OK;
    }
    return ENVLOG_NOT_FOUND;
}

/* A bundle's INDEX is empty (its pairs are random bytes that do not
 * compress): the pairs of its entries are made here, as they are read. */
envlog_err envlog_snap_index_item(envlog_snap *s, const envlog_snap_item *it,
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

/* The stored pairs name exactly the entries read, in the same order. */
bool envlog_snap_index_agrees(const envlog_buf *stored, uint64_t n_stored,
                              const envlog_buf *read, uint64_t n_read)
{
    if (n_stored != n_read)
        return false;
    for (uint64_t i = 0; i < n_read; i++) {
        const uint8_t *a = stored->p + 16 * i, *b = read->p + 16 * i;
        if (memcmp(a, b, 8) ||
            envlog_snap_record_start(envlog_get_be64(a + 8)) != envlog_get_be64(b + 8))
            return false;
    }
    return true;
}
