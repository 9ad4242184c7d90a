/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - the snapshot file: writing one, and reading it through its
 * index without folding it.
 *
 * Layout (envlog(5)): HEADER, MANIFEST, INDEX, then ENTRY and EVIDENCE
 * records in the total order, then SEAL, all in the log's block framing with
 * the snapshot's id as the checksum seed.  The INDEX comes before the
 * entries so a reader finds it at once: its size depends only on the number
 * of entries, so the writer lays out the file in two passes.  Lookups binary
 * search the INDEX's sorted (key hash, offset) pairs and decode only the
 * ENTRY records with that hash.
 */
#include "replay_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOPRES SIZE_MAX
#define FLD(k, ty, nm, st, mem)                                                \
    {k, ty, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 0}
#define ARRF(k, ty, nm, st, mem, cnt, sub)                                     \
    {k, ty, 0, nm, offsetof(st, mem), offsetof(st, cnt), NOPRES, sub, NULL, 0}
#define ENUMF(k, nm, st, mem, names)                                           \
    {k, ENVLOG_F_ENUM, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, names, 0}
#define SCHEMA(var, nm, st, tab)                                               \
    static const envlog_schema var = {nm, sizeof(st), tab, sizeof tab / sizeof tab[0]}

static const envlog_field env_f[] = {
    FLD(0, ENVLOG_F_TEXT, "label", envlog_snap_env, label),
    FLD(1, ENVLOG_F_TEXT, "host", envlog_snap_env, host),
    FLD(2, ENVLOG_F_TEXT, "os", envlog_snap_env, os),
    FLD(3, ENVLOG_F_TEXT, "arch", envlog_snap_env, arch),
    ARRF(4, ENVLOG_F_TEXTS, "devices", envlog_snap_env, devices, n_devices, NULL),
};
SCHEMA(env_s, "environment", envlog_snap_env, env_f);

static const envlog_field wm_f[] = {
    FLD(0, ENVLOG_F_H128, "session", envlog_snap_wm, session),
    FLD(1, ENVLOG_F_U64, "last_seq", envlog_snap_wm, last_seq),
};
SCHEMA(wm_s, "watermark", envlog_snap_wm, wm_f);

static const char *const evidence_names[] = {"none", "winners", "all", NULL};
static const char *const table_names[] = {"tune", "kernel", "user", NULL};
static const char *const origin_names[] = {"local", "imported", NULL};
static const char *const rule_names[] = {"first-local", "local-over-imported", "imported",
                                         "forgotten", "not-stored", "kept-first",
                                         "import-ignored", NULL};

static const envlog_field manifest_f[] = {
    FLD(0, ENVLOG_F_U64, "kind", envlog_snap_manifest, kind),
    FLD(4, ENVLOG_F_U64, "schema", envlog_snap_manifest, schema),
    FLD(5, ENVLOG_F_TEXT, "name", envlog_snap_manifest, name),
    FLD(6, ENVLOG_F_TEXT, "envlog_version", envlog_snap_manifest, envlog_version),
    FLD(7, ENVLOG_F_U64, "created_unix_ns", envlog_snap_manifest, created_unix_ns),
    ARRF(8, ENVLOG_F_TEXTS, "runtimes", envlog_snap_manifest, runtimes, n_runtimes, NULL),
    ARRF(9, ENVLOG_F_OBJS, "environments", envlog_snap_manifest, envs, n_envs, &env_s),
    ARRF(10, ENVLOG_F_OBJS, "sessions", envlog_snap_manifest, wms, n_wms, &wm_s),
    FLD(11, ENVLOG_F_U64, "tunes", envlog_snap_manifest, tunes),
    FLD(12, ENVLOG_F_U64, "kernels", envlog_snap_manifest, kernels),
    FLD(13, ENVLOG_F_U64, "users", envlog_snap_manifest, users),
    FLD(14, ENVLOG_F_U64, "evidence", envlog_snap_manifest, evidence),
    FLD(15, ENVLOG_F_H128, "content_hash", envlog_snap_manifest, content_hash),
    ENUMF(16, "evidence_level", envlog_snap_manifest, evidence_level, evidence_names),
    ARRF(17, ENVLOG_F_TEXTS, "namespaces", envlog_snap_manifest, namespaces,
         n_namespaces, NULL),
};
SCHEMA(manifest_s, "manifest", envlog_snap_manifest, manifest_f);

