/* SPDX-License-Identifier: MIT */
/*
 * render.c - records as JSON, as a one-line summary, and CBOR as diagnostic
 * notation (RFC 8949 section 8).
 *
 * JSON walks the stored payload with the kind's schema for names, so a field
 * this version does not know still shows (as "k<N>") rather than vanishing.
 */
#include "core_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct out {
    envlog_write_fn fn;
    void *ctx;
    envlog_err failed; /* what the writer returned that was not ENVLOG_OK:
                          nothing more is written, and the call returns it */
} out;

static void put(out *o, const char *s, size_t n)
{
    if (!o->failed && n)
        o->failed = o->fn(o->ctx, s, n);
}
static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }

static void putf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(out *o, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(o, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

envlog_err envlog__write_hex(envlog_write_fn fn, void *ctx, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char buf[128];
    size_t k = 0;
    envlog_err e;
    for (size_t i = 0; i < n; i++) {
        buf[k++] = hex[p[i] >> 4];
        buf[k++] = hex[p[i] & 15];
        if (k == sizeof buf) {
            if ((e = fn(ctx, buf, k)))
                return e;
            k = 0;
        }
    }
    return k ? fn(ctx, buf, k) : ENVLOG_OK;
}

static void put_hex(out *o, const uint8_t *p, size_t n)
{
    if (!o->failed)
        o->failed = envlog__write_hex(o->fn, o->ctx, p, n);
}

/* A JSON string; bytes that are not UTF-8 become U+FFFD so the output is
 * always valid JSON. */
static void put_jstr(out *o, const char *s, size_t n)
{
    put(o, "\"", 1);
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char ubuf[8];
        size_t skip = 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\r')
            esc = "\\r";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(ubuf, sizeof ubuf, "\\u%04x", c);
            esc = ubuf;
        } else if (c >= 0x80) {
            size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
            if (len > 1 && len <= n - i && envlog_utf8_valid(s + i, len)) {
                i += len;
                run += len;
                continue;
            }
            esc = "\xef\xbf\xbd";
        }
        if (!esc) {
            i++;
            run++;
            continue;
        }
        put(o, s + i - run, run);
        run = 0;
        puts_(o, esc);
        i += skip;
    }
    put(o, s + i - run, run);
    put(o, "\"", 1);
}

envlog_err envlog__write_json_str(envlog_write_fn fn, void *ctx, const char *s, size_t n)
{
    out o = {fn, ctx, ENVLOG_OK};
    put_jstr(&o, s, n);
    return o.failed;
}

envlog_err envlog_json_string(const char *s, envlog_write_fn fn, void *ctx)
{
    return envlog__write_json_str(fn, ctx, s, strlen(s));
}

/* The shortest %g that reads back as the same double. */
void envlog__fmt_double(double v, char *buf, size_t size)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static void put_negint(out *o, uint64_t u)
{
    if (u == UINT64_MAX)
        puts_(o, "-18446744073709551616");
    else
        putf(o, "-%" PRIu64, u + 1);
}

/* ------------------------------------------------------------------- JSON */

static envlog_err json_item(out *o, envlog_pull *p, const envlog_tok *t,
                            const envlog_field *f, int depth);

static envlog_err json_map(out *o, envlog_pull *p, uint64_t pairs,
                           const envlog_schema *s, const envlog_record *rec, int depth,
                           bool open_done, bool close);

/* A format 2 record's detail, in place of key 23: its map's pairs among the
 * record's own when it reads (the full reader found no problem), else the
 * problem and the bytes as they are (envlog(5), JSON RENDERING). */
