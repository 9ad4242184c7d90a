/* SPDX-License-Identifier: MIT */
/*
 * check_core.c - the core module: the event codec (round trips of every
 * kind, forward compatibility, hostile input), UTF-8, the renderers (JSON,
 * text, diagnostic notation), ids and hashes, and allocation failure.
 */
#include "codec_int.h"
#include "fold_agree.h"
#include "suites.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const envlog_stamp stamp0 = {
    {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}, 3, 7};

/* A write sink into a growing NUL-terminated string. */
typedef struct sink {
    char *p;
    size_t len, cap;
    int fail_after; /* fail the n-th call (0: never) */
    envlog_err fail_with; /* with this code (0: ENVLOG_IO) */
    int calls;
} sink;

static envlog_err sink_fn(void *ctx, const char *text, size_t len)
{
    sink *s = ctx;
    if (s->fail_after && ++s->calls >= s->fail_after)
        return s->fail_with ? s->fail_with : ENVLOG_IO;
    if (s->len + len + 1 > s->cap) {
        s->cap = (s->len + len + 1) * 2;
        s->p = realloc(s->p, s->cap);
        ck_assert_ptr_nonnull(s->p);
    }
    memcpy(s->p + s->len, text, len);
    s->len += len;
    s->p[s->len] = 0;
    return ENVLOG_OK;
}

static void sink_reset(sink *s)
{
    free(s->p);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------ a tiny JSON check */

/* A strict recursive-descent recognizer of RFC 8259 JSON text. */
typedef struct jp {
    const char *p, *end;
    int depth;
} jp;

static void jws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' ||
                             *j->p == '\r'))
        j->p++;
}

static bool jvalue(jp *j);

static bool jstring(jp *j)
{
    if (j->p >= j->end || *j->p != '"')
        return false;
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20)
            return false;
        if (c == '\\') {
            j->p++;
            if (j->p >= j->end)
                return false;
            if (*j->p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (j->p + i >= j->end || !strchr("0123456789abcdefABCDEF", j->p[i]) ||
                        !j->p[i])
                        return false;
                j->p += 5;
                continue;
            }
            if (!strchr("\"\\/bfnrt", *j->p) || !*j->p)
                return false;
        }
        j->p++;
    }
    if (j->p >= j->end)
        return false;
    j->p++;
    return true;
}

static bool jdigits(jp *j)
{
    const char *s = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > s;
}

static bool jnumber(jp *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (!jdigits(j))
        return false;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!jdigits(j))
            return false;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (!jdigits(j))
            return false;
    }
    return true;
}

static bool jlit(jp *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n))
        return false;
    j->p += n;
    return true;
}

static bool jvalue(jp *j)
{
    jws(j);
    if (j->p >= j->end || ++j->depth > 200)
        return false;
    bool ok;
    char c = *j->p;
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        jws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            ok = true;
        } else {
            for (;;) {
                if (c == '{') {
                    jws(j);
                    if (!jstring(j))
                        return false;
                    jws(j);
                    if (j->p >= j->end || *j->p++ != ':')
                        return false;
                }
                if (!jvalue(j))
                    return false;
                jws(j);
                if (j->p < j->end && *j->p == ',') {
                    j->p++;
                    continue;
                }
                if (j->p < j->end && *j->p == close) {
                    j->p++;
                    break;
                }
                return false;
            }
            ok = true;
        }
    } else if (c == '"') {
        ok = jstring(j);
    } else if (c == 't') {
        ok = jlit(j, "true");
    } else if (c == 'f') {
        ok = jlit(j, "false");
    } else if (c == 'n') {
        ok = jlit(j, "null");
    } else {
        ok = jnumber(j);
    }
    j->depth--;
    return ok;
}

static bool json_valid(const char *s, size_t n)
{
    if (!envlog_utf8_valid(s, n))
        return false;
    jp j = {s, s + n, 0};
    if (!jvalue(&j))
        return false;
    jws(&j);
    return j.p == j.end;
}

START_TEST(test_json_checker)
{
    /* The checker itself must refuse what is not JSON, or the renderer
     * tests below could not fail. */
    static const char *const good[] = {"{}", "[]", "{\"a\":[1,-0,2.5e+3,true,null]}",
                                       "\"\\u00e9\\n\"", "-0.5E-2"};
    static const char *const bad[] = {"{", "{\"a\"}", "[1,]", "01", "nan", "\"\x01\"",
                                      "{\"a\":1}}", "inf", "\"\\x\"", "[1 2]",
                                      "{a:1}", "1.", "\"\xff\""};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(json_valid(good[i], strlen(good[i])), "%s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!json_valid(bad[i], strlen(bad[i])), "%s", bad[i]);
}
END_TEST

/* ------------------------------------------------------------ round trips */

static const char *const variant_names[] = {"empty", "typical", "maximal", "unicode"};

/* The codec's own decode of `b`, asserting success. */
static void decode_ok(const envlog_buf *b, envlog_record *rec, envlog_arena *a)
{
    envlog_arena_reset(a);
    ck_assert_ok(envlog_event_decode(b->p, b->len, rec, a));
}

START_TEST(test_roundtrip_kind)
{
    envlog_kind kind = tu_kinds[_i];
    for (int v = TU_EMPTY; v <= TU_UNICODE; v++) {
        for (int lv = ENVLOG_LEVEL_BASIC; lv <= ENVLOG_LEVEL_FULL; lv++) {
            tu_sample s;
            tu_sample_make(&s, kind, (tu_variant)v);
            envlog_buf b = {0}, b2 = {0};
            envlog_arena a = {0};
            envlog_record rec;
            envlog_stamp st = stamp0;
            st.seq = v == TU_MAXIMAL ? UINT64_MAX : (uint64_t)v;
            st.offset_ns = v == TU_MAXIMAL ? UINT64_MAX : 1000u * (unsigned)v;
            envlog_effect eff = kind == ENVLOG_KIND_USER
                                    ? (v % 2 ? ENVLOG_CHANGED : ENVLOG_OBSERVED)
                                    : envlog_effect_of(kind, &s.u);
            envlog_err e = envlog_event_encode(&b, kind, &st, eff, (envlog_level)lv, &s.u);
            ck_assert_msg(e == ENVLOG_OK, "%s/%s: %s", envlog_kind_name(kind),
                          variant_names[v], envlog_errmsg());
            decode_ok(&b, &rec, &a);
            ck_assert_int_eq(rec.kind, kind);
            ck_assert_uint_eq(rec.stamp.seq, st.seq);
            ck_assert_uint_eq(rec.stamp.offset_ns, st.offset_ns);
            ck_assert_int_eq(rec.effect, eff);
            ck_assert_ptr_eq(rec.payload.data, b.p);
            ck_assert_uint_eq(rec.payload.size, b.len);
            tu_sample_check(kind, &s.u, &rec.u, lv == ENVLOG_LEVEL_FULL);
            /* Encoding what was decoded gives the same bytes: one canonical
             * form, nothing lost or invented on the way. */
            ck_assert_ok(envlog_event_encode(&b2, kind, &st, eff, (envlog_level)lv, &rec.u));
            ck_assert_uint_eq(b2.len, b.len);
            ck_assert_msg(!memcmp(b2.p, b.p, b.len), "%s/%s: re-encoding differs",
                          envlog_kind_name(kind), variant_names[v]);
            envlog_buf_free(&b);
            envlog_buf_free(&b2);
            envlog_arena_free(&a);
        }
    }
}
END_TEST

START_TEST(test_full_only_fields)
{
    /* At BASIC, sources, IR and samples are left out of the bytes, not just
     * ignored on decode. */
    tu_sample s;
    tu_sample_make(&s, ENVLOG_KIND_COMPILE, TU_TYPICAL);
    envlog_buf basic = {0}, full = {0};
    ck_assert_ok(envlog_event_encode(&basic, ENVLOG_KIND_COMPILE, &stamp0,
                                     ENVLOG_CHANGED, ENVLOG_LEVEL_BASIC, &s.u));
    ck_assert_ok(envlog_event_encode(&full, ENVLOG_KIND_COMPILE, &stamp0,
                                     ENVLOG_CHANGED, ENVLOG_LEVEL_FULL, &s.u));
    const char *src = s.u.compile.source;
    ck_assert_ptr_null(memmem(basic.p, basic.len, src, strlen(src)));
    ck_assert_ptr_nonnull(memmem(full.p, full.len, src, strlen(src)));
    ck_assert_uint_gt(full.len, basic.len);
    envlog_buf_free(&basic);
    envlog_buf_free(&full);
}
END_TEST

START_TEST(test_floats_shortest)
{
    /* A double that a float holds exactly is stored as a float (5 bytes),
     * one that it does not as a double (9 bytes), with the value kept. */
    envlog_buf b = {0};
    ck_assert_ok(envlog_enc_double(&b, 1.5));
    ck_assert_uint_eq(b.len, 5);
    ck_assert_uint_eq(b.p[0], 0xfa);
    b.len = 0;
    ck_assert_ok(envlog_enc_double(&b, 0.1));
    ck_assert_uint_eq(b.len, 9);
    ck_assert_uint_eq(b.p[0], 0xfb);
    envlog_pull p = {b.p, b.len, 0};
    envlog_tok t;
    ck_assert_ok(envlog_pull_next(&p, &t));
    ck_assert_int_eq(t.type, ENVLOG_TOK_FLOAT);
    ck_assert(t.f == 0.1);
    envlog_buf_free(&b);
}
END_TEST

/* --------------------------------------------- hand-built CBOR payloads */

/* Appends raw bytes. */
static void raw(envlog_buf *b, const char *bytes, size_t n)
{
    ck_assert_ok(envlog_buf_append(b, bytes, n));
}
static void u(envlog_buf *b, uint64_t v) { ck_assert_ok(envlog_enc_uint(b, v)); }
static void txt(envlog_buf *b, const char *s) { ck_assert_ok(envlog_enc_text(b, s, strlen(s))); }

/* The envelope of a record of `kind` in a map of `pairs` pairs. */
static void envelope(envlog_buf *b, size_t pairs, envlog_kind kind)
{
    b->len = 0;
    ck_assert_ok(envlog_enc_map(b, pairs));
    /* The effect of a record whose body fields are all absent. */
    bool changed = kind == ENVLOG_KIND_IMPORT || kind == ENVLOG_KIND_FORGET;
    u(b, 0), u(b, kind), u(b, 1), u(b, 5), u(b, 2), u(b, 6), u(b, 3), u(b, changed);
}

/* The decoder reads an event's envelope keys (0 to 3) and, for the kinds
 * with a detail, key 23 before it searches the kind's schema: no schema of
 * an event kind may name them as fields. */
START_TEST(test_schema_keys)
{
    int kinds = 0;
    for (int kind = 0; kind < 64; kind++) {
        const envlog_schema *s = envlog_schema_of((envlog_kind)kind);
        if (!s)
            continue;
        kinds++;
        for (uint64_t k = 0; k < ENVLOG_K_BODY0; k++)
            ck_assert_msg(!envlog_schema_field(s, k), "%s names envelope key %d", s->name,
                          (int)k);
        if (s->detail)
            ck_assert_msg(!envlog_schema_field(s, ENVLOG_K_DETAIL),
                          "%s names key 23, its detail", s->name);
        for (size_t i = 0; i < s->n_fields; i++)
            ck_assert_ptr_eq(envlog_schema_field(s, s->fields[i].key), &s->fields[i]);
    }
    ck_assert_int_eq(kinds, 8);
}
END_TEST

START_TEST(test_unknown_keys)
{
    envlog_buf b = {0};
    envlog_arena a = {0};
    envlog_record rec;
    /* A tune from a future version: key 99 holds a nested map, a text key
     * holds an array, key 200 a tag; the known keys around them decode. */
    envelope(&b, 4 + 6, ENVLOG_KIND_TUNE);
    u(&b, 4), txt(&b, "ns/1");
    u(&b, 99);
    ck_assert_ok(envlog_enc_map(&b, 2));
    u(&b, 1), txt(&b, "deep"), txt(&b, "x");
    ck_assert_ok(envlog_enc_array(&b, 2));
    u(&b, 1), u(&b, 2);
    txt(&b, "future"); ck_assert_ok(envlog_enc_array(&b, 3));
    u(&b, 1); ck_assert_ok(envlog_enc_double(&b, 2.5)); ck_assert_ok(envlog_enc_bytes(&b, "ab", 2));
    u(&b, 5), txt(&b, "key/1");
    u(&b, 200), raw(&b, "\xc1\x1a\x00\x01\x00\x00", 6); /* 1(65536) */
    /* A trial with an unknown key 50 inside it. */
    u(&b, 8); ck_assert_ok(envlog_enc_array(&b, 1));
    ck_assert_ok(envlog_enc_map(&b, 3));
    u(&b, 0), txt(&b, "cand"), u(&b, 50), raw(&b, "\xf6", 1), u(&b, 2), u(&b, 9);
    decode_ok(&b, &rec, &a);
    ck_assert_int_eq(rec.kind, ENVLOG_KIND_TUNE);
    ck_assert_uint_eq(rec.stamp.seq, 5);
    ck_assert_uint_eq(rec.stamp.offset_ns, 6);
    ck_assert_int_eq(rec.effect, ENVLOG_OBSERVED);
    ck_assert_str_eq(rec.u.tune.ns, "ns/1");
    ck_assert_str_eq(rec.u.tune.key, "key/1");
    ck_assert_uint_eq(rec.u.tune.n_trials, 1);
    ck_assert_str_eq(rec.u.tune.trials[0].name, "cand");
    ck_assert_uint_eq(rec.u.tune.trials[0].samples, 9);
    ck_assert_int_eq(rec.u.tune.winner, -1); /* absent: no winner */

    /* The JSON shows the unknown keys rather than dropping them. */
    sink s = {0};
    ck_assert_ok(envlog_record_json(&rec, sink_fn, &s));
    ck_assert_msg(json_valid(s.p, s.len), "%s", s.p);
    ck_assert_ptr_nonnull(strstr(s.p, "\"k99\":{\"k1\":\"deep\",\"x\":[1,2]}"));
    ck_assert_ptr_nonnull(strstr(s.p, "\"future\":[1,2.5,\"6162\"]"));
    ck_assert_ptr_nonnull(strstr(s.p, "\"k200\":65536"));
    ck_assert_ptr_nonnull(strstr(s.p, "\"trials\":[{\"name\":\"cand\",\"k50\":null,\"samples\":9}]"));
    sink_reset(&s);

    /* A kind this version does not know decodes with its envelope. */
    envelope(&b, 4 + 1, (envlog_kind)77);
    u(&b, 4), txt(&b, "whatever");
    decode_ok(&b, &rec, &a);
    ck_assert_int_eq(rec.kind, 77);
    ck_assert_uint_eq(rec.stamp.seq, 5);
    ck_assert_ok(envlog_record_json(&rec, sink_fn, &s));
    ck_assert_ptr_nonnull(strstr(s.p, "\"kind\":77,"));
    ck_assert_ptr_nonnull(strstr(s.p, "\"k4\":\"whatever\""));
    sink_reset(&s);
    envlog_buf_free(&b);
    envlog_arena_free(&a);
}
END_TEST

/* Decoding `b` must fail with `want`. */
static void decode_fails(const envlog_buf *b, envlog_err want, const char *what)
{
    envlog_arena a = {0};
    envlog_record rec;
    envlog_err e = envlog_event_decode(b->p, b->len, &rec, &a);
    ck_assert_msg(e == want, "%s: got %s, want %s", what, envlog_strerror(e),
                  envlog_strerror(want));
    /* The fold refuses exactly what the full reader refuses. */
    e = envlog_event_decode_fold(b->p, b->len, &rec, &a);
    ck_assert_msg(e == want, "%s: the fold got %s, want %s", what, envlog_strerror(e),
                  envlog_strerror(want));
    /* What little was taken is bounded by the input, never by a length the
     * input claims. */
    ck_assert_msg(a.want <= 64 * (b->len + 64), "%s: arena asked for %zu bytes", what,
                  a.want);
    envlog_arena_free(&a);
}

START_TEST(test_wrong_types)
{
    envlog_buf b = {0};
    struct {
        envlog_kind kind;
        uint64_t key;
        const char *bytes;
        size_t n;
        const char *what;
    } cases[] = {
        {ENVLOG_KIND_TUNE, 4, "\x01", 1, "namespace as uint"},
        {ENVLOG_KIND_TUNE, 6, "\x20", 1, "checksum as negint"},
        {ENVLOG_KIND_TUNE, 6, "\x61x", 2, "checksum as text"},
        {ENVLOG_KIND_TUNE, 7, "\x61x", 2, "candidates as text"},
        {ENVLOG_KIND_TUNE, 7, "\x81\x01", 2, "candidate as uint"},
        {ENVLOG_KIND_TUNE, 8, "\x81\x01", 2, "trial as uint"},
        {ENVLOG_KIND_TUNE, 8, "\x81\xa1\x01\x61x", 5, "trial index as text"},
        {ENVLOG_KIND_TUNE, 8, "\x81\xa1\x01\x1b\x00\x00\x00\x01\x00\x00\x00\x00", 12,
         "trial index over u32"},
        {ENVLOG_KIND_TUNE, 11, "\x1b\x80\x00\x00\x00\x00\x00\x00\x00", 9,
         "winner over i64"},
        {ENVLOG_KIND_TUNE, 11, "\xf5", 1, "winner as bool"},
        {ENVLOG_KIND_TUNE, 12, "\x61x", 2, "margin as text"},
        {ENVLOG_KIND_TUNE, 13, "\x01", 1, "within_noise as uint"},
        {ENVLOG_KIND_TUNE, 10, "\xa0", 1, "params as map"},
        {ENVLOG_KIND_COMPILE, 6, "\x4f" "012345678901234", 16, "kernel_key of 15 bytes"},
        {ENVLOG_KIND_COMPILE, 6, "\x70" "0123456789012345", 17, "kernel_key as text"},
        {ENVLOG_KIND_COMPILE, 11, "\x1b\x00\x00\x00\x01\x00\x00\x00\x00", 9,
         "outcome over int"},
        {ENVLOG_KIND_COMPILE, 15, "\x61x", 2, "binary as text"},
        {ENVLOG_KIND_COMPILE, 19, "\x82\x50" "0123456789012345\x01", 19,
         "stamp of two items"},
        {ENVLOG_KIND_COMPILE, 19, "\x83\x01\x02\x03", 4, "stamp session as uint"},
        {ENVLOG_KIND_SESSION, 4, "\x01", 1, "session id as uint"},
        {ENVLOG_KIND_SESSION, 14, "\x82\x61x\x02", 4, "device as uint"},
        {ENVLOG_KIND_SPAN, 9, "\x81\xa1\x00\x02", 4, "attr key as uint"},
        {ENVLOG_KIND_MARK, 5, "\xfa\x3f\xc0\x00\x00", 5, "wall time as float"},
        {ENVLOG_KIND_MARK, 4, "\x41x", 2, "label as bytes"},
        {ENVLOG_KIND_IMPORT, 7, "\x20", 1, "taken as negint"},
        {ENVLOG_KIND_FORGET, 4, "\x61x", 2, "table as text"},
        {ENVLOG_KIND_USER, 4, "\x41x", 2, "user kind as bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        envelope(&b, 5, cases[i].kind);
        u(&b, cases[i].key);
        raw(&b, cases[i].bytes, cases[i].n);
        decode_fails(&b, ENVLOG_BAD_DATA, cases[i].what);
    }
    /* Envelope damage. */
    b.len = 0;
    raw(&b, "\xa0", 1);
    decode_fails(&b, ENVLOG_BAD_DATA, "empty map");
    b.len = 0;
    raw(&b, "\x81\x00", 2);
    decode_fails(&b, ENVLOG_BAD_DATA, "an array");
    b.len = 0;
    raw(&b, "\xa2\x01\x00\x00\x14", 5);
    decode_fails(&b, ENVLOG_BAD_DATA, "kind not first");
    b.len = 0;
    raw(&b, "\xa1\x00\x61x", 4);
    decode_fails(&b, ENVLOG_BAD_DATA, "kind as text");
    envelope(&b, 4, ENVLOG_KIND_MARK);
    b.p[b.len - 1] = 2; /* effect 2 */
    decode_fails(&b, ENVLOG_BAD_DATA, "effect 2");
    envelope(&b, 4, ENVLOG_KIND_MARK);
    b.p[4] = 0x61, b.p[5] = 'x'; /* seq value: "x" in place of 5, 2 */
    decode_fails(&b, ENVLOG_BAD_DATA, "seq as text");
    envelope(&b, 4, ENVLOG_KIND_MARK);
    raw(&b, "\x00", 1);
    decode_fails(&b, ENVLOG_BAD_DATA, "trailing byte");
    envelope(&b, 4, ENVLOG_KIND_MARK);
    b.len--;
    decode_fails(&b, ENVLOG_BAD_DATA, "cut short");
    /* Every proper prefix of a good record is refused. */
    tu_sample s;
    tu_sample_make(&s, ENVLOG_KIND_TUNE, TU_TYPICAL);
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                     ENVLOG_LEVEL_FULL, &s.u));
    size_t full = b.len;
    for (size_t cut = 0; cut < full; cut++) {
        b.len = cut;
        decode_fails(&b, ENVLOG_BAD_DATA, "prefix");
    }
    envlog_buf_free(&b);
}
END_TEST

