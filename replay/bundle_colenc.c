/* SPDX-License-Identifier: MIT */
/*
 * bundle_colenc.c - writing the column image of a format 2 bundle
 * (bundle_cols.c): the snapshot taken as a snapshot writer's sink hands it
 * out, its framing taken off fragment by fragment, each record walked into
 * the columns of its items' contexts (unsigned integers as zigzag LEB128
 * differences, a string or float equal to the last of its column as one
 * REPEAT byte), then the image handed out: its header, then each column.
 */
#include "bundle_cols_int.h"

#include <string.h>

/* A column being written: chunks that never move (an item lies in one,
 * where REPEAT compares it), each twice the one before up to a bound. */
typedef struct chunk {
    struct chunk *next;
    size_t len, cap;
    uint8_t b[];
} chunk;
#define CHUNK_FIRST 256
#define CHUNK_MAX (1u << 20)

typedef struct colw {
    chunk *head, *tail;
    uint64_t len;
} colw;

static uint64_t zigzag(uint64_t d)
{
    return d << 1 ^ (uint64_t)-(int64_t)(d >> 63);
}

struct envlog_cols_enc {
    cxtree t;
    colw *cols;            /* ENVLOG_COLS_MAX of them */
    envlog_buf rec;        /* the record being taken off its framing */
    uint8_t hdr[ENVLOG_FRAG_HDR];
    unsigned hdr_n;
    uint64_t pos, need;    /* bytes seen; of the fragment, still to come */
    int type;              /* the fragment's */
    bool in_rec;
    uint64_t size;         /* stated by begin */
    uint64_t records;
    envlog_id128 id;
    envlog_h128 h;
    envlog_pull in;        /* the record being laid out */
    envlog_arena mem;      /* the columns' chunks */
};

envlog_err envlog_cols_enc_new(envlog_cols_enc **out)
{
    envlog_cols_enc *c = envlog_calloc(1, sizeof *c);
    envlog_err e = c && (c->cols = envlog_calloc(ENVLOG_COLS_MAX, sizeof *c->cols))
                       ? envlog_cols_tree_init(&c->t, ENVLOG_COLS_DEPTH, ENVLOG_COLS_MAX)
                       : envlog__fail(ENVLOG_NOMEM, "bundle columns");
    if (!e)
        e = envlog_h128_begin(&c->h);
    if (!e) {
        uint32_t root;
        e = envlog_cols_new_ctx(&c->t, 0, &root);
    }
    if (e) {
        envlog_cols_enc_free(c);
        c = NULL;
    }
    *out = c;
    return e;
}

void envlog_cols_enc_free(envlog_cols_enc *c)
{
    if (!c)
        return;
    envlog_arena_free(&c->mem);
    envlog_free(c->cols);
    envlog_buf_free(&c->rec);
    envlog_h128_free(&c->h);
    envlog_cols_tree_free(&c->t);
    envlog_free(c);
}

/* Appends `n` bytes to column `col`; *at (may be NULL) is where they lie. */
static envlog_err put(envlog_cols_enc *c, uint32_t col, const uint8_t *p, size_t n,
                      const uint8_t **at)
{
    colw *w = &c->cols[col];
    chunk *t = w->tail;
    if (!t || t->cap - t->len < n) {
        size_t cap = !t ? CHUNK_FIRST : t->cap < CHUNK_MAX ? 2 * t->cap : CHUNK_MAX;
        if (cap < n)
            cap = n;
        chunk *k = envlog_arena_alloc(&c->mem, sizeof *k + cap);
        if (!k)
            return envlog__fail(ENVLOG_NOMEM, "bundle columns");
        k->next = NULL;
        k->len = 0;
        k->cap = cap;
        if (t)
            t->next = k;
        else
            w->head = k;
        w->tail = t = k;
    }
    uint8_t *d = t->b + t->len;
    if (n == 1) /* (most items are a byte or a few) */
        *d = *p;
    else
        memcpy(d, p, n);
    t->len += n;
    w->len += n;
    if (at)
        *at = d;
    return ENVLOG_OK;
}