static envlog_err json_detail(out *o, const envlog_tok *v, const envlog_schema *s,
                            const envlog_record *rec)
{
    if (rec->detail_problem) {
        puts_(o, ",\"detail_problem\":");
        put_jstr(o, rec->detail_problem, strlen(rec->detail_problem));
        puts_(o, ",\"detail\":\"");
        put_hex(o, v->data, v->len);
        put(o, "\"", 1);
        return ENVLOG_OK;
    }
    envlog_pull bp = {v->data, v->len, 0};
    envlog_tok t;
    envlog_err e = envlog_pull_next(&bp, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_MAP || t.u > (bp.n - bp.pos) / 2)
        return envlog__fail(ENVLOG_BAD_DATA, "the detail is not a map");
    return json_map(o, &bp, t.u, s, NULL, 1, true, false);
}

/* The pairs of a map: with `open_done` the object is open already and has
 * pairs before them; with `close` the object is closed after them.  `rec`
 * is the record whose own map this is (its envelope named, its detail
 * flattened), or NULL. */
static envlog_err json_map(out *o, envlog_pull *p, uint64_t pairs,
                           const envlog_schema *s, const envlog_record *rec, int depth,
                           bool open_done, bool close)
{
    bool envelope = rec != NULL;
    if (!open_done)
        put(o, "{", 1);
    for (uint64_t i = 0; i < pairs; i++) {
        envlog_tok k, v;
        envlog_err e = envlog_pull_next(p, &k);
        if (e)
            return e;
        if (envelope && s && s->detail && k.type == ENVLOG_TOK_UINT && k.u == ENVLOG_K_DETAIL) {
            if ((e = envlog_pull_next(p, &v)))
                return e;
            if (v.type == ENVLOG_TOK_BYTES) {
                if ((e = json_detail(o, &v, s, rec)))
                    return e;
                continue;
            }
            return envlog__fail(ENVLOG_BAD_DATA, "key 23 (the detail): expected a byte string");
        }
        if (i || open_done)
            put(o, ",", 1);
        const envlog_field *f = NULL;
        const char *special = NULL;
        if (k.type == ENVLOG_TOK_UINT) {
            if (envelope && k.u < ENVLOG_K_BODY0) {
                static const char *const env_names[] = {"kind", "seq",
                                                        "offset_ns", "effect"};
                special = env_names[k.u];
            } else if (s) {
                f = envlog_schema_field(s, k.u);
            }
            if (f)
                put_jstr(o, f->name, strlen(f->name));
            else if (special)
                put_jstr(o, special, strlen(special));
            else
                putf(o, "\"k%" PRIu64 "\"", k.u);
        } else if (k.type == ENVLOG_TOK_TEXT) {
            put_jstr(o, (const char *)k.data, k.len);
        } else {
            puts_(o, "\"?\"");
            if ((e = envlog_pull_skip_after(p, &k)))
                return e;
        }
        put(o, ":", 1);
        if ((e = envlog_pull_next(p, &v)))
            return e;
        if (special && k.u == ENVLOG_K_KIND && v.type == ENVLOG_TOK_UINT) {
            const char *nm = envlog_kind_name((envlog_kind)v.u);
            if (strcmp(nm, "unknown"))
                put_jstr(o, nm, strlen(nm));
            else
                putf(o, "%" PRIu64, v.u);
        } else if (special && k.u == ENVLOG_K_EFFECT && v.type == ENVLOG_TOK_UINT) {
            puts_(o, v.u ? "\"changed\"" : "\"observed\"");
        } else if ((e = json_item(o, p, &v, f,
                                  /* a record stored inline counts from itself */
                                  f && f->type == ENVLOG_F_RECORD ? 0 : depth + 1))) {
            return e;
        }
    }
    if (close)
        put(o, "}", 1);
    return ENVLOG_OK;
}

