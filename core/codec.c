/* SPDX-License-Identifier: MIT */
/*
 * codec.c - the table-driven CBOR codec of the event model.
 *
 * One walker over schema.c's tables encodes a C struct to a CBOR map with
 * small-integer keys and decodes it back in place: strings are copied into a
 * reusable arena, byte strings point into the payload.  Unknown keys are
 * skipped (forward compatibility); every count read from data is checked
 * against the bytes left before memory is taken for it.
 */
#include "core_int.h"

#include <limits.h>
#include <string.h>

#define AT(base, off, type) ((type *)(void *)((char *)(base) + (off)))
typedef const char *cstr;
typedef const void *cptr;
#define CAT(base, off, type) ((const type *)(const void *)((const char *)(base) + (off)))

/* ------------------------------------------------------ fast lanes
 *
 * Recording a tune writes about 200 item heads; these write the common short
 * forms (small keys and counts, short strings, single floats) in place, the
 * same bytes cbor_io.c's envlog_enc_* functions write, and hand everything
 * else to them. */

/* Room for a key head (2 bytes: keys are below 256) and any fixed-size
 * value: a 9-byte number or a 17-byte hash. */
#define HEAD_ROOM 20

static inline envlog_err room(envlog_buf *b, size_t n)
{
    return b->cap - b->len >= n ? ENVLOG_OK : envlog_buf_reserve(b, n);
}

/* Writes a head of major type `major` at `w` in the shortest form (as
 * cbor_io.c does) and returns the byte after it.  Writing through a local
 * cursor, not b->len, lets the compiler keep it in a register: a byte store
 * through b->p may alias b->len. */
static inline uint8_t *put_head(uint8_t *w, uint8_t major, uint64_t v)
{
    if (v < 24) {
        *w = (uint8_t)(major | v);
        return w + 1;
    }
    if (v <= 0xff) {
        w[0] = major | 24;
        w[1] = (uint8_t)v;
        return w + 2;
    }
    if (v <= 0xffff) {
        w[0] = major | 25;
        w[1] = (uint8_t)(v >> 8);
        w[2] = (uint8_t)v;
        return w + 3;
    }
    if (v <= 0xffffffffu) {
        w[0] = major | 26;
        for (int i = 0; i < 4; i++)
            w[1 + i] = (uint8_t)(v >> (24 - 8 * i));
        return w + 5;
    }
    w[0] = major | 27;
    for (int i = 0; i < 8; i++)
        w[1 + i] = (uint8_t)(v >> (56 - 8 * i));
    return w + 9;
}

/* A double in its preferred form, as envlog_enc_double writes it. */
static inline uint8_t *put_f64(uint8_t *w, double v)
{
    float f = (float)v;
    if ((double)f == v || v != v) {
        uint32_t u;
        memcpy(&u, &f, 4);
        w[0] = 0xfa;
        for (int i = 0; i < 4; i++)
            w[1 + i] = (uint8_t)(u >> (24 - 8 * i));
        return w + 5;
    }
    uint64_t u;
    memcpy(&u, &v, 8);
    w[0] = 0xfb;
    for (int i = 0; i < 8; i++)
        w[1 + i] = (uint8_t)(u >> (56 - 8 * i));
    return w + 9;
}

/* An unsigned head, room for 9 bytes having been made. */
static inline envlog_err put_uint(envlog_buf *b, uint8_t major, uint64_t v)
{
    b->len = (size_t)(put_head(b->p + b->len, major, v) - b->p);
    return ENVLOG_OK;
}

/* True when the `n` bytes are all ASCII and none is NUL: then they are
 * valid UTF-8 without asking envlog_utf8_valid. */
static inline bool plain_ascii(const char *s, size_t n)
{
    const uint64_t lo = 0x0101010101010101ULL, hi = 0x8080808080808080ULL;
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        acc |= w | ((w - lo) & ~w);
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        acc |= c ? c : 0x80;
    }
    return !(acc & hi);
}

static inline bool text_valid(const char *s, size_t n)
{
    return plain_ascii(s, n) || envlog_utf8_valid(s, n);
}

static bool field_present(const envlog_field *f, const void *in, envlog_level level)
{
    if (f->full_only && level < ENVLOG_LEVEL_FULL)
        return false;
    if (f->present_off != SIZE_MAX && !*CAT(in, f->present_off, bool))
        return false;
    switch (f->type) {
    case ENVLOG_F_TEXT: return *CAT(in, f->off, cstr) != NULL;
    case ENVLOG_F_BYTES:
    case ENVLOG_F_RAW:
    case ENVLOG_F_RECORD: return CAT(in, f->off, envlog_bytes)->size != 0;
    case ENVLOG_F_TEXTS:
    case ENVLOG_F_F64S:
    case ENVLOG_F_OBJS: return *CAT(in, f->count_off, size_t) != 0;
    default: return true;
    }
}

