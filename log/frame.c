/* SPDX-License-Identifier: MIT */
/*
 * frame.c - block framing of records, and the frame reader.
 *
 * A record is cut into fragments that never cross a 32 KiB block; each has a
 * 7-byte header: checksum (u32 LE), length (u16 LE), type (u8).  The checksum
 * is the low 32 bits of XXH3-64 over the length, type and payload bytes,
 * seeded with the segment's identity, so bytes copied from another segment
 * fail it.  After damage the reader resyncs at the next block, as LevelDB's.
 */
#include "log_int.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#define NOPRES SIZE_MAX
#define HF(k, ty, nm, mem)                                                     \
    {k, ty, 0, nm, offsetof(envlog_seg_header, mem), 0, NOPRES, NULL, NULL, 0, 0, 0}
#define SF(k, nm, mem)                                                         \
    {k, ENVLOG_F_U64, 0, nm, offsetof(envlog_seg_seal, mem), 0, NOPRES, NULL, NULL, 0, 0, 0}

static const envlog_field header_f[] = {
    HF(0, ENVLOG_F_U64, "kind", kind),
    HF(4, ENVLOG_F_TEXT, "magic", magic),
    HF(5, ENVLOG_F_U64, "version", version),
    HF(6, ENVLOG_F_H128, "id", id),
    HF(7, ENVLOG_F_U64, "segment", segment),
    HF(8, ENVLOG_F_U64, "first_seq", first_seq),
    HF(9, ENVLOG_F_U64, "prev_chain", prev_chain),
    HF(10, ENVLOG_F_TEXT, "content", content),
};
const envlog_schema envlog_seg_header_schema = {
    "header", sizeof(envlog_seg_header), header_f,
    sizeof header_f / sizeof header_f[0], 0, 0};

static const envlog_field seal_f[] = {
    SF(0, "kind", kind),
    SF(4, "count", count),
    SF(5, "last_seq", last_seq),
    SF(6, "chain", chain),
};
const envlog_schema envlog_seg_seal_schema = {
    "seal", sizeof(envlog_seg_seal), seal_f, sizeof seal_f / sizeof seal_f[0], 0, 0};

uint64_t envlog_seg_seed(const envlog_id128 *id, uint32_t segment)
{
    uint8_t b[20];
    memcpy(b, id->b, 16);
    envlog_put_le32(b + 16, segment);
    return envlog_xxh64(b, sizeof b, 0);
}

uint64_t envlog_chain_next(uint64_t chain, uint32_t csum)
{
    uint8_t b[4];
    envlog_put_le32(b, csum);
    return envlog_xxh64(b, 4, chain);
}

uint64_t envlog_framed_size(uint64_t pos, uint64_t n)
{
    /* Most records fit in what is left of the current block: one header. */
    uint64_t room = ENVLOG_BLOCK - pos % ENVLOG_BLOCK;
    if (room >= ENVLOG_FRAG_HDR && n <= room - ENVLOG_FRAG_HDR)
        return ENVLOG_FRAG_HDR + n;
    uint64_t start = pos;
    bool first = true;
    while (first || n > 0) {
        uint64_t left = ENVLOG_BLOCK - pos % ENVLOG_BLOCK;
        if (left < ENVLOG_FRAG_HDR) {
            pos += left;
            continue;
        }
        uint64_t take = n < left - ENVLOG_FRAG_HDR ? n : left - ENVLOG_FRAG_HDR;
        pos += ENVLOG_FRAG_HDR + take;
        n -= take;
        first = false;
    }
    return pos - start;
}

static uint32_t frag_csum(const uint8_t *hdr_len_type, uint64_t seed)
{
    size_t len = envlog_get_le16(hdr_len_type);
    return (uint32_t)envlog_xxh64(hdr_len_type, 3 + len, seed);
}

void envlog_frame_write(uint8_t *dst, uint64_t *pos, uint64_t seed,
                        const uint8_t *p, size_t n, uint64_t *chain)
{
    uint64_t at = *pos;
    bool first = true;
    while (first || n > 0) {
        uint64_t left = ENVLOG_BLOCK - at % ENVLOG_BLOCK;
        if (left < ENVLOG_FRAG_HDR) {
            memset(dst + at, 0, left);
            at += left;
            continue;
        }
        size_t take = n < left - ENVLOG_FRAG_HDR ? n : (size_t)(left - ENVLOG_FRAG_HDR);
        bool last = take == n;
        uint8_t type = first && last ? ENVLOG_FRAG_FULL
                       : first       ? ENVLOG_FRAG_FIRST
                       : last        ? ENVLOG_FRAG_LAST
                                     : ENVLOG_FRAG_MIDDLE;
        uint8_t *h = dst + at;
        /* Payload before the header: a reader racing the writer sees a
         * checksum mismatch, never a header over stale bytes. */
        memcpy(h + ENVLOG_FRAG_HDR, p, take);
        envlog_put_le16(h + 4, (uint16_t)take);
        h[6] = type;
        uint32_t c = frag_csum(h + 4, seed);
        envlog_put_le32(h, c);
        if (chain)
            *chain = envlog_chain_next(*chain, c);
        at += ENVLOG_FRAG_HDR + take;
        p += take;
        n -= take;
        first = false;
    }
    *pos = at;
}

