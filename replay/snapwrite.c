/* SPDX-License-Identifier: MIT */
/*
 * snapwrite.c - laying out a snapshot file (envlog(5), SNAPSHOTS): HEADER,
 * MANIFEST, INDEX, then ENTRY and EVIDENCE records in the total order, then
 * SEAL, all in the log's block framing with the snapshot's id as the
 * checksum seed.  The INDEX comes before the entries so a reader finds it
 * at once; its size depends only on the number of entries, so the file is
 * laid out in two passes: the first sizes every record (and hashes the
 * content), the second hands each, framed, to a sink.  No pass holds more
 * than one record besides what the items reference: each is encoded again
 * when written, unless the writer may hold their encodings (w->hold bytes
 * of them: an export, whose records are at most a bundle's 1 GiB), which
 * saves encoding each item four times.
 */
#include "replay_int.h"

#include <stdlib.h>
#include <string.h>

/* Room for `more` items past those added: doubling, or at once to what is
 * asked when that is more. */
envlog_err envlog_snapw_expect(envlog_snapw *w, size_t more)
{
    if (more <= w->cap - w->n)
        return ENVLOG_OK;
    size_t cap = w->cap ? 2 * w->cap : 256;
    if (more > SIZE_MAX / sizeof *w->v / 2 - w->n)
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot: %zu records", more);
    if (cap < w->n + more)
        cap = w->n + more;
    envlog_snapw_rec *v = envlog_realloc_big(w->v, w->n * sizeof *v, cap * sizeof *v);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    w->v = v;
    w->cap = cap;
    return ENVLOG_OK;
}

static envlog_err add(envlog_snapw *w, const envlog_snap_item *it, bool indexed,
                      uint64_t key_hash, bool copy)
{
    envlog_err e = envlog_snapw_expect(w, 1);
    if (e)
        return e;
    /* Encoded now for its size (and its checks), and held for the passes
     * that write it while the encodings fit the bound.  Its record is one
     * the fold or a snapshot walk accepted, or one the encoder wrote (a
     * tune less its trials): its well-formedness is not walked again.  What
     * is held or copied goes to an arena, whose pieces never move: growing
     * one buffer for all of it would copy what it holds, into fresh pages,
     * at each doubling. */
    w->scratch.len = 0;
    e = envlog_struct_encode_trusted(&w->scratch, &envlog_snap_item_schema, it,
                                     ENVLOG_LEVEL_FULL);
    size_t len = w->scratch.len;
    if (!e && len > ENVLOG_RECORD_MAX)
        e = envlog__fail(ENVLOG_TOO_BIG, "a snapshot record of %zu bytes", len);
    if (e)
        return e;
    envlog_snapw_rec *r = &w->v[w->n];
    r->item = *it;
    r->enc = NULL;
    r->len = (uint32_t)len;
    r->indexed = indexed;
    r->hash = key_hash;
    if (w->held < w->hold && len <= w->hold - w->held) {
        uint8_t *d = envlog_arena_alloc(&w->mem, len);
        if (!d)
            return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        memcpy(d, w->scratch.p, len);
        r->enc = d;
        w->held += len;
    } else if (copy && it->record.size) {
        uint8_t *d = envlog_arena_alloc(&w->mem, it->record.size);
        if (!d)
            return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
        memcpy(d, it->record.data, it->record.size);
        r->item.record.data = d;
    }
    w->n++;
    return ENVLOG_OK;
}

envlog_err envlog_snapw_add(envlog_snapw *w, const envlog_snap_item *it, bool indexed,
                            uint64_t key_hash)
{
    return add(w, it, indexed, key_hash, true);
}

envlog_err envlog_snapw_add_ref(envlog_snapw *w, const envlog_snap_item *it, bool indexed,
                                uint64_t key_hash)
{
    return add(w, it, indexed, key_hash, false);
}

