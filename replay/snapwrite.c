/* SPDX-License-Identifier: MIT */
/*
 * snapwrite.c - laying out a snapshot file (envlog(5), SNAPSHOTS): HEADER,
 * MANIFEST, INDEX, then ENTRY and EVIDENCE records in the total order, then
 * SEAL, all in the log's block framing with the snapshot's id as the
 * checksum seed.  The INDEX comes before the entries so a reader finds it
 * at once; its size depends only on the number of entries, so the file is
 * laid out in two passes.
 */
#include "replay_int.h"

#include <stdlib.h>
#include <string.h>

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
    if ((e = envlog_struct_encode(&w->items, &envlog_snap_item_schema, it, ENVLOG_LEVEL_FULL))) {
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
    size_t k = 0, at = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint32_t len = envlog_get_le32(w->items.p + at);
        if (w->indexed[i]) {
            envlog_put_be64(pairs + 16 * k, w->hashes[i]);
            envlog_put_be64(pairs + 16 * k + 8, pos);
            k++;
        }
        pos += envlog_framed_size(pos, len);
        at += 4 + len;
    }
    qsort(pairs, n_index, 16, envlog_snap_pair_cmp);
    idx.len = 0;
    if ((e = envlog_struct_encode(&idx, &envlog_snap_index_schema, &ir, ENVLOG_LEVEL_BASIC)))
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