/* Copies a string of fewer than 24 bytes with a few fixed-size moves (each
 * within the string) and returns the OR of its bytes: bit 7 of each byte of
 * the result is clear when every byte is ASCII. */
static inline uint64_t copy_short(uint8_t *d, const char *s, size_t n)
{
    uint64_t a, z = 0;
    uint32_t x, y;
    if (n >= 8) {
        memcpy(&a, s, 8);
        memcpy(d, &a, 8);
        z = a;
        if (n > 16) {
            memcpy(&a, s + 8, 8);
            memcpy(d + 8, &a, 8);
            z |= a;
        }
        memcpy(&a, s + n - 8, 8);
        memcpy(d + n - 8, &a, 8);
        return z | a;
    }
    if (n >= 4) {
        memcpy(&x, s, 4);
        memcpy(&y, s + n - 4, 4);
        memcpy(d, &x, 4);
        memcpy(d + n - 4, &y, 4);
        return x | y;
    }
    for (size_t i = 0; i < n; i++)
        z |= (uint8_t)(d[i] = (uint8_t)s[i]);
    return z;
}

static envlog_err enc_text_checked(envlog_buf *b, const char *s, const char *what)
{
    size_t n = strlen(s);
    if (n < 24) {
        envlog_err e = room(b, 1 + n);
        if (e)
            return e;
        /* strlen found no NUL before n: ASCII bytes are valid UTF-8. */
        uint8_t *d = b->p + b->len;
        if ((copy_short(d + 1, s, n) & 0x8080808080808080ULL) &&
            !envlog_utf8_valid(s, n))
            return envlog__fail(ENVLOG_INVALID_ARG, "%s is not valid UTF-8", what);
        d[0] = (uint8_t)(0x60 | n);
        b->len += 1 + n;
        return ENVLOG_OK;
    }
    if (!text_valid(s, n))
        return envlog__fail(ENVLOG_INVALID_ARG, "%s is not valid UTF-8", what);
    return envlog_enc_text(b, s, n);
}

static inline envlog_err enc_f64(envlog_buf *b, double v)
{
    envlog_err e = room(b, 9);
    if (e)
        return e;
    b->len = (size_t)(put_f64(b->p + b->len, v) - b->p);
    return ENVLOG_OK;
}

static envlog_err enc_struct(envlog_buf *b, const envlog_schema *s,
                             const void *in, envlog_level level, int depth);

/* Encodes field `f` of a map at depth `depth` as a key and its value, or
 * writes nothing and sets *absent when the value is empty (field_present's
 * per-type rule, checked here so each field is dispatched once).  Level and
 * presence flag are the caller's to check. */
