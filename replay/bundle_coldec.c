/* SPDX-License-Identifier: MIT */
/*
 * bundle_coldec.c - reading the column image of a format 2 bundle
 * (bundle_cols.c): the records rebuilt from the columns, walked as the
 * writer walked them, and framed again from the snapshot's id, every
 * length checked against what is left before it is used and the result
 * against the snapshot's hash; memory grows with what the image really
 * gives, never with what it states.
 */
#include "bundle_cols_int.h"

#include <string.h>

typedef struct col_view {
    const uint8_t *p;
    uint64_t len, pos;
} col_view;

typedef struct dec {
    cxtree t;
    col_view *cols;
    /* Each context's bytes column (one of its own): where the next item
     * is, and where the column ends; set as the walk makes contexts. */
    const uint8_t **at, **end;
    uint32_t seen;       /* the contexts set */
    envlog_buf rec;
    uint64_t size, pos;  /* the snapshot: stated, framed so far */
} dec;


/* How far ahead of a column's cursor its bytes are asked for: a record
 * reads a few bytes of each of some forty columns, more streams than the
 * hardware follows, and a column's next line was a miss to memory. */
#define PREFETCH 256

static uint64_t unzigzag(uint64_t z)
{
    return z >> 1 ^ (uint64_t)-(int64_t)(z & 1);
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Bytes the snapshot can still take, the record in progress included. */
static uint64_t dec_left(const dec *d)
{
    return d->size - d->pos - d->rec.len;
}

static envlog_err dec_put(dec *d, const uint8_t *p, size_t n)
{
    if (n > dec_left(d))
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: its records take more than the %llu "
                            "bytes it states", (unsigned long long)d->size);
    if (d->rec.cap - d->rec.len < n) {
        envlog_err e = envlog_buf_reserve(&d->rec, n);
        if (e)
            return e;
    }
    uint8_t *to = d->rec.p + d->rec.len;
    if (n == 1)
        *to = *p;
    else
        memcpy(to, p, n);
    d->rec.len += n;
    return ENVLOG_OK;
}

static envlog_err dec_number(dec *d, uint32_t ctx, uint8_t ib, envlog_tok *t)
{
    cx *x = &d->t.v[ctx];
    envlog_err e;
    if (x->nums == NO_COL && (e = envlog_cols_new_col(&d->t, &x->nums)))
        return e;
    col_view *v = &d->cols[x->nums];
    uint64_t z = 0;
    for (int shift = 0;; shift += 7) {
        if (v->pos == v->len)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u ends before its "
                                "numbers do", x->nums);
        uint8_t b = v->p[v->pos++];
        if (shift == 63 && b > 1)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u: a number over 64 bits",
                                x->nums);
        z |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        if (shift == 63)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u: a number over 64 bits",
                                x->nums);
    }
    uint64_t val = x->prev + unzigzag(z);
    x->prev = val;
    unsigned w = 1u << ((ib & 31) - 24);
    if (w < 8 && val >> (8 * w))
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u: %llu does not fit the "
                            "%u bytes its head gives it", x->nums, (unsigned long long)val, w);
    uint8_t b[9];
    b[0] = ib;
    for (unsigned i = 0; i < w; i++)
        b[1 + i] = (uint8_t)(val >> (8 * (w - 1 - i)));
    t->type = ENVLOG_TOK_UINT;
    t->u = val;
    return dec_put(d, b, 1 + w);
}

/* dec_item() for every item but an unsigned integer below 24 that fits. */
static envlog_err dec_other(dec *d, uint32_t ctx, envlog_tok *t)
{
    const uint8_t *p = d->at[ctx], *end = d->end[ctx];
    uint32_t col = d->t.v[ctx].bytes;
    if (p == end)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u ends before its items do", col);
    envlog_err e;
    uint8_t ib = *p;
    cx *x = &d->t.v[ctx];
    if (ib < 0x18) {
        *t = (envlog_tok){.type = ENVLOG_TOK_UINT, .u = ib};
        d->at[ctx] = p + 1;
        return dec_put(d, &ib, 1);
    }
    if (is_delta_head(ib)) {
        d->at[ctx] = p + 1;
        return dec_number(d, ctx, ib, t);
    }
    if (ib == REPEAT) {
        if (!x->last_len)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u repeats an item before "
                                "it holds one", col);
        envlog_pull pl = {x->last, x->last_len, 0};
        d->at[ctx] = p + 1;
        return (e = envlog_pull_next(&pl, t)) ? e : dec_put(d, pl.p, pl.n);
    }
    envlog_pull pl = {p, (size_t)(end - p), 0};
    if ((e = envlog_pull_next(&pl, t)))
        return envlog__fail(e, "bundle: column %u: %s", col, envlog_errmsg());
    if (repeatable(ib)) {
        x->last = p;
        x->last_len = pl.pos;
    }
    if ((e = dec_put(d, p, pl.pos)))
        return e;
    d->at[ctx] = p + pl.pos;
    /* Every item takes a byte at least: a count past what is left is
     * refused before the walk counts through it. */
    bool map = t->type == ENVLOG_TOK_MAP;
    uint64_t left = dec_left(d);
    if ((map || t->type == ENVLOG_TOK_ARRAY) && (t->u > left || (map && t->u > left / 2)))
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u: %s of %llu %s, more than "
                            "the bytes left", col, map ? "a map" : "an array",
                            (unsigned long long)t->u, map ? "pairs" : "items");
    return ENVLOG_OK;
}