static envlog_err json_item(out *o, envlog_pull *p, const envlog_tok *t,
                            const envlog_field *f, int depth)
{
    char buf[40];
    envlog_err e;
    if (depth > ENVLOG_CBOR_MAX_DEPTH)
        return envlog__fail(ENVLOG_BAD_DATA, "CBOR nested too deep");
    switch (t->type) {
    case ENVLOG_TOK_UINT:
        if (f && f->type == ENVLOG_F_ENUM && f->enum_names) {
            for (uint64_t i = 0; f->enum_names[i]; i++)
                if (i == t->u) {
                    put_jstr(o, f->enum_names[i], strlen(f->enum_names[i]));
                    return ENVLOG_OK;
                }
        }
        if (f && f->identity)
            putf(o, "\"0x%016" PRIx64 "\"", t->u);
        else
            putf(o, "%" PRIu64, t->u);
        return ENVLOG_OK;
    case ENVLOG_TOK_NEGINT: put_negint(o, t->u); return ENVLOG_OK;
    case ENVLOG_TOK_BYTES:
        put(o, "\"", 1);
        put_hex(o, t->data, t->len);
        put(o, "\"", 1);
        return ENVLOG_OK;
    case ENVLOG_TOK_TEXT: put_jstr(o, (const char *)t->data, t->len); return ENVLOG_OK;
    case ENVLOG_TOK_FLOAT:
        if (!isfinite(t->f)) {
            puts_(o, "null");
            return ENVLOG_OK;
        }
        envlog__fmt_double(t->f, buf, sizeof buf);
        puts_(o, buf);
        return ENVLOG_OK;
    case ENVLOG_TOK_BOOL: puts_(o, t->b ? "true" : "false"); return ENVLOG_OK;
    case ENVLOG_TOK_NULL:
    case ENVLOG_TOK_UNDEF:
    case ENVLOG_TOK_INDEF: puts_(o, "null"); return ENVLOG_OK;
    case ENVLOG_TOK_TAG: {
        envlog_tok c;
        if ((e = envlog_pull_next(p, &c)))
            return e;
        return json_item(o, p, &c, NULL, depth + 1);
    }
    case ENVLOG_TOK_MAP:
        if (t->u > (p->n - p->pos) / 2)
            return envlog__fail(ENVLOG_BAD_DATA, "map claims too many pairs");
        return json_map(o, p, t->u, f ? f->sub : NULL, NULL, depth, false, true);
    case ENVLOG_TOK_ARRAY:
        if (t->u > p->n - p->pos)
            return envlog__fail(ENVLOG_BAD_DATA, "array claims too many items");
        if (f && f->type == ENVLOG_F_STAMP && t->u == 3) {
            envlog_tok a, b, c;
            if ((e = envlog_pull_next(p, &a)) || (e = envlog_pull_next(p, &b)) ||
                (e = envlog_pull_next(p, &c)))
                return e;
            puts_(o, "{\"session\":\"");
            put_hex(o, a.data, a.type == ENVLOG_TOK_BYTES ? a.len : 0);
            putf(o, "\",\"seq\":%" PRIu64 ",\"offset_ns\":%" PRIu64 "}", b.u, c.u);
            return ENVLOG_OK;
        }
        put(o, "[", 1);
        for (uint64_t i = 0; i < t->u; i++) {
            envlog_tok c;
            if (i)
                put(o, ",", 1);
            if ((e = envlog_pull_next(p, &c)))
                return e;
            /* Array elements of an OBJS field use the field's sub-schema. */
            if (c.type == ENVLOG_TOK_MAP && f && f->sub) {
                if (c.u > (p->n - p->pos) / 2)
                    return envlog__fail(ENVLOG_BAD_DATA, "map too large");
                e = json_map(o, p, c.u, f->sub, NULL, depth + 1, false, true);
            } else {
                e = json_item(o, p, &c, NULL, depth + 1);
            }
            if (e)
                return e;
        }
        put(o, "]", 1);
        return ENVLOG_OK;
    }
    return envlog__fail(ENVLOG_BAD_DATA, "unknown CBOR item");
}