static envlog_err enc_field(envlog_buf *b, const envlog_field *f, const void *in,
                            envlog_level level, int depth, bool *absent)
{
    /* Room for the key and a value head: the fixed-size values below are
     * written in place. */
    envlog_err e = room(b, HEAD_ROOM);
    if (e)
        return e;
    size_t mark = b->len;
    uint8_t *w = put_head(b->p + mark, 0x00, f->key);
    b->len = (size_t)(w - b->p);
    switch ((envlog_fty)f->type) {
    case ENVLOG_F_U64: return put_uint(b, 0x00, *CAT(in, f->off, uint64_t));
    case ENVLOG_F_U32: return put_uint(b, 0x00, *CAT(in, f->off, uint32_t));
    case ENVLOG_F_I64: {
        int64_t v = *CAT(in, f->off, int64_t);
        return put_uint(b, v >= 0 ? 0x00 : 0x20,
                        v >= 0 ? (uint64_t)v : (uint64_t)(-(v + 1)));
    }
    case ENVLOG_F_ENUM: {
        int v = *CAT(in, f->off, int);
        size_t n = 0;
        while (f->enum_names && f->enum_names[n])
            n++;
        if (v < 0 || (size_t)v >= n)
            return envlog__fail(ENVLOG_INVALID_ARG, "%s %d is out of range",
                                f->name, v);
        return put_uint(b, 0x00, (uint64_t)v);
    }
    case ENVLOG_F_F64:
        b->len = (size_t)(put_f64(w, *CAT(in, f->off, double)) - b->p);
        return ENVLOG_OK;
    case ENVLOG_F_BOOL:
        *w = *CAT(in, f->off, bool) ? 0xf5 : 0xf4;
        b->len++;
        return ENVLOG_OK;
    case ENVLOG_F_TEXT: {
        const char *v = *CAT(in, f->off, cstr);
        if (!v)
            goto empty;
        return enc_text_checked(b, v, f->name);
    }
    case ENVLOG_F_BYTES: {
        const envlog_bytes *x = CAT(in, f->off, envlog_bytes);
        if (!x->size)
            goto empty;
        if (!x->data)
            return envlog__fail(ENVLOG_INVALID_ARG, "%s has a size but no data",
                                f->name);
        return envlog_enc_bytes(b, x->data, x->size);
    }
    case ENVLOG_F_RAW:
    case ENVLOG_F_RECORD: {
        const envlog_bytes *x = CAT(in, f->off, envlog_bytes);
        if (!x->size)
            goto empty;
        /* The item goes at depth + 1; a record stored inline counts from
         * its own map (the nesting rule of core_int.h). */
        int d = f->type == ENVLOG_F_RECORD ? 0 : depth + 1;
        envlog_err ce = x->data ? envlog_cbor_check_at(x->data, x->size, d) : ENVLOG_BAD_DATA;
        if (ce == ENVLOG_NOMEM)
            return ce;
        if (ce || (f->type == ENVLOG_F_RECORD && (*(const uint8_t *)x->data >> 5) != 5))
            return envlog__fail(ENVLOG_INVALID_ARG,
                                "%s is not one well-formed CBOR %s (%s)", f->name,
                                f->type == ENVLOG_F_RECORD ? "map" : "item",
                                ce ? envlog_errmsg() : "not a map");
        return envlog_buf_append(b, x->data, x->size);
    }
    case ENVLOG_F_H128:
        *w = 0x50; /* a 16-byte string */
        memcpy(w + 1, CAT(in, f->off, envlog_id128)->b, 16);
        b->len += 17;
        return ENVLOG_OK;
    case ENVLOG_F_STAMP: {
        const envlog_stamp *st = CAT(in, f->off, envlog_stamp);
        if ((e = envlog_enc_array(b, 3)) ||
            (e = envlog_enc_bytes(b, st->session.b, 16)) ||
            (e = envlog_enc_uint(b, st->seq)))
            return e;
        return envlog_enc_uint(b, st->offset_ns);
    }
    case ENVLOG_F_TEXTS:
    case ENVLOG_F_F64S:
    case ENVLOG_F_OBJS: break;
    }
    size_t n = *CAT(in, f->count_off, size_t);
    if (!n)
        goto empty;
    const void *arr = *CAT(in, f->off, cptr);
    if (!arr)
        return envlog__fail(ENVLOG_INVALID_ARG, "%s has %zu items but no array",
                            f->name, n);
    if ((e = put_uint(b, 0x80, n)))
        return e;
    for (size_t i = 0; i < n; i++) {
        if (f->type == ENVLOG_F_TEXTS) {
            const char *s = ((const char *const *)arr)[i];
            if (!s)
                return envlog__fail(ENVLOG_INVALID_ARG, "%s[%zu] is NULL",
                                    f->name, i);
            e = enc_text_checked(b, s, f->name);
        } else if (f->type == ENVLOG_F_F64S) {
            e = enc_f64(b, ((const double *)arr)[i]);
        } else {
            e = enc_struct(b, f->sub, (const char *)arr + i * f->sub->size, level,
                           depth + 2);
        }
        if (e)
            return e;
    }
    return ENVLOG_OK;
empty:
    b->len = mark;
    *absent = true;
    return ENVLOG_OK;
}

static size_t count_fields(const envlog_schema *s, const void *in, envlog_level level)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_fields; i++)
        n += field_present(&s->fields[i], in, level);
    return n;
}

/* Encodes the present fields; *count says how many there were. */
static envlog_err enc_fields(envlog_buf *b, const envlog_schema *s,
                             const void *in, envlog_level level, int depth,
                             size_t *count)
{
    size_t n = 0;
    for (const envlog_field *f = s->fields, *end = f + s->n_fields; f < end; f++) {
        if (f->full_only && level < ENVLOG_LEVEL_FULL)
            continue;
        if (f->present_off != SIZE_MAX && !*CAT(in, f->present_off, bool))
            continue;
        bool absent = false;
        envlog_err e = enc_field(b, f, in, level, depth, &absent);
        if (e)
            return e;
        n += !absent;
    }
    *count = n;
    return ENVLOG_OK;
}

/* A map of at most 23 pairs has a one-byte head: it is reserved first and
 * filled in once the fields are written, so the fields are walked once. */
static envlog_err enc_struct(envlog_buf *b, const envlog_schema *s,
                             const void *in, envlog_level level, int depth)
{
    envlog_err e;
    size_t n;
    if (s->n_fields >= 24) {
        if ((e = envlog_enc_map(b, count_fields(s, in, level))))
            return e;
        return enc_fields(b, s, in, level, depth, &n);
    }
    if ((e = room(b, 1)))
        return e;
    size_t at = b->len++;
    if ((e = enc_fields(b, s, in, level, depth, &n)))
        return e;
    b->p[at] = (uint8_t)(0xa0 | n);
    return ENVLOG_OK;
}