/* The cursors of the contexts the walk made since the last call. */
static void see_contexts(dec *d)
{
    for (; d->seen < d->t.n; d->seen++) {
        const col_view *v = &d->cols[d->t.v[d->seen].bytes];
        d->at[d->seen] = v->p + v->pos;
        d->end[d->seen] = v->p + v->len;
    }
}

/* The reader's item_fn: the next item of context `ctx` from its columns
 * onto the record being rebuilt.  (An unsigned integer below 24, a map's
 * keys most of all, is half the items: it goes without a call.) */
static envlog_err dec_item(void *side, uint32_t ctx, envlog_tok *t)
{
    dec *d = side;
    if (ctx >= d->seen)
        see_contexts(d);
    const uint8_t *p = d->at[ctx];
    __builtin_prefetch((const void *)((uintptr_t)p + PREFETCH));
    if (p < d->end[ctx] && *p < 0x18 && d->rec.len < d->rec.cap && dec_left(d)) {
        uint8_t ib = *p;
        d->at[ctx] = p + 1;
        d->rec.p[d->rec.len++] = ib;
        t->type = ENVLOG_TOK_UINT;
        t->u = ib;
        return ENVLOG_OK;
    }
    return dec_other(d, ctx, t);
}

/* Room in *out for `need` bytes, from `first` doubling up to `size`: the
 * first block on huge pages where large (a fault per 2 MiB), the next
 * grown in place where it can be (never held beside a copy of itself). */
static envlog_err dec_room(uint8_t **out, size_t *cap, uint64_t need, uint64_t first,
                           uint64_t size)
{
    if (need <= *cap)
        return ENVLOG_OK;
    uint64_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    if (c > size)
        c = size;
    uint8_t *p = *out ? envlog_realloc(*out, (size_t)c) : envlog_malloc_big((size_t)c, false);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "reading a bundle");
    *out = p;
    *cap = (size_t)c;
    return ENVLOG_OK;
}

/* A snapshot checked without being kept (envlog_cols_check()): its
 * records framed into a window used again and again, the hash taken of
 * each piece before it is written over.  The window starts on a block:
 * the framing depends on a record's place in its block only, so a record
 * framed at `pos - base` in it is the bytes it is at `pos` in the
 * snapshot.  What a load reads (the head: HEADER, MANIFEST, INDEX; the
 * tail: the SEAL) is kept at its place in memory reserved for the whole,
 * whose other pages are never touched. */
#define HEAD_RECORDS 3
#define WINDOW (1u << 20)

typedef struct cols_window {
    uint8_t *w;
    size_t cap;
    uint64_t base;   /* the snapshot's offset of w[0], a whole block */
    uint64_t hashed; /* the snapshot's bytes hashed so far */
    envlog_h128 h;
    uint8_t *snap;   /* envlog_reserve(size): the head and tail in place */
    uint64_t size;   /* what the image states, reserved */
    bool head;       /* the head is in `snap` */
} cols_window;

static uint8_t *win_reserve(void *ctx, uint64_t size)
{
    cols_window *w = ctx;
    w->size = size;
    return w->snap = envlog_reserve((size_t)size);
}

/* Room in the window for `framed` bytes at snapshot offset `pos`: what is
 * written hashed and let go (the block `pos` is in kept, being written),
 * or, while the head is not yet kept or a record does not fit, the window
 * grown. */
