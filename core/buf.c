/* SPDX-License-Identifier: MIT */
/*
 * buf.c - a growable byte buffer and a reusable arena.
 *
 * Recording encodes into a buffer that grows to the largest record seen and
 * then stays, so a warm session allocates nothing per record.
 */
#include "core_int.h"

#include <string.h>

envlog_err envlog_buf_reserve(envlog_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return ENVLOG_OK;
    if (extra > SIZE_MAX / 2 - b->len)
        return envlog__fail(ENVLOG_TOO_BIG, "buffer of %zu bytes", extra);
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *p = envlog_realloc_big(b->p, b->len, cap);
    cap = envlog_big_size(cap);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "buffer of %zu bytes", cap);
    b->p = p;
    b->cap = cap;
    return ENVLOG_OK;
}

envlog_err envlog_buf_append(envlog_buf *b, const void *p, size_t n)
{
    envlog_err e = envlog_buf_reserve(b, n);
    if (e)
        return e;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return ENVLOG_OK;
}

void envlog_buf_free(envlog_buf *b)
{
    envlog_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* The arena hands out pieces of chunks.  Pointers stay valid until the next
 * reset; a reset that finds several chunks replaces them with one chunk big
 * enough for all, so a warm reader decodes from one block. */
typedef struct envlog_chunk {
    struct envlog_chunk *next;
    size_t cap;
    size_t used;
    _Alignas(16) uint8_t data[];
} envlog_chunk;

/* A chunk of `cap` bytes at least: all of what envlog_malloc_big takes. */
static envlog_chunk *chunk_new(size_t cap)
{
    if (cap > SIZE_MAX / 2)
        return NULL;
    cap = envlog_big_size(sizeof(envlog_chunk) + cap) - sizeof(envlog_chunk);
    envlog_chunk *c = envlog_malloc_big(sizeof(envlog_chunk) + cap, false);
    if (c) {
        c->next = NULL;
        c->cap = cap;
        c->used = 0;
    }
    return c;
}

void *envlog_arena_alloc(envlog_arena *a, size_t n)
{
    if (n > SIZE_MAX / 4)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    a->want += n;
    envlog_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = c ? c->cap * 2 : 4096;
        if (cap < n)
            cap = n;
        envlog_chunk *nc = chunk_new(cap);
        if (!nc)
            return NULL;
        nc->next = c;
        a->head = c = nc;
    }
    void *r = c->data + c->used;
    c->used += n;
    return r;
}

static void chunks_free(envlog_chunk *c)
{
    while (c) {
        envlog_chunk *next = c->next;
        envlog_free(c);
        c = next;
    }
}

void envlog_arena_reset(envlog_arena *a)
{
    envlog_chunk *c = a->head;
    if (c && c->next) {
        size_t want = a->want;
        chunks_free(c);
        a->head = chunk_new(want);
    } else if (c) {
        c->used = 0;
    }
    a->want = 0;
}

void envlog_arena_free(envlog_arena *a)
{
    chunks_free(a->head);
    a->head = NULL;
    a->want = 0;
}
