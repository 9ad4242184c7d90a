/* SPDX-License-Identifier: MIT */
/*
 * cbor_io.c - CBOR item heads in and out, over libcbor.
 *
 * Writing puts item heads straight into a growable buffer, byte for byte
 * what libcbor's cbor_encode_* functions write (the shortest form).  Reading
 * is a pull tokenizer, so decoders walk a payload in place and never build a
 * cbor_item_t tree: the heads records are made of (integers, strings,
 * arrays, maps, booleans, null, single and double floats) are read here
 * directly; every other head goes through cbor_stream_decode's callbacks,
 * so what is accepted or refused is exactly what libcbor accepts or refuses.
 */
#include "codec_int.h"

#include <cbor.h>
#include <string.h>

/* ---------------------------------------------------------------- writing */

#define ENC_HEAD_MAX 9

static inline envlog_err enc_head(envlog_buf *b, uint8_t major, uint64_t v)
{
    envlog_err e = room(b, ENC_HEAD_MAX);
    if (e)
        return e;
    b->len = (size_t)(put_head(b->p + b->len, major, v) - b->p);
    return ENVLOG_OK;
}

envlog_err envlog_enc_uint(envlog_buf *b, uint64_t v)
{
    return enc_head(b, 0x00, v);
}

envlog_err envlog_enc_int(envlog_buf *b, int64_t v)
{
    if (v >= 0)
        return envlog_enc_uint(b, (uint64_t)v);
    return enc_head(b, 0x20, (uint64_t)(-(v + 1)));
}

envlog_err envlog_enc_double(envlog_buf *b, double v)
{
    envlog_err e = room(b, ENC_HEAD_MAX);
    if (e)
        return e;
    uint8_t *p = b->p + b->len;
    /* Preferred serialization: the shortest float that keeps the value. */
    float f = (float)v;
    if ((double)f == v || v != v) {
        uint32_t u;
        memcpy(&u, &f, 4);
        p[0] = 0xfa;
        for (int i = 0; i < 4; i++)
            p[1 + i] = (uint8_t)(u >> (24 - 8 * i));
        b->len += 5;
        return ENVLOG_OK;
    }
    uint64_t u;
    memcpy(&u, &v, 8);
    p[0] = 0xfb;
    for (int i = 0; i < 8; i++)
        p[1 + i] = (uint8_t)(u >> (56 - 8 * i));
    b->len += 9;
    return ENVLOG_OK;
}

envlog_err envlog_enc_bool(envlog_buf *b, bool v)
{
    envlog_err e = room(b, ENC_HEAD_MAX);
    if (e)
        return e;
    b->p[b->len++] = v ? 0xf5 : 0xf4;
    return ENVLOG_OK;
}

envlog_err envlog_enc_map(envlog_buf *b, size_t n)
{
    return enc_head(b, 0xa0, n);
}

envlog_err envlog_enc_array(envlog_buf *b, size_t n)
{
    return enc_head(b, 0x80, n);
}

static envlog_err enc_string(envlog_buf *b, const void *s, size_t n, bool text)
{
    envlog_err e = room(b, ENC_HEAD_MAX + n);
    if (e)
        return e;
    b->len = (size_t)(put_head(b->p + b->len, text ? 0x60 : 0x40, n) - b->p);
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    return ENVLOG_OK;
}

envlog_err envlog_enc_text(envlog_buf *b, const char *s, size_t n)
{
    return enc_string(b, s, n, true);
}

envlog_err envlog_enc_bytes(envlog_buf *b, const void *s, size_t n)
{
    return enc_string(b, s, n, false);
}

/* ---------------------------------------------------------------- reading */

#define TOK(ctx) ((envlog_tok *)(ctx))