envlog_err envlog_struct_encode(envlog_buf *b, const envlog_schema *s,
                                const void *in, envlog_level level)
{
    return enc_struct(b, s, in, level, 0);
}

envlog_err envlog_event_encode(envlog_buf *b, envlog_kind kind,
                               const envlog_stamp *stamp, envlog_effect effect,
                               envlog_level level, const void *body)
{
    const envlog_schema *s = envlog_schema_of(kind);
    if (!s)
        return envlog__fail(ENVLOG_INVALID_ARG, "kind %d has no schema", kind);
    /* The writer never writes a record its readers refuse. */
    const char *why = envlog_record_problem(kind, effect, body, ENVLOG_TRIALS_OF_BODY);
    if (why)
        return envlog__fail(ENVLOG_INVALID_ARG, "%s record: %s", s->name, why);
    b->len = 0;
    envlog_err e;
    size_t n, at = 0;
    bool late_head = 4 + s->n_fields < 24; /* as in enc_struct */
    if (late_head) {
        if ((e = room(b, 1)))
            return e;
        b->len = 1;
    } else if ((e = envlog_enc_map(b, 4 + count_fields(s, body, level)))) {
        return e;
    }
    /* The envelope: four small keys and four numbers. */
    if ((e = room(b, 4 * (1 + 9))))
        return e;
    uint8_t *w = b->p + b->len;
    w = put_head(w, 0x00, ENVLOG_K_KIND);
    w = put_head(w, 0x00, (uint64_t)kind);
    w = put_head(w, 0x00, ENVLOG_K_SEQ);
    w = put_head(w, 0x00, stamp->seq);
    w = put_head(w, 0x00, ENVLOG_K_OFFSET);
    w = put_head(w, 0x00, stamp->offset_ns);
    w = put_head(w, 0x00, ENVLOG_K_EFFECT);
    w = put_head(w, 0x00, (uint64_t)effect);
    b->len = (size_t)(w - b->p);
    if ((e = enc_fields(b, s, body, level, 0, &n)))
        return e;
    if (late_head)
        b->p[at] = (uint8_t)(0xa0 | (4 + n));
    return ENVLOG_OK;
}

/* ---------------------------------------------------------------- decoding
 *
 * One walker serves the full reader and the fold (envlog(5): whatever the
 * fold reads, the full reader accepts exactly the same records).  Both read
 * every key of every map and check every value against its field's type;
 * the fold only stores less: a field it does not need is checked where it
 * lies (out == NULL below), never copied.  Then both apply the same checks
 * across fields (validate()). */

/* What a walk has seen across fields, for validate(). */
typedef struct dec_facts {
    uint64_t max_index;   /* the largest candidate index a trial names */
    bool any_index;
} dec_facts;

typedef struct dec_ctx {
    envlog_arena *a;
    dec_facts facts;
} dec_ctx;

static envlog_err bad(const envlog_field *f, const char *what)
{
    return envlog__fail(ENVLOG_BAD_DATA, "field %s: %s", f->name, what);
}

/* The heads pull() leaves: short arrays and maps (a trial list, a trial),
 * booleans and 16-byte hashes read in place, everything else by
 * envlog_pull_next(), which reads the same tokens. */
static envlog_err pull_rest(envlog_pull *p, envlog_tok *t)
{
    if (p->pos < p->n) {
        const uint8_t *s = p->p + p->pos;
        size_t left = p->n - p->pos;
        uint8_t ib = s[0];
        if (ib >= 0x80 && ib < 0xb8 && (ib < 0x98 || ib >= 0xa0)) {
            t->type = ib < 0xa0 ? ENVLOG_TOK_ARRAY : ENVLOG_TOK_MAP;
            t->u = ib & 31;
            p->pos++;
            return ENVLOG_OK;
        }
        if (ib == 0xf4 || ib == 0xf5) {
            t->type = ENVLOG_TOK_BOOL;
            t->u = 0;
            t->b = ib == 0xf5;
            p->pos++;
            return ENVLOG_OK;
        }
        if (ib >= 0x40 && ib < 0x58 && (size_t)(ib - 0x40) < left) {
            t->type = ENVLOG_TOK_BYTES;
            t->u = 0;
            t->data = s + 1;
            t->len = (size_t)(ib - 0x40);
            p->pos += 1 + t->len;
            return ENVLOG_OK;
        }
    }
    return envlog_pull_next(p, t);
}

/* envlog_pull_next(), with the heads a record is mostly made of (small
 * integers, short text, single floats) read in place; the same tokens, and
 * everything else is left to pull_rest(). */