static const envlog_field item_f[] = {
    FLD(0, ENVLOG_F_U64, "kind", envlog_snap_item, kind),
    ENUMF(4, "table", envlog_snap_item, table, table_names),
    ENUMF(5, "origin", envlog_snap_item, origin, origin_names),
    FLD(6, ENVLOG_F_STAMP, "stamp", envlog_snap_item, stamp),
    FLD(7, ENVLOG_F_U64, "unix_ns", envlog_snap_item, unix_ns),
    FLD(8, ENVLOG_F_RAW, "record", envlog_snap_item, record),
    ENUMF(9, "rule", envlog_snap_item, rule, rule_names),
};
SCHEMA(item_s, "entry", envlog_snap_item, item_f);

typedef struct index_rec {
    uint64_t kind;
    uint64_t count;
    envlog_bytes pairs;  /* count x (u64 BE hash, u64 BE offset), sorted */
} index_rec;

static const envlog_field index_f[] = {
    FLD(0, ENVLOG_F_U64, "kind", index_rec, kind),
    FLD(4, ENVLOG_F_U64, "count", index_rec, count),
    FLD(5, ENVLOG_F_BYTES, "pairs", index_rec, pairs),
};
SCHEMA(index_s, "index", index_rec, index_f);

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* ----------------------------------------------------------------- writer */

envlog_err envlog_snapw_add(envlog_snapw *w, const envlog_snap_item *it, bool indexed,
                            uint64_t key_hash)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 256;
        uint64_t *h = envlog_realloc(w->hashes, cap * sizeof *h);
        if (!h)
            return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        w->hashes = h;
        uint8_t *x = envlog_realloc(w->indexed, cap);
        if (!x)
            return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        w->indexed = x;
        w->cap = cap;
    }
    size_t at = w->items.len;
    envlog_err e = envlog_buf_reserve(&w->items, 4);
    if (e)
        return e;
    w->items.len += 4;
    if ((e = envlog_struct_encode(&w->items, &item_s, it, ENVLOG_LEVEL_FULL))) {
        w->items.len = at;
        return e;
    }
    size_t len = w->items.len - at - 4;
    if (len > ENVLOG_RECORD_MAX) {
        w->items.len = at;
        return envlog__fail(ENVLOG_TOO_BIG, "a snapshot record of %zu bytes", len);
    }
    envlog_put_le32(w->items.p + at, (uint32_t)len);
    w->hashes[w->n] = key_hash;
    w->indexed[w->n] = indexed;
    w->n++;
    return ENVLOG_OK;
}

void envlog_snapw_free(envlog_snapw *w)
{
    envlog_buf_free(&w->items);
    envlog_free(w->hashes);
    envlog_free(w->indexed);
    memset(w, 0, sizeof *w);
}

static int pair_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

/* Appends a framed record; the chain covers every record but the HEADER and
 * SEAL, as in a session segment. */
static envlog_err frame_into(envlog_buf *out, uint64_t seed, const uint8_t *p,
                             size_t n, uint64_t *chain)
{
    uint64_t sz = envlog_framed_size(out->len, n);
    envlog_err e = envlog_buf_reserve(out, (size_t)sz);
    if (e)
        return e;
    memset(out->p + out->len, 0, (size_t)sz);
    uint64_t pos = out->len;
    envlog_frame_write(out->p, &pos, seed, p, n, chain);
    out->len = (size_t)pos;
    return ENVLOG_OK;
}