/* One truth: every field of every kind malformed in turn (a value of each
 * other type, an out-of-range value, the key held twice), at the top of the
 * record and inside the first element of each array of maps.  The fold and
 * the full reader must agree on each: both refuse it with the same code, or
 * both take it, and then the fold's fields are the full reader's. */
static const struct { const char *bytes; size_t n; const char *what; } wrong_values[] = {
    {"\x07", 1, "uint 7"},
    {"\x1b\xff\xff\xff\xff\xff\xff\xff\xff", 9, "uint 2^64-1"},
    {"\x22", 1, "negint -3"},
    {"\x61x", 2, "text"},
    {"\x61\xff", 2, "text that is not UTF-8"},
    {"\x41\x01", 2, "bytes"},
    {"\x50\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", 17, "16 bytes"},
    {"\x81\x01", 2, "array"},
    {"\xa0", 1, "empty map"},
    {"\xa2\x00\x01\x00\x02", 5, "map holding key 0 twice"},
    {"\xf9\x3e\x00", 3, "half float"},
    {"\xf5", 1, "true"},
    {"\xf6", 1, "null"},
    {"\xc1\x01", 2, "tag 1"},
};

static void agree(const envlog_buf *b, const char *what)
{
    envlog_arena a1 = {0}, a2 = {0};
    envlog_record full, fold;
    envlog_err e1 = envlog_event_decode(b->p, b->len, &full, &a1);
    envlog_err e2 = envlog_event_decode_fold(b->p, b->len, &fold, &a2);
    tu_check(e1 == e2, "%s: the full reader says %s, the fold %s", what, envlog_strerror(e1),
             envlog_strerror(e2));
    if (!e1) {
        tu_check(full.kind == fold.kind && full.effect == fold.effect &&
                     full.stamp.seq == fold.stamp.seq, "%s: envelopes differ", what);
        if (full.kind == ENVLOG_KIND_TUNE) {
            const envlog_tune *x = &full.u.tune, *y = &fold.u.tune;
            tu_check(x->winner == y->winner && x->stored == y->stored &&
                         x->imported == y->imported && x->checksum == y->checksum &&
                         x->n_candidates == y->n_candidates &&
                         !strcmp(x->ns ? x->ns : "", y->ns ? y->ns : "") &&
                         !strcmp(x->key ? x->key : "", y->key ? y->key : ""),
                     "%s: the fold's tune differs", what);
        } else if (full.kind == ENVLOG_KIND_COMPILE) {
            const envlog_compile *x = &full.u.compile, *y = &fold.u.compile;
            tu_check(x->outcome == y->outcome && x->binary.size == y->binary.size &&
                         x->imported == y->imported &&
                         !memcmp(x->kernel_key.b, y->kernel_key.b, 16),
                     "%s: the fold's compile differs", what);
        }
    }
    envlog_arena_free(&a1);
    envlog_arena_free(&a2);
}

static void mutate_fields(const envlog_buf *rec, const envlog_schema *sc, uint64_t *path,
                          size_t depth, const char *kind, size_t *cases)
{
    envlog_buf out = {0};
    char what[160];
    for (size_t i = 0; i < sc->n_fields; i++) {
        const envlog_field *f = &sc->fields[i];
        path[depth] = f->key;
        for (size_t w = 0; w < sizeof wrong_values / sizeof *wrong_values; w++) {
            if (!tu_cbor_edit(rec->p, rec->len, path, depth + 1,
                              (const uint8_t *)wrong_values[w].bytes, wrong_values[w].n,
                              false, 0, &out))
                break; /* the field is absent from this sample */
            snprintf(what, sizeof what, "%s.%s = %s (depth %zu)", kind, f->name,
                     wrong_values[w].what, depth);
            agree(&out, what);
            (*cases)++;
        }
        /* The field's key a second time, in the same map. */
        if (tu_cbor_edit(rec->p, rec->len, path, depth, (const uint8_t *)"\x00", 1, true,
                         f->key, &out)) {
            snprintf(what, sizeof what, "%s.%s twice", kind, f->name);
            agree(&out, what);
            envlog_arena a = {0};
            envlog_record r;
            tu_check(envlog_event_decode(out.p, out.len, &r, &a) == ENVLOG_BAD_DATA,
                     "%s: taken", what);
            envlog_arena_free(&a);
            (*cases)++;
        }
        if (f->type == ENVLOG_F_OBJS && depth + 3 <= 6) {
            path[depth + 1] = 0; /* the first element */
            envlog_buf probe = {0};
            /* Only when there is a first element to walk into. */
            if (tu_cbor_edit(rec->p, rec->len, path, depth + 2, (const uint8_t *)"\xa0", 1,
                             false, 0, &probe))
                mutate_fields(rec, f->sub, path, depth + 2, kind, cases);
            envlog_buf_free(&probe);
        }
    }
    envlog_buf_free(&out);
}

START_TEST(test_fold_and_full_reader_agree)
{
    size_t cases = 0;
    for (size_t k = 0; k < 8; k++) {
        for (int v = TU_TYPICAL; v <= TU_UNICODE; v += 2) {
            tu_sample s;
            tu_sample_make(&s, tu_kinds[k], (tu_variant)v);
            envlog_buf b = {0};
            envlog_effect eff = tu_kinds[k] == ENVLOG_KIND_USER
                                    ? ENVLOG_CHANGED : envlog_effect_of(tu_kinds[k], &s.u);
            /* Format 1's layout: every field in the record's own map, where
             * every reader checks it (format 2's detail: test_format2_detail). */
            ck_assert_ok(envlog_event_encode_as(&b, tu_kinds[k], &stamp0, eff,
                                                ENVLOG_LEVEL_FULL, &s.u, 1));
            agree(&b, "the sample itself");
            uint64_t path[8];
            mutate_fields(&b, envlog_schema_of(tu_kinds[k]), path, 0,
                          envlog_kind_name(tu_kinds[k]), &cases);
            /* The envelope and an unknown key, twice. */
            static const uint64_t keys[] = {0, 1, 2, 3, 99};
            envlog_buf out = {0};
            for (size_t i = 0; i < 5; i++) {
                ck_assert(tu_cbor_edit(b.p, b.len, path, 0, (const uint8_t *)"\x00", 1,
                                       true, keys[i], &out));
                if (i < 4)
                    decode_fails(&out, ENVLOG_BAD_DATA, "an envelope key twice");
                else
                    agree(&out, "an unknown key");
            }
            envlog_buf_free(&out);
            envlog_buf_free(&b);
        }
    }
    ck_assert_uint_gt(cases, 500);
}
END_TEST

/* `fn` on [b] with each bit of each byte flipped in turn, and cut short at
 * every length, `what` naming each ("<label>, byte 3 bit 5"). */