static void cb_u8(void *c, uint8_t v) { TOK(c)->type = ENVLOG_TOK_UINT; TOK(c)->u = v; }
static void cb_u16(void *c, uint16_t v) { TOK(c)->type = ENVLOG_TOK_UINT; TOK(c)->u = v; }
static void cb_u32(void *c, uint32_t v) { TOK(c)->type = ENVLOG_TOK_UINT; TOK(c)->u = v; }
static void cb_u64(void *c, uint64_t v) { TOK(c)->type = ENVLOG_TOK_UINT; TOK(c)->u = v; }
static void cb_n8(void *c, uint8_t v) { TOK(c)->type = ENVLOG_TOK_NEGINT; TOK(c)->u = v; }
static void cb_n16(void *c, uint16_t v) { TOK(c)->type = ENVLOG_TOK_NEGINT; TOK(c)->u = v; }
static void cb_n32(void *c, uint32_t v) { TOK(c)->type = ENVLOG_TOK_NEGINT; TOK(c)->u = v; }
static void cb_n64(void *c, uint64_t v) { TOK(c)->type = ENVLOG_TOK_NEGINT; TOK(c)->u = v; }
static void cb_bytes(void *c, cbor_data d, size_t n)
{
    TOK(c)->type = ENVLOG_TOK_BYTES;
    TOK(c)->data = d;
    TOK(c)->len = n;
}
static void cb_text(void *c, cbor_data d, size_t n)
{
    TOK(c)->type = ENVLOG_TOK_TEXT;
    TOK(c)->data = d;
    TOK(c)->len = n;
}
static void cb_indef(void *c) { TOK(c)->type = ENVLOG_TOK_INDEF; }
static void cb_array(void *c, size_t n) { TOK(c)->type = ENVLOG_TOK_ARRAY; TOK(c)->u = n; }
static void cb_map(void *c, size_t n) { TOK(c)->type = ENVLOG_TOK_MAP; TOK(c)->u = n; }
static void cb_tag(void *c, uint64_t v) { TOK(c)->type = ENVLOG_TOK_TAG; TOK(c)->u = v; }
static void cb_f4(void *c, float v) { TOK(c)->type = ENVLOG_TOK_FLOAT; TOK(c)->f = v; }
static void cb_f8(void *c, double v) { TOK(c)->type = ENVLOG_TOK_FLOAT; TOK(c)->f = v; }
static void cb_undef(void *c) { TOK(c)->type = ENVLOG_TOK_UNDEF; }
static void cb_null(void *c) { TOK(c)->type = ENVLOG_TOK_NULL; }
static void cb_bool(void *c, bool v) { TOK(c)->type = ENVLOG_TOK_BOOL; TOK(c)->b = v; }

static const struct cbor_callbacks pull_cbs = {
    .uint8 = cb_u8, .uint16 = cb_u16, .uint32 = cb_u32, .uint64 = cb_u64,
    .negint8 = cb_n8, .negint16 = cb_n16, .negint32 = cb_n32, .negint64 = cb_n64,
    .byte_string_start = cb_indef, .byte_string = cb_bytes,
    .string = cb_text, .string_start = cb_indef,
    .indef_array_start = cb_indef, .array_start = cb_array,
    .indef_map_start = cb_indef, .map_start = cb_map,
    .tag = cb_tag, .float2 = cb_f4, .float4 = cb_f4, .float8 = cb_f8,
    .undefined = cb_undef, .null = cb_null, .boolean = cb_bool,
    .indef_break = cb_indef,
};

/* Reads the heads records are made of without a call into libcbor, exactly
 * as cbor_stream_decode and the callbacks above would: 1 when read (*t and
 * p->pos set), -1 when the data is cut short (libcbor's NEDATA), 0 to leave
 * the head to libcbor (tags, half floats, negative numbers' rarer forms,
 * reserved values and everything it refuses). */
static inline int pull_fast(envlog_pull *p, envlog_tok *t)
{
    const uint8_t *s = p->p + p->pos;
    size_t left = p->n - p->pos;
    uint8_t ib = s[0];
    unsigned major = ib >> 5, ai = ib & 31;
    if (major <= 5 && ai < 28) {
        size_t hl = 1;
        uint64_t v = ai;
        if (ai >= 24) {
            size_t w = (size_t)1 << (ai - 24);
            if (w > left - 1)
                return -1;
            v = envlog_load_be(s + 1, w);
            hl += w;
        }
        switch (major) {
        case 0:
            t->type = ENVLOG_TOK_UINT;
            t->u = v;
            break;
        case 1:
            t->type = ENVLOG_TOK_NEGINT;
            t->u = v;
            break;
        case 2:
        case 3: {
            size_t len = (size_t)v;
            if (len > left - hl)
                return -1;
            t->type = major == 2 ? ENVLOG_TOK_BYTES : ENVLOG_TOK_TEXT;
            t->data = s + hl;
            t->len = len;
            hl += len;
            break;
        }
        case 4:
            t->type = ENVLOG_TOK_ARRAY;
            t->u = (size_t)v;
            break;
        default:
            t->type = ENVLOG_TOK_MAP;
            t->u = (size_t)v;
            break;
        }
        p->pos += hl;
        return 1;
    }
    switch (ib) {
    case 0xf4:
    case 0xf5:
        t->type = ENVLOG_TOK_BOOL;
        t->b = ib == 0xf5;
        p->pos += 1;
        return 1;
    case 0xf6:
        t->type = ENVLOG_TOK_NULL;
        p->pos += 1;
        return 1;
    case 0xf7:
        t->type = ENVLOG_TOK_UNDEF;
        p->pos += 1;
        return 1;
    case 0xfa: {
        if (left < 5)
            return -1;
        t->type = ENVLOG_TOK_FLOAT;
        t->f = envlog_load_float(s + 1, 4);
        p->pos += 5;
        return 1;
    }
    case 0xfb: {
        if (left < 9)
            return -1;
        t->type = ENVLOG_TOK_FLOAT;
        t->f = envlog_load_float(s + 1, 8);
        p->pos += 9;
        return 1;
    }
    default:
        return 0;
    }
}

