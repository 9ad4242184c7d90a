/* SPDX-License-Identifier: MIT */
/*
 * cbor_io.c - CBOR item heads in and out, over libcbor.
 *
 * Writing uses libcbor's no-allocation cbor_encode_* functions into a growable
 * buffer; reading turns cbor_stream_decode's callbacks into a pull tokenizer,
 * so decoders walk a payload in place and never build a cbor_item_t tree.
 */
#include "core_int.h"

#include <cbor.h>
#include <string.h>

/* ---------------------------------------------------------------- writing */

#define ENC_HEAD_MAX 9

#define ENC_WITH(b, call)                                                     \
    do {                                                                       \
        envlog_err e_ = envlog_buf_reserve((b), ENC_HEAD_MAX);                 \
        if (e_)                                                                \
            return e_;                                                         \
        size_t n_ = call((b)->p + (b)->len, (b)->cap - (b)->len);              \
        if (!n_)                                                               \
            return envlog__fail(ENVLOG_BAD_DATA, "CBOR encoder refused item"); \
        (b)->len += n_;                                                        \
        return ENVLOG_OK;                                                      \
    } while (0)

envlog_err envlog_enc_uint(envlog_buf *b, uint64_t v)
{
#define CALL(p, n) cbor_encode_uint(v, p, n)
    ENC_WITH(b, CALL);
#undef CALL
}

envlog_err envlog_enc_int(envlog_buf *b, int64_t v)
{
    if (v >= 0)
        return envlog_enc_uint(b, (uint64_t)v);
#define CALL(p, n) cbor_encode_negint((uint64_t)(-(v + 1)), p, n)
    ENC_WITH(b, CALL);
#undef CALL
}

envlog_err envlog_enc_double(envlog_buf *b, double v)
{
    /* Preferred serialization: the shortest float that keeps the value. */
    float f = (float)v;
    if ((double)f == v || v != v) {
#define CALL(p, n) cbor_encode_single(f, p, n)
        ENC_WITH(b, CALL);
#undef CALL
    }
#define CALL(p, n) cbor_encode_double(v, p, n)
    ENC_WITH(b, CALL);
#undef CALL
}

envlog_err envlog_enc_bool(envlog_buf *b, bool v)
{
#define CALL(p, n) cbor_encode_bool(v, p, n)
    ENC_WITH(b, CALL);
#undef CALL
}

envlog_err envlog_enc_map(envlog_buf *b, size_t n)
{
#define CALL(p, m) cbor_encode_map_start(n, p, m)
    ENC_WITH(b, CALL);
#undef CALL
}

envlog_err envlog_enc_array(envlog_buf *b, size_t n)
{
#define CALL(p, m) cbor_encode_array_start(n, p, m)
    ENC_WITH(b, CALL);
#undef CALL
}

static envlog_err enc_string(envlog_buf *b, const void *s, size_t n, bool text)
{
    envlog_err e = envlog_buf_reserve(b, ENC_HEAD_MAX + n);
    if (e)
        return e;
    size_t h = text ? cbor_encode_string_start(n, b->p + b->len, b->cap - b->len)
                    : cbor_encode_bytestring_start(n, b->p + b->len,
                                                   b->cap - b->len);
    if (!h)
        return envlog__fail(ENVLOG_BAD_DATA, "CBOR encoder refused string");
    b->len += h;
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

static envlog_err skip_rest(envlog_pull *p, const envlog_tok *t, int depth)
{
    if (depth > ENVLOG_CBOR_MAX_DEPTH)
        return envlog__fail(ENVLOG_BAD_DATA, "CBOR nested deeper than %d",
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
    for (uint64_t i = 0; i < items; i++) {
        envlog_tok c;
        envlog_err e = envlog_pull_next(p, &c);
        if (!e)
            e = skip_rest(p, &c, depth + 1);
        if (e)
            return e;
    }
    return ENVLOG_OK;
}

envlog_err envlog_pull_skip_after(envlog_pull *p, const envlog_tok *t)
{
    return skip_rest(p, t, 0);
}

envlog_err envlog_cbor_check_item(const void *data, size_t n)
{
    envlog_pull p = {data, n, 0};
    envlog_tok t;
    envlog_err e = envlog_pull_next(&p, &t);
    if (!e)
        e = envlog_pull_skip_after(&p, &t);
    if (!e && p.pos != n)
        e = envlog__fail(ENVLOG_BAD_DATA,
                         "%zu bytes follow the CBOR item", n - p.pos);
    return e;
}