void envlog_snapw_free(envlog_snapw *w)
{
    envlog_free(w->v);
    envlog_arena_free(&w->mem);
    envlog_buf_free(&w->scratch);
    memset(w, 0, sizeof *w);
}

/* Item `i` encoded: as held, or made again in `into`. */
static envlog_err encode_item(envlog_snapw *w, size_t i, envlog_buf *into, const uint8_t **p,
                              size_t *n)
{
    const envlog_snapw_rec *r = &w->v[i];
    if (r->enc) {
        *p = r->enc;
        *n = r->len;
        return ENVLOG_OK;
    }
    into->len = 0;
    envlog_err e = envlog_struct_encode(into, &envlog_snap_item_schema, &r->item,
                                        ENVLOG_LEVEL_FULL);
    *p = into->p;
    *n = into->len;
    return e;
}

typedef struct framer {
    const envlog_sink *sink;
    envlog_buf fb;      /* one record, framed */
    uint64_t pos, seed, chain;
} framer;

/* Frames a record at the file's current end and hands it on; the chain
 * covers every record but the HEADER and SEAL, as in a session segment. */
static envlog_err frame_out(framer *f, const uint8_t *p, size_t n, bool chained)
{
    uint64_t local = f->pos % ENVLOG_BLOCK, start = local;
    uint64_t sz = envlog_framed_size(f->pos, n);
    envlog_err e = envlog_buf_reserve(&f->fb, (size_t)(local + sz));
    if (e)
        return e;
    /* (only the record's own bytes: the block before it is not sent) */
    memset(f->fb.p + start, 0, (size_t)sz);
    envlog_frame_write(f->fb.p, &local, f->seed, p, n, chained ? &f->chain : NULL);
    f->pos += sz;
    return f->sink->write(f->sink->ctx, f->fb.p + start, (size_t)sz);
}