envlog_err envlog_pull_next(envlog_pull *p, envlog_tok *t)
{
    if (p->pos >= p->n)
        return envlog__fail(ENVLOG_BAD_DATA, "CBOR item cut short at byte %zu",
                            p->pos);
    /* A simple value other than false/true/null/undefined (major type 7,
     * additional info < 20 or 24) has no callback in libcbor 0.8; refuse it
     * rather than read past it. */
    uint8_t ib = p->p[p->pos];
    if ((ib >> 5) == 7 && ((ib & 31) < 20 || (ib & 31) == 24))
        return envlog__fail(ENVLOG_BAD_DATA,
                            "unsupported CBOR simple value at byte %zu", p->pos);
    t->type = ENVLOG_TOK_UNDEF;
    t->u = 0;
    int fast = pull_fast(p, t);
    if (fast > 0)
        return ENVLOG_OK;
    if (fast < 0)
        return envlog__fail(ENVLOG_BAD_DATA, "truncated CBOR at byte %zu", p->pos);
    struct cbor_decoder_result r =
        cbor_stream_decode(p->p + p->pos, p->n - p->pos, &pull_cbs, t);
    if (r.status != CBOR_DECODER_FINISHED)
        return envlog__fail(ENVLOG_BAD_DATA, "%s CBOR at byte %zu",
                            r.status == CBOR_DECODER_NEDATA ? "truncated"
                                                            : "malformed",
                            p->pos);
    if (t->type == ENVLOG_TOK_INDEF)
        return envlog__fail(ENVLOG_BAD_DATA,
                            "indefinite-length CBOR item at byte %zu", p->pos);
    p->pos += r.read;
    return ENVLOG_OK;
}

/* ------------------------------------------------------------- map keys */

/* Two keys are the same when they decode to the same value: integers by
 * value, strings by type and bytes, anything else (a float, an array...)
 * by its encoded bytes. */
static bool key_eq(const envlog_key *a, const envlog_key *b)
{
    return a->type == b->type && a->u == b->u && a->len == b->len &&
           (!a->len || !memcmp(a->data, b->data, a->len));
}

static uint64_t key_hash(const envlog_key *k)
{
    return envlog_xxh64(k->data ? (const void *)k->data : "", k->len,
                        k->u * 31 + (uint64_t)k->type);
}

static envlog_err keyset_rehash(envlog_keyset *ks, size_t slots)
{
    uint32_t *t = envlog_calloc(slots, sizeof *t);
    if (!t)
        return envlog__fail(ENVLOG_NOMEM, "checking the keys of a map");
    for (size_t i = 0; i < ks->n; i++) {
        size_t j = (size_t)key_hash(&ks->v[i]) & (slots - 1);
        while (t[j])
            j = (j + 1) & (slots - 1);
        t[j] = (uint32_t)i + 1;
    }
    envlog_free(ks->slots);
    ks->slots = t;
    ks->n_slots = slots;
    return ENVLOG_OK;
}

envlog_err envlog_keyset_add(envlog_keyset *ks, const envlog_key *k)
{
    if (k->type == ENVLOG_TOK_UINT && k->u < 64) {
        uint64_t bit = (uint64_t)1 << k->u;
        if (ks->small & bit)
            return envlog__fail(ENVLOG_BAD_DATA, "map holds key %llu twice",
                                (unsigned long long)k->u);
        ks->small |= bit;
        return ENVLOG_OK;
    }
    /* Few keys: a scan; many (a hostile map): a hash table of indexes. */
    if (!ks->slots) {
        for (size_t i = 0; i < ks->n; i++)
            if (key_eq(&ks->v[i], k))
                return envlog__fail(ENVLOG_BAD_DATA, "map holds a key twice");
    } else {
        for (size_t j = (size_t)key_hash(k) & (ks->n_slots - 1); ks->slots[j];
             j = (j + 1) & (ks->n_slots - 1))
            if (key_eq(&ks->v[ks->slots[j] - 1], k))
                return envlog__fail(ENVLOG_BAD_DATA, "map holds a key twice");
    }
    if (!ks->v) {
        ks->v = ks->in;
        ks->cap = ENVLOG_KEYSET_INLINE;
    }
    if (ks->n == ks->cap) {
        size_t cap = 2 * ks->cap;
        envlog_key *v = envlog_malloc(cap * sizeof *v);
        if (!v)
            return envlog__fail(ENVLOG_NOMEM, "checking the keys of a map");
        memcpy(v, ks->v, ks->n * sizeof *v);
        if (ks->v != ks->in)
            envlog_free(ks->v);
        ks->v = v;
        ks->cap = cap;
    }
    ks->v[ks->n++] = *k;
    if (ks->n > 16 && 2 * ks->n > ks->n_slots) {
        envlog_err e = keyset_rehash(ks, ks->n_slots ? 2 * ks->n_slots : 64);
        if (e)
            return e;
    } else if (ks->slots) {
        size_t j = (size_t)key_hash(k) & (ks->n_slots - 1);
        while (ks->slots[j])
            j = (j + 1) & (ks->n_slots - 1);
        ks->slots[j] = (uint32_t)ks->n;
    }
    return ENVLOG_OK;
}

