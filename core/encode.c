/* SPDX-License-Identifier: MIT */
/*
 * encode.c - records from the event model's structs, through schema.c's
 * tables: a CBOR map with small-integer keys, the envelope first, then the
 * fields the fold reads and, in format 2, the rest in one byte string under
 * key 23 (envlog(5), RECORD ENCODING), so that a fold skips it whole.
 */
#include "codec_int.h"

#include <limits.h>
#include <string.h>

typedef const char *cstr;
typedef const void *cptr;

/* An unsigned head, room for 9 bytes having been made. */
static inline envlog_err put_uint(envlog_buf *b, uint8_t major, uint64_t v)
{
    b->len = (size_t)(put_head(b->p + b->len, major, v) - b->p);
    return ENVLOG_OK;
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
                             const void *in, envlog_level level, int depth, bool trusted);

/* Encodes field `f` of a map at depth `depth` as a key and its value, or
 * writes nothing and sets *absent when the value is empty (field_present's
 * per-type rule, checked here so each field is dispatched once).  Level and
 * presence flag are the caller's to check. */
static envlog_err enc_field(envlog_buf *b, const envlog_field *f, const void *in,
                            envlog_level level, int depth, bool trusted, bool *absent)
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
         * its own map (the nesting rule of core_int.h).  A record a reader
         * accepted (`trusted`) is not walked again. */
        int d = f->type == ENVLOG_F_RECORD ? 0 : depth + 1;
        envlog_err ce = !x->data ? ENVLOG_BAD_DATA
                        : trusted && f->type == ENVLOG_F_RECORD
                            ? ENVLOG_OK
                            : envlog_cbor_check_at(x->data, x->size, d);
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
                           depth + 2, trusted);
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

/* Which fields of a map a walk takes: all of them (a plain map, or a
 * record of a kind without a detail), those of a record's own map in format
 * 2 (the fold fields), or those of its detail (the others). */
typedef enum part { PART_ALL, PART_TOP, PART_DETAIL } part;

static inline bool in_part(const envlog_field *f, part which)
{
    return which == PART_ALL || (which == PART_TOP) == (f->fold != 0);
}

static size_t count_fields(const envlog_schema *s, const void *in, envlog_level level,
                           part which)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_fields; i++)
        n += in_part(&s->fields[i], which) && field_present(&s->fields[i], in, level);
    return n;
}

/* Encodes the present fields of `which`; *count says how many there were. */
static envlog_err enc_fields(envlog_buf *b, const envlog_schema *s,
                             const void *in, envlog_level level, int depth,
                             part which, bool trusted, size_t *count)
{
    size_t n = 0;
    for (const envlog_field *f = s->fields, *end = f + s->n_fields; f < end; f++) {
        if (!in_part(f, which))
            continue;
        if (f->full_only && level < ENVLOG_LEVEL_FULL)
            continue;
        if (f->present_off != SIZE_MAX && !*CAT(in, f->present_off, bool))
            continue;
        bool absent = false;
        envlog_err e = enc_field(b, f, in, level, depth, trusted, &absent);
        if (e)
            return e;
        n += !absent;
    }
    *count = n;
    return ENVLOG_OK;
}

/* How many fields of `s` lie in `which`, present or not. */
static size_t part_size(const envlog_schema *s, part which)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_fields; i++)
        n += in_part(&s->fields[i], which);
    return n;
}

/* A map's head.  One of at most 23 pairs has a one-byte head: it is
 * reserved (*at says where) and filled in once the fields are written, so
 * they are walked once; a larger one is counted first (*at is SIZE_MAX).
 * `extra` pairs (a record's envelope) come on top of the fields of `which`;
 * with `detail`, one more pair when a field of the detail is present. */
static envlog_err enc_map(envlog_buf *b, const envlog_schema *s, const void *in,
                          envlog_level level, part which, size_t extra, bool detail,
                          size_t *at)
{
    envlog_err e;
    *at = SIZE_MAX;
    if (extra + detail + s->n_fields >= 24 && extra + detail + part_size(s, which) >= 24)
        return envlog_enc_map(b, extra + count_fields(s, in, level, which) +
                                     (detail && count_fields(s, in, level, PART_DETAIL)));
    if ((e = room(b, 1)))
        return e;
    *at = b->len++;
    return ENVLOG_OK;
}

/* A trial as trial_f lists its fields (schema.c): the name, index,
 * samples and five times, each in its shortest form. */
static bool enc_trial(envlog_buf *b, const envlog_trial *t, envlog_level level)
{
    if (!t->name || t->error || t->has_start || (level >= ENVLOG_LEVEL_FULL && t->n_sample_ns))
        return false;
    size_t n = strlen(t->name);
    /* A map head, the name's key, head and bytes, two keys and uints, five
     * keys and doubles. */
    if (n >= 24 || !plain_ascii(t->name, n) || room(b, 3 + 23 + 2 * 10 + 5 * 10))
        return false;
    uint8_t *w = b->p + b->len;
    w[0] = 0xa8;
    w[1] = 0x00;
    w[2] = (uint8_t)(0x60 | n);
    memcpy(w + 3, t->name, n);
    w += 3 + n;
    *w++ = 0x01;
    w = put_head(w, 0x00, t->index);
    *w++ = 0x02;
    w = put_head(w, 0x00, t->samples);
    *w++ = 0x03;
    w = put_f64(w, t->min_ns);
    *w++ = 0x04;
    w = put_f64(w, t->median_ns);
    *w++ = 0x05;
    w = put_f64(w, t->mean_ns);
    *w++ = 0x06;
    w = put_f64(w, t->max_ns);
    *w++ = 0x07;
    w = put_f64(w, t->stddev_ns);
    b->len = (size_t)(w - b->p);
    return true;
}