static inline envlog_err pull(envlog_pull *p, envlog_tok *t)
{
    if (p->pos < p->n) {
        const uint8_t *s = p->p + p->pos;
        size_t left = p->n - p->pos;
        uint8_t ib = s[0];
        if (ib < 0x18) {
            t->type = ENVLOG_TOK_UINT;
            t->u = ib;
            p->pos++;
            return ENVLOG_OK;
        }
        if (ib == 0x18 && left >= 2) {
            t->type = ENVLOG_TOK_UINT;
            t->u = s[1];
            p->pos += 2;
            return ENVLOG_OK;
        }
        if (ib >= 0x60 && ib < 0x78 && (size_t)(ib - 0x60) < left) {
            t->type = ENVLOG_TOK_TEXT;
            t->u = 0;
            t->data = s + 1;
            t->len = (size_t)(ib - 0x60);
            p->pos += 1 + t->len;
            return ENVLOG_OK;
        }
        if (ib == 0xfa && left >= 5) {
            uint32_t u = (uint32_t)s[1] << 24 | (uint32_t)s[2] << 16 |
                         (uint32_t)s[3] << 8 | s[4];
            float f;
            memcpy(&f, &u, 4);
            t->type = ENVLOG_TOK_FLOAT;
            t->u = 0;
            t->f = f;
            p->pos += 5;
            return ENVLOG_OK;
        }
    }
    return pull_rest(p, t);
}

/* A text value; copied into the arena when `out` is not NULL. */
static envlog_err dec_text(envlog_pull *p, const envlog_field *f,
                           envlog_arena *a, const char **out)
{
    envlog_tok t;
    envlog_err e = pull(p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_TEXT)
        return bad(f, "expected a text string");
    if (!text_valid((const char *)t.data, t.len))
        return bad(f, "text is not valid UTF-8 or holds a NUL");
    if (!out)
        return ENVLOG_OK;
    char *s = envlog_arena_alloc(a, t.len + 1);
    if (!s)
        return envlog__fail(ENVLOG_NOMEM, "decoding %s", f->name);
    memcpy(s, t.data, t.len);
    s[t.len] = 0;
    *out = s;
    return ENVLOG_OK;
}

static envlog_err dec_double(const envlog_tok *t, const envlog_field *f, double *out)
{
    double v;
    if (t->type == ENVLOG_TOK_FLOAT)
        v = t->f;
    else if (t->type == ENVLOG_TOK_UINT)
        v = (double)t->u;
    else if (t->type == ENVLOG_TOK_NEGINT)
        v = -1.0 - (double)t->u;
    else
        return bad(f, "expected a number");
    if (out)
        *out = v;
    return ENVLOG_OK;
}

static envlog_err dec_h128(envlog_pull *p, const envlog_field *f, envlog_id128 *out)
{
    envlog_tok t;
    envlog_err e = pull(p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_BYTES || t.len != 16)
        return bad(f, "expected a 16-byte string");
    if (out)
        memcpy(out->b, t.data, 16);
    return ENVLOG_OK;
}

static envlog_err dec_uint(envlog_pull *p, const envlog_field *f, uint64_t max,
                           uint64_t *out)
{
    envlog_tok t;
    envlog_err e = pull(p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_UINT || t.u > max)
        return bad(f, "expected an unsigned integer in range");
    *out = t.u;
    return ENVLOG_OK;
}

static uint64_t enum_count(const envlog_field *f)
{
    uint64_t n = 0;
    while (f->enum_names && f->enum_names[n])
        n++;
    return n;
}

/* An array head whose count is checked against the bytes left (each item
 * takes at least one byte) before its storage is allocated (when stored). */
static envlog_err dec_array(envlog_pull *p, const envlog_field *f, size_t elem,
                            envlog_arena *a, bool store, void **arr, size_t *n)
{
    envlog_tok t;
    envlog_err e = pull(p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_ARRAY)
        return bad(f, "expected an array");
    if (t.u > p->n - p->pos)
        return bad(f, "array claims more items than bytes left");
    *n = (size_t)t.u;
    *arr = NULL;
    if (!store || !*n)
        return ENVLOG_OK;
    *arr = envlog_arena_alloc(a, *n * elem);
    if (!*arr)
        return envlog__fail(ENVLOG_NOMEM, "decoding %s", f->name);
    memset(*arr, 0, *n * elem);
    return ENVLOG_OK;
}

static envlog_err dec_pairs(envlog_pull *p, uint64_t pairs, const envlog_schema *s,
                            void *out, dec_ctx *c, int depth, envlog_keyset *ks,
                            envlog_record *env);

/* envlog_keyset_free(), called only when the set took memory (a map of
 * small keys takes none). */