/* The fold's memo of the last candidates it checked changes no verdict and
 * no value: a tune record with every bit of every byte flipped in turn, and
 * cut short at every length, decodes the same with a memo primed by the
 * record itself as without one, and as the full reader decodes it, its
 * slices lying in the bytes decoded. */
typedef struct memo_case {
    const envlog_dec_memo *primed;
    size_t cand, taken;
} memo_case;

static void memo_agrees(const envlog_buf *b, const char *what, void *ctx)
{
    memo_case *mc = ctx;
    const envlog_dec_memo *primed = mc->primed;
    size_t cand = mc->cand;
    envlog_arena a1 = {0}, a2 = {0}, a3 = {0};
    envlog_record with, without, full;
    envlog_text s_with[ENVLOG_FIELDS_MAX], s_without[ENVLOG_FIELDS_MAX];
    envlog_dec_memo m = *primed;
    envlog_err e1 = envlog_event_decode_slices(b->p, b->len, &with, &a1, s_with, &m);
    envlog_err e2 = envlog_event_decode_slices(b->p, b->len, &without, &a2, s_without, NULL);
    envlog_err e3 = envlog_event_decode(b->p, b->len, &full, &a3);
    tu_check(e1 == e2 && e2 == e3, "%s: with the memo %s, without it %s, the full reader %s",
             what, envlog_strerror(e1), envlog_strerror(e2), envlog_strerror(e3));
    if (!e1 && !e2 && with.kind == ENVLOG_KIND_TUNE) {
        mc->taken++;
        tu_check(with.u.tune.n_candidates == without.u.tune.n_candidates &&
                     s_with[cand].p == s_without[cand].p && s_with[cand].n == s_without[cand].n,
                 "%s: the candidates differ with the memo", what);
        tu_check(!s_with[cand].n || ((const uint8_t *)s_with[cand].p >= b->p &&
                                     (const uint8_t *)s_with[cand].p < b->p + b->len),
                 "%s: the candidates lie outside the record", what);
    }
    envlog_arena_free(&a1);
    envlog_arena_free(&a2);
    envlog_arena_free(&a3);
}

START_TEST(test_fold_memo)
{
    const envlog_schema *sc = envlog_schema_of(ENVLOG_KIND_TUNE);
    size_t cand = 0;
    while (strcmp(sc->fields[cand].name, "candidates"))
        cand++;
    for (int v = TU_TYPICAL; v <= TU_UNICODE; v += 2) {
        tu_sample s;
        tu_sample_make(&s, ENVLOG_KIND_TUNE, (tu_variant)v);
        ck_assert_uint_ge(s.u.tune.n_candidates, 2);
        envlog_buf b = {0}, m = {0};
        ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                         ENVLOG_LEVEL_FULL, &s.u));
        envlog_dec_memo primed;
        memset(&primed, 0, sizeof primed);
        envlog_arena a = {0};
        envlog_record rec;
        envlog_text sl[ENVLOG_FIELDS_MAX];
        ck_assert_ok(envlog_event_decode_slices(b.p, b.len, &rec, &a, sl, &primed));
        ck_assert_msg(primed.len > primed.head && primed.n == s.u.tune.n_candidates,
                      "the memo holds no candidates");
        /* Taken from the memo: the same record's slices, in its own bytes. */
        ck_assert_ok(envlog_buf_append(&m, b.p, b.len));
        envlog_dec_memo again = primed;
        envlog_text sl2[ENVLOG_FIELDS_MAX];
        ck_assert_ok(envlog_event_decode_slices(m.p, m.len, &rec, &a, sl2, &again));
        ck_assert(sl2[cand].p == (const char *)m.p + ((const uint8_t *)sl[cand].p - b.p));
        char what[32];
        snprintf(what, sizeof what, "variant %d", v);
        memo_case mc = {&primed, cand, 0};
        tu_each_damage(&b, what, memo_agrees, &mc);
        /* Flips in the detail and in values after the candidates leave
         * records that decode. */
        ck_assert_uint_gt(mc.taken, 8);
        envlog_arena_free(&a);
        envlog_buf_free(&m);
        envlog_buf_free(&b);
    }
}
END_TEST

/* The readers read a record of a kind with a detail in the shape the
 * encoder gives it by a path of their own (decode.c, fold_fast), every
 * other by the walk of its map: the two give the same verdict and the same
 * values.  Over tune and compile records (typical, and with Unicode texts),
 * every bit flipped and every cut: the fold's reading with slices and with
 * strings, and the full reader's (that path, where the shape holds),
 * against the full reader's by the walk alone (envlog_decode_walk_only,
 * whose verdict is the fold's walk's: test_fold_memo): the fold's field by
 * field of its fields, the full reader's as a whole record. */
typedef struct fast_case {
    uint64_t fast, taken;
} fast_case;

static void fast_agrees(const envlog_buf *b, const char *what, void *ctx)
{
    fast_case *fc = ctx;
    envlog_arena a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0};
    envlog_record sliced, fold, full, walked;
    envlog_text sl[ENVLOG_FIELDS_MAX];
    envlog_dec_memo m1, m2;
    memset(&m1, 0, sizeof m1);
    memset(&m2, 0, sizeof m2);
    envlog_err e1 = envlog_event_decode_slices(b->p, b->len, &sliced, &a1, sl, &m1);
    envlog_err e2 = envlog_event_decode_slices(b->p, b->len, &fold, &a2, NULL, &m2);
    envlog_err e3 = envlog_event_decode(b->p, b->len, &full, &a3);
    envlog_decode_walk_only(true);
    envlog_err e4 = envlog_event_decode(b->p, b->len, &walked, &a4);
    envlog_decode_walk_only(false);
    fc->fast += m1.fast + m2.fast;
    tu_check(e1 == e4 && e2 == e4 && e3 == e4,
             "%s: the fold with slices %s, with strings %s, the full reader %s, the walk %s",
             what, envlog_strerror(e1), envlog_strerror(e2), envlog_strerror(e3),
             envlog_strerror(e4));
    const envlog_schema *s = e1 || e2 || e3 || e4 ? NULL : envlog_schema_of(walked.kind);
    if (s && s->detail) {
        fc->taken++;
        const char *d1 = fold_agree(&sliced, sl, &walked), *d2 = fold_agree(&fold, NULL, &walked);
        tu_check(!d1, "%s: %s differs (slices)", what, d1);
        tu_check(!d2, "%s: %s differs", what, d2);
        tu_check(fold_agree_whole(&full, &walked), "%s: the full reader's record differs",
                 what);
    }
    envlog_arena_free(&a1);
    envlog_arena_free(&a2);
    envlog_arena_free(&a3);
    envlog_arena_free(&a4);
}

START_TEST(test_fold_fast_agrees)
{
    static const envlog_kind kinds[] = {ENVLOG_KIND_TUNE, ENVLOG_KIND_COMPILE};
    for (size_t k = 0; k < 2; k++)
        for (int v = TU_TYPICAL; v <= TU_UNICODE; v += 2) {
            tu_sample s;
            tu_sample_make(&s, kinds[k], (tu_variant)v);
            envlog_buf b = {0};
            if (envlog_event_encode(&b, kinds[k], &stamp0, ENVLOG_CHANGED, ENVLOG_LEVEL_FULL,
                                    &s.u) != ENVLOG_OK) {
                envlog_buf_free(&b);
                continue; /* a variant its kind does not take */
            }
            char what[48];
            snprintf(what, sizeof what, "%s variant %d", envlog_kind_name(kinds[k]), v);
            fast_case whole = {0, 0}, damaged = {0, 0};
            fast_agrees(&b, what, &whole);
            tu_each_damage(&b, what, fast_agrees, &damaged);
            /* The encoder's records take the path, and so do records
             * damaged in a value that still reads. */
            ck_assert_msg(whole.fast == 2, "%s: not read by the fold's path", what);
            ck_assert_msg(damaged.fast > 8, "%s: no damaged record took the path", what);
            ck_assert_uint_gt(damaged.taken, 8);
            envlog_buf_free(&b);
        }
}
END_TEST

/* The same over values of every head: each value of a record's map (the
 * envelope's, the fold's fields, the detail) replaced in turn by each item
 * of a catalogue (every width of every integer head at its bounds, the
 * simple values, floats of each width, texts and byte strings of each
 * length form, bad UTF-8, arrays, maps, a tag): the fold's path and its walk
 * give the same verdict and the same values, and the path takes the values
 * it is written for. */

/* `b` with the value of pair `pair` of its top map replaced by `alt`, in
 * `out`; false when it has no such pair. */
static bool with_value(const envlog_buf *b, size_t pair, const tu_head_alt *alt, envlog_buf *out)
{
    envlog_pull p = {b->p, b->len, 0};
    envlog_tok t;
    ck_assert_ok(envlog_pull_next(&p, &t));
    ck_assert_int_eq(t.type, ENVLOG_TOK_MAP);
    if (pair >= t.u)
        return false;
    for (size_t i = 0; i <= pair; i++) {
        ck_assert_ok(envlog_pull_next(&p, &t));       /* the key */
        size_t from = p.pos;
        ck_assert_ok(envlog_pull_next(&p, &t));       /* the value */
        ck_assert_ok(envlog_pull_skip_at(&p, &t, 1));
        if (i == pair) {
            out->len = 0;
            ck_assert_ok(envlog_buf_append(out, b->p, from));
            ck_assert_ok(envlog_buf_append(out, alt->b, alt->n));
            ck_assert_ok(envlog_buf_append(out, b->p + p.pos, b->len - p.pos));
        }
    }
    return true;
}

START_TEST(test_fold_fast_heads)
{
    static const envlog_kind kinds[] = {ENVLOG_KIND_TUNE, ENVLOG_KIND_COMPILE};
    for (size_t k = 0; k < 2; k++) {
        tu_sample s;
        tu_sample_make(&s, kinds[k], TU_TYPICAL);
        envlog_buf b = {0}, m = {0};
        ck_assert_ok(envlog_event_encode(&b, kinds[k], &stamp0, ENVLOG_CHANGED,
                                         ENVLOG_LEVEL_FULL, &s.u));
        fast_case fc = {0, 0};
        size_t pairs = 0;
        /* Pair 0 is the kind, which every reader reads before either way. */
        for (size_t pair = 1; with_value(&b, pair, &tu_head_alts[0], &m); pair++, pairs++)
            for (size_t a = 0; a < tu_n_head_alts; a++) {
                ck_assert(with_value(&b, pair, &tu_head_alts[a], &m));
                char what[96];
                snprintf(what, sizeof what, "%s, pair %zu: %s", envlog_kind_name(kinds[k]), pair,
                         tu_head_alts[a].name);
                fast_agrees(&m, what, &fc);
            }
        ck_assert_uint_ge(pairs, 10);
        /* Each value takes some of the catalogue's heads. */
        ck_assert_uint_ge(fc.fast, 3 * pairs);
        envlog_buf_free(&m);
        envlog_buf_free(&b);
    }
}
END_TEST

/* A snapshot ENTRY's record is decoded where it lies in the ENTRY's map
 * (envlog_struct_decode_with_record), its decode saying where it ends,
 * where the map was decoded with the record skipped with every check
 * (envlog_pull_skip_at) and the record then decoded on its own: the two
 * accept the same bytes and give the same record.  Over records with
 * every kind of item in an unknown key (nested maps and arrays, tags,
 * floats, strings, a nesting at the limit and past it), every bit flipped
 * and every cut, each inside a map of a number before it and one after,
 * decoded whole and for the fold. */
typedef struct wrapped {
    uint64_t before, after;
    envlog_bytes record;
} wrapped;

static const envlog_field wrapped_f[] = {
    {0, ENVLOG_F_U64, 0, "before", offsetof(wrapped, before), 0, SIZE_MAX, NULL, NULL, 0, 0, 0},
    {1, ENVLOG_F_RECORD, 0, "record", offsetof(wrapped, record), 0, SIZE_MAX, NULL, NULL, 0, 0,
     0},
    {2, ENVLOG_F_U64, 0, "after", offsetof(wrapped, after), 0, SIZE_MAX, NULL, NULL, 0, 0, 0},
};
static const envlog_schema wrapped_schema = {"wrapped", sizeof(wrapped), wrapped_f, 3, 0, 0};

static void in_place_agrees(const envlog_buf *rb, const char *what, void *ctx)
{
    size_t *both = ctx;
    envlog_buf b = {0};
    ck_assert_ok(envlog_buf_append(&b, "\xa3\x00\x07\x01", 4));
    ck_assert_ok(envlog_buf_append(&b, rb->p, rb->len));
    ck_assert_ok(envlog_buf_append(&b, "\x02\x05", 2));
    for (int fold = 0; fold < 2; fold++) {
        envlog_arena a1 = {0}, a2 = {0};
        envlog_record r1, r2;
        wrapped w1, w2;
        memset(&w1, 0, sizeof w1);
        memset(&w2, 0, sizeof w2);
        envlog_pull p1 = {b.p, b.len, 0}, p2 = {b.p, b.len, 0};
        envlog_tok t;
        ck_assert_ok(envlog_pull_next(&p1, &t));
        p2.pos = p1.pos;
        bool old_ok = envlog_struct_decode(&p1, &t, &wrapped_schema, &w1, &a1) == ENVLOG_OK &&
                      p1.pos == b.len &&
                      (fold ? envlog_event_decode_fold : envlog_event_decode)(
                          w1.record.data, w1.record.size, &r1, &a1) == ENVLOG_OK;
        bool new_ok = envlog_struct_decode_with_record(&p2, &t, &wrapped_schema, &w2, &a2, &r2,
                                                       fold) == ENVLOG_OK &&
                      p2.pos == b.len;
        tu_check(old_ok == new_ok, "%s (%s): %s with the record on its own, %s in place", what,
                 fold ? "fold" : "whole", old_ok ? "taken" : "refused",
                 new_ok ? "taken" : "refused");
        if (old_ok && new_ok) {
            tu_check(w1.record.data == w2.record.data && w1.record.size == w2.record.size &&
                         w1.before == w2.before && w1.after == w2.after,
                     "%s: the map reads differently", what);
            tu_check(r1.kind == r2.kind && r1.payload.data == r2.payload.data &&
                         r1.payload.size == r2.payload.size &&
                         r1.stamp.seq == r2.stamp.seq && r1.effect == r2.effect &&
                         (r1.kind != ENVLOG_KIND_TUNE ||
                          (r1.u.tune.checksum == r2.u.tune.checksum &&
                           r1.u.tune.winner == r2.u.tune.winner &&
                           r1.u.tune.n_candidates == r2.u.tune.n_candidates &&
                           fold_agree_text(r1.u.tune.key, r2.u.tune.key) &&
                           fold_agree_text(r1.u.tune.ns, r2.u.tune.ns))),
                     "%s (%s): the record reads differently", what, fold ? "fold" : "whole");
            *both += 1;
        }
        envlog_arena_free(&a1);
        envlog_arena_free(&a2);
    }
    envlog_buf_free(&b);
}