static envlog_err win_room(cols_window *w, uint64_t pos, uint64_t framed)
{
    if (pos - w->base + framed <= w->cap)
        return ENVLOG_OK;
    if (w->head) {
        envlog_h128_update(&w->h, w->w + (w->hashed - w->base), (size_t)(pos - w->hashed));
        w->hashed = pos;
        uint64_t nb = pos / ENVLOG_BLOCK * ENVLOG_BLOCK;
        memmove(w->w, w->w + (nb - w->base), (size_t)(pos - nb));
        w->base = nb;
        if (pos - w->base + framed <= w->cap)
            return ENVLOG_OK;
    }
    uint64_t need = pos - w->base + framed, cap = 2 * (uint64_t)w->cap;
    if (cap < need)
        cap = need;
    uint8_t *p = envlog_realloc_big(w->w, (size_t)(pos - w->base), (size_t)cap);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "checking a bundle");
    w->w = p;
    w->cap = (size_t)cap;
    return ENVLOG_OK;
}

static envlog_err decode_into(const uint8_t *img, size_t n, const envlog_cols_out *to,
                              cols_window *win, uint8_t **out, uint64_t *n_out);

envlog_err envlog_cols_check(const uint8_t *img, size_t n, uint8_t **snap, uint64_t *size)
{
    *snap = NULL;
    *size = 0;
    cols_window w = {0};
    envlog_cols_out to = {win_reserve, NULL, &w};
    uint8_t *none;
    uint64_t made = 0;
    envlog_err e = envlog_h128_begin(&w.h);
    if (!e && !(w.w = envlog_malloc_big(WINDOW, false)))
        e = envlog__fail(ENVLOG_NOMEM, "checking a bundle");
    w.cap = WINDOW;
    if (!e)
        e = decode_into(img, n, &to, &w, &none, &made);
    /* The tail: the window holds the last record whole (it starts no
     * later than the block the last record began in). */
    if (!e)
        memcpy(w.snap + w.base, w.w, (size_t)(made - w.base));
    envlog_free(w.w);
    envlog_h128_free(&w.h);
    if (e) {
        envlog_unreserve(w.snap, (size_t)w.size);
        return e;
    }
    *snap = w.snap;
    *size = made; /* (what it states: a snapshot of another size is refused) */
    return ENVLOG_OK;
}

envlog_err envlog_cols_decode(const uint8_t *img, size_t n, uint8_t **out, size_t *n_out)
{
    *n_out = 0;
    uint64_t made;
    envlog_err e = envlog_cols_decode_to(img, n, NULL, out, &made);
    if (!e)
        *n_out = (size_t)made;
    return e;
}

envlog_err envlog_cols_decode_to(const uint8_t *img, size_t n, const envlog_cols_out *to,
                                 uint8_t **out, uint64_t *n_out)
{
    return decode_into(img, n, to, NULL, out, n_out);
}