envlog_err envlog_record_json(const envlog_record *rec, envlog_write_fn fn, void *ctx)
{
    out o = {fn, ctx, ENVLOG_OK};
    char id[33];
    envlog_id_format(&rec->stamp.session, id);
    putf(&o, "{\"session\":\"%s\"", id);
    envlog_pull p = {rec->payload.data, rec->payload.size, 0};
    envlog_tok t;
    envlog_err e = envlog_pull_next(&p, &t);
    if (e)
        return e;
    if (t.type != ENVLOG_TOK_MAP)
        return envlog__fail(ENVLOG_BAD_DATA, "a record is a map");
    e = json_map(&o, &p, t.u, envlog_schema_of(rec->kind), rec, 0, true, true);
    return o.failed ? o.failed : e;
}

/* ------------------------------------------------------------ diagnostic */

/* `s`, when not NULL, is the schema of the item when it is a record's map:
 * a field of it that holds a record inline counts its depth from itself
 * (the nesting rule of core_int.h). */
static envlog_err diag_item_s(out *o, envlog_pull *p, int depth, const envlog_schema *s);

static envlog_err diag_item(out *o, envlog_pull *p, int depth)
{
    return diag_item_s(o, p, depth, NULL);
}

/* A format 2 record's detail (key 23): the map it holds as embedded CBOR,
 * <<{...}>> (RFC 8949, section 8), at depth 1; bytes that are not one
 * item as they are. */
static envlog_err diag_detail(out *o, envlog_pull *p)
{
    envlog_tok t;
    envlog_pull look = *p;
    envlog_err e = envlog_pull_next(&look, &t);
    if (e)
        return e;
    if (t.type == ENVLOG_TOK_BYTES) {
        envlog_pull bp = {t.data, t.len, 0};
        if (envlog_cbor_check_at(t.data, t.len, 1) == ENVLOG_OK) {
            puts_(o, "<<");
            if ((e = diag_item(o, &bp, 1)))
                return e;
            puts_(o, ">>");
            *p = look;
            return ENVLOG_OK;
        }
    }
    return diag_item(o, p, 1);
}

static envlog_err diag_item_s(out *o, envlog_pull *p, int depth, const envlog_schema *s)
{
    envlog_tok t;
    envlog_err e = envlog_pull_next(p, &t);
    char buf[40];
    if (e)
        return e;
    if (depth > ENVLOG_CBOR_MAX_DEPTH)
        return envlog__fail(ENVLOG_BAD_DATA, "CBOR nested too deep");
    switch (t.type) {
    case ENVLOG_TOK_UINT: putf(o, "%" PRIu64, t.u); break;
    case ENVLOG_TOK_NEGINT: put_negint(o, t.u); break;
    case ENVLOG_TOK_BYTES:
        puts_(o, "h'");
        put_hex(o, t.data, t.len);
        puts_(o, "'");
        break;
    case ENVLOG_TOK_TEXT: put_jstr(o, (const char *)t.data, t.len); break;
    case ENVLOG_TOK_FLOAT:
        if (isnan(t.f))
            puts_(o, "NaN");
        else if (isinf(t.f))
            puts_(o, t.f > 0 ? "Infinity" : "-Infinity");
        else {
            envlog__fmt_double(t.f, buf, sizeof buf);
            puts_(o, buf);
            if (!strpbrk(buf, ".eEn"))
                puts_(o, ".0");
        }
        break;
    case ENVLOG_TOK_BOOL: puts_(o, t.b ? "true" : "false"); break;
    case ENVLOG_TOK_NULL: puts_(o, "null"); break;
    case ENVLOG_TOK_UNDEF:
    case ENVLOG_TOK_INDEF: puts_(o, "undefined"); break;
    case ENVLOG_TOK_TAG:
        putf(o, "%" PRIu64 "(", t.u);
        if ((e = diag_item(o, p, depth + 1)))
            return e;
        puts_(o, ")");
        break;
    case ENVLOG_TOK_ARRAY:
    case ENVLOG_TOK_MAP: {
        bool map = t.type == ENVLOG_TOK_MAP;
        if (t.u > (p->n - p->pos) / (map ? 2 : 1))
            return envlog__fail(ENVLOG_BAD_DATA, "container claims too many items");
        puts_(o, map ? "{" : "[");
        for (uint64_t i = 0; i < t.u; i++) {
            if (i)
                puts_(o, ", ");
            size_t kpos = p->pos;
            if ((e = diag_item(o, p, depth + 1)))
                return e;
            if (map) {
                puts_(o, ": ");
                const envlog_field *f = NULL;
                envlog_pull kp = {p->p, p->n, kpos};
                envlog_tok k = {0};
                if (s && !envlog_pull_next(&kp, &k) && k.type == ENVLOG_TOK_UINT)
                    f = envlog_schema_field(s, k.u);
                if (depth == 0 && s && s->detail && k.type == ENVLOG_TOK_UINT &&
                    k.u == ENVLOG_K_DETAIL) {
                    if ((e = diag_detail(o, p)))
                        return e;
                } else if ((e = diag_item(o, p, f && f->type == ENVLOG_F_RECORD ? 0
                                                                                : depth + 1))) {
                    return e;
                }
            }
        }
        puts_(o, map ? "}" : "]");
        break;
    }
    }
    return ENVLOG_OK;
}