START_TEST(test_record_in_place_agrees)
{
    /* The value of the unknown key 99: an array of a map with a text key, a
     * tag, floats of each width, byte and text strings, true/null and
     * negative integers; then arrays nested past the limit; then a text,
     * ending the record. */
    static const uint8_t mixed[] = {
        0x86, 0xa2, 0x61, 'k', 0x82, 0x01, 0x39, 0x01, 0x00, 0x02, 0xc1, 0x1a, 0x5f, 0, 0, 1,
        0xf9, 0x3c, 0x00, 0xfa, 0x3f, 0x80, 0, 0, 0x43, 1, 2, 3, 0x82, 0xf5, 0xf6,
        0xfb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18};
    size_t both = 0;
    for (int shape = 0; shape < 5; shape++) {
        tu_sample s;
        tu_sample_make(&s, ENVLOG_KIND_TUNE, shape & 1 ? TU_UNICODE : TU_TYPICAL);
        envlog_buf b = {0};
        ck_assert_ok(envlog_event_encode_as(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                            ENVLOG_LEVEL_FULL, &s.u, 1));
        ck_assert(b.p[0] >= 0xa1 && b.p[0] < 0xb7);
        if (shape >= 2) { /* key 99 and its value, one more pair */
            b.p[0]++;
            ck_assert_ok(envlog_buf_append(&b, "\x18\x63", 2));
            if (shape == 2) {
                ck_assert_ok(envlog_buf_append(&b, mixed, sizeof mixed));
            } else if (shape == 4) { /* a string last */
                ck_assert_ok(envlog_buf_append(&b, "\x63\x61\x62\x63", 4));
            } else { /* arrays from depth 1 to 64, in the last an item at 65 */
                for (int d = 0; d < ENVLOG_CBOR_MAX_DEPTH - 1; d++)
                    ck_assert_ok(envlog_buf_append(&b, "\x81", 1));
                ck_assert_ok(envlog_buf_append(&b, "\x81\x00", 2));
            }
        }
        char what[32];
        snprintf(what, sizeof what, "shape %d", shape);
        in_place_agrees(&b, what, &both);
        tu_each_damage(&b, what, in_place_agrees, &both);
        envlog_buf_free(&b);
    }
    ck_assert_uint_gt(both, 100);
}
END_TEST

/* The hand-written encoders (envlog_enc_fast) write what the walk of
 * their schema writes, byte for byte, or nothing: trials filled field by
 * field from the schema (a field added to it is filled too, and the fast
 * encoder must then write it or leave the trial to the walk) with values
 * at every edge of their encodings, at both levels. */
static uint64_t xs_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void fill_random(void *in, const envlog_schema *sc, uint64_t *x)
{
    static const char *const texts[] = {NULL, "", "m128n128k64w8s3", "a23-byte-name-ascii-xyz",
                                        "a-24-byte-name-ascii-xyz", "na\xc3\xafve", "\xff\xfe",
                                        "m64n64k32w2s5"};
    static const uint64_t ints[] = {0, 1, 23, 24, 255, 256, 65535, 65536, 0xffffffffu,
                                    0x100000000ull, UINT64_MAX};
    static const double reals[] = {0.0, -0.0, 1.5, 30720.001953125, 0.1, 1e300, 5e-324,
                                   NAN, INFINITY, -INFINITY, 65504.0, 16777217.0};
    static const double samples[] = {1.0, 0.1, 2.5};
    memset(in, 0, sc->size);
    for (size_t i = 0; i < sc->n_fields; i++) {
        const envlog_field *f = &sc->fields[i];
        char *at = (char *)in + f->off;
        uint64_t r = xs_next(x);
        if (f->present_off != SIZE_MAX)
            *(bool *)((char *)in + f->present_off) = r % 4 == 0;
        r >>= 2;
        switch ((envlog_fty)f->type) {
        case ENVLOG_F_TEXT: {
            /* Mostly a name that is there and no error: the common shape. */
            size_t k = r % 16 < 10 ? (i == 0 ? 2 : 0) : (r >> 4) % 8;
            *(const char **)at = texts[k];
            break;
        }
        case ENVLOG_F_U32: *(uint32_t *)at = (uint32_t)(r % 2 ? ints[(r >> 1) % 11] : r >> 8); break;
        case ENVLOG_F_U64: *(uint64_t *)at = r % 2 ? ints[(r >> 1) % 11] : r >> 8; break;
        case ENVLOG_F_F64:
            *(double *)at = r % 3 == 0 ? reals[(r >> 2) % 12]
                            : r % 3 == 1 ? (double)(float)((double)(r >> 20) / 1024.0)
                                         : (double)(r >> 11) / 3.0;
            break;
        case ENVLOG_F_F64S:
            *(const double **)at = samples;
            *(size_t *)((char *)in + f->count_off) = r % 4 == 0 ? 1 + r / 4 % 3 : 0;
            break;
        default: ck_abort_msg("%s.%s: a type this test does not fill", sc->name, f->name);
        }
    }
}

START_TEST(test_fast_encoders)
{
    const envlog_schema *tune = envlog_schema_of(ENVLOG_KIND_TUNE), *trial = NULL;
    for (size_t i = 0; i < tune->n_fields; i++)
        if (tune->fields[i].type == ENVLOG_F_OBJS && !strcmp(tune->fields[i].name, "trials"))
            trial = tune->fields[i].sub;
    ck_assert_ptr_nonnull(trial);
    ck_assert_int_eq(trial->fast, ENVLOG_FAST_TRIAL);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    size_t fast = 0, walked = 0;
    envlog_buf w = {0}, f = {0}, g = {0};
    envlog_trial t;
    for (int i = 0; i < 20000; i++) {
        fill_random(&t, trial, &x);
        for (envlog_level lv = ENVLOG_LEVEL_BASIC; lv <= ENVLOG_LEVEL_FULL; lv++) {
            w.len = f.len = g.len = 0;
            envlog_err ew = envlog_struct_encode_walk(&w, trial, &t, lv);
            if (envlog_enc_fast(&f, trial, &t, lv)) {
                fast++;
                ck_assert_msg(!ew && w.len == f.len && !memcmp(w.p, f.p, w.len),
                              "trial %d at level %d: the fast encoder's %zu bytes differ "
                              "from the walk's %zu", i, (int)lv, f.len, w.len);
            } else {
                walked++;
                ck_assert_msg(f.len == 0, "trial %d: the fast encoder wrote and gave up", i);
            }
            /* What the writer uses: one or the other, the same bytes. */
            envlog_err eg = envlog_struct_encode(&g, trial, &t, lv);
            ck_assert_msg(eg == ew && (ew || (g.len == w.len && !memcmp(g.p, w.p, w.len))),
                          "trial %d at level %d: the writer and the walk differ", i, (int)lv);
        }
    }
    ck_assert_uint_gt(fast, 5000);
    ck_assert_uint_gt(walked, 5000);
    envlog_buf_free(&w);
    envlog_buf_free(&f);
    envlog_buf_free(&g);
}
END_TEST

/* Values across fields: the same rules for the writer and both readers. */
START_TEST(test_cross_field_rules)
{
    static const char *const cands[] = {"a", "b"};
    envlog_trial tr = {.name = "a", .index = 1};
    envlog_tune t = {.ns = "n", .key = "k", .candidates = cands, .n_candidates = 2,
                     .trials = &tr, .n_trials = 1, .winner = 1, .stored = true};
    envlog_buf b = {0}, out = {0};
    /* Format 1: the trials in the record's own map (in format 2 a trial
     * out of range is the detail's problem: test_format2_detail). */
    ck_assert_ok(envlog_event_encode_as(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                        ENVLOG_LEVEL_BASIC, &t, 1));
    uint64_t path[4] = {11};
    /* winner 2 of 2 candidates, winner -2 */
    ck_assert(tu_cbor_edit(b.p, b.len, path, 1, (const uint8_t *)"\x02", 1, false, 0, &out));
    decode_fails(&out, ENVLOG_BAD_DATA, "winner out of range");
    ck_assert(tu_cbor_edit(b.p, b.len, path, 1, (const uint8_t *)"\x21", 1, false, 0, &out));
    decode_fails(&out, ENVLOG_BAD_DATA, "winner -2");
    /* a stored tune without a winner */
    ck_assert(tu_cbor_edit(b.p, b.len, path, 1, (const uint8_t *)"\x20", 1, false, 0, &out));
    decode_fails(&out, ENVLOG_BAD_DATA, "stored without a winner");
    /* a trial naming candidate 2 of 2 */
    uint64_t tp[3] = {8, 0, 1};
    ck_assert(tu_cbor_edit(b.p, b.len, tp, 3, (const uint8_t *)"\x02", 1, false, 0, &out));
    decode_fails(&out, ENVLOG_BAD_DATA, "trial index out of range");
    /* the effect of a stored tune is changed */
    path[0] = 3;
    ck_assert(tu_cbor_edit(b.p, b.len, path, 1, (const uint8_t *)"\x00", 1, false, 0, &out));
    decode_fails(&out, ENVLOG_BAD_DATA, "a stored tune observed");
    /* an outcome out of range */
    envlog_compile c = {.ns = "c", .name = "k", .outcome = ENVLOG_LOADED};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_COMPILE, &stamp0, ENVLOG_OBSERVED,
                                     ENVLOG_LEVEL_BASIC, &c));
    path[0] = 11;
    ck_assert(tu_cbor_edit(b.p, b.len, path, 1, (const uint8_t *)"\x03", 1, false, 0, &out));
    decode_fails(&out, ENVLOG_BAD_DATA, "outcome 3");
    /* The writer refuses each of these too. */
    t.winner = 2;
    ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                      ENVLOG_LEVEL_BASIC, &t), ENVLOG_INVALID_ARG);
    t.winner = 1;
    tr.index = 2;
    ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                      ENVLOG_LEVEL_BASIC, &t), ENVLOG_INVALID_ARG);
    tr.index = 0;
    ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_OBSERVED,
                                      ENVLOG_LEVEL_BASIC, &t), ENVLOG_INVALID_ARG);
    envlog_buf_free(&b);
    envlog_buf_free(&out);
}
END_TEST

/* ------------------------------------------------ format 2: the detail */

/* `rec` with key 23 holding `body`'s bytes. */
static void with_detail(const envlog_buf *rec, const uint8_t *body, size_t n, envlog_buf *out)
{
    envlog_buf w = {0};
    ck_assert_ok(envlog_enc_bytes(&w, body, n));
    uint64_t path[1] = {23};
    ck_assert(tu_cbor_edit(rec->p, rec->len, path, 1, w.p, w.len, false, 0, out));
    envlog_buf_free(&w);
}

/* A record's JSON rendering as the full reader reads it, or "" when it
 * does not read; its body's problem in *problem (NULL: none). */
static void read_full(const envlog_buf *b, sink *json, envlog_err *e, bool *problem)
{
    envlog_arena a = {0};
    envlog_record rec;
    sink_reset(json);
    *e = envlog_event_decode(b->p, b->len, &rec, &a);
    *problem = !*e && rec.detail_problem;
    if (!*e)
        ck_assert_ok(envlog_record_json(&rec, sink_fn, json));
    /* The fold takes whatever the full reader takes, body or not. */
    envlog_arena fa = {0};
    envlog_record f;
    envlog_err fe = envlog_event_decode_fold(b->p, b->len, &f, &fa);
    tu_check(fe == *e, "the fold says %s, the full reader %s", envlog_strerror(fe),
             envlog_strerror(*e));
    tu_check(fe || !f.detail_problem, "the fold read a detail");
    envlog_arena_free(&a);
    envlog_arena_free(&fa);
}

/* Format 2 (envlog(5), RECORD ENCODING): a record reads to exactly what the
 * same record in format 1 reads to (the same JSON); each detail field broken
 * in turn (each wrong value, the key twice) leaves the record standing for
 * both readers, and the full reader names the detail's problem exactly where
 * format 1's reader refuses the record, its other fields read as before. */