uint64_t envlog_frame_chain(uint64_t pos, uint64_t seed, const uint8_t *p, size_t n,
                           uint64_t chain)
{
    bool first = true;
    while (first || n > 0) {
        uint64_t left = ENVLOG_BLOCK - pos % ENVLOG_BLOCK;
        if (left < ENVLOG_FRAG_HDR) {
            pos += left;
            continue;
        }
        size_t take = n < left - ENVLOG_FRAG_HDR ? n : (size_t)(left - ENVLOG_FRAG_HDR);
        bool last = take == n;
        uint8_t h[3];
        envlog_put_le16(h, (uint16_t)take);
        h[2] = first && last ? ENVLOG_FRAG_FULL
               : first       ? ENVLOG_FRAG_FIRST
               : last        ? ENVLOG_FRAG_LAST
                             : ENVLOG_FRAG_MIDDLE;
        /* The checksum of (length, type, payload), as frag_csum() takes it
         * from a written header. */
        XXH3_state_t st;
        XXH3_INITSTATE(&st); /* see envlog_xxh64_2() */
        XXH3_64bits_reset_withSeed(&st, seed);
        XXH3_64bits_update(&st, h, 3);
        XXH3_64bits_update(&st, p, take);
        chain = envlog_chain_next(chain, (uint32_t)XXH3_64bits_digest(&st));
        pos += ENVLOG_FRAG_HDR + take;
        p += take;
        n -= take;
        first = false;
    }
    return chain;
}

int envlog_payload_kind(const uint8_t *p, size_t n)
{
    /* A record's usual first bytes: a map of 1 to 23 pairs, key 0, a kind
     * under 24 (what the heads read one by one read them as). */
    if (n >= 3 && p[0] > 0xa0 && p[0] < 0xb8 && p[1] == 0 && p[2] < 0x18)
        return p[2];
    return envlog_payload_kind_by_heads(p, n);
}

int envlog_payload_kind_by_heads(const uint8_t *p, size_t n)
{
    envlog_pull pull = {p, n, 0};
    envlog_tok t;
    if (envlog_pull_next(&pull, &t) || t.type != ENVLOG_TOK_MAP || t.u == 0)
        return -1;
    if (envlog_pull_next(&pull, &t) || t.type != ENVLOG_TOK_UINT || t.u != 0)
        return -1;
    if (envlog_pull_next(&pull, &t) || t.type != ENVLOG_TOK_UINT || t.u > 0x7fffffff)
        return -1;
    return (int)t.u;
}

/* ----------------------------------------------------------------- reader */

void envlog_frame_reader_init(envlog_frame_reader *fr, const uint8_t *p,
                              size_t n, uint64_t seed, uint64_t chain)
{
    memset(fr, 0, sizeof *fr);
    fr->p = p;
    fr->n = n;
    fr->seed = seed;
    fr->chain = chain;
}

void envlog_frame_reader_free(envlog_frame_reader *fr)
{
    envlog_buf_free(&fr->rec);
}

/* The shape of the fragment whose header `h` lies at `at` of a file of
 * `n` bytes (envlog_frag_peek()); inline so the reader's per-fragment path
 * pays no call for it. */
static inline int frag_shape(const uint8_t *h, size_t at, size_t n, size_t *len)
{
    size_t left = ENVLOG_BLOCK - at % ENVLOG_BLOCK;
    if (at > n || left < ENVLOG_FRAG_HDR || n - at < ENVLOG_FRAG_HDR)
        return 0;
    size_t l = envlog_get_le16(h + 4);
    uint8_t type = h[6];
    if (type < ENVLOG_FRAG_FULL || type > ENVLOG_FRAG_LAST)
        return 0;
    if (ENVLOG_FRAG_HDR + l > left || ENVLOG_FRAG_HDR + l > n - at)
        return 0;
    *len = l;
    return type;
}

int envlog_frag_peek(const uint8_t *p, size_t n, size_t at, size_t *len)
{
    return at <= n && n - at >= ENVLOG_FRAG_HDR ? frag_shape(p + at, at, n, len) : 0;
}

