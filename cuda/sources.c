/* SPDX-License-Identifier: MIT */
/*
 * sources.c - the source of every kernel compiled or refused, recorded once
 * per source hash, so `envlog rebuild` can check kernels recorded at the
 * default level.
 *
 * A compile record carries its source at ENVLOG_LEVEL_FULL only (with the
 * IR, the heavy payloads).  A source is smaller than the binary it makes and
 * one source serves every option set and arch it is compiled for, so the
 * runtime records it on its own, content-addressed: a user record of kind
 * "envlog-cuda/source" whose body is the CBOR array [source_hash (bytes 16),
 * source (text)], written before the first compile record of that hash in
 * the session.  It is OBSERVED, so it is kept exactly when the compile
 * record beside it is, and user records are carried through compaction and
 * bundles as they are (envlog-cuda(3), SOURCES).
 */
#include "cuda_int.h"

#include <string.h>

/* A CBOR head: major type `mt` with argument `v`. */
static envlog_err put_head(envlog_buf *b, uint8_t mt, uint64_t v)
{
    uint8_t h[9];
    size_t n;
    if (v < 24) {
        h[0] = (uint8_t)(mt << 5 | v);
        n = 1;
    } else if (v <= 0xff) {
        h[0] = (uint8_t)(mt << 5 | 24);
        h[1] = (uint8_t)v;
        n = 2;
    } else if (v <= 0xffff) {
        h[0] = (uint8_t)(mt << 5 | 25);
        h[1] = (uint8_t)(v >> 8);
        h[2] = (uint8_t)v;
        n = 3;
    } else if (v <= 0xffffffffu) {
        h[0] = (uint8_t)(mt << 5 | 26);
        for (int i = 0; i < 4; i++)
            h[1 + i] = (uint8_t)(v >> (24 - 8 * i));
        n = 5;
    } else {
        h[0] = (uint8_t)(mt << 5 | 27);
        for (int i = 0; i < 8; i++)
            h[1 + i] = (uint8_t)(v >> (56 - 8 * i));
        n = 9;
    }
    return envlog_buf_append(b, h, n);
}

/* Whether `h` was recorded by `c` already; notes it when not (c->mu). */
static envlog_err first_time(envlog_cuda *c, const envlog_hash128 *h, bool *first)
{
    *first = false;
    pthread_mutex_lock(&c->mu);
    envlog_err e = ENVLOG_OK;
    size_t i = 0;
    while (i < c->n_sources && memcmp(c->sources[i].b, h->b, 16))
        i++;
    if (i == c->n_sources) {
        if (c->n_sources == c->cap_sources) {
            size_t cap = c->cap_sources ? 2 * c->cap_sources : 16;
            envlog_hash128 *p = envlog_realloc(c->sources, cap * sizeof *p);
            if (!p)
                e = envlog__fail(ENVLOG_NOMEM, "out of memory for a source hash");
            else {
                c->sources = p;
                c->cap_sources = cap;
            }
        }
        if (!e) {
            c->sources[c->n_sources++] = *h;
            *first = true;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return e;
}

envlog_err envlog_cuda__record_source(envlog_cuda_kernel *k)
{
    envlog_cuda *c = k->c;
    if (!c->s || !k->source)
        return ENVLOG_OK;
    bool first;
    envlog_err e = first_time(c, &k->source_hash, &first);
    if (e || !first)
        return e;
    size_t n = strlen(k->source);
    envlog_buf b = {0};
    if (!(e = put_head(&b, 4, 2)) && !(e = put_head(&b, 2, 16)) &&
        !(e = envlog_buf_append(&b, k->source_hash.b, 16)) && !(e = put_head(&b, 3, n)) &&
        !(e = envlog_buf_append(&b, k->source, n)))
        e = envlog_record_user(c->s, ENVLOG_CUDA_SOURCE_KIND, b.p, b.len, ENVLOG_OBSERVED,
                               NULL);
    envlog_buf_free(&b);
    if (e) {
        /* Not recorded: the next compile of this source tries again. */
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < c->n_sources; i++)
            if (!memcmp(c->sources[i].b, k->source_hash.b, 16)) {
                c->sources[i] = c->sources[--c->n_sources];
                break;
            }
        pthread_mutex_unlock(&c->mu);
    }
    return e;
}