START_TEST(test_format2_detail)
{
    size_t cases = 0;
    sink j1 = {0}, j2 = {0};
    envlog_buf b1 = {0}, b2 = {0}, body = {0}, e1b = {0}, e2b = {0}, out2 = {0};
    for (size_t k = 0; k < 8; k++) {
        const envlog_schema *sc = envlog_schema_of(tu_kinds[k]);
        for (int v = TU_TYPICAL; v <= TU_UNICODE; v++) {
            tu_sample s;
            tu_sample_make(&s, tu_kinds[k], (tu_variant)v);
            envlog_effect eff = tu_kinds[k] == ENVLOG_KIND_USER
                                    ? ENVLOG_CHANGED : envlog_effect_of(tu_kinds[k], &s.u);
            ck_assert_ok(envlog_event_encode_as(&b1, tu_kinds[k], &stamp0, eff,
                                                ENVLOG_LEVEL_FULL, &s.u, 1));
            ck_assert_ok(envlog_event_encode(&b2, tu_kinds[k], &stamp0, eff,
                                             ENVLOG_LEVEL_FULL, &s.u));
            envlog_err r1, r2;
            bool p1, p2;
            read_full(&b1, &j1, &r1, &p1);
            read_full(&b2, &j2, &r2, &p2);
            ck_assert_ok(r1);
            ck_assert_ok(r2);
            ck_assert(!p1 && !p2);
            ck_assert_str_eq(j1.p, j2.p);
            bool has_detail = tu_detail_bytes(b2.p, b2.len, &body);
            ck_assert(has_detail == (sc->detail && b1.len != b2.len));
            if (!has_detail)
                continue;
            /* The fold reads none of it: a detail that is garbage throughout
             * folds as the record does. */
            with_detail(&b2, (const uint8_t *)"\xff\xff", 2, &out2);
            read_full(&out2, &j2, &r2, &p2);
            ck_assert(!r2 && p2);
            for (size_t i = 0; i < sc->n_fields; i++) {
                const envlog_field *f = &sc->fields[i];
                if (f->fold)
                    continue;
                uint64_t path[1] = {f->key};
                for (size_t w = 0; w <= sizeof wrong_values / sizeof *wrong_values; w++) {
                    bool twice = w == sizeof wrong_values / sizeof *wrong_values;
                    const uint8_t *with = twice ? (const uint8_t *)"\x00"
                                                : (const uint8_t *)wrong_values[w].bytes;
                    size_t wn = twice ? 1 : wrong_values[w].n;
                    /* The field is absent from this sample: nothing to break. */
                    if (!tu_cbor_edit(b1.p, b1.len, path, twice ? 0 : 1, with, wn, twice,
                                      f->key, &e1b))
                        break;
                    ck_assert(tu_cbor_edit(body.p, body.len, path, twice ? 0 : 1, with, wn,
                                           twice, f->key, &e2b));
                    with_detail(&b2, e2b.p, e2b.len, &out2);
                    read_full(&e1b, &j1, &r1, &p1);
                    read_full(&out2, &j2, &r2, &p2);
                    tu_check(!r2, "%s.%s: a broken body dropped the record", sc->name,
                             f->name);
                    tu_check(p2 == (r1 == ENVLOG_BAD_DATA),
                             "%s.%s = %s: format 1 says %s, the detail's problem is %s",
                             sc->name, f->name, twice ? "twice" : wrong_values[w].what,
                             envlog_strerror(r1), p2 ? "named" : "not named");
                    if (!r1)
                        tu_check(!strcmp(j1.p, j2.p), "%s.%s: %s read differently", sc->name,
                                 f->name, twice ? "twice" : wrong_values[w].what);
                    cases++;
                }
            }
        }
    }
    ck_assert_uint_gt(cases, 300);
    sink_reset(&j1);
    sink_reset(&j2);
    envlog_buf_free(&b1);
    envlog_buf_free(&b2);
    envlog_buf_free(&body);
    envlog_buf_free(&e1b);
    envlog_buf_free(&e2b);
    envlog_buf_free(&out2);
}
END_TEST

/* What a format 2 record's map and detail may hold. */
START_TEST(test_format2_detail_rules)
{
    static const char *const cands[] = {"a", "b"};
    envlog_trial tr = {.name = "a", .index = 1};
    envlog_tune t = {.ns = "n", .key = "k", .candidates = cands, .n_candidates = 2,
                     .trials = &tr, .n_trials = 1, .winner = 1, .stored = true,
                     .policy = "p"};
    envlog_buf b = {0}, body = {0}, e = {0}, out = {0};
    sink j = {0};
    envlog_err r;
    bool problem;
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                     ENVLOG_LEVEL_BASIC, &t));
    ck_assert(tu_detail_bytes(b.p, b.len, &body));
    /* A fold field inside the body: the fold would not see it. */
    uint64_t top[1] = {0};
    ck_assert(tu_cbor_edit(body.p, body.len, top, 0, (const uint8_t *)"\x61x", 2, true, 4, &e));
    with_detail(&b, e.p, e.len, &out);
    read_full(&out, &j, &r, &problem);
    ck_assert(!r && problem);
    /* A body field in both places. */
    ck_assert(tu_cbor_edit(b.p, b.len, top, 0, (const uint8_t *)"\x61q", 2, true, 9, &out));
    read_full(&out, &j, &r, &problem);
    ck_assert(!r && problem);
    /* The record's own map is read as ever; the body is not. */
    ck_assert_ptr_nonnull(strstr(j.p, "\"policy\":\"q\""));
    ck_assert_ptr_null(strstr(j.p, "\"policy\":\"p\""));
    /* A trial naming candidate 2 of 2 inside the body. */
    uint64_t tp[3] = {8, 0, 1};
    ck_assert(tu_cbor_edit(body.p, body.len, tp, 3, (const uint8_t *)"\x02", 1, false, 0, &e));
    with_detail(&b, e.p, e.len, &out);
    read_full(&out, &j, &r, &problem);
    ck_assert(!r && problem);
    ck_assert_ptr_nonnull(strstr(j.p, "\"detail_problem\":\"tune record: a trial names a "
                                      "candidate the tune does not have\""));
    ck_assert_ptr_null(strstr(j.p, "\"trials\""));
    ck_assert_ptr_nonnull(strstr(j.p, "\"winner\":1"));
    /* Not a map; a map and a byte more. */
    with_detail(&b, (const uint8_t *)"\x01", 1, &out);
    read_full(&out, &j, &r, &problem);
    ck_assert(!r && problem);
    ck_assert_ok(envlog_buf_append(&body, "\x00", 1));
    with_detail(&b, body.p, body.len, &out);
    read_full(&out, &j, &r, &problem);
    ck_assert(!r && problem);
    /* Key 23 that is not a byte string: the record, for every reader. */
    uint64_t k23[1] = {23};
    ck_assert(tu_cbor_edit(b.p, b.len, k23, 1, (const uint8_t *)"\x01", 1, false, 0, &out));
    decode_fails(&out, ENVLOG_BAD_DATA, "key 23 a number");
    /* A kind without a body: key 23 is a key this version does not know. */
    envlog_forget fg = {.table = ENVLOG_TABLE_TUNE, .ns = "n", .key = "k"};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_FORGET, &stamp0, ENVLOG_CHANGED,
                                     ENVLOG_LEVEL_BASIC, &fg));
    ck_assert(tu_cbor_edit(b.p, b.len, top, 0, (const uint8_t *)"\x41\xff", 2, true, 23, &out));
    read_full(&out, &j, &r, &problem);
    ck_assert(!r && !problem);
    sink_reset(&j);
    envlog_buf_free(&b);
    envlog_buf_free(&body);
    envlog_buf_free(&e);
    envlog_buf_free(&out);
}
END_TEST

START_TEST(test_lying_lengths)
{
    envlog_buf b = {0};
    /* Counts far beyond the bytes there: refused before any allocation is
     * sized from them (decode_fails checks the arena). */
    static const struct {
        uint64_t key;
        const char *bytes;
        size_t n;
        const char *what;
    } cases[] = {
        {7, "\x9b\x10\x00\x00\x00\x00\x00\x00\x00", 9, "2^60 candidates"},
        {7, "\x9a\xff\xff\xff\xff\x61x", 7, "2^32 candidates"},
        {8, "\x9b\x00\x00\x00\x01\x00\x00\x00\x00\xa0", 10, "2^32 trials"},
        {8, "\x81\xbb\x7f\xff\xff\xff\xff\xff\xff\xff", 10, "trial map of 2^63 pairs"},
        {4, "\x7b\x00\x00\x01\x00\x00\x00\x00\x00xyz", 12, "text of 2^40 bytes"},
        {4, "\x7a\xff\xff\xff\xff", 5, "text of 4 GiB"},
        {99, "\x9b\xff\xff\xff\xff\xff\xff\xff\xff", 9, "unknown key, 2^64-1 items"},
        {99, "\xbb\x80\x00\x00\x00\x00\x00\x00\x00", 9, "unknown key, 2^63 pairs"},
        {99, "\x5b\x00\x00\x10\x00\x00\x00\x00\x00", 9, "bytes of 2^44"},
        {99, "\x9f\x01\xff", 3, "indefinite array"},
        {99, "\x7f\x61x\xff", 4, "indefinite text"},
        {99, "\xf0", 1, "unassigned simple value"},
        {99, "\xf8\x20", 2, "one-byte simple value"},
        {99, "\x1c", 1, "reserved additional info"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        envelope(&b, 5, ENVLOG_KIND_TUNE);
        u(&b, cases[i].key);
        raw(&b, cases[i].bytes, cases[i].n);
        decode_fails(&b, ENVLOG_BAD_DATA, cases[i].what);
    }
    /* A map claiming 2^32 pairs. */
    b.len = 0;
    raw(&b, "\xba\xff\xff\xff\xff\x00\x11", 7);
    decode_fails(&b, ENVLOG_BAD_DATA, "record map of 2^32 pairs");
    /* Nesting deeper than the limit, under a key nobody knows. */
    envelope(&b, 5, ENVLOG_KIND_MARK);
    u(&b, 99);
    for (int i = 0; i < 1000; i++)
        raw(&b, "\x81", 1);
    raw(&b, "\x00", 1);
    decode_fails(&b, ENVLOG_BAD_DATA, "1000 nested arrays");
    /* Just within the limit is fine: the value of key 99 lies at depth 1,
     * inside the record's map, so 63 arrays put the last item at 64. */
    envelope(&b, 5, ENVLOG_KIND_MARK);
    u(&b, 99);
    for (int i = 0; i < ENVLOG_CBOR_MAX_DEPTH - 1; i++)
        raw(&b, "\x81", 1);
    raw(&b, "\x00", 1);
    envlog_arena a = {0};
    envlog_record rec;
    ck_assert_ok(envlog_event_decode(b.p, b.len, &rec, &a));
    ck_assert_ok(envlog_event_decode_fold(b.p, b.len, &rec, &a));
    /* One more level is over it, for the full reader and the fold alike. */
    envelope(&b, 5, ENVLOG_KIND_MARK);
    u(&b, 99);
    for (int i = 0; i < ENVLOG_CBOR_MAX_DEPTH; i++)
        raw(&b, "\x81", 1);
    raw(&b, "\x00", 1);
    decode_fails(&b, ENVLOG_BAD_DATA, "65 levels");
    ck_assert_err(envlog_event_decode_fold(b.p, b.len, &rec, &a), ENVLOG_BAD_DATA);
    envlog_arena_free(&a);
    envlog_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------------ UTF-8 */

static const char *const bad_utf8[] = {
    "\x80",              /* lone continuation */
    "\xc0\xaf",          /* overlong '/' */
    "\xe0\x80\xaf",      /* overlong, 3 bytes */
    "\xf0\x80\x80\xaf",  /* overlong, 4 bytes */
    "\xed\xa0\x80",      /* surrogate U+D800 */
    "\xed\xbf\xbf",      /* surrogate U+DFFF */
    "\xf4\x90\x80\x80",  /* U+110000 */
    "\xe6\x97",          /* cut short */
    "ok\xff",            /* 0xff */
    "\xf8\x88\x80\x80\x80", /* 5-byte form */
    "a\xc3",             /* truncated at the end */
    "\xc3\x28",          /* bad continuation */
};
#define N_BAD_UTF8 (sizeof bad_utf8 / sizeof *bad_utf8)

START_TEST(test_utf8)
{
    static const char *const good[] = {"", "ascii", "é", "日本", "🚀", "\xef\xbf\xbf",
                                       "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(envlog_utf8_valid(good[i], strlen(good[i])), "good[%zu]", i);
    for (size_t i = 0; i < N_BAD_UTF8; i++)
        ck_assert_msg(!envlog_utf8_valid(bad_utf8[i], strlen(bad_utf8[i])), "bad[%zu]", i);
    ck_assert(!envlog_utf8_valid("a\0b", 3)); /* a NUL inside */
}
END_TEST

/* The decoder's fast test for plain ASCII (codec_int.h) says yes exactly
 * when every byte is 1 to 0x7f, whatever the length and wherever the one
 * odd byte is, reading no byte outside the text (each text is a block of
 * its own length, for the sanitizers); text_valid agrees with
 * envlog_utf8_valid everywhere. */
START_TEST(test_plain_ascii)
{
    static const uint8_t odd[] = {0x00, 0x01, 0x7f, 0x80, 0xbf, 0xc3, 0xff};
    for (size_t n = 0; n <= 40; n++) {
        for (long at = -1; at < (long)n; at++) {
            for (size_t v = 0; v < sizeof odd; v++) {
                char *s = malloc(n ? n : 1);
                ck_assert_ptr_nonnull(s);
                for (size_t i = 0; i < n; i++)
                    s[i] = (char)('a' + i % 26);
                if (at >= 0)
                    s[at] = (char)odd[v];
                bool want = true;
                for (size_t i = 0; i < n; i++)
                    want = want && (uint8_t)s[i] >= 1 && (uint8_t)s[i] <= 0x7f;
                ck_assert_msg(plain_ascii(s, n) == want, "n %zu, 0x%02x at %ld", n, odd[v], at);
                ck_assert_msg(text_valid(s, n) == envlog_utf8_valid(s, n),
                              "n %zu, 0x%02x at %ld", n, odd[v], at);
                free(s);
                if (at < 0)
                    break;
            }
        }
    }
}
END_TEST

START_TEST(test_utf8_refused_on_encode)
{
    envlog_buf b = {0};
    for (size_t i = 0; i < N_BAD_UTF8; i++) {
        const char *bad = bad_utf8[i];
        /* A top-level text field, an item of a text array, a field of a
         * nested struct and of a span attribute. */
        tu_sample s;
        tu_sample_make(&s, ENVLOG_KIND_TUNE, TU_TYPICAL);
        s.u.tune.key = bad;
        ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                          ENVLOG_LEVEL_BASIC, &s.u), ENVLOG_INVALID_ARG);
        tu_sample_make(&s, ENVLOG_KIND_TUNE, TU_TYPICAL);
        const char *cands[] = {"a", bad};
        s.u.tune.candidates = cands;
        s.u.tune.n_candidates = 2;
        ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                          ENVLOG_LEVEL_BASIC, &s.u), ENVLOG_INVALID_ARG);
        tu_sample_make(&s, ENVLOG_KIND_TUNE, TU_TYPICAL);
        envlog_trial tr = {.name = "x", .error = bad};
        s.u.tune.trials = &tr;
        s.u.tune.n_trials = 1;
        ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                          ENVLOG_LEVEL_BASIC, &s.u), ENVLOG_INVALID_ARG);
        envlog_attr at = {"k", bad};
        envlog_span_rec sp = {.name = "s", .attrs = &at, .n_attrs = 1};
        ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_SPAN, &stamp0, ENVLOG_OBSERVED,
                                          ENVLOG_LEVEL_BASIC, &sp), ENVLOG_INVALID_ARG);
        envlog_mark m = {bad, 1};
        ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_MARK, &stamp0, ENVLOG_OBSERVED,
                                          ENVLOG_LEVEL_BASIC, &m), ENVLOG_INVALID_ARG);
    }
    /* The same strings, valid, go through: the refusals above are the
     * strings' doing. */
    envlog_mark m = {"fine é", 1};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_MARK, &stamp0, ENVLOG_OBSERVED,
                                     ENVLOG_LEVEL_BASIC, &m));
    envlog_buf_free(&b);
}
END_TEST

