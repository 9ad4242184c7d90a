/* SPDX-License-Identifier: MIT */
/*
 * bundle_cols.c - the column image of a format 2 bundle (envlog(5),
 * BUNDLES, "Format 2").
 *
 * A bundle's entries repeat themselves field by field (every tune of a
 * tune set names the same candidates, stamps count up one by one), but in
 * a snapshot those fields lie a record apart, between checksums that never
 * repeat: a fast zstd level finds little there.  The image lays every CBOR
 * item of every record in the column of its context (where it sits in its
 * record: under which keys of which kind of map, at which place of an
 * array), unsigned integers as the difference from the last one of their
 * context, and drops the framing, which the records and the snapshot's id
 * determine.  Records are read as generic CBOR, so the image does not
 * depend on what the records hold.
 *
 * The writer takes the snapshot as a snapshot writer's sink hands it out
 * (framed) and takes the framing off; the reader rebuilds the records from
 * the columns and frames them again, checking every length against what
 * is left before it is used and the result against the snapshot's hash.
 */
#include "bundle_cols.h"

#include <string.h>

#define NO_COL UINT32_MAX
/* Items nest at most this deep in a snapshot record: an ENTRY holds a
 * record, which counts its own depth from 0 (envlog(5), CBOR limits). */
#define NEST_MAX (2 * ENVLOG_CBOR_MAX_DEPTH + 2)

/* ------------------------------------------------------------- contexts */

/* Steps from a context to a child: ELEM(i) is i (i < 16), ELEM(*) 16,
 * TAGGED 17; KEY(T) and VAL(T, k) carry the map's type T (0 untyped, else
 * its type + 1) and the key k + 1 (0: any other key). */
#define STEP_ELEMS 16
#define STEP_TAGGED 17
#define STEP_KEY(T) ((1ull << 44) | (uint64_t)(T))
#define STEP_VAL(T, k) ((2ull << 44) | ((uint64_t)(T) << 25) | (uint64_t)(k))
#define TYPE_MAX (1u << 16)  /* types below it type a map */
#define VKEY_MAX (1u << 24)  /* keys below it have contexts of their own */
#define SLOTS_FIRST 256   /* the table of children starts small (in L1): 2^8 */

typedef struct cx {
    uint32_t bytes, nums; /* its columns (nums: NO_COL until made) */
    uint32_t depth;
    uint64_t prev;        /* the last unsigned integer of the context */
    const uint8_t *last;  /* the last string or float, in its column */
    size_t last_len;
} cx;

typedef struct slot {
    uint64_t key;         /* parent << 48 | step */
    uint32_t child;       /* + 1; 0: empty */
} slot;

typedef struct cxtree {
    cx *v;
    uint32_t n;
    slot *slots;          /* the children made, kept at most half full */
    uint32_t n_slots;     /* 2^bits */
    unsigned bits;
    uint32_t depth;       /* D */
    uint32_t n_cols, max_cols;
} cxtree;

/* The slot of `key` in a table of 2^bits (the top bits of the product:
 * every bit of the key reaches them). */
static uint32_t slot_of(uint64_t key, unsigned bits)
{
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static envlog_err tree_init(cxtree *t, uint32_t depth, uint32_t max_cols)
{
    memset(t, 0, sizeof *t);
    t->depth = depth;
    t->max_cols = max_cols;
    t->v = envlog_malloc(ENVLOG_COLS_CONTEXTS_MAX * sizeof *t->v);
    t->slots = envlog_calloc(SLOTS_FIRST, sizeof *t->slots);
    t->n_slots = SLOTS_FIRST;
    t->bits = 8;
    if (!t->v || !t->slots)
        return envlog__fail(ENVLOG_NOMEM, "bundle columns");
    return ENVLOG_OK;
}

static void tree_free(cxtree *t)
{
    envlog_free(t->v);
    envlog_free(t->slots);
    memset(t, 0, sizeof *t);
}

static envlog_err more_slots(cxtree *t)
{
    uint32_t n = 2 * t->n_slots;
    slot *s = envlog_calloc(n, sizeof *s);
    if (!s)
        return envlog__fail(ENVLOG_NOMEM, "bundle columns");
    for (uint32_t i = 0; i < t->n_slots; i++) {
        if (!t->slots[i].child)
            continue;
        uint32_t j = slot_of(t->slots[i].key, t->bits + 1);
        while (s[j].child)
            j = (j + 1) & (n - 1);
        s[j] = t->slots[i];
    }
    envlog_free(t->slots);
    t->slots = s;
    t->n_slots = n;
    t->bits++;
    return ENVLOG_OK;
}

static envlog_err new_col(cxtree *t, uint32_t *col)
{
    if (t->n_cols == t->max_cols)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: its records use more than the %u "
                            "columns it lists", t->max_cols);
    *col = t->n_cols++;
    return ENVLOG_OK;
}