static envlog_err decode_into(const uint8_t *img, size_t n, const envlog_cols_out *to,
                              cols_window *win, uint8_t **out, uint64_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (n < ENVLOG_COLS_HDR || memcmp(img, ENVLOG_COLS_MAGIC, 8))
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: no column image inside (%zu bytes)", n);
    uint64_t size = get_le64(img + 8), records = get_le64(img + 48);
    envlog_id128 id;
    memcpy(id.b, img + 32, 16);
    uint32_t depth = envlog_get_le32(img + 56), n_cols = envlog_get_le32(img + 60);
    if (size > ENVLOG_BUNDLE_MAX_SIZE)
        return envlog__fail(ENVLOG_TOO_BIG, "bundle states a snapshot of %llu bytes, over the "
                            "%llu-byte limit", (unsigned long long)size,
                            (unsigned long long)ENVLOG_BUNDLE_MAX_SIZE);
    if (!depth || depth > ENVLOG_COLS_DEPTH_MAX || !n_cols || n_cols > ENVLOG_COLS_MAX)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: column image of depth %u with %u "
                            "columns (1 to %u and 1 to %u)", depth, n_cols,
                            ENVLOG_COLS_DEPTH_MAX, ENVLOG_COLS_MAX);
    if ((n - ENVLOG_COLS_HDR) / 8 < n_cols)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: it lists %u columns in %zu bytes",
                            n_cols, n);
    /* Each record is framed in 8 bytes at least. */
    if (!records || records > size / 8)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: %llu records in a snapshot of %llu "
                            "bytes", (unsigned long long)records, (unsigned long long)size);
    const uint8_t *body = img + ENVLOG_COLS_HDR + 8 * (size_t)n_cols;
    uint64_t held = n - (uint64_t)(body - img), sum = 0;
    dec d = {0};
    d.size = size;
    envlog_err e = envlog_cols_tree_init(&d.t, depth, n_cols);
    if (!e && (!(d.cols = envlog_malloc(n_cols * sizeof *d.cols)) ||
               !(d.at = envlog_malloc(ENVLOG_COLS_CONTEXTS_MAX * sizeof *d.at)) ||
               !(d.end = envlog_malloc(ENVLOG_COLS_CONTEXTS_MAX * sizeof *d.end))))
        e = envlog__fail(ENVLOG_NOMEM, "reading a bundle");
    for (uint32_t i = 0; !e && i < n_cols; i++) {
        uint64_t len = get_le64(img + ENVLOG_COLS_HDR + 8 * (size_t)i);
        if (len > held - sum) {
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u claims %llu bytes, more than "
                             "the image holds", i, (unsigned long long)len);
            break;
        }
        d.cols[i] = (col_view){body + sum, len, 0};
        sum += len;
    }
    if (!e && sum != held)
        e = envlog__fail(ENVLOG_BAD_DATA, "bundle: its columns take %llu bytes, not the %llu "
                         "that follow them", (unsigned long long)sum, (unsigned long long)held);
    uint8_t *snap = NULL;
    size_t cap = 0;
    uint64_t seed = envlog_seg_seed(&id, 0);
    uint32_t root;
    if (!e)
        e = envlog_cols_new_ctx(&d.t, 0, &root);
    /* Written where it will be read while it is written: all its stated
     * bytes at once, at an address that stays. */
    if (!e && to && !(snap = to->room(to->ctx, size)))
        e = envlog__fail(ENVLOG_NOMEM, "reading a bundle");
    for (uint64_t r = 0; !e && r < records; r++) {
        d.rec.len = 0;
        if ((e = envlog_cols_walk(&d.t, dec_item, &d)))
            break;
        uint64_t framed = envlog_framed_size(d.pos, d.rec.len);
        if (d.rec.len > ENVLOG_RECORD_MAX || framed > d.size - d.pos) {
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: record %llu of %zu bytes does not fit "
                             "the %llu bytes it states", (unsigned long long)r, d.rec.len,
                             (unsigned long long)d.size);
            break;
        }
        if (win) {
            if ((e = win_room(win, d.pos, framed)))
                break;
            uint64_t at = d.pos - win->base;
            envlog_frame_write(win->w, &at, seed, d.rec.p, d.rec.len, NULL);
            d.pos = win->base + at;
            /* The head, whole in the window still (nothing let go yet). */
            if (!win->head && (r + 1 == HEAD_RECORDS || r + 1 == records)) {
                memcpy(win->snap, win->w, (size_t)d.pos);
                win->head = true;
            }
            continue;
        }
        /* (the snapshot takes about what its image does, often less) */
        if (!to && (e = dec_room(&snap, &cap, d.pos + framed,
                                 n < (1u << 18) ? (1u << 20) : 4 * n, d.size)))
            break;
        envlog_frame_write(snap, &d.pos, seed, d.rec.p, d.rec.len, NULL);
        if (to)
            to->made(to->ctx, d.pos);
    }
    if (!e && d.pos != d.size)
        e = envlog__fail(ENVLOG_BAD_DATA, "bundle: its records take %llu bytes, not the %llu "
                         "it states", (unsigned long long)d.pos, (unsigned long long)d.size);
    for (uint32_t i = 0; i < d.seen; i++)
        d.cols[d.t.v[i].bytes].pos = (uint64_t)(d.at[i] - d.cols[d.t.v[i].bytes].p);
    for (uint32_t i = 0; !e && i < n_cols; i++)
        if (d.cols[i].pos != d.cols[i].len)
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u holds %llu bytes its records "
                             "do not use", i,
                             (unsigned long long)(d.cols[i].len - d.cols[i].pos));
    if (!e && win)
        envlog_h128_update(&win->h, win->w + (win->hashed - win->base),
                           (size_t)(d.pos - win->hashed));
    if (!e) {
        envlog_hash128 h = win ? envlog_h128_end(&win->h)
                               : envlog_hash128_bytes(snap, (size_t)d.pos);
        if (memcmp(h.b, img + 16, 16))
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: the snapshot its columns give does not "
                             "match its hash");
    }
    envlog_buf_free(&d.rec);
    envlog_free(d.cols);
    envlog_free(d.at);
    envlog_free(d.end);
    envlog_cols_tree_free(&d.t);
    if (e) {
        if (!to)
            envlog_free(snap);
        return e;
    }
    *out = snap;
    *n_out = d.pos;
    return ENVLOG_OK;
}
