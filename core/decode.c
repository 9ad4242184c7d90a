/* SPDX-License-Identifier: MIT */
/*
 * decode.c - records back into the event model's structs, through
 * schema.c's tables, in place: strings are copied into a reusable arena,
 * byte strings point into the payload.  Unknown keys are skipped (forward
 * compatibility); every count read from data is checked against the bytes
 * left before memory is taken for it.  Both record formats read: a format
 * 2 record's detail (key 23) is read by the full reader only, and its damage
 * never drops the record (envlog(5), RECORD ENCODING).
 */
#include "codec_int.h"

#include <limits.h>
#include <string.h>

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
    const envlog_schema *own;     /* the record's schema (NULL: not a record) */
    const envlog_schema *detail_of; /* own, when its kind has a detail */
    envlog_bytes detail;          /* key 23's bytes, when it has one */
    uint64_t seen;                /* the fields of `own` met, by index */
    envlog_text *slices;          /* text of `own`'s fields, not copied */
    envlog_dec_memo *memo;        /* with slices: the last array of texts */
    envlog_record *inner;         /* a RECORD field's record, decoded where it
                                     lies (NULL: the field is checked whole) */
    bool inner_fold;              /* ... by the fold's decode */
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
            t->type = ENVLOG_TOK_FLOAT;
            t->u = 0;
            t->f = envlog_load_float(s + 1, 4);
            p->pos += 5;
            return ENVLOG_OK;
        }
    }
    return pull_rest(p, t);
}

/* A text value, checked: its token in *t. */
static envlog_err dec_text_tok(envlog_pull *p, const envlog_field *f, envlog_tok *t)
{
    envlog_err e = pull(p, t);
    if (e)
        return e;
    if (t->type != ENVLOG_TOK_TEXT)
        return bad(f, "expected a text string");
    if (!text_valid((const char *)t->data, t->len))
        return bad(f, "text is not valid UTF-8 or holds a NUL");
    return ENVLOG_OK;
}

/* A text value; copied into the arena when `out` is not NULL. */
static envlog_err dec_text(envlog_pull *p, const envlog_field *f,
                           envlog_arena *a, const char **out)
{
    envlog_tok t;
    envlog_err e = dec_text_tok(p, f, &t);
    if (e || !out)
        return e;
    char *s = envlog_arena_alloc(a, t.len + 1);
    if (!s)
        return envlog__fail(ENVLOG_NOMEM, "decoding %s", f->name);
    memcpy(s, t.data, t.len);
    s[t.len] = 0;
    *out = s;
    return ENVLOG_OK;
}