envlog_err envlog_snapw_finish(envlog_snapw *w, envlog_snap_manifest *m,
                               const envlog_id128 *id, const char *content,
                               envlog_buf *out)
{
    envlog_buf hdr = {0}, man = {0}, idx = {0};
    uint8_t *pairs = NULL;
    envlog_err e;
    uint64_t seed = envlog_seg_seed(id, 0), chain = 0;
    size_t n_index = 0;
    for (size_t i = 0; i < w->n; i++)
        n_index += w->indexed[i];
    m->kind = ENVLOG_KIND_MANIFEST;
    m->content_hash = envlog_hash128_bytes(w->items.p, w->items.len);
    envlog_seg_header h = {ENVLOG_KIND_HEADER, ENVLOG_MAGIC, ENVLOG_LOG_VERSION, *id,
                           0, 0, 0, content};
    if ((e = envlog_struct_encode(&hdr, &envlog_seg_header_schema, &h, ENVLOG_LEVEL_BASIC)) ||
        (e = envlog_struct_encode(&man, &manifest_s, m, ENVLOG_LEVEL_FULL)))
        goto out;
    if (!(pairs = envlog_calloc(n_index ? n_index : 1, 16))) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot index");
        goto out;
    }
    index_rec ir = {ENVLOG_KIND_INDEX, n_index, {pairs, n_index * 16}};
    /* Pass 1: the index's encoded size does not depend on the offsets in
     * it, so every record's place is known before anything is written. */
    if ((e = envlog_struct_encode(&idx, &index_s, &ir, ENVLOG_LEVEL_BASIC)))
        goto out;
    uint64_t pos = 0;
    pos += envlog_framed_size(pos, hdr.len);
    pos += envlog_framed_size(pos, man.len);
    pos += envlog_framed_size(pos, idx.len);
    size_t k = 0, at = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint32_t len = envlog_get_le32(w->items.p + at);
        if (w->indexed[i]) {
            put_be64(pairs + 16 * k, w->hashes[i]);
            put_be64(pairs + 16 * k + 8, pos);
            k++;
        }
        pos += envlog_framed_size(pos, len);
        at += 4 + len;
    }
    qsort(pairs, n_index, 16, pair_cmp);
    idx.len = 0;
    if ((e = envlog_struct_encode(&idx, &index_s, &ir, ENVLOG_LEVEL_BASIC)))
        goto out;
    /* Pass 2: frame it all. */
    out->len = 0;
    if ((e = frame_into(out, seed, hdr.p, hdr.len, NULL)) ||
        (e = frame_into(out, seed, man.p, man.len, &chain)) ||
        (e = frame_into(out, seed, idx.p, idx.len, &chain)))
        goto out;
    at = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint32_t len = envlog_get_le32(w->items.p + at);
        if ((e = frame_into(out, seed, w->items.p + at + 4, len, &chain)))
            goto out;
        at += 4 + len;
    }
    envlog_seg_seal seal = {ENVLOG_KIND_SEAL, w->n + 2, 0, chain};
    uint8_t sb[64];
    envlog_buf sbuf = {sb, 0, sizeof sb};
    if ((e = envlog_struct_encode(&sbuf, &envlog_seg_seal_schema, &seal, ENVLOG_LEVEL_BASIC)))
        goto out;
    e = frame_into(out, seed, sbuf.p, sbuf.len, NULL);
out:
    envlog_buf_free(&hdr);
    envlog_buf_free(&man);
    envlog_buf_free(&idx);
    envlog_free(pairs);
    return e;
}

/* ----------------------------------------------------------------- reader */

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
    envlog_frame_reader fr;
    envlog_arena arena;        /* per lookup */
    uint64_t bad;
    bool content_ok;
    void *map;                 /* when mapped from a file */
    size_t map_len;
};