static envlog_err put_number(envlog_cols_enc *c, uint32_t ctx, uint64_t v)
{
    cx *x = &c->t.v[ctx];
    envlog_err e;
    if (x->nums == NO_COL && (e = envlog_cols_new_col(&c->t, &x->nums)))
        return e;
    uint8_t b[10];
    size_t n = 0;
    for (uint64_t z = zigzag(v - x->prev); ; z >>= 7) {
        b[n++] = (uint8_t)(z & 0x7f) | (z > 0x7f ? 0x80 : 0);
        if (z <= 0x7f)
            break;
    }
    x->prev = v;
    return put(c, x->nums, b, n, NULL);
}

/* The writer's item_fn: the next item of the record (c->in) into the
 * columns of `ctx`. */
static envlog_err enc_item(void *side, uint32_t ctx, envlog_tok *t)
{
    envlog_cols_enc *c = side;
    envlog_pull *p = &c->in;
    size_t start = p->pos;
    cx *x = &c->t.v[ctx];
    /* (an unsigned integer below 24, its head alone: most of all a map's
     * keys, half the items) */
    if (p->pos < p->n && p->p[p->pos] < 0x18) {
        t->type = ENVLOG_TOK_UINT;
        t->u = p->p[p->pos++];
        colw *w = &c->cols[x->bytes];
        if (w->tail && w->tail->len < w->tail->cap) {
            w->tail->b[w->tail->len++] = (uint8_t)t->u;
            w->len++;
            return ENVLOG_OK;
        }
        return put(c, x->bytes, p->p + start, 1, NULL);
    }
    envlog_err e = envlog_pull_next(p, t);
    if (e)
        return e;
    uint8_t ib = p->p[start];
    size_t len = p->pos - start;
    if (is_delta_head(ib))
        return (e = put(c, x->bytes, &ib, 1, NULL)) ? e : put_number(c, ctx, t->u);
    if (repeatable(ib) && len == x->last_len && !memcmp(x->last, p->p + start, len)) {
        static const uint8_t again = REPEAT;
        return put(c, x->bytes, &again, 1, NULL);
    }
    if (!repeatable(ib))
        return put(c, x->bytes, p->p + start, len, NULL);
    x->last_len = len;
    return put(c, x->bytes, p->p + start, len, &x->last);
}

/* The id of a HEADER record (key 6, 16 bytes), which seeds the framing. */
static envlog_err header_id(const uint8_t *p, size_t n, envlog_id128 *id)
{
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e && t.type != ENVLOG_TOK_MAP)
        e = ENVLOG_BAD_DATA;
    for (uint64_t i = 0, m = t.u; !e && i < m; i++) {
        envlog_tok k;
        if ((e = envlog_pull_next(&pl, &k)) || (e = envlog_pull_next(&pl, &t)))
            break;
        if (k.type == ENVLOG_TOK_UINT && k.u == 6 && t.type == ENVLOG_TOK_BYTES &&
            t.len == 16) {
            memcpy(id->b, t.data, 16);
            return ENVLOG_OK;
        }
        if ((e = envlog_pull_skip_after(&pl, &t)))
            break;
    }
    return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: the snapshot's HEADER names no id");
}

static envlog_err end_record(envlog_cols_enc *c)
{
    envlog_err e;
    if (!c->records && (e = header_id(c->rec.p, c->rec.len, &c->id)))
        return e;
    c->in = (envlog_pull){c->rec.p, c->rec.len, 0};
    if ((e = envlog_cols_walk(&c->t, enc_item, c)))
        return envlog__fail(e, "bundle columns: snapshot record %llu: %s",
                            (unsigned long long)c->records, envlog_errmsg());
    if (c->in.pos != c->in.n)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: snapshot record %llu holds "
                            "more than one item", (unsigned long long)c->records);
    c->records++;
    c->rec.len = 0;
    return ENVLOG_OK;
}

static envlog_err cols_begin(void *ctx, uint64_t size)
{
    envlog_cols_enc *c = ctx;
    c->size = size;
    return ENVLOG_OK;
}

/* Takes the framing off, fragment by fragment, whatever pieces the bytes
 * come in. */