envlog_err envlog_record_diag(const envlog_record *rec, envlog_write_fn fn, void *ctx)
{
    out o = {fn, ctx, ENVLOG_OK};
    envlog_pull p = {rec->payload.data, rec->payload.size, 0};
    envlog_err e = diag_item_s(&o, &p, 0, envlog_schema_of(rec->kind));
    if (!e && p.pos != rec->payload.size)
        e = envlog__fail(ENVLOG_BAD_DATA, "%zu bytes follow the record",
                         rec->payload.size - p.pos);
    return o.failed ? o.failed : e;
}

envlog_err envlog_cbor_diag(const void *data, size_t size, envlog_write_fn fn, void *ctx)
{
    out o = {fn, ctx, ENVLOG_OK};
    envlog_pull p = {data, size, 0};
    envlog_err e = diag_item(&o, &p, 0);
    if (!e && p.pos != size)
        e = envlog__fail(ENVLOG_BAD_DATA, "%zu bytes follow the item", size - p.pos);
    return o.failed ? o.failed : e;
}

/* ---------------------------------------------------------------- summary */

static void put_dur(out *o, double ns)
{
    if (ns < 1e3)
        putf(o, "%.0fns", ns);
    else if (ns < 1e6)
        putf(o, "%.2fus", ns / 1e3);
    else if (ns < 1e9)
        putf(o, "%.2fms", ns / 1e6);
    else
        putf(o, "%.3fs", ns / 1e9);
}

static void put_str(out *o, const char *s) { puts_(o, s ? s : "-"); }

static void put_h(out *o, const envlog_hash128 *h, size_t n)
{
    put_hex(o, h->b, n);
}

static void text_tune(out *o, const envlog_tune *t)
{
    put_str(o, t->ns);
    puts_(o, " ");
    put_str(o, t->key);
    if (t->winner >= 0 && (size_t)t->winner < t->n_candidates)
        putf(o, " winner=%s", t->candidates[t->winner]);
    else if (t->winner >= 0)
        putf(o, " winner=#%" PRId64, t->winner);
    else
        puts_(o, " winner=none");
    putf(o, " margin=%.1f%%%s", t->margin * 100, t->within_noise ? " (noise)" : "");
    putf(o, " candidates=%zu trials=%zu", t->n_candidates, t->n_trials);
    if (t->policy)
        putf(o, " policy=%s", t->policy);
    puts_(o, " wall=");
    put_dur(o, (double)t->wall_ns);
    puts_(o, t->stored ? " stored" : " not-stored");
    if (t->short_circuit)
        puts_(o, " short-circuit");
}