static envlog_err new_ctx(cxtree *t, uint32_t depth, uint32_t *id)
{
    cx *x = &t->v[t->n];
    x->nums = NO_COL;
    x->depth = depth;
    x->prev = 0;
    x->last_len = 0;
    envlog_err e = new_col(t, &x->bytes);
    if (!e)
        *id = t->n++;
    return e;
}

/* The child of `parent` by `step`: the parent itself at depth D or once
 * ENVLOG_COLS_CONTEXTS_MAX contexts are made. */
static envlog_err child(cxtree *t, uint32_t parent, uint64_t step, uint32_t *out)
{
    *out = parent;
    if (t->v[parent].depth >= t->depth)
        return ENVLOG_OK;
    uint64_t k = (uint64_t)parent << 48 | step;
    uint32_t i = slot_of(k, t->bits);
    for (; t->slots[i].child; i = (i + 1) & (t->n_slots - 1))
        if (t->slots[i].key == k) {
            *out = t->slots[i].child - 1;
            return ENVLOG_OK;
        }
    if (t->n == ENVLOG_COLS_CONTEXTS_MAX)
        return ENVLOG_OK;
    envlog_err e;
    if (2 * (t->n + 1) > t->n_slots) {
        if ((e = more_slots(t)))
            return e;
        for (i = slot_of(k, t->bits); t->slots[i].child; i = (i + 1) & (t->n_slots - 1))
            ;
    }
    if (!(e = new_ctx(t, t->v[parent].depth + 1, out)))
        t->slots[i] = (slot){k, *out + 1};
    return e;
}

/* The step to a map value: the key's own context when the key (its
 * `u` when an unsigned integer, else NO_KEY) is a small one. */
#define NO_KEY UINT64_MAX
static uint64_t val_step(uint32_t type, uint64_t key)
{
    return STEP_VAL(type, key < VKEY_MAX ? (uint32_t)key + 1 : 0);
}

/* A map whose first key is 0 with an unsigned integer value below
 * TYPE_MAX is typed by it. */
static uint32_t map_type(uint64_t key, const envlog_tok *val)
{
    return key == 0 && val->type == ENVLOG_TOK_UINT && val->u < TYPE_MAX
               ? (uint32_t)val->u + 1
               : 0;
}

static uint64_t zigzag(uint64_t d)
{
    return d << 1 ^ (uint64_t)-(int64_t)(d >> 63);
}

static uint64_t unzigzag(uint64_t z)
{
    return z >> 1 ^ (uint64_t)-(int64_t)(z & 1);
}

/* An unsigned integer whose head has its value in 1 to 8 more bytes: the
 * ones a column holds as a difference. */
static bool is_delta_head(uint8_t ib)
{
    return ib >> 5 == 0 && (ib & 31) >= 24 && (ib & 31) <= 27;
}

/* A byte or text string, or a float: what a column may give again with
 * REPEAT, a byte no CBOR item begins with. */
#define REPEAT 0xfc
static bool repeatable(uint8_t ib)
{
    return ib >> 5 == 2 || ib >> 5 == 3 || (ib >= 0xf9 && ib <= 0xfb);
}

/* Writes or reads one item's own bytes in context `ctx` (the writer from a
 * record into the columns, the reader back) and says in *t what it is. */
typedef envlog_err (*item_fn)(void *side, uint32_t ctx, envlog_tok *t);

/* A container being walked: what its next item is and where it goes. */
typedef struct open_item {
    uint32_t ctx, type;   /* its context; a map's type */
    uint64_t n, i;        /* its items (pairs of a map); those begun */
    envlog_tok_type kind; /* array, map or tag */
    bool value_next;      /* a map's: the next item is a value */
    uint64_t key;         /* a map's: the key of the pair begun (NO_KEY
                             when not an unsigned integer) */
} open_item;

/* One item and everything it holds, depth first, each in its context: the
 * writer and the reader both walk so, and so cannot disagree on where an
 * item goes.  (A stack of the containers open, not recursion: an item is a
 * few bytes, and this runs for each of them.) */