static inline void keys_done(envlog_keyset *ks)
{
    if (ks->v || ks->slots)
        envlog_keyset_free(ks);
}

/* Decodes the value of field `f`, which lies at depth `depth`, into `out`;
 * with `out` NULL only checks it. */
static envlog_err dec_field(envlog_pull *p, const envlog_field *f, void *out,
                            dec_ctx *c, int depth)
{
    envlog_tok t;
    envlog_err e;
    uint64_t u = 0;
    switch ((envlog_fty)f->type) {
    case ENVLOG_F_U64:
    case ENVLOG_F_U32:
        if ((e = dec_uint(p, f, f->type == ENVLOG_F_U32 ? UINT32_MAX : UINT64_MAX, &u)))
            return e;
        if (f->candidate_index) {
            c->facts.any_index = true;
            if (u > c->facts.max_index)
                c->facts.max_index = u;
        }
        if (out && f->type == ENVLOG_F_U32)
            *AT(out, f->off, uint32_t) = (uint32_t)u;
        else if (out)
            *AT(out, f->off, uint64_t) = u;
        if (out && f->present_off != SIZE_MAX)
            *AT(out, f->present_off, bool) = true;
        return ENVLOG_OK;
    case ENVLOG_F_ENUM:
        if ((e = pull(p, &t)))
            return e;
        if (t.type != ENVLOG_TOK_UINT || t.u >= enum_count(f))
            return bad(f, "not one of its values");
        if (out)
            *AT(out, f->off, int) = (int)t.u;
        return ENVLOG_OK;
    case ENVLOG_F_I64: {
        int64_t v;
        if ((e = pull(p, &t)))
            return e;
        if (t.type == ENVLOG_TOK_UINT && t.u <= INT64_MAX)
            v = (int64_t)t.u;
        else if (t.type == ENVLOG_TOK_NEGINT && t.u <= INT64_MAX)
            v = -1 - (int64_t)t.u;
        else
            return bad(f, "expected a signed 64-bit integer");
        if (out)
            *AT(out, f->off, int64_t) = v;
        return ENVLOG_OK;
    }
    case ENVLOG_F_F64:
        if ((e = pull(p, &t)))
            return e;
        return dec_double(&t, f, out ? AT(out, f->off, double) : NULL);
    case ENVLOG_F_BOOL:
        if ((e = pull(p, &t)))
            return e;
        if (t.type != ENVLOG_TOK_BOOL)
            return bad(f, "expected a boolean");
        if (out)
            *AT(out, f->off, bool) = t.b;
        return ENVLOG_OK;
    case ENVLOG_F_TEXT:
        return dec_text(p, f, c->a, out ? AT(out, f->off, const char *) : NULL);
    case ENVLOG_F_BYTES:
        if ((e = pull(p, &t)))
            return e;
        if (t.type != ENVLOG_TOK_BYTES)
            return bad(f, "expected a byte string");
        if (out) {
            AT(out, f->off, envlog_bytes)->data = t.data;
            AT(out, f->off, envlog_bytes)->size = t.len;
        }
        return ENVLOG_OK;
    case ENVLOG_F_RAW:
    case ENVLOG_F_RECORD: {
        size_t start = p->pos;
        /* A record stored inline counts its depth from its own map. */
        int d = f->type == ENVLOG_F_RECORD ? 0 : depth;
        if ((e = pull(p, &t)) || (e = envlog_pull_skip_at(p, &t, d)))
            return e;
        if (f->type == ENVLOG_F_RECORD && t.type != ENVLOG_TOK_MAP)
            return bad(f, "expected a record (a map)");
        if (out) {
            AT(out, f->off, envlog_bytes)->data = p->p + start;
            AT(out, f->off, envlog_bytes)->size = p->pos - start;
        }
        return ENVLOG_OK;
    }
    case ENVLOG_F_H128: return dec_h128(p, f, out ? AT(out, f->off, envlog_id128) : NULL);
    case ENVLOG_F_STAMP: {
        envlog_stamp tmp, *st = out ? AT(out, f->off, envlog_stamp) : &tmp;
        if ((e = pull(p, &t)))
            return e;
        if (t.type != ENVLOG_TOK_ARRAY || t.u != 3)
            return bad(f, "expected a stamp [session, seq, offset]");
        if ((e = dec_h128(p, f, &st->session)) ||
            (e = dec_uint(p, f, UINT64_MAX, &st->seq)) ||
            (e = dec_uint(p, f, UINT64_MAX, &st->offset_ns)))
            return e;
        if (out && f->present_off != SIZE_MAX)
            *AT(out, f->present_off, bool) = true;
        return ENVLOG_OK;
    }
    case ENVLOG_F_TEXTS:
    case ENVLOG_F_F64S:
    case ENVLOG_F_OBJS: break;
    }
    if (depth + 1 > ENVLOG_CBOR_MAX_DEPTH)
        return bad(f, "nested too deep");
    size_t elem = f->type == ENVLOG_F_TEXTS  ? sizeof(char *)
                  : f->type == ENVLOG_F_F64S ? sizeof(double)
                                             : f->sub->size;
    void *arr = NULL;
    size_t n = 0;
    if ((e = dec_array(p, f, elem, c->a, out != NULL, &arr, &n)))
        return e;
    for (size_t i = 0; i < n; i++) {
        void *item = arr ? (char *)arr + i * elem : NULL;
        if (f->type == ENVLOG_F_TEXTS) {
            e = dec_text(p, f, c->a, (const char **)item);
        } else if (f->type == ENVLOG_F_F64S) {
            if (!(e = pull(p, &t)))
                e = dec_double(&t, f, (double *)item);
        } else if (!(e = pull(p, &t))) {
            if (t.type != ENVLOG_TOK_MAP)
                return bad(f, "expected a map");
            envlog_keyset ks;
            envlog_keyset_init(&ks);
            e = dec_pairs(p, t.u, f->sub, item, c, depth + 1, &ks, NULL);
            keys_done(&ks);
        }
        if (e)
            return e;
    }
    if (out) {
        *AT(out, f->off, void *) = arr;
        *AT(out, f->count_off, size_t) = n;
    }
    return ENVLOG_OK;
}