static void text_compile(out *o, const envlog_compile *c)
{
    static const char *const oc[] = {"compiled", "loaded", "failed"};
    put_str(o, c->ns);
    puts_(o, " ");
    put_str(o, c->name);
    putf(o, " %s key=", (unsigned)c->outcome < 3 ? oc[c->outcome] : "?");
    put_h(o, &c->kernel_key, 8);
    putf(o, " arch=%s", c->arch ? c->arch : "-");
    putf(o, " binary=%" PRIu64 "B", c->binary_size);
    puts_(o, " took=");
    put_dur(o, (double)c->duration_ns);
}

envlog_err envlog_record_text(const envlog_record *rec, envlog_write_fn fn, void *ctx)
{
    out o = {fn, ctx, ENVLOG_OK};
    const char *kind = envlog_kind_name(rec->kind);
    putf(&o, "#%" PRIu64 " +%" PRIu64 ".%06" PRIu64 "s %-8s %s ", rec->stamp.seq,
         rec->stamp.offset_ns / 1000000000u,
         rec->stamp.offset_ns % 1000000000u / 1000u,
         rec->effect == ENVLOG_CHANGED ? "CHANGED" : "OBSERVED", kind);
    const envlog_session_rec *s = &rec->u.session;
    switch (rec->kind) {
    case ENVLOG_KIND_SESSION:
        putf(&o, "label=%s host=%s pid=%" PRIu64, s->label ? s->label : "-",
             s->host ? s->host : "-", s->pid);
        putf(&o, " runtime=%s/%s", s->runtime ? s->runtime : "-",
             s->runtime_version ? s->runtime_version : "-");
        for (size_t i = 0; i < s->n_devices; i++)
            putf(&o, "%s%s", i ? "," : " devices=", s->devices[i]);
        if (s->process_mode)
            putf(&o, " mode=%s", s->process_mode);
        static const char *const lv[] = {"off", "basic", "full"};
        putf(&o, " level=%s dropped=%" PRIu64,
             (unsigned)s->level < 3 ? lv[s->level] : "?", s->dropped);
        break;
    case ENVLOG_KIND_TUNE: text_tune(&o, &rec->u.tune); break;
    case ENVLOG_KIND_COMPILE: text_compile(&o, &rec->u.compile); break;
    case ENVLOG_KIND_SPAN:
        put_str(&o, rec->u.span.name);
        putf(&o, " id=%" PRIu64 " parent=%" PRIu64 " took=", rec->u.span.id,
             rec->u.span.parent);
        put_dur(&o, (double)rec->u.span.duration_ns);
        for (size_t i = 0; i < rec->u.span.n_attrs; i++)
            putf(&o, " %s=%s", rec->u.span.attrs[i].key ? rec->u.span.attrs[i].key : "-",
                 rec->u.span.attrs[i].value ? rec->u.span.attrs[i].value : "-");
        break;
    case ENVLOG_KIND_MARK: put_str(&o, rec->u.mark.label); break;
    case ENVLOG_KIND_IMPORT:
        put_str(&o, rec->u.import.bundle);
        putf(&o, " taken=%" PRIu64 " skipped=%" PRIu64 " rejected=%" PRIu64,
             rec->u.import.taken, rec->u.import.skipped, rec->u.import.rejected);
        break;
    case ENVLOG_KIND_FORGET:
        if (rec->u.forget.under) {
            puts_(&o, "under ");
            put_str(&o, rec->u.forget.under);
            break;
        }
        putf(&o, "%s ", rec->u.forget.table == ENVLOG_TABLE_KERNEL ? "kernel" : "tune");
        put_str(&o, rec->u.forget.ns);
        puts_(&o, " ");
        put_str(&o, rec->u.forget.key);
        break;
    case ENVLOG_KIND_USER:
        put_str(&o, rec->u.user.kind);
        if (rec->u.user.body.size) {
            puts_(&o, " ");
            envlog_err e = o.failed ? o.failed
                                    : envlog_cbor_diag(rec->u.user.body.data,
                                                       rec->u.user.body.size, fn, ctx);
            if (e)
                return e;
        }
        break;
    default: putf(&o, "(%d)", (int)rec->kind); break;
    }
    return o.failed;
}