static envlog_err walk(cxtree *tree, item_fn item, void *side)
{
    open_item st[NEST_MAX + 1];
    int top = -1;
    uint32_t ctx = 0;
    envlog_err e;
    for (;;) {
        envlog_tok t;
        if ((e = item(side, ctx, &t)))
            return e;
        if (top >= 0 && st[top].kind == ENVLOG_TOK_MAP) {
            open_item *m = &st[top];
            if (m->value_next)
                m->key = t.type == ENVLOG_TOK_UINT ? t.u : NO_KEY;
            else if (m->i == 1)
                m->type = map_type(m->key, &t);
        }
        uint64_t n = t.type == ENVLOG_TOK_TAG ? 1 : t.u;
        if ((t.type == ENVLOG_TOK_ARRAY || t.type == ENVLOG_TOK_MAP ||
             t.type == ENVLOG_TOK_TAG) && n) {
            if (top == NEST_MAX)
                return envlog__fail(ENVLOG_BAD_DATA, "bundle columns: a record nested more "
                                    "than %d deep", NEST_MAX);
            st[++top] = (open_item){ctx, 0, n, 0, t.type, false, NO_KEY};
        }
        /* The context of the next item: of the innermost container that
         * has one more. */
        for (;; top--) {
            if (top < 0)
                return ENVLOG_OK;
            open_item *o = &st[top];
            uint64_t step;
            if (o->kind == ENVLOG_TOK_MAP && o->value_next) {
                step = val_step(o->type, o->key);
                o->value_next = false;
            } else if (o->i == o->n) {
                continue;
            } else if (o->kind == ENVLOG_TOK_MAP) {
                step = STEP_KEY(o->type);
                o->value_next = true;
                o->i++;
            } else {
                step = o->kind == ENVLOG_TOK_TAG ? STEP_TAGGED
                       : o->i < STEP_ELEMS       ? o->i
                                                 : STEP_ELEMS;
                o->i++;
            }
            if ((e = child(tree, o->ctx, step, &ctx)))
                return e;
            break;
        }
    }
}

/* -------------------------------------------------------------- writing */

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
};

envlog_err envlog_cols_enc_new(envlog_cols_enc **out)
{
    envlog_cols_enc *c = envlog_calloc(1, sizeof *c);
    envlog_err e = c && (c->cols = envlog_calloc(ENVLOG_COLS_MAX, sizeof *c->cols))
                       ? tree_init(&c->t, ENVLOG_COLS_DEPTH, ENVLOG_COLS_MAX)
                       : envlog__fail(ENVLOG_NOMEM, "bundle columns");
    if (!e)
        e = envlog_h128_begin(&c->h);
    if (!e) {
        uint32_t root;
        e = new_ctx(&c->t, 0, &root);
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
    for (uint32_t i = 0; c->cols && i < c->t.n_cols; i++)
        for (chunk *k = c->cols[i].head, *next; k; k = next) {
            next = k->next;
            envlog_free(k);
        }
    envlog_free(c->cols);
    envlog_buf_free(&c->rec);
    envlog_h128_free(&c->h);
    tree_free(&c->t);
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
        chunk *k = envlog_malloc(sizeof *k + cap);
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
    if (x->nums == NO_COL && (e = new_col(&c->t, &x->nums)))
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
    if ((e = walk(&c->t, enc_item, c)))
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

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
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
        for (chunk *k = c->cols[i].head, *next; k; k = next) {
            next = k->next;
            if (!e && k->len)
                e = out->write(out->ctx, k->b, k->len);
            envlog_free(k);
        }
        c->cols[i] = (colw){NULL, NULL, 0};
    }
    return e;
}

/* -------------------------------------------------------------- reading */

typedef struct col_view {
    const uint8_t *p;
    uint64_t len, pos;
} col_view;