static envlog_err read_record(envlog_snap *s, size_t at, const uint8_t **p, size_t *n)
{
    s->fr.pos = at;
    envlog_fr_status st = envlog_frame_reader_next(&s->fr);
    if (st != ENVLOG_FR_RECORD)
        return envlog__fail(ENVLOG_CORRUPT, "snapshot record at offset %zu is damaged", at);
    *p = s->fr.out;
    *n = s->fr.out_len;
    return ENVLOG_OK;
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

/* Decodes an ENTRY/EVIDENCE payload and the record inside it. */
static envlog_err decode_item(envlog_snap *s, const uint8_t *p, size_t n,
                              envlog_snap_item *it, envlog_record *rec)
{
    envlog_arena_reset(&s->arena);
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    memset(it, 0, sizeof *it);
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e)
        e = envlog_struct_decode(&pl, &t, &item_s, it, &s->arena);
    if (e)
        return e;
    if ((it->kind != ENVLOG_KIND_ENTRY && it->kind != ENVLOG_KIND_EVIDENCE) ||
        !it->record.size)
        return envlog__fail(ENVLOG_BAD_DATA, "not an entry or evidence record");
    if (it->table < 0 || it->table > ENVLOG_TABLE_USER || it->origin < 0 || it->origin > 1)
        return envlog__fail(ENVLOG_BAD_DATA, "entry table or origin out of range");
    if ((e = envlog_event_decode(it->record.data, it->record.size, rec, &s->arena)))
        return e;
    rec->stamp = it->stamp;
    return ENVLOG_OK;
}

void envlog_snap_free(envlog_snap *s)
{
    if (!s)
        return;
    envlog_arena_free(&s->marena);
    envlog_arena_free(&s->arena);
    envlog_buf_free(&s->index);
    envlog_free(s->idx_ok);
    envlog_frame_reader_free(&s->fr);
    envlog_free(s);
}

static envlog_err check_all_items(envlog_snap *s);

/* The INDEX read whole, through the frame reader, and checked: sorted,
 * every offset inside the file (check_all). */