int envlog_frag_head(const uint8_t *h, size_t at, size_t n, size_t *len)
{
    return frag_shape(h, at, n, len);
}

uint64_t envlog_frags_chain(const uint8_t *p, size_t n, size_t from, size_t to,
                            uint64_t chain)
{
    size_t at = from, len;
    while (at + ENVLOG_FRAG_HDR <= to) {
        size_t left = ENVLOG_BLOCK - at % ENVLOG_BLOCK;
        if (left < ENVLOG_FRAG_HDR) {
            at += left;
            continue;
        }
        if (!envlog_frag_peek(p, n, at, &len))
            break;
        chain = envlog_chain_next(chain, envlog_get_le32(p + at));
        at += ENVLOG_FRAG_HDR + len;
    }
    return chain;
}

/* A fragment at `at` that is whole, inside its block and checksummed right:
 * its type, else 0. */
static int valid_frag(const envlog_frame_reader *fr, size_t at, size_t *len)
{
    size_t l;
    int type = envlog_frag_peek(fr->p, fr->n, at, &l);
    if (!type || envlog_get_le32(fr->p + at) != frag_csum(fr->p + at + 4, fr->seed))
        return 0;
    *len = l;
    return type;
}

/* A fragment of type `type` holding `len` payload bytes ends exactly at
 * `end` (the end of its block or of the file), inside one block and with
 * a good checksum: its payload, else NULL.  `tail` holds the file's bytes
 * from offset `base`. */
static const uint8_t *frag_ending_at(const uint8_t *tail, uint64_t base, uint64_t end,
                                     size_t len, uint8_t type, uint64_t seed)
{
    if (end < base + len + ENVLOG_FRAG_HDR)
        return NULL;
    uint64_t at = end - len - ENVLOG_FRAG_HDR;
    const uint8_t *h = tail + (at - base);
    if (at / ENVLOG_BLOCK != (end - 1) / ENVLOG_BLOCK || h[6] != type ||
        envlog_get_le16(h + 4) != len || envlog_get_le32(h) != frag_csum(h + 4, seed))
        return NULL;
    return h + ENVLOG_FRAG_HDR;
}

bool envlog_tail_is_seal(const uint8_t *tail, size_t tail_len, uint64_t n, uint64_t seed)
{
    uint64_t base = n - tail_len;
    /* One FULL fragment ending the file. */
    for (size_t len = 1; len <= 64; len++) {
        const uint8_t *pl = frag_ending_at(tail, base, n, len, ENVLOG_FRAG_FULL, seed);
        if (pl && envlog_payload_kind(pl, len) == ENVLOG_KIND_SEAL)
            return true;
    }
    /* Or cut in two at a block boundary (fewer bytes than the SEAL were
     * left in the block before): a LAST fragment opening the file's last
     * block and ending the file, after a FIRST that ends the block before. */
    uint64_t cut = (n - 1) / ENVLOG_BLOCK * ENVLOG_BLOCK;
    if (!cut || cut < base || n - cut <= ENVLOG_FRAG_HDR || n - cut > ENVLOG_FRAG_HDR + 64)
        return false;
    size_t last = (size_t)(n - cut - ENVLOG_FRAG_HDR);
    const uint8_t *lp = frag_ending_at(tail, base, n, last, ENVLOG_FRAG_LAST, seed);
    {
        for (size_t first = 0; lp && first + last <= 64; first++) {
            const uint8_t *fp =
                frag_ending_at(tail, base, cut, first, ENVLOG_FRAG_FIRST, seed);
            if (!fp)
                continue;
            uint8_t rec[64];
            memcpy(rec, fp, first);
            memcpy(rec + first, lp, last);
            if (envlog_payload_kind(rec, first + last) == ENVLOG_KIND_SEAL)
                return true;
        }
    }
    return false;
}

bool envlog_frames_end_in_seal(const uint8_t *p, size_t n, uint64_t seed)
{
    return envlog_tail_is_seal(p, n, n, seed);
}

int envlog_frag_check(const envlog_frame_reader *fr, size_t at, size_t *len)
{
    return at < fr->n ? valid_frag(fr, at, len) : 0;
}

/* Where the next record may start after damage at `from`: the first FULL or
 * FIRST fragment reached by walking whole blocks after `from`'s block.  Sets
 * *found; returns the offset (or n). */