typedef struct dec {
    cxtree t;
    col_view *cols;
    envlog_buf rec;
    uint64_t size, pos;  /* the snapshot: stated, framed so far */
} dec;

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
    if (x->nums == NO_COL && (e = new_col(&d->t, &x->nums)))
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
    uint32_t col = d->t.v[ctx].bytes;
    col_view *v = &d->cols[col];
    if (v->pos == v->len)
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u ends before its items do", col);
    envlog_err e;
    uint8_t ib = v->p[v->pos];
    cx *x = &d->t.v[ctx];
    if (ib < 0x18) {
        *t = (envlog_tok){.type = ENVLOG_TOK_UINT, .u = ib};
        v->pos++;
        return dec_put(d, &ib, 1);
    }
    if (is_delta_head(ib)) {
        v->pos++;
        return dec_number(d, ctx, ib, t);
    }
    if (ib == REPEAT) {
        if (!x->last_len)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u repeats an item before "
                                "it holds one", col);
        envlog_pull pl = {x->last, x->last_len, 0};
        v->pos++;
        return (e = envlog_pull_next(&pl, t)) ? e : dec_put(d, pl.p, pl.n);
    }
    envlog_pull pl = {v->p, (size_t)v->len, (size_t)v->pos};
    if ((e = envlog_pull_next(&pl, t)))
        return envlog__fail(e, "bundle: column %u: %s", col, envlog_errmsg());
    if (repeatable(ib)) {
        x->last = v->p + v->pos;
        x->last_len = pl.pos - (size_t)v->pos;
    }
    if ((e = dec_put(d, v->p + v->pos, pl.pos - (size_t)v->pos)))
        return e;
    v->pos = pl.pos;
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

/* The reader's item_fn: the next item of context `ctx` from its columns
 * onto the record being rebuilt.  (An unsigned integer below 24, a map's
 * keys most of all, is half the items: it goes without a call.) */
static envlog_err dec_item(void *side, uint32_t ctx, envlog_tok *t)
{
    dec *d = side;
    col_view *v = &d->cols[d->t.v[ctx].bytes];
    if (v->pos < v->len && v->p[v->pos] < 0x18 && d->rec.len < d->rec.cap && dec_left(d)) {
        uint8_t ib = v->p[v->pos++];
        d->rec.p[d->rec.len++] = ib;
        t->type = ENVLOG_TOK_UINT;
        t->u = ib;
        return ENVLOG_OK;
    }
    return dec_other(d, ctx, t);
}

/* Room in *out for `need` bytes, from `first` doubling up to `size`. */
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
    uint8_t *p = envlog_realloc(*out, (size_t)c);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "reading a bundle");
    *out = p;
    *cap = (size_t)c;
    return ENVLOG_OK;
}

envlog_err envlog_cols_decode(const uint8_t *img, size_t n, uint8_t **out, size_t *n_out)
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
    envlog_err e = tree_init(&d.t, depth, n_cols);
    if (!e && !(d.cols = envlog_malloc(n_cols * sizeof *d.cols)))
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
        e = new_ctx(&d.t, 0, &root);
    for (uint64_t r = 0; !e && r < records; r++) {
        d.rec.len = 0;
        if ((e = walk(&d.t, dec_item, &d)))
            break;
        uint64_t framed = envlog_framed_size(d.pos, d.rec.len);
        if (d.rec.len > ENVLOG_RECORD_MAX || framed > d.size - d.pos) {
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: record %llu of %zu bytes does not fit "
                             "the %llu bytes it states", (unsigned long long)r, d.rec.len,
                             (unsigned long long)d.size);
            break;
        }
        /* (the snapshot takes about what its image does, often less) */
        if ((e = dec_room(&snap, &cap, d.pos + framed, n < (1u << 18) ? (1u << 20) : 4 * n,
                          d.size)))
            break;
        envlog_frame_write(snap, &d.pos, seed, d.rec.p, d.rec.len, NULL);
    }
    if (!e && d.pos != d.size)
        e = envlog__fail(ENVLOG_BAD_DATA, "bundle: its records take %llu bytes, not the %llu "
                         "it states", (unsigned long long)d.pos, (unsigned long long)d.size);
    for (uint32_t i = 0; !e && i < n_cols; i++)
        if (d.cols[i].pos != d.cols[i].len)
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: column %u holds %llu bytes its records "
                             "do not use", i,
                             (unsigned long long)(d.cols[i].len - d.cols[i].pos));
    if (!e) {
        envlog_hash128 h = envlog_hash128_bytes(snap, (size_t)d.pos);
        if (memcmp(h.b, img + 16, 16))
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: the snapshot its columns give does not "
                             "match its hash");
    }
    envlog_buf_free(&d.rec);
    envlog_free(d.cols);
    tree_free(&d.t);
    if (e) {
        envlog_free(snap);
        return e;
    }
    *out = snap;
    *n_out = (size_t)d.pos;
    return ENVLOG_OK;
}