START_TEST(test_utf8_refused_on_decode)
{
    envlog_buf b = {0};
    for (size_t i = 0; i < N_BAD_UTF8; i++) {
        size_t n = strlen(bad_utf8[i]);
        envelope(&b, 5, ENVLOG_KIND_MARK);
        u(&b, 4);
        ck_assert_ok(envlog_enc_text(&b, bad_utf8[i], n));
        decode_fails(&b, ENVLOG_BAD_DATA, bad_utf8[i]);
        /* In an array of texts, too. */
        envelope(&b, 5, ENVLOG_KIND_SESSION);
        u(&b, 14); ck_assert_ok(envlog_enc_array(&b, 2));
        txt(&b, "ok");
        ck_assert_ok(envlog_enc_text(&b, bad_utf8[i], n));
        decode_fails(&b, ENVLOG_BAD_DATA, "device");
    }
    /* A NUL inside a text string is refused: the API hands out C strings. */
    envelope(&b, 5, ENVLOG_KIND_MARK);
    u(&b, 4);
    ck_assert_ok(envlog_enc_text(&b, "a\0b", 3));
    decode_fails(&b, ENVLOG_BAD_DATA, "NUL in text");
    envlog_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------- renderers */

static char *render_json(envlog_kind kind, const void *body, envlog_effect eff,
                         envlog_level lv)
{
    envlog_buf b = {0};
    envlog_arena a = {0};
    envlog_record rec;
    ck_assert_ok(envlog_event_encode(&b, kind, &stamp0, eff, lv, body));
    decode_ok(&b, &rec, &a);
    rec.stamp.session = stamp0.session;
    sink s = {0};
    ck_assert_ok(envlog_record_json(&rec, sink_fn, &s));
    envlog_buf_free(&b);
    envlog_arena_free(&a);
    return s.p;
}

#define SID "000102030405060708090a0b0c0d0e0f"

START_TEST(test_json_every_kind_valid)
{
    for (size_t k = 0; k < 8; k++)
        for (int v = TU_TYPICAL; v <= TU_UNICODE; v += 2) {
            tu_sample s;
            tu_sample_make(&s, tu_kinds[k], (tu_variant)v);
            envlog_effect eff = tu_kinds[k] == ENVLOG_KIND_USER
                                    ? ENVLOG_CHANGED
                                    : envlog_effect_of(tu_kinds[k], &s.u);
            char *j = render_json(tu_kinds[k], &s.u, eff, ENVLOG_LEVEL_FULL);
            ck_assert_msg(json_valid(j, strlen(j)), "%s/%s: invalid JSON: %.300s",
                          envlog_kind_name(tu_kinds[k]), variant_names[v], j);
            char head[160];
            snprintf(head, sizeof head, "{\"session\":\"" SID "\",\"kind\":\"%s\",\"seq\":3,"
                     "\"offset_ns\":7,\"effect\":\"%s\"",
                     envlog_kind_name(tu_kinds[k]),
                     eff == ENVLOG_CHANGED ? "changed" : "observed");
            ck_assert_msg(!strncmp(j, head, strlen(head)), "%.200s", j);
            free(j);
        }
}
END_TEST

START_TEST(test_json_golden)
{
    envlog_mark m = {"a\"b\\\n\t\x01\x7f é/", 5};
    char *j = render_json(ENVLOG_KIND_MARK, &m, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC);
    ck_assert_str_eq(j, "{\"session\":\"" SID "\",\"kind\":\"mark\",\"seq\":3,"
                        "\"offset_ns\":7,\"effect\":\"observed\","
                        "\"label\":\"a\\\"b\\\\\\n\\t\\u0001\\u007f é/\",\"wall_unix_ns\":5}");
    free(j);

    static const char *const cands[] = {"a", "b"};
    double sample[] = {1, 2};
    envlog_trial tr = {.name = "a", .index = 0, .samples = 2, .sample_ns = sample,
                       .n_sample_ns = 2, .min_ns = 1.5, .median_ns = 2,
                       .mean_ns = 0.1, .max_ns = INFINITY, .stddev_ns = -0.0};
    envlog_param pa = {"w", 0.5};
    envlog_tune t = {.ns = "n", .key = "k", .checksum = 1, .candidates = cands,
                     .n_candidates = 2, .trials = &tr, .n_trials = 1, .policy = "p",
                     .params = &pa, .n_params = 1, .winner = 1, .margin = 0.25,
                     .short_circuit = true, .wall_ns = 10, .stored = true};
    j = render_json(ENVLOG_KIND_TUNE, &t, ENVLOG_CHANGED, ENVLOG_LEVEL_BASIC);
    ck_assert_str_eq(j, "{\"session\":\"" SID "\",\"kind\":\"tune\",\"seq\":3,"
        "\"offset_ns\":7,\"effect\":\"changed\",\"namespace\":\"n\",\"key\":\"k\","
        "\"checksum\":\"0x0000000000000001\",\"stored\":true,\"imported\":false,\"winner\":1,"
        "\"candidates\":[\"a\",\"b\"],\"margin\":0.25,\"within_noise\":false,"
        "\"winner_ns\":0,\"trials\":[{\"name\":\"a\","
        "\"index\":0,\"samples\":2,\"min_ns\":1.5,\"median_ns\":2,\"mean_ns\":0.1,"
        "\"max_ns\":null,\"stddev_ns\":-0}],\"policy\":\"p\",\"params\":[{\"name\":"
        "\"w\",\"value\":0.5}],\"short_circuit\":true,\"wall_ns\":10}");
    free(j);
    /* At FULL the samples show, in the trial. */
    j = render_json(ENVLOG_KIND_TUNE, &t, ENVLOG_CHANGED, ENVLOG_LEVEL_FULL);
    ck_assert_ptr_nonnull(strstr(j, "\"stddev_ns\":-0,\"sample_ns\":[1,2]}"));
    free(j);
    t.winner = -1;
    t.stored = false;
    j = render_json(ENVLOG_KIND_TUNE, &t, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC);
    ck_assert_ptr_nonnull(strstr(j, "\"winner\":-1,"));
    free(j);

    envlog_compile c = {.ns = "c", .name = "k", .arch = "sm_90",
                        .outcome = ENVLOG_LOADED, .duration_ns = 5,
                        .binary_size = 2, .binary = {"\x01\xab", 2},
                        .has_tune = true, .tune = {stamp0.session, 9, 11}};
    memset(c.kernel_key.b, 0x11, 16);
    memset(c.binary_hash.b, 0xfe, 16);
    j = render_json(ENVLOG_KIND_COMPILE, &c, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC);
    /* The fold's fields come first (envlog(5)). */
    ck_assert_str_eq(j, "{\"session\":\"" SID "\",\"kind\":\"compile\",\"seq\":3,"
        "\"offset_ns\":7,\"effect\":\"observed\",\"namespace\":\"c\","
        "\"kernel_key\":\"11111111111111111111111111111111\",\"outcome\":\"loaded\","
        "\"imported\":false,\"name\":\"k\","
        "\"source_hash\":\"00000000000000000000000000000000\",\"arch\":\"sm_90\","
        "\"binary_hash\":\"fefefefefefefefefefefefefefefefe\",\"binary_size\":2,"
        "\"binary\":\"01ab\",\"duration_ns\":5,"
        "\"tune\":{\"session\":\"" SID "\",\"seq\":9,\"offset_ns\":11}}");
    free(j);

    const char *devs[] = {"sm_90", "é"};
    envlog_session_rec sr = {.id = stamp0.session, .start_unix_ns = 1, .label = "",
                             .pid = 2, .devices = devs, .n_devices = 2,
                             .level = ENVLOG_LEVEL_FULL, .dropped = 4};
    j = render_json(ENVLOG_KIND_SESSION, &sr, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC);
    ck_assert_str_eq(j, "{\"session\":\"" SID "\",\"kind\":\"session\",\"seq\":3,"
        "\"offset_ns\":7,\"effect\":\"observed\",\"id\":\"" SID "\",\"start_unix_ns\":1,"
        "\"label\":\"\",\"pid\":2,\"devices\":[\"sm_90\",\"é\"],\"level\":\"full\","
        "\"dropped\":4}");
    free(j);

    envlog_forget f = {ENVLOG_TABLE_KERNEL, "ns", "key", 0, NULL, NULL};
    j = render_json(ENVLOG_KIND_FORGET, &f, ENVLOG_CHANGED, ENVLOG_LEVEL_BASIC);
    ck_assert_str_eq(j, "{\"session\":\"" SID "\",\"kind\":\"forget\",\"seq\":3,"
        "\"offset_ns\":7,\"effect\":\"changed\",\"table\":\"kernel\",\"namespace\":\"ns\","
        "\"key\":\"key\",\"checksum\":\"0x0000000000000000\"}");
    free(j);

    /* {"name": "b", "entries": [1, 2, 3], 7: h'00ff'} as a user body. */
    tu_sample s;
    tu_sample_make(&s, ENVLOG_KIND_USER, TU_TYPICAL);
    j = render_json(ENVLOG_KIND_USER, &s.u, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC);
    ck_assert_str_eq(j, "{\"session\":\"" SID "\",\"kind\":\"user\",\"seq\":3,"
        "\"offset_ns\":7,\"effect\":\"observed\",\"user_kind\":\"profiler-sample\","
        "\"body\":{\"name\":\"b\",\"entries\":[1,2,3],\"k7\":\"00ff\"}}");
    free(j);
}
END_TEST

START_TEST(test_json_write_failure)
{
    /* A sink that fails stops the renderer at whatever call it fails, and
     * the renderer returns the sink's code as it is (issue 17, item 3). */
    static const envlog_err codes[] = {ENVLOG_IO, ENVLOG_NOSPACE, ENVLOG_STOPPED,
                                       ENVLOG_WRONG_STATE};
    tu_sample s;
    tu_sample_make(&s, ENVLOG_KIND_TUNE, TU_TYPICAL);
    envlog_buf b = {0};
    envlog_arena a = {0};
    envlog_record rec;
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                     ENVLOG_LEVEL_BASIC, &s.u));
    decode_ok(&b, &rec, &a);
    /* Count the sink calls of each renderer, then fail each one in turn. */
    sink count = {.fail_after = 1 << 30};
    ck_assert_ok(envlog_record_json(&rec, sink_fn, &count));
    int json_calls = count.calls;
    sink_reset(&count);
    count.fail_after = 1 << 30;
    ck_assert_ok(envlog_record_text(&rec, sink_fn, &count));
    int text_calls = count.calls;
    sink_reset(&count);
    count.fail_after = 1 << 30;
    ck_assert_ok(envlog_record_diag(&rec, sink_fn, &count));
    int diag_calls = count.calls;
    sink_reset(&count);
    ck_assert_int_gt(json_calls, 5);
    ck_assert_int_gt(text_calls, 2);
    ck_assert_int_gt(diag_calls, 5);
    for (size_t c = 0; c < sizeof codes / sizeof *codes; c++) {
        for (int k = 1; k <= json_calls; k++) {
            sink f = {.fail_after = k, .fail_with = codes[c]};
            ck_assert_err(envlog_record_json(&rec, sink_fn, &f), codes[c]);
            ck_assert_int_eq(f.calls, k); /* nothing written after */
            sink_reset(&f);
        }
        for (int k = 1; k <= text_calls; k++) {
            sink f = {.fail_after = k, .fail_with = codes[c]};
            ck_assert_err(envlog_record_text(&rec, sink_fn, &f), codes[c]);
            ck_assert_int_eq(f.calls, k);
            sink_reset(&f);
        }
        for (int k = 1; k <= diag_calls; k++) {
            sink f = {.fail_after = k, .fail_with = codes[c]};
            ck_assert_err(envlog_record_diag(&rec, sink_fn, &f), codes[c]);
            ck_assert_err(envlog_cbor_diag(rec.payload.data, rec.payload.size, sink_fn, &f),
                          codes[c]);
            sink_reset(&f);
        }
        sink f = {.fail_after = 1, .fail_with = codes[c]};
        ck_assert_err(envlog_json_string("text", sink_fn, &f), codes[c]);
        sink_reset(&f);
    }
    envlog_buf_free(&b);
    envlog_arena_free(&a);
}
END_TEST

START_TEST(test_json_string)
{
    sink s = {0};
    ck_assert_ok(envlog_json_string("é\"\x1f", sink_fn, &s));
    ck_assert_str_eq(s.p, "\"é\\\"\\u001f\"");
    sink_reset(&s);
    /* Bytes that are not UTF-8 come out as U+FFFD: the output stays JSON. */
    ck_assert_int_eq(envlog__write_json_str(sink_fn, &s, "a\xff\xc3", 3), ENVLOG_OK);
    ck_assert_str_eq(s.p, "\"a\xef\xbf\xbd\xef\xbf\xbd\"");
    ck_assert(json_valid(s.p, s.len));
    sink_reset(&s);
}
END_TEST