void envlog_keyset_free(envlog_keyset *ks)
{
    if (ks->v != ks->in)
        envlog_free(ks->v);
    envlog_free(ks->slots);
    ks->v = NULL;
    ks->slots = NULL;
    ks->n = ks->cap = ks->n_slots = 0;
    ks->small = 0;
}

envlog_err envlog_key_read(envlog_pull *p, const envlog_tok *t, size_t start,
                           int depth, envlog_key *k)
{
    memset(k, 0, sizeof *k);
    k->type = t->type;
    switch (t->type) {
    case ENVLOG_TOK_UINT:
    case ENVLOG_TOK_NEGINT: k->u = t->u; return ENVLOG_OK;
    case ENVLOG_TOK_TEXT:
    case ENVLOG_TOK_BYTES:
        k->data = t->data;
        k->len = t->len;
        return ENVLOG_OK;
    default: break;
    }
    envlog_err e = envlog_pull_skip_at(p, t, depth);
    if (e)
        return e;
    k->data = p->p + start;
    k->len = p->pos - start;
    return ENVLOG_OK;
}

/* ------------------------------------------------------------ skipping */

envlog_err envlog_pull_skip_at(envlog_pull *p, const envlog_tok *t, int depth)
{
    if (depth > ENVLOG_CBOR_MAX_DEPTH)
        return envlog__fail(ENVLOG_BAD_DATA, "CBOR nested deeper than %d levels",
                            ENVLOG_CBOR_MAX_DEPTH);
    uint64_t items;
    switch (t->type) {
    case ENVLOG_TOK_ARRAY: items = t->u; break;
    case ENVLOG_TOK_MAP:
        if (t->u > UINT64_MAX / 2)
            return envlog__fail(ENVLOG_BAD_DATA, "CBOR map too large");
        items = t->u * 2;
        break;
    case ENVLOG_TOK_TAG: items = 1; break;
    default: return ENVLOG_OK;
    }
    /* Every item takes at least one byte: a count beyond what is left is a
     * lie, refused before walking it. */
    if (items > p->n - p->pos)
        return envlog__fail(ENVLOG_BAD_DATA,
                            "CBOR container claims %llu items in %zu bytes",
                            (unsigned long long)items, p->n - p->pos);
    if (t->type == ENVLOG_TOK_MAP) {
        envlog_keyset ks;
        envlog_keyset_init(&ks);
        envlog_err e = ENVLOG_OK;
        for (uint64_t i = 0; !e && i < t->u; i++) {
            envlog_tok k, v;
            envlog_key key;
            size_t start = p->pos;
            if (!(e = envlog_pull_next(p, &k)) &&
                !(e = envlog_key_read(p, &k, start, depth + 1, &key)) &&
                !(e = envlog_keyset_add(&ks, &key)) && !(e = envlog_pull_next(p, &v)))
                e = envlog_pull_skip_at(p, &v, depth + 1);
        }
        envlog_keyset_free(&ks);
        return e;
    }
    for (uint64_t i = 0; i < items; i++) {
        envlog_tok c;
        envlog_err e = envlog_pull_next(p, &c);
        if (!e)
            e = envlog_pull_skip_at(p, &c, depth + 1);
        if (e)
            return e;
    }
    return ENVLOG_OK;
}

envlog_err envlog_pull_skip_after(envlog_pull *p, const envlog_tok *t)
{
    return envlog_pull_skip_at(p, t, 0);
}

envlog_err envlog_cbor_check_at(const void *data, size_t n, int depth)
{
    envlog_pull p = {data, n, 0};
    envlog_tok t;
    envlog_err e = envlog_pull_next(&p, &t);
    if (!e)
        e = envlog_pull_skip_at(&p, &t, depth);
    if (!e && p.pos != n)
        e = envlog__fail(ENVLOG_BAD_DATA,
                         "%zu bytes follow the CBOR item", n - p.pos);
    return e;
}

envlog_err envlog_cbor_check_item(const void *data, size_t n)
{
    return envlog_cbor_check_at(data, n, 0);
}