static size_t resync(const envlog_frame_reader *fr, size_t from, bool *found)
{
    *found = false;
    for (size_t b = (from / ENVLOG_BLOCK + 1) * ENVLOG_BLOCK; b < fr->n;
         b += ENVLOG_BLOCK) {
        size_t at = b, len;
        int type;
        while (at < fr->n && (type = valid_frag(fr, at, &len)) != 0) {
            if (type == ENVLOG_FRAG_FULL || type == ENVLOG_FRAG_FIRST) {
                *found = true;
                return at;
            }
            at += ENVLOG_FRAG_HDR + len;
            if (ENVLOG_BLOCK - at % ENVLOG_BLOCK < ENVLOG_FRAG_HDR)
                break;
        }
    }
    return fr->n;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static envlog_fr_status damage(envlog_frame_reader *fr, size_t start, size_t at,
                               const char *why, bool interrupted)
{
    bool found;
    size_t next = resync(fr, at, &found);
    fr->rec.len = 0;
    fr->bad_off = start;
    fr->bad_at = at;
    snprintf(fr->why, sizeof fr->why, "%s", why);
    /* What an append cut short looks like: the fragments of the record
     * before `at` are good, the one at `at` is not (its payload is written
     * before its header), and nothing after its block was written yet. */
    size_t block_end = (at / ENVLOG_BLOCK + 1) * ENVLOG_BLOCK;
    fr->bad_confined = interrupted &&
                       (block_end >= fr->n || all_zero(fr->p + block_end, fr->n - block_end));
    if (found) {
        fr->bad_len = next - start;
        fr->pos = next;
        return ENVLOG_FR_BAD;
    }
    fr->pos = fr->n;
    /* Only zeros after a whole record: the clean end of a preallocated
     * segment. */
    if (start == at && all_zero(fr->p + at, fr->n - at))
        return ENVLOG_FR_END;
    size_t end = fr->n;
    while (end > start && fr->p[end - 1] == 0)
        end--;
    fr->bad_len = end > start ? end - start : 0;
    if (fr->bad_len == 0)
        fr->bad_len = at - start;
    return ENVLOG_FR_TAIL;
}

envlog_fr_status envlog_frame_reader_next(envlog_frame_reader *fr)
{
    bool in_rec = false;
    size_t start = fr->pos;
    for (;;) {
        size_t at = fr->pos;
        if (at >= fr->n) {
            if (in_rec)
                return damage(fr, start, at, "record cut short", true);
            return ENVLOG_FR_END;
        }
        size_t left = ENVLOG_BLOCK - at % ENVLOG_BLOCK;
        if (left < ENVLOG_FRAG_HDR) {
            fr->pos = at + left < fr->n ? at + left : fr->n;
            continue;
        }
        size_t len;
        int type = valid_frag(fr, at, &len);
        if (!in_rec) {
            start = at;
            fr->chain_start = fr->chain;
        }
        if (type == 0) {
            bool zero = fr->n - at >= ENVLOG_FRAG_HDR
                            ? all_zero(fr->p + at, ENVLOG_FRAG_HDR)
                            : all_zero(fr->p + at, fr->n - at);
            return damage(fr, start, at, zero ? "zero fill before data"
                                              : "bad fragment checksum or header", true);
        }
        const uint8_t *payload = fr->p + at + ENVLOG_FRAG_HDR;
        bool opening = type == ENVLOG_FRAG_FULL || type == ENVLOG_FRAG_FIRST;
        if (opening == in_rec)
            return damage(fr, start, at, in_rec ? "record interrupted"
                                                : "fragment without its start", false);
        fr->chain = envlog_chain_next(fr->chain, envlog_get_le32(fr->p + at));
        fr->pos = at + ENVLOG_FRAG_HDR + len;
        /* The next fragment's header, asked for now: a walk in file order
         * waits on each record's first byte otherwise (the hardware does
         * not fetch across a page). */
        if (fr->pos < fr->n)
            __builtin_prefetch(fr->p + fr->pos);
        if (fr->pos + 4096 < fr->n)
            __builtin_prefetch(fr->p + fr->pos + 4096);
        if (type == ENVLOG_FRAG_FULL) {
            fr->out = payload;
            fr->out_len = len;
            fr->rec_off = at;
            return ENVLOG_FR_RECORD;
        }
        if (type == ENVLOG_FRAG_FIRST) {
            fr->rec.len = 0;
            in_rec = true;
        }
        if (fr->rec.len + len > ENVLOG_RECORD_MAX)
            return damage(fr, start, at, "record over the size limit", false);
        if (envlog_buf_append(&fr->rec, payload, len)) {
            /* Not the data's fault: no damage, no resync; the caller may
             * free memory and read the record again from rec_off. */
            fr->rec.len = 0;
            fr->pos = start;
            fr->rec_off = start;
            fr->chain = fr->chain_start;
            return ENVLOG_FR_NOMEM;
        }
        if (type == ENVLOG_FRAG_LAST) {
            fr->out = fr->rec.p;
            fr->out_len = fr->rec.len;
            fr->rec_off = start;
            return ENVLOG_FR_RECORD;
        }
    }
}