START_TEST(test_text_summary)
{
    tu_sample s;
    tu_sample_make(&s, ENVLOG_KIND_TUNE, TU_TYPICAL);
    envlog_buf b = {0};
    envlog_arena a = {0};
    envlog_record rec;
    envlog_stamp st = {stamp0.session, 12, 1500000};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &st, ENVLOG_CHANGED,
                                     ENVLOG_LEVEL_BASIC, &s.u));
    decode_ok(&b, &rec, &a);
    sink o = {0};
    ck_assert_ok(envlog_record_text(&rec, sink_fn, &o));
    ck_assert_msg(!strncmp(o.p, "#12 +0.001500s CHANGED  tune autotune/example-rt/1.0/sim-gpu "
                           "matmul-1024 winner=tile2 ", 76), "%s", o.p);
    ck_assert_ptr_nonnull(strstr(o.p, " candidates=4 trials=3 policy=median-adaptive"));
    ck_assert_ptr_nonnull(strstr(o.p, " stored"));
    ck_assert_ptr_null(strchr(o.p, '\n'));
    sink_reset(&o);
    for (size_t k = 0; k < 8; k++) {
        tu_sample_make(&s, tu_kinds[k], TU_UNICODE);
        ck_assert_ok(envlog_event_encode(&b, tu_kinds[k], &st,
                                         envlog_effect_of(tu_kinds[k], &s.u),
                                         ENVLOG_LEVEL_BASIC, &s.u));
        decode_ok(&b, &rec, &a);
        ck_assert_ok(envlog_record_text(&rec, sink_fn, &o));
        ck_assert_msg(strstr(o.p, envlog_kind_name(tu_kinds[k])) != NULL, "%s", o.p);
        ck_assert(envlog_utf8_valid(o.p, o.len));
        sink_reset(&o);
    }
    envlog_buf_free(&b);
    envlog_arena_free(&a);
}
END_TEST

static void diag_is(const char *bytes, size_t n, const char *want)
{
    sink s = {0};
    envlog_err e = envlog_cbor_diag(bytes, n, sink_fn, &s);
    ck_assert_msg(e == ENVLOG_OK, "diag of '%s': %s", want, envlog_errmsg());
    ck_assert_str_eq(s.p ? s.p : "", want);
    sink_reset(&s);
}

static void diag_fails(const char *bytes, size_t n, const char *what)
{
    sink s = {0};
    ck_assert_msg(envlog_cbor_diag(bytes, n, sink_fn, &s) == ENVLOG_BAD_DATA, "%s", what);
    sink_reset(&s);
}

START_TEST(test_diag)
{
    diag_is("\x00", 1, "0");
    diag_is("\x17", 1, "23");
    diag_is("\x18\x18", 2, "24");
    diag_is("\x1b\xff\xff\xff\xff\xff\xff\xff\xff", 9, "18446744073709551615");
    diag_is("\x20", 1, "-1");
    diag_is("\x38\x63", 2, "-100");
    diag_is("\x3b\xff\xff\xff\xff\xff\xff\xff\xff", 9, "-18446744073709551616");
    diag_is("\x40", 1, "h''");
    diag_is("\x42\x00\xff", 3, "h'00ff'");
    diag_is("\x60", 1, "\"\"");
    diag_is("\x64\x61\x22\x5c\xc3", 5, "\"a\\\"\\\\\xef\xbf\xbd\""); /* bad UTF-8 shown safely */
    diag_is("\x63\xe6\x97\xa5", 4, "\"日\"");
    diag_is("\x80", 1, "[]");
    diag_is("\x83\x01\x82\x02\x03\x04", 6, "[1, [2, 3], 4]");
    diag_is("\xa0", 1, "{}");
    diag_is("\xa2\x01\x02\x61\x61\xf5", 6, "{1: 2, \"a\": true}");
    diag_is("\xf4", 1, "false");
    diag_is("\xf6", 1, "null");
    diag_is("\xf7", 1, "undefined");
    diag_is("\xc1\x1a\x51\x4b\x67\xb0", 6, "1(1363896240)");
    diag_is("\xd8\x20\x63\x61\x62\x63", 6, "32(\"abc\")");
    diag_is("\xf9\x3c\x00", 3, "1.0");
    diag_is("\xfa\x3f\xc0\x00\x00", 5, "1.5");
    diag_is("\xfb\x3f\xb9\x99\x99\x99\x99\x99\x9a", 9, "0.1");
    diag_is("\xfa\x7f\xc0\x00\x00", 5, "NaN");
    diag_is("\xfa\x7f\x80\x00\x00", 5, "Infinity");
    diag_is("\xfb\xff\xf0\x00\x00\x00\x00\x00\x00", 9, "-Infinity");
    diag_is("\xfa\xc0\x00\x00\x00", 5, "-2.0");
    diag_is("\xfb\x7e\x37\xe4\x3c\x88\x00\x75\x9c", 9, "1e+300");

    diag_fails("", 0, "empty");
    diag_fails("\x00\x00", 2, "trailing item");
    diag_fails("\x82\x01", 2, "array cut short");
    diag_fails("\x62\x61", 2, "text cut short");
    diag_fails("\x9f\x01\xff", 3, "indefinite array");
    diag_fails("\xf0", 1, "unassigned simple value");
    diag_fails("\x9b\x00\x00\x00\x01\x00\x00\x00\x00\x00", 10, "2^32 items in 1 byte");
    char deep[200];
    memset(deep, 0x81, sizeof deep);
    deep[sizeof deep - 1] = 0;
    diag_fails(deep, sizeof deep, "nested 199 deep");
}
END_TEST

START_TEST(test_cbor_check_item)
{
    ck_assert_ok(envlog_cbor_check_item("\xa1\x01\x82\x02\x03", 5));
    ck_assert_err(envlog_cbor_check_item("\x01\x02", 2), ENVLOG_BAD_DATA);
    ck_assert_err(envlog_cbor_check_item("\x82\x01", 2), ENVLOG_BAD_DATA);
    ck_assert_err(envlog_cbor_check_item("", 0), ENVLOG_BAD_DATA);
    /* A user or import body must be exactly one item, checked on encode. */
    envlog_user us = {"k", {"\x01\x02", 2}};
    envlog_buf b = {0};
    ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_USER, &stamp0, ENVLOG_OBSERVED,
                                      ENVLOG_LEVEL_BASIC, &us), ENVLOG_INVALID_ARG);
    envlog_import im = {.bundle = "b", .manifest = {"\x9f\xff", 2}};
    ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_IMPORT, &stamp0, ENVLOG_CHANGED,
                                      ENVLOG_LEVEL_BASIC, &im), ENVLOG_INVALID_ARG);
    envlog_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------ ids, hashes, codes */

START_TEST(test_ids_and_hashes)
{
    envlog_id128 id, back;
    char hex[33];
    ck_assert_ok(envlog_id_new(&id));
    envlog_id_format(&id, hex);
    ck_assert_uint_eq(strlen(hex), 32);
    ck_assert_ok(envlog_id_parse(hex, &back));
    ck_assert(!memcmp(id.b, back.b, 16));
    ck_assert_ok(envlog_id_parse("00112233445566778899AABBCCDDEEFF", &back));
    envlog_id_format(&back, hex);
    ck_assert_str_eq(hex, "00112233445566778899aabbccddeeff");
    ck_assert_err(envlog_id_parse("0011", &back), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_id_parse("0011223344556677889AABBCCDDEEFFG", &back),
                  ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_id_parse(NULL, &back), ENVLOG_INVALID_ARG);
    /* Time-ordered: the first 48 bits are Unix milliseconds. */
    uint64_t ms = 0;
    for (int i = 0; i < 6; i++)
        ms = ms << 8 | id.b[i];
    uint64_t now = envlog_clock_unix_ns() / 1000000u;
    ck_assert_uint_le(ms, now);
    ck_assert_uint_ge(ms + 60000, now);
    envlog_id128 id2;
    ck_assert_ok(envlog_id_new(&id2));
    ck_assert(memcmp(id.b, id2.b, 16) != 0);
    ck_assert_int_le(memcmp(id.b, id2.b, 6), 0);

    /* Reference values from python3-xxhash, an implementation not ours. */
    envlog_hash128 h = envlog_hash128_bytes("", 0);
    envlog_id_format(&h, hex);
    ck_assert_str_eq(hex, "99aa06d3014798d86001c324468d497f");
    h = envlog_hash128_bytes("envlog", 6);
    envlog_id_format(&h, hex);
    ck_assert_str_eq(hex, "dec64bcf476a22d3dfb254c50537baca");
    const char *names[] = {"a", "b"};
    ck_assert_uint_eq(envlog_tune_checksum(names, 2), 0x50e9fe6f7fb8a296ull);
    ck_assert_uint_ne(envlog_tune_checksum(names, 1), envlog_tune_checksum(names, 2));
}
END_TEST

START_TEST(test_names)
{
    for (int e = ENVLOG_OK; e <= ENVLOG_STOPPED; e++) {
        const char *s = envlog_strerror((envlog_err)e);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_ne(s, "unknown error");
        for (int k = ENVLOG_OK; k < e; k++)
            ck_assert_str_ne(s, envlog_strerror((envlog_err)k));
    }
    ck_assert_str_eq(envlog_strerror((envlog_err)999), "unknown error");
    /* The old name stays for one release, as the same code. */
    ck_assert_int_eq(ENVLOG_STATE, ENVLOG_WRONG_STATE);
    ck_assert_int_eq(ENVLOG_WRONG_STATE, 15);
    ck_assert_int_eq(ENVLOG_STOPPED, 16);
    static const char *const kinds[] = {"session", "tune", "compile", "span",
                                        "mark", "import", "forget", "user"};
    for (int i = 0; i < 8; i++)
        ck_assert_str_eq(envlog_kind_name(tu_kinds[i]), kinds[i]);
    ck_assert_str_eq(envlog_kind_name(ENVLOG_KIND_HEADER), "header");
    ck_assert_str_eq(envlog_kind_name(ENVLOG_KIND_SEAL), "seal");
    ck_assert_str_eq(envlog_kind_name((envlog_kind)99), "unknown");
    ck_assert_str_eq(envlog_session_state_name(ENVLOG_STATE_TORN), "torn");
    ck_assert_str_eq(envlog_session_state_name(ENVLOG_STATE_SEALED), "sealed");
    /* Effects of the built-in kinds (envlog.h). */
    envlog_tune t = {.stored = true};
    ck_assert_int_eq(envlog_effect_of(ENVLOG_KIND_TUNE, &t), ENVLOG_CHANGED);
    t.stored = false;
    ck_assert_int_eq(envlog_effect_of(ENVLOG_KIND_TUNE, &t), ENVLOG_OBSERVED);
    envlog_compile c = {.outcome = ENVLOG_COMPILED, .binary = {"x", 1}};
    ck_assert_int_eq(envlog_effect_of(ENVLOG_KIND_COMPILE, &c), ENVLOG_CHANGED);
    c.outcome = ENVLOG_LOADED;
    ck_assert_int_eq(envlog_effect_of(ENVLOG_KIND_COMPILE, &c), ENVLOG_OBSERVED);
    c.outcome = ENVLOG_COMPILED;
    c.binary.size = 0;
    ck_assert_int_eq(envlog_effect_of(ENVLOG_KIND_COMPILE, &c), ENVLOG_OBSERVED);
}
END_TEST

START_TEST(test_errmsg)
{
    envlog_buf b = {0};
    envlog_mark m = {"\xff", 0};
    ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_MARK, &stamp0, ENVLOG_OBSERVED,
                                      ENVLOG_LEVEL_BASIC, &m), ENVLOG_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "label"));
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "UTF-8"));
    ck_assert_err(envlog_event_encode(&b, ENVLOG_KIND_HEADER, &stamp0, ENVLOG_OBSERVED,
                                      ENVLOG_LEVEL_BASIC, &m), ENVLOG_INVALID_ARG);
    envlog_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------- allocation faults */

START_TEST(test_alloc_fail_encode)
{
    tu_sample s;
    envlog_kind kind = tu_kinds[_i];
    tu_sample_make(&s, kind, TU_MAXIMAL);
    envlog_buf ref = {0};
    ck_assert_ok(envlog_event_encode(&ref, kind, &stamp0, envlog_effect_of(kind, &s.u),
                                     ENVLOG_LEVEL_FULL, &s.u));
    long n;
    for (n = 1; n < 10000; n++) {
        envlog_buf b = {0};
        envlog_alloc_fail_after(n);
        envlog_err e = envlog_event_encode(&b, kind, &stamp0, envlog_effect_of(kind, &s.u),
                                           ENVLOG_LEVEL_FULL, &s.u);
        long made = envlog_alloc_fail_reset();
        if (e == ENVLOG_OK) {
            ck_assert_msg(made < n, "succeeded though allocation %ld failed", n);
            ck_assert_uint_eq(b.len, ref.len);
            ck_assert(!memcmp(b.p, ref.p, b.len));
            envlog_buf_free(&b);
            break;
        }
        ck_assert_err(e, ENVLOG_NOMEM);
        envlog_buf_free(&b);
    }
    ck_assert_int_gt(n, 1); /* at least one allocation was failed */
    ck_assert_int_lt(n, 10000);
    envlog_buf_free(&ref);
}
END_TEST