/* A text value, checked as dec_text checks it, handed out where it lies. */
static envlog_err dec_slice(envlog_pull *p, const envlog_field *f, envlog_text *out)
{
    envlog_tok t;
    envlog_err e = dec_text_tok(p, f, &t);
    if (!e) {
        out->p = (const char *)t.data;
        out->n = t.len;
    }
    return e;
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
static envlog_err event_decode(const uint8_t *data, size_t n, envlog_record *rec,
                               envlog_arena *arena, bool fold, envlog_text *slices,
                               envlog_dec_memo *memo, size_t *used);

/* envlog_keyset_free(), called only when the set took memory (a map of
 * small keys takes none). */
static inline void keys_done(envlog_keyset *ks)
{
    if (ks->v || ks->slots)
        envlog_keyset_free(ks);
}

/* An array of texts of the record's own map, checked and handed out as a
 * slice (where its items begin, and how many); the same bytes as the
 * array c->memo holds are taken without checking each text again. */
static envlog_err dec_slice_array(envlog_pull *p, const envlog_field *f, void *out,
                                  dec_ctx *c, envlog_text *sl)
{
    envlog_dec_memo *m = c->memo;
    size_t from = p->pos, head, n;
    void *arr;
    envlog_err e = ENVLOG_OK;
    if (m && m->field == f && m->len <= p->n - from && !memcmp(p->p + from, m->run, m->len)) {
        p->pos = from + m->len;
        head = m->head;
        n = m->n;
    } else {
        if ((e = dec_array(p, f, sizeof(char *), c->a, false, &arr, &n)))
            return e;
        head = p->pos - from;
        for (size_t i = 0; i < n && !e; i++)
            e = dec_text(p, f, c->a, NULL);
        if (e)
            return e;
        if (m && p->pos - from <= sizeof m->run) {
            m->field = f;
            m->len = p->pos - from;
            m->head = head;
            m->n = n;
            memcpy(m->run, p->p + from, m->len);
        }
    }
    sl->p = (const char *)p->p + from + head;
    sl->n = n;
    /* The count stands in the struct, for the rules across fields. */
    *AT(out, f->off, void *) = NULL;
    *AT(out, f->count_off, size_t) = n;
    return ENVLOG_OK;
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
        if (out && c->slices && c->own && f >= c->own->fields &&
            f < c->own->fields + c->own->n_fields)
            return dec_slice(p, f, &c->slices[f - c->own->fields]);
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
        size_t start = p->pos, used;
        /* A record stored inline counts its depth from its own map. */
        int d = f->type == ENVLOG_F_RECORD ? 0 : depth;
        if (f->type == ENVLOG_F_RECORD && c->inner) {
            /* (its decode reads it whole, and says where it ends) */
            if ((e = event_decode(p->p + start, p->n - start, c->inner, c->a, c->inner_fold,
                                  NULL, NULL, &used)))
                return e;
            p->pos = start + used;
        } else if ((e = pull(p, &t)) || (e = envlog_pull_skip_at(p, &t, d))) {
            return e;
        } else if (f->type == ENVLOG_F_RECORD && t.type != ENVLOG_TOK_MAP) {
            return bad(f, "expected a record (a map)");
        }
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
    /* Texts of the record's own map as a slice: where the array's items
     * begin, and how many. */
    envlog_text *sl = out && c->slices && f->type == ENVLOG_F_TEXTS && c->own &&
                              f >= c->own->fields && f < c->own->fields + c->own->n_fields
                          ? &c->slices[f - c->own->fields]
                          : NULL;
    if (sl)
        return dec_slice_array(p, f, out, c, sl);
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

/* Key 23 of a record whose kind has a detail: a byte string, taken as it is
 * by every reader (envlog(5), RECORD ENCODING); the full reader reads what
 * it holds afterwards (read_detail). */
static envlog_err detail_key(envlog_pull *p, dec_ctx *c)
{
    envlog_tok t;
    envlog_err e = pull(p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_BYTES)
        return envlog__fail(ENVLOG_BAD_DATA, "key 23 (the detail): expected a byte string");
    c->detail.data = t.data;
    c->detail.size = t.len;
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
        /* An event's envelope keys and its detail are never fields of its
         * schema (check_core's test_schema_keys): asked first, they cost
         * no search of the schema's table. */
        bool uint_key = k.type == ENVLOG_TOK_UINT;
        const envlog_field *f = NULL;
        if (env && uint_key && k.u < ENVLOG_K_BODY0)
            e = envelope_key(p, k.u, env);
        else if (env && c->detail_of && uint_key && k.u == ENVLOG_K_DETAIL)
            e = detail_key(p, c);
        else if (s && uint_key && (f = field_of(s, k.u, &hint))) {
            if (s == c->own)
                c->seen |= (uint64_t)1 << (f - s->fields);
            e = dec_field(p, f, fold_only && !f->fold ? NULL : out, c, depth + 1);
        } else if (!(e = pull(p, &v)))
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

static envlog_err struct_decode(envlog_pull *pull, const envlog_tok *t,
                                const envlog_schema *s, void *out,
                                envlog_arena *arena, envlog_record *inner, bool fold)
{
    if (t->type != ENVLOG_TOK_MAP)
        return envlog__fail(ENVLOG_BAD_DATA, "%s: expected a map", s->name);
    dec_ctx c = {arena, {0, false}, NULL, NULL, {NULL, 0}, 0, NULL, NULL, inner, fold};
    envlog_keyset ks;
    envlog_keyset_init(&ks);
    envlog_err e = dec_pairs(pull, t->u, s, out, &c, 0, &ks, NULL);
    keys_done(&ks);
    return e;
}

envlog_err envlog_struct_decode(envlog_pull *pull, const envlog_tok *t,
                                const envlog_schema *s, void *out,
                                envlog_arena *arena)
{
    return struct_decode(pull, t, s, out, arena, NULL, false);
}

envlog_err envlog_struct_decode_with_record(envlog_pull *pull, const envlog_tok *t,
                                            const envlog_schema *s, void *out,
                                            envlog_arena *arena, envlog_record *rec,
                                            bool fold)
{
    return struct_decode(pull, t, s, out, arena, rec, fold);
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

/* The map a format 2 detail holds, into rec->u: one map (at depth 1) of
 * fields of the record's kind that are not the fold's and that its own map
 * does not hold, with nothing after it, keeping the rules across fields. */
static envlog_err detail_fields(envlog_record *rec, dec_ctx *c)
{
    const envlog_schema *s = c->detail_of;
    envlog_pull p = {c->detail.data, c->detail.size, 0};
    envlog_tok t;
    envlog_err e = pull(&p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_MAP)
        return envlog__fail(ENVLOG_BAD_DATA, "the detail is not a map");
    uint64_t top = c->seen;
    dec_ctx bc = {c->a, {0, false}, s, NULL, {NULL, 0}, 0, NULL, NULL, NULL, false};
    envlog_keyset ks;
    envlog_keyset_init(&ks);
    /* Its keys are read as a record's are, so the fields met are noted. */
    e = dec_pairs_x(&p, t.u, s, &rec->u, &bc, 1, &ks, NULL, false);
    keys_done(&ks);
    if (e)
        return e;
    if (p.pos != p.n)
        return envlog__fail(ENVLOG_BAD_DATA, "%zu bytes follow the detail's map", p.n - p.pos);
    for (size_t i = 0; i < s->n_fields; i++) {
        const envlog_field *f = &s->fields[i];
        if (!(bc.seen & (uint64_t)1 << i))
            continue;
        if (f->fold)
            return envlog__fail(ENVLOG_BAD_DATA, "field %s belongs in the record's own "
                                "map, not in its detail", f->name);
        if (top & (uint64_t)1 << i)
            return envlog__fail(ENVLOG_BAD_DATA, "field %s is both in the record's map "
                                "and in its detail", f->name);
    }
    return validate(rec, &bc.facts);
}

/* The full reader's reading of a detail.  Its damage does not drop the
 * record (the fold never reads it, and a record stands or falls the same
 * for every reader): the fields it holds are left absent and
 * rec->detail_problem says why. */
static envlog_err read_detail(envlog_record *rec, dec_ctx *c)
{
    /* A copy to go back to: a detail that fails half way has written some of
     * its fields already. */
    envlog_record before = *rec;
    envlog_err e = detail_fields(rec, c);
    if (e == ENVLOG_NOMEM || !e)
        return e;
    char *why = envlog_arena_alloc(c->a, strlen(envlog_errmsg()) + 1);
    if (!why)
        return envlog__fail(ENVLOG_NOMEM, "keeping a detail's problem");
    strcpy(why, envlog_errmsg());
    *rec = before;
    rec->detail_problem = why;
    return ENVLOG_OK;
}

/* ------------------------------------------------- the fold's own path
 *
 * The fold, and the full reader for the record's own map (the detail is
 * read by the walk either way), read a record of a kind with a detail, in
 * the shape envlog_event_encode_as() gives it, by a path of their own: the
 * envelope's keys 1, 2 and 3, then every field marked fold in its table's
 * order (they lead the table), then the detail, each key in one byte and
 * each value in one of the heads that kind of value is written in.  Each
 * key is the one expected, so none comes twice; each head is read in place
 * as envlog_pull_next() reads it, and each value is checked and stored as
 * dec_field() checks and stores it: where fold_fast() returns true the walk
 * (dec_pairs_x) reads the same.  Anything else (a field left out, another
 * order, another head, a value the walk refuses) returns false, having
 * written part of the record, and the walk reads it from its start, to the
 * verdict it always gave.  check_core holds the two to each other, value
 * by value, over every bit flipped and every cut (test_fold_fast_agrees)
 * and over every kind of head in every value (test_fold_fast_heads), and
 * fuzz_event over what the fuzzer makes, the walk alone read by
 * envlog_decode_walk_only(). */

/* A head of major type `major` (0 to 4) with its number inline or in 1, 2,
 * 4 or 8 bytes; for strings, its bytes too, which must lie before `end`. */
static inline bool ff_head(const uint8_t **at, const uint8_t *end, unsigned major,
                           uint64_t *v, const uint8_t **data)
{
    const uint8_t *q = *at;
    if (q >= end || q[0] >> 5 != major)
        return false;
    unsigned ai = q[0] & 31;
    size_t hl = 1;
    *v = ai;
    if (ai >= 24) {
        if (ai > 27)
            return false;
        size_t w = (size_t)1 << (ai - 24);
        if ((size_t)(end - q) - 1 < w)
            return false;
        *v = envlog_load_be(q + 1, w);
        hl += w;
    }
    q += hl;
    if (major == 2 || major == 3) {
        if (*v > (uint64_t)(end - q))
            return false;
        *data = q;
        q += *v;
    }
    *at = q;
    return true;
}

/* A text copied into the arena as dec_text() copies it, into *out. */
static inline bool ff_text(const uint8_t **at, const uint8_t *end, dec_ctx *c,
                           const char **out)
{
    uint64_t v;
    const uint8_t *d;
    if (!ff_head(at, end, 3, &v, &d) || !text_valid((const char *)d, (size_t)v))
        return false;
    char *s = envlog_arena_alloc(c->a, (size_t)v + 1);
    if (!s)
        return false;
    memcpy(s, d, (size_t)v);
    s[v] = 0;
    *out = s;
    return true;
}

/* An array of texts copied as dec_array() and dec_text() copy it. */
static inline bool ff_texts(const uint8_t **at, const uint8_t *end, const envlog_field *f,
                            void *out, dec_ctx *c)
{
    uint64_t n;
    const uint8_t *q = *at;
    if (!ff_head(&q, end, 4, &n, NULL) || n > (uint64_t)(end - q))
        return false;
    const char **arr = NULL;
    if (n && !(arr = envlog_arena_alloc(c->a, (size_t)n * sizeof *arr)))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!ff_text(&q, end, c, &arr[i]))
            return false;
    *AT(out, f->off, void *) = arr;
    *AT(out, f->count_off, size_t) = (size_t)n;
    *at = q;
    return true;
}

/* A value ff_value() has no in-place reading for, read by dec_field()
 * itself (an array of texts by dec_slice_array() when the fold takes
 * slices), from *at on; texts to copy (the snapshot walks') by ff_text()
 * and ff_texts().  (Out of ff_value(), whose loop over the fields the
 * sessions' fold runs: it ran slower with them inside.) */
static bool ff_walk(const uint8_t **at, const envlog_field *f, size_t i, void *out,
                    dec_ctx *c, const envlog_pull *whole)
{
    const uint8_t *end = whole->p + whole->n;
    if (!c->slices && f->type == ENVLOG_F_TEXT)
        return ff_text(at, end, c, AT(out, f->off, const char *));
    if (!c->slices && f->type == ENVLOG_F_TEXTS)
        return ff_texts(at, end, f, out, c);
    envlog_pull p = {whole->p, whole->n, (size_t)(*at - whole->p)};
    if (f->type == ENVLOG_F_TEXTS && c->slices ? dec_slice_array(&p, f, out, c, &c->slices[i])
                                               : dec_field(&p, f, out, c, 1))
        return false;
    *at = p.p + p.pos;
    return true;
}

/* One field's value, as dec_field() reads it into `out` (the record's
 * body) for a field of the record's own map. */
static inline bool ff_value(const uint8_t **at, const uint8_t *end, const envlog_field *f,
                            size_t i, void *out, dec_ctx *c, const envlog_pull *whole)
{
    const uint8_t *q = *at, *d = NULL;
    uint64_t v;
    switch ((envlog_fty)f->type) {
    case ENVLOG_F_U64:
    case ENVLOG_F_U32:
        if (f->candidate_index || !ff_head(&q, end, 0, &v, &d) ||
            (f->type == ENVLOG_F_U32 && v > UINT32_MAX))
            return false;
        if (f->type == ENVLOG_F_U32)
            *AT(out, f->off, uint32_t) = (uint32_t)v;
        else
            *AT(out, f->off, uint64_t) = v;
        if (f->present_off != SIZE_MAX)
            *AT(out, f->present_off, bool) = true;
        break;
    case ENVLOG_F_ENUM:
        if (!ff_head(&q, end, 0, &v, &d) || v >= enum_count(f))
            return false;
        *AT(out, f->off, int) = (int)v;
        break;
    case ENVLOG_F_I64:
        if (q < end && q[0] >> 5 == 1) {
            if (!ff_head(&q, end, 1, &v, &d) || v > INT64_MAX)
                return false;
            *AT(out, f->off, int64_t) = -1 - (int64_t)v;
        } else {
            if (!ff_head(&q, end, 0, &v, &d) || v > INT64_MAX)
                return false;
            *AT(out, f->off, int64_t) = (int64_t)v;
        }
        break;
    case ENVLOG_F_F64: {
        size_t w = q >= end ? 0 : q[0] == 0xfa ? 4 : q[0] == 0xfb ? 8 : 0;
        if (!w || (size_t)(end - q) <= w)
            return false;
        *AT(out, f->off, double) = envlog_load_float(q + 1, w);
        q += 1 + w;
        break;
    }
    case ENVLOG_F_BOOL:
        if (q >= end || (q[0] != 0xf4 && q[0] != 0xf5))
            return false;
        *AT(out, f->off, bool) = q[0] == 0xf5;
        q++;
        break;
    case ENVLOG_F_TEXT:
        if (!c->slices)
            return ff_walk(at, f, i, out, c, whole);
        if (!ff_head(&q, end, 3, &v, &d) || !text_valid((const char *)d, (size_t)v))
            return false;
        c->slices[i] = (envlog_text){(const char *)d, (size_t)v};
        break;
    case ENVLOG_F_BYTES:
        if (!ff_head(&q, end, 2, &v, &d))
            return false;
        *AT(out, f->off, envlog_bytes) = (envlog_bytes){d, (size_t)v};
        break;
    case ENVLOG_F_H128:
        if (!ff_head(&q, end, 2, &v, &d) || v != 16)
            return false;
        memcpy(AT(out, f->off, envlog_id128)->b, d, 16);
        break;
    default:
        return ff_walk(at, f, i, out, c, whole);
    }
    *at = q;
    return true;
}

static bool fold_fast(envlog_pull *p, uint64_t pairs, const envlog_schema *s,
                      envlog_record *rec, dec_ctx *c)
{
    const uint8_t *q = p->p + p->pos, *end = p->p + p->n, *d;
    uint64_t v[ENVLOG_K_EFFECT + 1];
    for (uint8_t k = ENVLOG_K_SEQ; k <= ENVLOG_K_EFFECT; k++) {
        if (q >= end || *q++ != k || !ff_head(&q, end, 0, &v[k], &d))
            return false;
    }
    if (v[ENVLOG_K_EFFECT] > 1)
        return false;
    rec->stamp.seq = v[ENVLOG_K_SEQ];
    rec->stamp.offset_ns = v[ENVLOG_K_OFFSET];
    rec->effect = (envlog_effect)v[ENVLOG_K_EFFECT];
    size_t nf = 0;
    for (; nf < s->n_fields && s->fields[nf].fold; nf++) {
        const envlog_field *f = &s->fields[nf];
        if (f->key >= 0x18 || q >= end || *q++ != f->key ||
            !ff_value(&q, end, f, nf, &rec->u, c, p))
            return false;
        c->seen |= (uint64_t)1 << nf;
    }
    uint64_t n;
    if (pairs != ENVLOG_K_EFFECT + nf + 1 || q >= end || *q++ != ENVLOG_K_DETAIL ||
        !ff_head(&q, end, 2, &n, &d))
        return false;
    c->detail = (envlog_bytes){d, (size_t)n};
    p->pos = (size_t)(q - p->p);
    return true;
}

/* What a record's decoding starts from, its kind read: nothing of its body
 * yet. */
static void body_reset(envlog_record *rec, dec_ctx *c)
{
    memset(&rec->u, 0, sizeof rec->u);
    rec->effect = ENVLOG_OBSERVED;
    rec->stamp.seq = rec->stamp.offset_ns = 0;
    if (rec->kind == ENVLOG_KIND_TUNE)
        rec->u.tune.winner = -1;
    if (c->slices)
        memset(c->slices, 0, c->own->n_fields * sizeof *c->slices);
    c->facts = (dec_facts){0, false};
    c->seen = 0;
    c->detail = (envlog_bytes){NULL, 0};
}

static bool walk_only; /* envlog_decode_walk_only() */

void envlog_decode_walk_only(bool on)
{
    walk_only = on;
}

/* Decodes the record that `data` (n bytes) holds; with `used`, a record
 * that `data` begins with, followed by anything, and *used its size. */
static envlog_err event_decode(const uint8_t *data, size_t n, envlog_record *rec,
                               envlog_arena *arena, bool fold, envlog_text *slices,
                               envlog_dec_memo *memo, size_t *used)
{
    envlog_pull p = {data, n, 0};
    envlog_tok t, k, v;
    envlog_err e;
    rec->payload.data = data;
    rec->payload.size = n;
    rec->detail_problem = NULL;
    if ((e = pull(&p, &t)))
        return e;
    if (t.type != ENVLOG_TOK_MAP || t.u == 0)
        return envlog__fail(ENVLOG_BAD_DATA, "a record is a non-empty map");
    /* envlog(5): the kind is the first key, so the rest can be read in one
     * pass with the right schema. */
    if ((e = pull(&p, &k)) || (e = pull(&p, &v)))
        return e;
    if (k.type != ENVLOG_TOK_UINT || k.u != ENVLOG_K_KIND ||
        v.type != ENVLOG_TOK_UINT || v.u > INT_MAX)
        return envlog__fail(ENVLOG_BAD_DATA, "a record's first key is its kind");
    rec->kind = (envlog_kind)v.u;
    const envlog_schema *s = envlog_schema_of(rec->kind);
    dec_ctx c = {arena, {0, false}, s, s && s->detail ? s : NULL, {NULL, 0}, 0,
                 slices && s && s->detail ? slices : NULL, memo, NULL, false};
    body_reset(rec, &c);
    /* The fold stores only the fields it reads, and of the kinds whose
     * other fields it never looks at; it checks all of them all the same. */
    bool fold_only = fold && rec->kind != ENVLOG_KIND_SESSION &&
                     rec->kind != ENVLOG_KIND_FORGET && rec->kind != ENVLOG_KIND_USER;
    size_t body = p.pos;
    /* (the full reader too: its fields beyond the fold's are in the detail,
     * which both read alike) */
    bool shaped = c.detail_of && !walk_only;
    if (!shaped || !fold_fast(&p, t.u - 1, s, rec, &c)) {
        if (shaped) {
            p.pos = body;
            body_reset(rec, &c);
        }
        envlog_keyset ks;
        envlog_keyset_init(&ks);
        ks.small = 1; /* key 0, the kind */
        e = dec_pairs_x(&p, t.u - 1, s, &rec->u, &c, 0, &ks, rec, fold_only);
        keys_done(&ks);
        if (e)
            return e;
    } else if (memo) {
        memo->fast++;
    }
    if (used) {
        *used = p.pos;
        rec->payload.size = p.pos;
    } else if (p.pos != n) {
        return envlog__fail(ENVLOG_BAD_DATA, "%zu bytes follow the record", n - p.pos);
    }
    if ((e = validate(rec, &c.facts)))
        return e;
    return c.detail.data && !fold ? read_detail(rec, &c) : ENVLOG_OK;
}

envlog_err envlog_event_decode(const uint8_t *data, size_t n, envlog_record *rec,
                               envlog_arena *arena)
{
    return event_decode(data, n, rec, arena, false, NULL, NULL, NULL);
}

envlog_err envlog_event_decode_fold(const uint8_t *data, size_t n, envlog_record *rec,
                                    envlog_arena *arena)
{
    return event_decode(data, n, rec, arena, true, NULL, NULL, NULL);
}

envlog_err envlog_event_decode_slices(const uint8_t *data, size_t n, envlog_record *rec,
                                      envlog_arena *arena, envlog_text slices[ENVLOG_FIELDS_MAX],
                                      envlog_dec_memo *memo)
{
    return event_decode(data, n, rec, arena, true, slices, memo, NULL);
}