static envlog_err cols_write(void *ctx, const uint8_t *p, size_t n)
{
    envlog_cols_enc *c = ctx;
    envlog_err e;
    envlog_h128_update(&c->h, p, n);
    while (n) {
        if (c->need) {
            size_t take = c->need < n ? (size_t)c->need : n;
            if ((e = envlog_buf_append(&c->rec, p, take)))
                return e;
            c->need -= take;
            c->pos += take;
            p += take;
            n -= take;
            if (!c->need && !c->in_rec && (e = end_record(c)))
                return e;
            continue;
        }
        uint64_t left = ENVLOG_BLOCK - c->pos % ENVLOG_BLOCK;
        if (!c->hdr_n && left < ENVLOG_FRAG_HDR) {
            size_t take = left < n ? (size_t)left : n;
            for (size_t i = 0; i < take; i++)
                if (p[i])
                    return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: a block trailer "
                                        "that is not zero at byte %llu",
                                        (unsigned long long)c->pos + i);
            c->pos += take;
            p += take;
            n -= take;
            continue;
        }
        size_t take = ENVLOG_FRAG_HDR - c->hdr_n < n ? ENVLOG_FRAG_HDR - c->hdr_n : n;
        memcpy(c->hdr + c->hdr_n, p, take);
        c->hdr_n += (unsigned)take;
        c->pos += take;
        p += take;
        n -= take;
        if (c->hdr_n < ENVLOG_FRAG_HDR)
            continue;
        c->hdr_n = 0;
        c->type = c->hdr[6];
        c->need = envlog_get_le16(c->hdr + 4);
        /* (the header may have come in pieces: its block is where it began) */
        uint64_t room = ENVLOG_BLOCK - (c->pos - ENVLOG_FRAG_HDR) % ENVLOG_BLOCK;
        bool opens = c->type == ENVLOG_FRAG_FULL || c->type == ENVLOG_FRAG_FIRST;
        if (c->type < ENVLOG_FRAG_FULL || c->type > ENVLOG_FRAG_LAST || opens == c->in_rec ||
            c->need > room - ENVLOG_FRAG_HDR)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: a bad fragment at byte "
                                "%llu", (unsigned long long)(c->pos - ENVLOG_FRAG_HDR));
        c->in_rec = c->type == ENVLOG_FRAG_FIRST || c->type == ENVLOG_FRAG_MIDDLE;
        if (!c->need && !c->in_rec && (e = end_record(c)))
            return e;
    }
    return ENVLOG_OK;
}

envlog_sink envlog_cols_sink(envlog_cols_enc *c)
{
    return (envlog_sink){cols_begin, cols_write, c};
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

envlog_err envlog_cols_finish(envlog_cols_enc *c, const envlog_sink *out)
{
    if (c->need || c->hdr_n || c->in_rec || c->pos != c->size || c->records < 2)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: not a whole snapshot "
                            "(%llu of %llu bytes, %llu records)", (unsigned long long)c->pos,
                            (unsigned long long)c->size, (unsigned long long)c->records);
    uint32_t n_cols = c->t.n_cols;
    size_t hn = ENVLOG_COLS_HDR + 8 * (size_t)n_cols;
    uint8_t *hdr = envlog_malloc(hn);
    if (!hdr)
        return envlog__fail(ENVLOG_NOMEM, "bundle columns");
    uint64_t size = hn;
    memcpy(hdr, ENVLOG_COLS_MAGIC, 8);
    put_le64(hdr + 8, c->size);
    envlog_hash128 h = envlog_h128_end(&c->h);
    memcpy(hdr + 16, h.b, 16);
    memcpy(hdr + 32, c->id.b, 16);
    put_le64(hdr + 48, c->records);
    envlog_put_le32(hdr + 56, c->t.depth);
    envlog_put_le32(hdr + 60, n_cols);
    for (uint32_t i = 0; i < n_cols; i++) {
        put_le64(hdr + ENVLOG_COLS_HDR + 8 * (size_t)i, c->cols[i].len);
        size += c->cols[i].len;
    }
    envlog_err e = out->begin ? out->begin(out->ctx, size) : ENVLOG_OK;
    if (!e)
        e = out->write(out->ctx, hdr, hn);
    envlog_free(hdr);
    for (uint32_t i = 0; i < n_cols; i++) {
        for (chunk *k = c->cols[i].head; k && !e; k = k->next)
            if (k->len)
                e = out->write(out->ctx, k->b, k->len);
        c->cols[i] = (colw){NULL, NULL, 0};
    }
    return e;
}