/* envlog_schema_field() for the keys of one map, read in turn: a record's
 * fields come in the order of its schema's table (absent ones left out), so
 * the search starts after the field found last, wrapping around, and nearly
 * always stops at once.  Keys are unique within a schema, so the field
 * found is the one envlog_schema_field() finds. */
static inline const envlog_field *field_of(const envlog_schema *s, uint64_t key,
                                           size_t *hint)
{
    size_t n = s->n_fields, h = *hint < n ? *hint : 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = h + k < n ? h + k : h + k - n;
        if (s->fields[i].key == key) {
            *hint = i + 1;
            return &s->fields[i];
        }
    }
    return NULL;
}

/* An envelope key (1 seq, 2 offset, 3 effect) of an event record. */
static envlog_err envelope_key(envlog_pull *p, uint64_t key, envlog_record *rec)
{
    envlog_tok t;
    envlog_err e = pull(p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_UINT || (key == ENVLOG_K_EFFECT && t.u > 1))
        return envlog__fail(ENVLOG_BAD_DATA, "envelope key %llu: bad value",
                            (unsigned long long)key);
    if (key == ENVLOG_K_SEQ)
        rec->stamp.seq = t.u;
    else if (key == ENVLOG_K_OFFSET)
        rec->stamp.offset_ns = t.u;
    else
        rec->effect = (envlog_effect)t.u;
    return ENVLOG_OK;
}

/* Reads `pairs` key/value pairs of a map at depth `depth`: keys the schema
 * knows are decoded into `out` (with `out` NULL, or a field that is not
 * marked fold when c->fold_only, only checked), the envelope into `env`
 * when it is an event record, others checked and skipped.  Every key is
 * added to `ks`: a map never holds a key twice. */
static envlog_err dec_pairs_x(envlog_pull *p, uint64_t pairs, const envlog_schema *s,
                              void *out, dec_ctx *c, int depth, envlog_keyset *ks,
                              envlog_record *env, bool fold_only)
{
    size_t hint = 0; /* where field_of looks first */
    if (pairs > (p->n - p->pos) / 2)
        return envlog__fail(ENVLOG_BAD_DATA,
                            "map claims more pairs than bytes left");
    if (depth > ENVLOG_CBOR_MAX_DEPTH)
        return envlog__fail(ENVLOG_BAD_DATA, "CBOR nested deeper than %d levels",
                            ENVLOG_CBOR_MAX_DEPTH);
    for (uint64_t i = 0; i < pairs; i++) {
        envlog_tok k, v;
        envlog_key key;
        size_t start = p->pos;
        envlog_err e;
        if (start < p->n && p->p[start] < 0x18) {
            uint8_t ib = p->p[start];
            /* A small key, as envlog_key_read and envlog_keyset_add take
             * it: one bit of the set's small keys. */
            uint64_t bit = (uint64_t)1 << ib;
            if (ks->small & bit)
                return envlog__fail(ENVLOG_BAD_DATA, "map holds key %llu twice",
                                    (unsigned long long)ib);
            ks->small |= bit;
            k.type = ENVLOG_TOK_UINT;
            k.u = ib;
            p->pos++;
        } else {
            e = pull(p, &k);
            if (!e)
                e = envlog_key_read(p, &k, start, depth + 1, &key);
            if (!e)
                e = envlog_keyset_add(ks, &key);
            if (e)
                return e;
        }
        const envlog_field *f =
            s && k.type == ENVLOG_TOK_UINT ? field_of(s, k.u, &hint) : NULL;
        if (f)
            e = dec_field(p, f, fold_only && !f->fold ? NULL : out, c, depth + 1);
        else if (env && k.type == ENVLOG_TOK_UINT && k.u < ENVLOG_K_BODY0)
            e = envelope_key(p, k.u, env);
        else if (!(e = pull(p, &v)))
            e = envlog_pull_skip_at(p, &v, depth + 1); /* a key this version
                                                           does not know */
        if (e)
            return e;
    }
    return ENVLOG_OK;
}