bool envlog_enc_fast(envlog_buf *b, const envlog_schema *s, const void *in,
                     envlog_level level)
{
    switch (s->fast) {
    case ENVLOG_FAST_TRIAL: return enc_trial(b, in, level);
    default: return false;
    }
}

static envlog_err enc_struct_walk(envlog_buf *b, const envlog_schema *s,
                                  const void *in, envlog_level level, int depth, bool trusted)
{
    size_t at, n;
    envlog_err e = enc_map(b, s, in, level, PART_ALL, 0, false, &at);
    if (!e)
        e = enc_fields(b, s, in, level, depth, PART_ALL, trusted, &n);
    if (!e && at != SIZE_MAX)
        b->p[at] = (uint8_t)(0xa0 | n);
    return e;
}

static envlog_err enc_struct(envlog_buf *b, const envlog_schema *s,
                             const void *in, envlog_level level, int depth, bool trusted)
{
    return s->fast && envlog_enc_fast(b, s, in, level)
               ? ENVLOG_OK
               : enc_struct_walk(b, s, in, level, depth, trusted);
}

envlog_err envlog_struct_encode_walk(envlog_buf *b, const envlog_schema *s,
                                     const void *in, envlog_level level)
{
    return enc_struct_walk(b, s, in, level, 0, false);
}

envlog_err envlog_struct_encode(envlog_buf *b, const envlog_schema *s,
                                const void *in, envlog_level level)
{
    return enc_struct(b, s, in, level, 0, false);
}

envlog_err envlog_struct_encode_trusted(envlog_buf *b, const envlog_schema *s,
                                        const void *in, envlog_level level)
{
    return enc_struct(b, s, in, level, 0, true);
}

/* Size of the head of a byte string of `n` bytes. */
static size_t bstr_head_size(size_t n)
{
    return n < 24 ? 1 : n <= 0xff ? 2 : n <= 0xffff ? 3 : (uint64_t)n <= 0xffffffffu ? 5 : 9;
}

/* Format 2: key 23 and, in a byte string, a map of the fields that are not
 * the fold's (envlog(5), RECORD ENCODING).  Nothing at all when none is
 * present.  The byte string's head is guessed at three bytes (bodies of
 * 256 bytes to 64 KiB) and the map moved when the guess was wrong, so the
 * head stays in the shortest form. */
static envlog_err enc_detail(envlog_buf *b, const envlog_schema *s, const void *in,
                           envlog_level level, size_t *pairs)
{
    enum { GUESS = 3 };
    envlog_err e;
    size_t start = b->len;
    if ((e = room(b, 1 + GUESS)))
        return e;
    b->p[b->len++] = ENVLOG_K_DETAIL;
    b->len += GUESS;
    size_t at, n, content = b->len;
    /* The detail's map lies at depth 1, its values at depth 2. */
    if ((e = enc_map(b, s, in, level, PART_DETAIL, 0, false, &at)) ||
        (e = enc_fields(b, s, in, level, 1, PART_DETAIL, false, &n)))
        return e;
    if (!n) {
        b->len = start;
        return ENVLOG_OK;
    }
    if (at != SIZE_MAX)
        b->p[at] = (uint8_t)(0xa0 | n);
    size_t len = b->len - content, h = bstr_head_size(len);
    if (h > GUESS && (e = room(b, h - GUESS)))
        return e;
    uint8_t *c = b->p + content;
    if (h != GUESS)
        memmove(c + h - GUESS, c, len);
    put_head(b->p + start + 1, 0x40, len);
    b->len = start + 1 + h + len;
    (*pairs)++;
    return ENVLOG_OK;
}

envlog_err envlog_event_encode_as(envlog_buf *b, envlog_kind kind, const envlog_stamp *stamp,
                                  envlog_effect effect, envlog_level level, const void *body,
                                  int format)
{
    const envlog_schema *s = envlog_schema_of(kind);
    if (!s)
        return envlog__fail(ENVLOG_INVALID_ARG, "kind %d has no schema", kind);
    if (format != 1 && format != 2)
        return envlog__fail(ENVLOG_INVALID_ARG, "record format %d", format);
    /* The writer never writes a record its readers refuse. */
    const char *why = envlog_record_problem(kind, effect, body, ENVLOG_TRIALS_OF_BODY);
    if (why)
        return envlog__fail(ENVLOG_INVALID_ARG, "%s record: %s", s->name, why);
    b->len = 0;
    part top = format == 2 && s->detail ? PART_TOP : PART_ALL;
    size_t at, n;
    envlog_err e = enc_map(b, s, body, level, top, 4, top == PART_TOP, &at);
    if (e)
        return e;
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
    if ((e = enc_fields(b, s, body, level, 0, top, false, &n)))
        return e;
    if (top == PART_TOP && (e = enc_detail(b, s, body, level, &n)))
        return e;
    if (at != SIZE_MAX)
        b->p[at] = (uint8_t)(0xa0 | (4 + n));
    return ENVLOG_OK;
}

envlog_err envlog_event_encode(envlog_buf *b, envlog_kind kind, const envlog_stamp *stamp,
                               envlog_effect effect, envlog_level level, const void *body)
{
    return envlog_event_encode_as(b, kind, stamp, effect, level, body, ENVLOG_RECORD_FORMAT);
}