envlog_err envlog_snapw_finish_to(envlog_snapw *w, envlog_snap_manifest *m,
                                  const envlog_id128 *id, const char *content,
                                  const envlog_sink *sink)
{
    envlog_buf hdr = {0}, man = {0}, idx = {0}, rec = {0};
    const uint8_t *rp;
    size_t rn;
    uint8_t *pairs = NULL;
    envlog_h128 h = {0};
    framer f = {sink, {0}, 0, envlog_seg_seed(id, 0), 0};
    envlog_err e;
    size_t n_index = 0;
    for (size_t i = 0; i < w->n; i++)
        n_index += w->v[i].indexed;
    m->kind = ENVLOG_KIND_MANIFEST;
    /* The content hash: u32le(len) || record, over every item. */
    if ((e = envlog_h128_begin(&h)))
        goto out;
    for (size_t i = 0; i < w->n; i++) {
        if ((e = encode_item(w, i, &rec, &rp, &rn)))
            goto out;
        uint8_t len[4];
        envlog_put_le32(len, (uint32_t)rn);
        envlog_h128_update(&h, len, 4);
        envlog_h128_update(&h, rp, rn);
    }
    m->content_hash = envlog_h128_end(&h);
    envlog_seg_header hd = {ENVLOG_KIND_HEADER, ENVLOG_MAGIC, ENVLOG_LOG_VERSION, *id,
                            0, 0, 0, content};
    if ((e = envlog_struct_encode(&hdr, &envlog_seg_header_schema, &hd, ENVLOG_LEVEL_BASIC)) ||
        (e = envlog_struct_encode(&man, &envlog_snap_manifest_schema, m, ENVLOG_LEVEL_FULL)))
        goto out;
    if (!(pairs = envlog_calloc(n_index ? n_index : 1, 16))) {
        e = envlog__fail(ENVLOG_NOMEM, "building a snapshot index");
        goto out;
    }
    envlog_snap_index ir = {ENVLOG_KIND_INDEX, n_index, {pairs, n_index * 16}};
    /* Pass 1: the index's encoded size does not depend on the offsets in
     * it, so every record's place is known before anything is written. */
    if ((e = envlog_struct_encode(&idx, &envlog_snap_index_schema, &ir, ENVLOG_LEVEL_BASIC)))
        goto out;
    uint64_t pos = 0;
    pos += envlog_framed_size(pos, hdr.len);
    pos += envlog_framed_size(pos, man.len);
    pos += envlog_framed_size(pos, idx.len);
    size_t k = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->v[i].indexed) {
            envlog_put_be64(pairs + 16 * k, w->v[i].hash);
            envlog_put_be64(pairs + 16 * k + 8, pos);
            k++;
        }
        pos += envlog_framed_size(pos, w->v[i].len);
    }
    envlog_snap_pairs_sort(pairs, n_index);
    idx.len = 0;
    if ((e = envlog_struct_encode(&idx, &envlog_snap_index_schema, &ir, ENVLOG_LEVEL_BASIC)))
        goto out;
    /* The SEAL carries the chain over everything before it, and its size
     * depends on that value: the chain is worked out first (checksums
     * only), so the sink knows the exact size of the file before its first
     * byte (a zstd frame states it). */
    uint64_t chain = 0, at = envlog_framed_size(0, hdr.len);
    chain = envlog_frame_chain(at, f.seed, man.p, man.len, chain);
    at += envlog_framed_size(at, man.len);
    chain = envlog_frame_chain(at, f.seed, idx.p, idx.len, chain);
    at += envlog_framed_size(at, idx.len);
    for (size_t i = 0; i < w->n; i++) {
        if ((e = encode_item(w, i, &rec, &rp, &rn)))
            goto out;
        chain = envlog_frame_chain(at, f.seed, rp, rn, chain);
        at += envlog_framed_size(at, rn);
    }
    envlog_seg_seal seal = {ENVLOG_KIND_SEAL, w->n + 2, 0, chain};
    uint8_t sb[64];
    envlog_buf sbuf = {sb, 0, sizeof sb};
    if ((e = envlog_struct_encode(&sbuf, &envlog_seg_seal_schema, &seal, ENVLOG_LEVEL_BASIC)))
        goto out;
    if (sink->begin && (e = sink->begin(sink->ctx, pos + envlog_framed_size(pos, sbuf.len))))
        goto out;
    /* Pass 2: frame it all. */
    if ((e = frame_out(&f, hdr.p, hdr.len, false)) || (e = frame_out(&f, man.p, man.len, true)) ||
        (e = frame_out(&f, idx.p, idx.len, true)))
        goto out;
    for (size_t i = 0; i < w->n; i++)
        if ((e = encode_item(w, i, &rec, &rp, &rn)) || (e = frame_out(&f, rp, rn, true)))
            goto out;
    if (f.chain != chain) /* the two passes framed the same bytes */
        e = envlog__fail(ENVLOG_IO, "a snapshot record changed while it was written");
    else
        e = frame_out(&f, sbuf.p, sbuf.len, false);
out:
    envlog_h128_free(&h);
    envlog_buf_free(&hdr);
    envlog_buf_free(&man);
    envlog_buf_free(&idx);
    envlog_buf_free(&rec);
    envlog_buf_free(&f.fb);
    envlog_free(pairs);
    return e;
}

static envlog_err to_buf(void *ctx, const uint8_t *p, size_t n)
{
    return envlog_buf_append(ctx, p, n);
}

static envlog_err size_buf(void *ctx, uint64_t size)
{
    envlog_buf *b = ctx;
    return envlog_buf_reserve(b, (size_t)size);
}

envlog_err envlog_snapw_finish(envlog_snapw *w, envlog_snap_manifest *m,
                               const envlog_id128 *id, const char *content,
                               envlog_buf *out)
{
    out->len = 0;
    envlog_sink s = {size_buf, to_buf, out};
    return envlog_snapw_finish_to(w, m, id, content, &s);
}