START_TEST(test_alloc_fail_decode)
{
    tu_sample s;
    envlog_kind kind = tu_kinds[_i];
    tu_sample_make(&s, kind, TU_MAXIMAL);
    envlog_buf b = {0};
    ck_assert_ok(envlog_event_encode(&b, kind, &stamp0, envlog_effect_of(kind, &s.u),
                                     ENVLOG_LEVEL_FULL, &s.u));
    long n;
    bool failed_once = false;
    for (n = 1; n < 10000; n++) {
        envlog_arena a = {0};
        envlog_record rec;
        envlog_alloc_fail_after(n);
        envlog_err e = envlog_event_decode(b.p, b.len, &rec, &a);
        envlog_alloc_fail_reset();
        if (e == ENVLOG_OK) {
            tu_sample_check(kind, &s.u, &rec.u, true);
            /* And the arena, after failures, still works warm. */
            envlog_arena_reset(&a);
            envlog_alloc_fail_after(1);
            e = envlog_event_decode(b.p, b.len, &rec, &a);
            envlog_alloc_fail_reset();
            ck_assert_ok(e);
            envlog_arena_free(&a);
            break;
        }
        failed_once = true;
        ck_assert_err(e, ENVLOG_NOMEM);
        envlog_arena_free(&a);
    }
    /* Kinds with strings allocate; a hash-only empty record might not. */
    ck_assert(failed_once);
    ck_assert_int_lt(n, 10000);
    envlog_buf_free(&b);
}
END_TEST

START_TEST(test_arena_reuse)
{
    /* After a record needed several chunks, a reset keeps one chunk big
     * enough, so decoding the same record again allocates nothing. */
    tu_sample s;
    tu_sample_make(&s, ENVLOG_KIND_TUNE, TU_MAXIMAL);
    envlog_buf b = {0};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &stamp0, ENVLOG_CHANGED,
                                     ENVLOG_LEVEL_FULL, &s.u));
    envlog_arena a = {0};
    envlog_record rec;
    decode_ok(&b, &rec, &a);
    decode_ok(&b, &rec, &a);
    envlog_arena_reset(&a);
    envlog_alloc_fail_after(1);
    envlog_err e = envlog_event_decode(b.p, b.len, &rec, &a);
    long made = envlog_alloc_fail_reset();
    ck_assert_ok(e);
    ck_assert_int_eq(made, 0);
    tu_sample_check(ENVLOG_KIND_TUNE, &s.u, &rec.u, true);
    envlog_arena_free(&a);
    envlog_buf_free(&b);
}
END_TEST

/* Blocks that grow past ENVLOG_BIG_MIN move to whole huge pages: what
 * they held comes along, all of the capacity they state is theirs to
 * write (the sanitizers see any byte over), and running out of memory on
 * the way is a clean failure that keeps the block. */
/* envlog_sort_keyed() against qsort() under a total order: keys unique,
 * few, all one, differing only in a high byte, in every byte, in the low
 * four; sizes
 * about the threshold below which it is qsort(); by one key with ties put
 * in order by the comparison, by two, by three that decide alone; and
 * with each of its allocations failing (it falls back to qsort()). */
typedef struct sk_elem {
    uint64_t k;
    uint32_t tie, id;
    uint64_t pad;
} sk_elem;

static uint64_t sk_key(const void *a)
{
    return ((const sk_elem *)a)->k;
}

static uint64_t sk_tie(const void *a)
{
    return ((const sk_elem *)a)->tie;
}

static uint64_t sk_id(const void *a)
{
    return ((const sk_elem *)a)->id;
}

static int sk_cmp(const void *a, const void *b)
{
    const sk_elem *x = a, *y = b;
    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    if (x->tie != y->tie)
        return x->tie < y->tie ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static uint64_t sk_u64(const void *a)
{
    uint64_t v;
    memcpy(&v, a, 8);
    return v;
}

static int sk_u64_cmp(const void *a, const void *b)
{
    uint64_t x = sk_u64(a), y = sk_u64(b);
    return (x > y) - (x < y);
}

START_TEST(test_sort_keyed)
{
    static const size_t sizes[] = {0, 1, 2, 255, 256, 257, 1000, 5000};
    static const envlog_sort_key by[] = {sk_key, sk_tie, sk_id}, by_u64[] = {sk_u64};
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int dist = 0; dist < 6; dist++)
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
            for (long fail = 0; fail <= 5; fail++) {
                size_t n = sizes[z], bytes = (n ? n : 1) * sizeof(sk_elem);
                sk_elem *v = malloc(bytes), *w = malloc(bytes);
                uint64_t *u = malloc((n ? n : 1) * 8), *x = malloc((n ? n : 1) * 8);
                ck_assert(v && w && u && x);
                for (size_t i = 0; i < n; i++) {
                    r = r * 6364136223846793005ull + 1442695040888963407ull;
                    uint64_t k = dist == 0 ? r : dist == 1 ? r % 5 : dist == 2 ? 42
                               : dist == 3 ? (r >> 61) << 56 : dist == 4 ? r ^ (r << 7)
                                                                      : r >> 32;
                    w[i] = (sk_elem){k, (uint32_t)(r >> 40) % 7, (uint32_t)i, 0};
                    u[i] = k;
                }
                qsort(w, n, sizeof *w, sk_cmp);
                memcpy(x, u, n * 8);
                qsort(x, n, 8, sk_u64_cmp);
                /* by the first key, the first two, all three (then exact) */
                for (size_t n_keys = 1; n_keys <= 3; n_keys++) {
                    memcpy(v, w, n * sizeof *v);
                    for (size_t i = n; i > 1; i--) { /* shuffled */
                        r = r * 6364136223846793005ull + 1442695040888963407ull;
                        size_t j = (size_t)(r >> 33) % i;
                        sk_elem e = v[i - 1];
                        v[i - 1] = v[j];
                        v[j] = e;
                    }
                    if (fail)
                        envlog_alloc_fail_after(fail);
                    envlog_sort_keyed(v, n, sizeof *v, by, n_keys, sk_cmp, n_keys == 3);
                    envlog_alloc_fail_reset();
                    for (size_t i = 0; i < n; i++)
                        ck_assert_msg(!sk_cmp(&v[i], &w[i]),
                                      "dist %d, n %zu, %zu keys, fail %ld: element %zu", dist, n,
                                      n_keys, fail, i);
                }
                if (fail)
                    envlog_alloc_fail_after(fail);
                envlog_sort_keyed(u, n, 8, by_u64, 1, sk_u64_cmp, true);
                envlog_alloc_fail_reset();
                for (size_t i = 0; i < n; i++)
                    ck_assert_uint_eq(u[i], x[i]);
                free(v);
                free(w);
                free(u);
                free(x);
            }
}
END_TEST

START_TEST(test_big_blocks)
{
    envlog_buf b = {0};
    uint8_t piece[4093];
    for (size_t i = 0; i < sizeof piece; i++)
        piece[i] = (uint8_t)(i * 7);
    while (b.len < 5 * ENVLOG_BIG_MIN)
        ck_assert_ok(envlog_buf_append(&b, piece, sizeof piece));
    ck_assert_uint_ge(b.cap, b.len);
    ck_assert_uint_eq(b.cap, envlog_big_size(b.cap));
    for (size_t i = 0; i < b.len; i++)
        ck_assert_uint_eq(b.p[i], (uint8_t)((i % sizeof piece) * 7));
    memset(b.p + b.len, 0xa5, b.cap - b.len);
    size_t len = b.len, cap = b.cap;
    envlog_alloc_fail_after(1);
    envlog_err e = envlog_buf_reserve(&b, cap);
    envlog_alloc_fail_reset();
    ck_assert_int_eq(e, ENVLOG_NOMEM);
    ck_assert_uint_eq(b.len, len);
    ck_assert_uint_eq(b.cap, cap);
    ck_assert_uint_eq(b.p[len - 1], (uint8_t)(((len - 1) % sizeof piece) * 7));
    envlog_buf_free(&b);

    /* An arena's chunk of that size and more: every byte handed out. */
    envlog_arena a = {0};
    size_t total = 0;
    for (size_t n = 1000; total < 4 * ENVLOG_BIG_MIN; n += 997) {
        uint8_t *p = envlog_arena_alloc(&a, n);
        ck_assert_ptr_nonnull(p);
        memset(p, (int)(n & 0xff), n);
        total += n;
    }
    envlog_arena_free(&a);

    /* A table taken zeroed is zero, whatever the size. */
    for (size_t n = ENVLOG_BIG_MIN - 8; n < ENVLOG_BIG_MIN + 16; n += 8) {
        uint64_t *t = envlog_malloc_big(n, true);
        ck_assert_ptr_nonnull(t);
        for (size_t i = 0; i < n / 8; i++)
            ck_assert_uint_eq(t[i], 0);
        envlog_free(t);
    }
    ck_assert_uint_eq(envlog_big_size(ENVLOG_BIG_MIN - 1), ENVLOG_BIG_MIN - 1);
    ck_assert_uint_eq(envlog_big_size(ENVLOG_BIG_MIN) % ((size_t)2 << 20), 0);
}
END_TEST

/* The library says the version its header says, as text and as a number
 * that orders versions. */
/* The table's openat of a name of several components, through openat2
 * and through the walk that stands in for it: the file beneath, never a
 * symbolic link on the way, never "..". */
START_TEST(test_openat_beneath)
{
    char *dir = tu_mkdtemp("beneath");
    char p[4200];
    ck_assert_int_eq(mkdir(tu_path(dir, "a"), 0700), 0);
    ck_assert_int_eq(mkdir(tu_path(dir, "a/b"), 0700), 0);
    snprintf(p, sizeof p, "%s/a/b/f", dir);
    tu_write(p, "beneath", 7);
    ck_assert_int_eq(symlink("a", tu_path(dir, "la")), 0);
    ck_assert_int_eq(symlink("f", tu_path(dir, "a/b/lf")), 0);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(dfd, 0);
    for (int way = 0; way < 2; way++) {
        int (*op)(int, const char *, int, mode_t) =
            way ? envlog_openat_walk : envlog_io_posix()->openat;
        char got[8] = {0};
        int fd = op(dfd, "a/b/f", O_RDONLY, 0);
        ck_assert_msg(fd >= 0, "way %d: %s", way, strerror(errno));
        ck_assert_int_eq(pread(fd, got, 7, 0), 7);
        ck_assert_str_eq(got, "beneath");
        ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        close(fd);
        errno = 0;
        ck_assert_int_eq(op(dfd, "la/b/f", O_RDONLY, 0), -1); /* a link on the way */
        ck_assert_int_eq(errno, ELOOP);
        ck_assert_int_eq(op(dfd, "a/b/lf", O_RDONLY, 0), -1); /* a link at the end */
        ck_assert_int_eq(errno, ELOOP);
        ck_assert_int_eq(op(dfd, "a/../a/b/f", O_RDONLY, 0), -1);
        ck_assert_int_eq(errno, EXDEV);
        ck_assert_int_eq(op(dfd, "a/x/f", O_RDONLY, 0), -1);
        ck_assert_int_eq(errno, ENOENT);
        ck_assert_int_eq(op(dfd, "a/b/f/g", O_RDONLY, 0), -1);
        ck_assert_int_eq(errno, ENOTDIR);
        /* Created beneath, with its mode. */
        fd = op(dfd, way ? "a/b/new1" : "a/b/new0", O_WRONLY | O_CREAT | O_EXCL, 0600);
        ck_assert_int_ge(fd, 0);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert_uint_eq(st.st_mode & 0077, 0); /* 0600, less the umask */
        close(fd);
    }
    close(dfd);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_version)
{
    ck_assert_uint_eq(envlog_version(), ENVLOG_VERSION_NUMBER);
    ck_assert_str_eq(envlog_version_string(), ENVLOG_VERSION_STRING);
    char text[32];
    snprintf(text, sizeof text, "%d.%d.%d", ENVLOG_VERSION_MAJOR, ENVLOG_VERSION_MINOR,
             ENVLOG_VERSION_PATCH);
    ck_assert_str_eq(text, ENVLOG_VERSION_STRING);
    unsigned maj, min, pat;
    ck_assert_int_eq(sscanf(envlog_version_string(), "%u.%u.%u", &maj, &min, &pat), 3);
    ck_assert_uint_eq(envlog_version(), maj * 10000 + min * 100 + pat);
    ck_assert(ENVLOG_VERSION_MINOR < 100 && ENVLOG_VERSION_PATCH < 100);
}
END_TEST

Suite *suite_core(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tu_tcase(s, "codec", 120);
    tcase_add_loop_test(tc, test_roundtrip_kind, 0, 8);
    tcase_add_test(tc, test_full_only_fields);
    tcase_add_test(tc, test_floats_shortest);
    tcase_add_test(tc, test_schema_keys);
    tcase_add_test(tc, test_unknown_keys);
    tcase_add_test(tc, test_wrong_types);
    tcase_add_test(tc, test_lying_lengths);
    tcase_add_test(tc, test_cbor_check_item);
    tcase_add_test(tc, test_fold_and_full_reader_agree);
    tcase_add_test(tc, test_fold_memo);
    tcase_add_test(tc, test_fold_fast_agrees);
    tcase_add_test(tc, test_fold_fast_heads);
    tcase_add_test(tc, test_record_in_place_agrees);
    tcase_add_test(tc, test_fast_encoders);
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_cross_field_rules);
    tcase_add_test(tc, test_format2_detail);
    tcase_add_test(tc, test_format2_detail_rules);

    tc = tu_tcase(s, "utf8", 0);
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_plain_ascii);
    tcase_add_test(tc, test_utf8_refused_on_encode);
    tcase_add_test(tc, test_utf8_refused_on_decode);

    tc = tu_tcase(s, "render", 60);
    tcase_add_test(tc, test_json_checker);
    tcase_add_test(tc, test_json_every_kind_valid);
    tcase_add_test(tc, test_json_golden);
    tcase_add_test(tc, test_json_write_failure);
    tcase_add_test(tc, test_json_string);
    tcase_add_test(tc, test_text_summary);
    tcase_add_test(tc, test_diag);

    tc = tu_tcase(s, "misc", 0);
    tcase_add_test(tc, test_ids_and_hashes);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_errmsg);
    tcase_add_test(tc, test_openat_beneath);
    tcase_add_test(tc, test_sort_keyed);

    tc = tu_tcase(s, "alloc", 300);
    tcase_add_loop_test(tc, test_alloc_fail_encode, 0, 8);
    tcase_add_loop_test(tc, test_alloc_fail_decode, 0, 8);
    tcase_add_test(tc, test_arena_reuse);
    tcase_add_test(tc, test_big_blocks);
    return s;
}