static envlog_err dec_pairs(envlog_pull *p, uint64_t pairs, const envlog_schema *s,
                            void *out, dec_ctx *c, int depth, envlog_keyset *ks,
                            envlog_record *env)
{
    return dec_pairs_x(p, pairs, s, out, c, depth, ks, env, false);
}

envlog_err envlog_struct_decode(envlog_pull *pull, const envlog_tok *t,
                                const envlog_schema *s, void *out,
                                envlog_arena *arena)
{
    if (t->type != ENVLOG_TOK_MAP)
        return envlog__fail(ENVLOG_BAD_DATA, "%s: expected a map", s->name);
    dec_ctx c = {arena, {0, false}};
    envlog_keyset ks;
    envlog_keyset_init(&ks);
    envlog_err e = dec_pairs(pull, t->u, s, out, &c, 0, &ks, NULL);
    keys_done(&ks);
    return e;
}

/* The rules across fields (envlog_record_problem), with what the walk saw
 * of the trials, which the fold does not keep. */
static envlog_err validate(const envlog_record *rec, const dec_facts *fx)
{
    const char *why = envlog_record_problem(rec->kind, rec->effect, &rec->u,
                                            fx->any_index ? (int64_t)fx->max_index : -1);
    return why ? envlog__fail(ENVLOG_BAD_DATA, "%s record: %s",
                              envlog_kind_name(rec->kind), why)
               : ENVLOG_OK;
}

static envlog_err event_decode(const uint8_t *data, size_t n, envlog_record *rec,
                               envlog_arena *arena, bool fold)
{
    envlog_pull p = {data, n, 0};
    envlog_tok t, k, v;
    envlog_err e;
    memset(&rec->u, 0, sizeof rec->u);
    rec->effect = ENVLOG_OBSERVED;
    rec->stamp.seq = rec->stamp.offset_ns = 0;
    rec->payload.data = data;
    rec->payload.size = n;
    if ((e = pull(&p, &t)))
        return e;
    if (t.type != ENVLOG_TOK_MAP || t.u == 0)
        return envlog__fail(ENVLOG_BAD_DATA, "a record is a non-empty map");
    /* envlog(5): the kind is the first key, so the body can be read in one
     * pass with the right schema. */
    if ((e = pull(&p, &k)) || (e = pull(&p, &v)))
        return e;
    if (k.type != ENVLOG_TOK_UINT || k.u != ENVLOG_K_KIND ||
        v.type != ENVLOG_TOK_UINT || v.u > INT_MAX)
        return envlog__fail(ENVLOG_BAD_DATA, "a record's first key is its kind");
    rec->kind = (envlog_kind)v.u;
    const envlog_schema *s = envlog_schema_of(rec->kind);
    if (rec->kind == ENVLOG_KIND_TUNE)
        rec->u.tune.winner = -1;
    dec_ctx c = {arena, {0, false}};
    envlog_keyset ks;
    envlog_keyset_init(&ks);
    ks.small = 1; /* key 0, the kind */
    /* The fold stores only the fields it reads, and of the kinds whose
     * other fields it never looks at; it checks all of them all the same. */
    bool fold_only = fold && rec->kind != ENVLOG_KIND_SESSION &&
                     rec->kind != ENVLOG_KIND_FORGET && rec->kind != ENVLOG_KIND_USER;
    e = dec_pairs_x(&p, t.u - 1, s, &rec->u, &c, 0, &ks, rec, fold_only);
    keys_done(&ks);
    if (e)
        return e;
    if (p.pos != n)
        return envlog__fail(ENVLOG_BAD_DATA, "%zu bytes follow the record", n - p.pos);
    return validate(rec, &c.facts);
}

envlog_err envlog_event_decode(const uint8_t *data, size_t n, envlog_record *rec,
                               envlog_arena *arena)
{
    return event_decode(data, n, rec, arena, false);
}

envlog_err envlog_event_decode_fold(const uint8_t *data, size_t n, envlog_record *rec,
                                    envlog_arena *arena)
{
    return event_decode(data, n, rec, arena, true);
}