static envlog_err load_index(envlog_snap *s)
{
    size_t n = s->n;
    if (envlog_frame_reader_next(&s->fr) != ENVLOG_FR_RECORD)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
    index_rec ir;
    envlog_arena tmp = {0};
    envlog_err e = decode_as(s->fr.out, s->fr.out_len, &index_s, &ir, &tmp, ENVLOG_KIND_INDEX);
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
        if (get_be64(s->index.p + 16 * i + 8) >= n ||
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
    int type = envlog_frag_check(&s->fr, at, &len);
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
        *hash = get_be64(s->index.p + 16 * i);
        *off = get_be64(s->index.p + 16 * i + 8);
        return true;
    }
    uint8_t b[16];
    uint64_t at = s->idx_base + 16 * i;
    /* A pair may straddle a block boundary: gathered byte by byte then. */
    size_t f0 = idx_file_off(s, at), f15 = idx_file_off(s, at + 15);
    if (!idx_block_ok(s, f0) || !idx_block_ok(s, f15))
        return false;
    if (f15 == f0 + 15) {
        memcpy(b, s->p + f0, 16);
    } else {
        for (int k = 0; k < 16; k++)
            b[k] = s->p[idx_file_off(s, at + (uint64_t)k)];
    }
    *hash = get_be64(b);
    *off = get_be64(b + 8);
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
    if (!envlog_frames_end_in_seal(s->p, s->n, s->seed))
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot is cut short: no seal at its end");
    if (ENVLOG_BLOCK - pos % ENVLOG_BLOCK < ENVLOG_FRAG_HDR)
        pos += ENVLOG_BLOCK - pos % ENVLOG_BLOCK; /* the block's zero tail */
    int type = envlog_frag_check(&s->fr, pos, &len);
    if (type != ENVLOG_FRAG_FULL && type != ENVLOG_FRAG_FIRST)
        return envlog__fail(ENVLOG_BAD_DATA, "snapshot index is damaged");
    /* The head of the record: {0: kind, 4: count, 5: pairs}, the pairs a
     * byte string that ends the record. */
    envlog_pull pl = {s->p + pos + ENVLOG_FRAG_HDR, len, 0};
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
    /* The record's length: its fragments' lengths, from their headers. */
    uint64_t total = len;
    size_t end = pos + ENVLOG_FRAG_HDR + len;
    size_t blocks = 1;
    while (!e && type != ENVLOG_FRAG_FULL && type != ENVLOG_FRAG_LAST) {
        size_t at = (pos / ENVLOG_BLOCK + blocks) * ENVLOG_BLOCK;
        if (at + ENVLOG_FRAG_HDR > s->n) {
            e = ENVLOG_BAD_DATA;
            break;
        }
        const uint8_t *h = s->p + at;
        type = h[6];
        size_t l = envlog_get_le16(h + 4);
        if ((type != ENVLOG_FRAG_MIDDLE && type != ENVLOG_FRAG_LAST) ||
            ENVLOG_FRAG_HDR + l > ENVLOG_BLOCK || at + ENVLOG_FRAG_HDR + l > s->n ||
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

envlog_err envlog_snap_load(const uint8_t *p, size_t n, bool check_all,
                            envlog_snap **out)
{
    *out = NULL;
    if (n < ENVLOG_FRAG_HDR)
        return envlog__fail(ENVLOG_FORMAT, "too short to be a snapshot (%zu bytes)", n);
    envlog_snap *s = envlog_calloc(1, sizeof *s);
    if (!s)
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    s->p = p;
    s->n = n;
    envlog_err e = ENVLOG_OK;
    /* The seed comes from the id in the HEADER, so the header's fragment is
     * decoded first and its checksum checked with the seed it names. */
    size_t hl = envlog_get_le16(p + 4);
    envlog_seg_header h;
    if (p[6] != ENVLOG_FRAG_FULL || ENVLOG_FRAG_HDR + hl > n ||
        (e = decode_as(p + ENVLOG_FRAG_HDR, hl, &envlog_seg_header_schema, &h, &s->marena,
                       ENVLOG_KIND_HEADER)) ||
        !h.magic || strcmp(h.magic, ENVLOG_MAGIC)) {
        if (e != ENVLOG_NOMEM) /* out of memory is not the data's fault */
            e = envlog__fail(ENVLOG_FORMAT, "not an envlog snapshot or bundle (bad header)");
        goto fail;
    }
    if (h.version != ENVLOG_LOG_VERSION) {
        e = envlog__fail(ENVLOG_FORMAT, "log format version %llu is unknown",
                         (unsigned long long)h.version);
        goto fail;
    }
    s->id = h.id;
    s->seed = envlog_seg_seed(&h.id, 0);
    envlog_frame_reader_init(&s->fr, p, n, s->seed, 0);
    const uint8_t *rp;
    size_t rn;
    if (envlog_frame_reader_next(&s->fr) != ENVLOG_FR_RECORD) {
        e = envlog__fail(ENVLOG_FORMAT, "snapshot header fails its checksum");
        goto fail;
    }
    if (envlog_frame_reader_next(&s->fr) != ENVLOG_FR_RECORD) {
        e = envlog__fail(ENVLOG_BAD_DATA, "snapshot manifest is damaged");
        goto fail;
    }
    rp = s->fr.out;
    rn = s->fr.out_len;
    /* The manifest's strings outlive the frame buffer: copied by decode. */
    uint8_t *mcopy = envlog_arena_alloc(&s->marena, rn);
    if (!mcopy) {
        e = envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
        goto fail;
    }
    memcpy(mcopy, rp, rn);
    s->mraw.data = mcopy;
    s->mraw.size = rn;
    if ((e = decode_as(mcopy, rn, &manifest_s, &s->m, &s->marena, ENVLOG_KIND_MANIFEST))) {
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
uint64_t envlog_snap_size(const envlog_snap *s) { return s->n; }
bool envlog_snap_content_ok(const envlog_snap *s) { return s->content_ok; }

bool envlog_snap_watermark(const envlog_snap *s, const envlog_id128 *session,
                           uint64_t *last_seq)
{
    for (size_t i = 0; i < s->m.n_wms; i++)
        if (!memcmp(s->m.wms[i].session.b, session->b, 16)) {
            *last_seq = s->m.wms[i].last_seq;
            return true;
        }
    return false;
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

envlog_err envlog_snap_find(envlog_snap *s, envlog_table table, const char *ns,
                            const char *key, const envlog_hash128 *kkey,
                            uint64_t checksum, envlog_snap_item *item,
                            envlog_record *rec)
{
    uint64_t h = table == ENVLOG_TABLE_TUNE
                     ? envlog_entry_key_hash(table, ns, key, strlen(key), checksum)
                     : envlog_entry_key_hash(table, ns, kkey->b, 16, 0);
    uint64_t lo = 0, hi = s->n_index, ph, po;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (!pair_at(s, mid, &ph, &po))
            return envlog__fail(ENVLOG_CORRUPT, "snapshot index is damaged");
        if (ph < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < s->n_index; lo++) {
        if (!pair_at(s, lo, &ph, &po))
            return envlog__fail(ENVLOG_CORRUPT, "snapshot index is damaged");
        if (ph != h)
            break;
        const uint8_t *p = NULL;
        size_t n = 0;
        envlog_err e = po < s->items_start || po >= s->n
                           ? envlog__fail(ENVLOG_CORRUPT, "snapshot index points outside")
                           : read_record(s, (size_t)po, &p, &n);
        if (!e)
            e = decode_item(s, p, n, item, rec);
        if (e == ENVLOG_NOMEM)
            return e;
        if (e)
            return envlog__fail(ENVLOG_CORRUPT, "snapshot entry: %s", envlog_errmsg());
        if (item->kind == ENVLOG_KIND_ENTRY && (int)table == item->table &&
            key_matches(rec, table, ns, key, kkey, checksum))
            return ENVLOG_OK;
    }
    return ENVLOG_NOT_FOUND;
}

void envlog_snap_rewind(envlog_snap *s)
{
    s->fr.pos = s->items_start;
}

envlog_err envlog_snap_next(envlog_snap *s, envlog_snap_item *it, envlog_record *rec)
{
    for (;;) {
        envlog_fr_status st = envlog_frame_reader_next(&s->fr);
        if (st == ENVLOG_FR_END || st == ENVLOG_FR_TAIL)
            return ENVLOG_END;
        if (st == ENVLOG_FR_BAD) {
            if (!strcmp(s->fr.why, "out of memory reassembling a record"))
                return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
            s->bad++;
            continue;
        }
        if (envlog_payload_kind(s->fr.out, s->fr.out_len) == ENVLOG_KIND_SEAL) {
            s->fr.pos = s->n;
            return ENVLOG_END;
        }
        envlog_err e = decode_item(s, s->fr.out, s->fr.out_len, it, rec);
        if (e == ENVLOG_NOMEM)
            return e; /* not damage: the caller must not skip the record */
        if (e) {
            s->bad++;
            continue;
        }
        return ENVLOG_OK;
    }
}

/* Reads every record: the checksums (framing), the decode of each item, the
 * SEAL's count and chain, and the manifest's content hash. */
/* A bundle's INDEX is empty (its pairs are random bytes that do not
 * compress): the pairs of its entries are made here, as they are read. */
static envlog_err index_item(envlog_snap *s, const envlog_snap_item *it,
                             const envlog_record *rec, size_t off)
{
    uint64_t h;
    if (it->table == ENVLOG_TABLE_TUNE && rec->kind == ENVLOG_KIND_TUNE && rec->u.tune.ns &&
        rec->u.tune.key)
        h = envlog_entry_key_hash(ENVLOG_TABLE_TUNE, rec->u.tune.ns, rec->u.tune.key,
                                  strlen(rec->u.tune.key), rec->u.tune.checksum);
    else if (it->table == ENVLOG_TABLE_KERNEL && rec->kind == ENVLOG_KIND_COMPILE &&
             rec->u.compile.ns)
        h = envlog_entry_key_hash(ENVLOG_TABLE_KERNEL, rec->u.compile.ns,
                                  rec->u.compile.kernel_key.b, 16, 0);
    else
        return ENVLOG_OK;
    uint8_t pair[16];
    put_be64(pair, h);
    put_be64(pair + 8, off);
    envlog_err e = envlog_buf_append(&s->index, pair, 16);
    if (!e)
        s->n_index++;
    return e;
}

static envlog_err check_all_items(envlog_snap *s)
{
    bool rebuild = s->n_index == 0 && s->m.tunes + s->m.kernels > 0;
    envlog_buf cat = {0};
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, s->p, s->n, s->seed, 0);
    uint64_t count = 0;
    bool sealed = false;
    envlog_err e = ENVLOG_OK;
    for (;;) {
        envlog_fr_status st = envlog_frame_reader_next(&fr);
        if (st == ENVLOG_FR_END)
            break;
        if (st != ENVLOG_FR_RECORD) {
            s->bad++;
            if (st == ENVLOG_FR_TAIL)
                break;
            continue;
        }
        int kind = envlog_payload_kind(fr.out, fr.out_len);
        if (kind == ENVLOG_KIND_HEADER) {
            fr.chain = fr.chain_start;
            continue;
        }
        if (kind == ENVLOG_KIND_SEAL) {
            fr.chain = fr.chain_start;
            envlog_seg_seal seal;
            if (decode_as(fr.out, fr.out_len, &envlog_seg_seal_schema, &seal, NULL,
                          ENVLOG_KIND_SEAL) || seal.count != count ||
                seal.chain != fr.chain)
                s->bad++;
            sealed = true;
            break;
        }
        count++;
        if (kind == ENVLOG_KIND_ENTRY || kind == ENVLOG_KIND_EVIDENCE) {
            uint8_t len[4];
            envlog_put_le32(len, (uint32_t)fr.out_len);
            if ((e = envlog_buf_append(&cat, len, 4)) ||
                (e = envlog_buf_append(&cat, fr.out, fr.out_len)))
                break;
            envlog_snap_item it;
            envlog_record rec;
            if (decode_item(s, fr.out, fr.out_len, &it, &rec))
                s->bad++;
            else if (rebuild && it.kind == ENVLOG_KIND_ENTRY)
                e = index_item(s, &it, &rec, fr.rec_off);
            if (e)
                break;
        }
    }
    if (!e && rebuild && s->n_index)
        qsort(s->index.p, (size_t)s->n_index, 16, pair_cmp);
    if (!e) {
        if (!sealed)
            s->bad++;
        envlog_hash128 h = envlog_hash128_bytes(cat.p, cat.len);
        s->content_ok = !memcmp(h.b, s->m.content_hash.b, 16);
    }
    envlog_buf_free(&cat);
    envlog_frame_reader_free(&fr);
    return e;
}

/* ------------------------------------------------------------- the file */

envlog_err envlog_snap_map(envlog_env *env, envlog_snap **out)
{
    const envlog_io *io = envlog_io_get();
    *out = NULL;
    int dfd;
    envlog_err e = envlog_open_dir(env->dirfd, "snapshot", &dfd);
    if (e == ENVLOG_NOT_FOUND)
        return ENVLOG_OK;
    if (e)
        return e;
    int fd = io->openat(dfd, "current", O_RDONLY, 0);
    close(dfd);
    if (fd < 0) {
        if (errno == ENOENT)
            return ENVLOG_OK;
        return envlog__fail_errno(errno, "opening snapshot/current");
    }
    struct stat st;
    if (io->fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size == 0) {
        io->close(fd);
        return envlog__fail(ENVLOG_CORRUPT, "snapshot/current is not a snapshot file");
    }
    size_t len = (size_t)st.st_size;
    /* Snapshots are replaced by rename, never rewritten in place, so the
     * mapping stays whole for as long as it is held. */
    void *map = io->mmap(len, PROT_READ, fd);
    io->close(fd);
    if (map == MAP_FAILED)
        return envlog__fail_errno(errno, "mapping snapshot/current");
    envlog_snap *s;
    if ((e = envlog_snap_load(map, len, false, &s))) {
        io->munmap(map, len);
        if (e == ENVLOG_NOMEM)
            return e; /* not the file's fault */
        return envlog__fail(ENVLOG_CORRUPT, "snapshot/current: %s", envlog_errmsg());
    }
    s->map = map;
    s->map_len = len;
    *out = s;
    return ENVLOG_OK;
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
