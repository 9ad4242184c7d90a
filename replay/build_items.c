/* SPDX-License-Identifier: MIT */
/*
 * build_items.c - what a snapshot build lays out of the folded state: the
 * standing entries under the namespaces asked for (tune records without
 * their trials at --evidence none), their namespaces, and their places in
 * the total order.
 */
#include "build_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

bool envlog_build_ns_taken(const envlog_build_opts *o, const char *ns)
{
    if (!o->n_prefixes)
        return true;
    for (size_t i = 0; i < o->n_prefixes; i++)
        if (ns && envlog_ns_under(ns, o->prefixes[i]))
            return true;
    return false;
}

envlog_err envlog_build_grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return ENVLOG_OK;
    size_t c = *cap ? 2 * *cap : 16;
    if (c > SIZE_MAX / 2 / elem)
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    void *p = envlog_realloc_big(*v, n * elem, c * elem);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    *v = p;
    *cap = envlog_big_size(c * elem) / elem;
    return ENVLOG_OK;
}

/* Whether the fields of the map whose head `t` was just read from `p` are
 * all of the tune schema, of the part `top` says (a record's own map holds
 * the envelope and the fold fields, its detail the others), and none is
 * the trials; *detail: the detail's bytes, when the map holds one. */
static bool fields_without_trials(envlog_pull *p, const envlog_tok *t, bool top,
                                  envlog_bytes *detail)
{
    const envlog_schema *s = envlog_schema_of(ENVLOG_KIND_TUNE);
    envlog_tok k, v;
    if (t->type != ENVLOG_TOK_MAP)
        return false;
    for (uint64_t i = 0; i < t->u; i++) {
        if (envlog_pull_next(p, &k) || k.type != ENVLOG_TOK_UINT || envlog_pull_next(p, &v))
            return false;
        if (top && k.u == ENVLOG_K_DETAIL && v.type == ENVLOG_TOK_BYTES) {
            *detail = (envlog_bytes){v.data, v.len};
            continue;
        }
        if (!top || k.u > ENVLOG_K_EFFECT) {
            const envlog_field *f = envlog_schema_field(s, k.u);
            if (!f || (f->fold != 0) != top || f->off == offsetof(envlog_tune, trials))
                return false;
        }
        if (envlog_pull_skip_at(p, &v, 1))
            return false;
    }
    return true;
}

/* no_trials() by the walk of every item (pull and skip, each checked). */
static bool no_trials_walk(const envlog_bytes *in)
{
    envlog_pull p = {in->data, in->size, 0}, d;
    envlog_tok t;
    envlog_bytes detail = {NULL, 0};
    if (envlog_pull_next(&p, &t) || !fields_without_trials(&p, &t, true, &detail) ||
        p.pos != p.n)
        return false;
    if (!detail.data)
        return true;
    d = (envlog_pull){detail.data, detail.size, 0};
    return !envlog_pull_next(&d, &t) && t.u && fields_without_trials(&d, &t, false, &detail) &&
           d.pos == d.n;
}

/* The head at p[*at] of a definite-length item of major type 0-5 (no
 * simple value, no float): its major type and argument, *at past it.
 * False: not such a head, or cut short. */
static inline bool plain_head(const uint8_t *p, size_t n, size_t *at, unsigned *major,
                              uint64_t *v)
{
    if (*at >= n)
        return false;
    uint8_t ib = p[(*at)++];
    unsigned ai = ib & 31;
    *major = ib >> 5;
    *v = ai;
    if (*major > 5 || ai >= 28)
        return false;
    if (ai >= 24) {
        size_t w = (size_t)1 << (ai - 24);
        if (w > n - *at)
            return false;
        *v = envlog_load_be(p + *at, w);
        *at += w;
    }
    return true;
}

/* Skips the value at p[*at] when it has one of the shapes a tune record's
 * values take: an integer, a string, false/true/null/undefined, a float,
 * and, at depth 0 or 1, an array of such values or a map of them under
 * small unsigned keys, each key once (a detail's settings).  False for
 * anything else (a tag, another key, a deeper nesting, a value cut
 * short): the walk decides it. */
static bool skip_plain(const uint8_t *p, size_t n, size_t *at, int depth)
{
    size_t i = *at;
    if (i >= n)
        return false;
    uint8_t ib = p[i];
    if (ib >= 0xf4 && ib <= 0xf7) {
        *at = i + 1;
        return true;
    }
    if (ib >= 0xf9 && ib <= 0xfb) { /* a float of 2, 4 or 8 bytes */
        size_t w = (size_t)2 << (ib - 0xf9);
        if (w >= n - i)
            return false;
        *at = i + 1 + w;
        return true;
    }
    unsigned major;
    uint64_t v;
    if (!plain_head(p, n, &i, &major, &v))
        return false;
    if (major == 2 || major == 3) {
        if (v > n - i)
            return false;
        i += (size_t)v;
    } else if (major == 4) {
        if (depth >= 2 || v > n - i) /* every item takes a byte at least */
            return false;
        for (uint64_t k = 0; k < v; k++)
            if (!skip_plain(p, n, &i, depth + 1))
                return false;
    } else if (major == 5) {
        if (depth >= 2 || v > (n - i) / 2)
            return false;
        uint32_t seen = 0;
        for (uint64_t k = 0; k < v; k++) {
            if (i >= n || p[i] >= 24 || (seen & (uint32_t)1 << p[i]))
                return false;
            seen |= (uint32_t)1 << p[i++];
            if (!skip_plain(p, n, &i, depth + 1))
                return false;
        }
    }
    *at = i;
    return true;
}

/* The fields of the map at p[*at] as fields_without_trials() takes them
 * (top: the record's own map, else its detail), every value of a plain
 * shape: 1 when all are of that part and none is the trials, *detail the
 * detail's bytes when the map holds one; 0 when one is not; -1 when a
 * value is not plain (the walk decides). */
static int fields_plain(const uint8_t *p, size_t n, size_t *at, bool top,
                        envlog_bytes *detail)
{
    const envlog_schema *s = envlog_schema_of(ENVLOG_KIND_TUNE);
    unsigned major;
    uint64_t pairs, k;
    if (!plain_head(p, n, at, &major, &pairs) || major != 5)
        return -1;
    if (!top && !pairs)
        return 0;
    for (uint64_t i = 0; i < pairs; i++) {
        if (!plain_head(p, n, at, &major, &k) || major != 0)
            return -1;
        if (top && k == ENVLOG_K_DETAIL && *at < n && p[*at] >> 5 == 2) {
            uint64_t len;
            if (!plain_head(p, n, at, &major, &len) || len > n - *at)
                return -1;
            *detail = (envlog_bytes){p + *at, (size_t)len};
            *at += (size_t)len;
            continue;
        }
        if (!top || k > ENVLOG_K_EFFECT) {
            const envlog_field *f = envlog_schema_field(s, k);
            if (!f || (f->fold != 0) != top || f->off == offsetof(envlog_tune, trials))
                return 0;
        }
        if (!skip_plain(p, n, at, 0))
            return -1;
    }
    return 1;
}

bool envlog_build_no_trials_plain(const envlog_bytes *in)
{
    size_t at = 0, dat = 0;
    envlog_bytes detail = {NULL, 0}, inner = {NULL, 0};
    return fields_plain(in->data, in->size, &at, true, &detail) == 1 && at == in->size &&
           (!detail.data || (fields_plain(detail.data, detail.size, &dat, false, &inner) == 1 &&
                             dat == detail.size));
}

bool envlog_build_no_trials(const envlog_bytes *in, bool walk_only)
{
    /* The plain path says yes only where the walk would: anything it does
     * not take whole (a value of another shape, a field out of its part)
     * the walk decides, as it always did. */
    return (!walk_only && envlog_build_no_trials_plain(in)) || no_trials_walk(in);
}

/* Whether the tune record `in` (checked when it was read) holds no trials
 * and is laid out as envlog writes one: stripping its trials would encode
 * the very same bytes, so they are taken as they are. */
static bool no_trials(const envlog_bytes *in)
{
    return envlog_build_no_trials(in, false);
}

/* The tune record without its trials (--evidence none), appended to
 * c->stripped; *at: where it starts there.  One buffer for all of them (and
 * one arena and scratch buffer, reused) rather than a block each: fresh
 * memory a piece at a time is what cost most here. */
static envlog_err strip_trials(items_ctx *c, const envlog_bytes *in, size_t *at, size_t *n)
{
    envlog_record rec;
    envlog_arena_reset(&c->strip_mem);
    envlog_err e = envlog_event_decode(in->data, in->size, &rec, &c->strip_mem);
    if (!e) {
        rec.u.tune.n_trials = 0;
        rec.u.tune.trials = NULL;
        e = envlog_event_encode(&c->scratch, ENVLOG_KIND_TUNE, &rec.stamp, rec.effect,
                                ENVLOG_LEVEL_FULL, &rec.u.tune);
    }
    *at = c->stripped.len;
    *n = c->scratch.len;
    return e ? e : envlog_buf_append(&c->stripped, c->scratch.p, c->scratch.len);
}

static envlog_err take_item(void *ctx, const envlog_state_item *it)
{
    items_ctx *c = ctx;
    envlog_err e;
    if (it->table != ENVLOG_TABLE_USER && !envlog_build_ns_taken(c->b->o, it->ns))
        return ENVLOG_OK;
    if (!it->payload.size)
        return ENVLOG_OK; /* no record kept: cannot happen with keep_payloads */
    if ((e = envlog_build_grow((void **)&c->v, &c->cap, c->n, sizeof *c->v)))
        return e;
    item_ref *r = &c->v[c->n];
    memset(r, 0, sizeof *r);
    r->item.kind = ENVLOG_KIND_ENTRY;
    r->item.table = it->table;
    r->item.origin = it->origin;
    r->item.rule = it->rule;
    r->item.stamp = it->stamp;
    r->item.unix_ns = it->unix_ns;
    r->item.record = it->payload;
    r->indexed = it->table != ENVLOG_TABLE_USER;
    r->hash = it->key_hash;
    r->ns = r->indexed ? it->ns : NULL;
    if (it->table == ENVLOG_TABLE_TUNE && c->b->o->evidence == ENVLOG_EVIDENCE_NONE &&
        !no_trials(&it->payload)) {
        size_t n;
        if ((e = strip_trials(c, &it->payload, &r->strip_at, &n)))
            return e;
        r->stripped = true;
        r->item.record.data = NULL; /* set once all are in (the buffer moves) */
        r->item.record.size = n;
    }
    if (it->table == ENVLOG_TABLE_TUNE)
        c->tunes++;
    else if (it->table == ENVLOG_TABLE_KERNEL)
        c->kernels++;
    else
        c->users++;
    c->n++;
    return ENVLOG_OK;
}

static uint64_t ptr_key(const void *a)
{
    return (uintptr_t)*(const char *const *)a;
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(const char *const *)a, y = (uintptr_t)*(const char *const *)b;
    return (x > y) - (x < y);
}

int envlog_build_str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The namespaces of the tune and kernel entries taken, each once, sorted:
 * the state interns them, so one namespace is one pointer. */
static envlog_err items_namespaces(items_ctx *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += c->v[i].ns != NULL;
    if (!n)
        return ENVLOG_OK;
    if (!(c->nss = envlog_malloc_big(n * sizeof *c->nss, false)))
        return envlog__fail(ENVLOG_NOMEM, "building a snapshot");
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].ns)
            c->nss[c->n_nss++] = c->v[i].ns;
    static const envlog_sort_key by[] = {ptr_key};
    envlog_sort_keyed(c->nss, n, sizeof *c->nss, by, 1, ptr_cmp, true);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || c->nss[k - 1] != c->nss[i])
            c->nss[k++] = c->nss[i];
    c->n_nss = k;
    qsort(c->nss, k, sizeof *c->nss, envlog_build_str_cmp);
    return ENVLOG_OK;
}

/* item_cmp() orders by the time first. */
static uint64_t item_ns(const void *a)
{
    return ((const item_key *)a)->unix_ns;
}

static int item_cmp(const void *a, const void *b)
{
    const item_key *x = a, *y = b;
    int c = envlog_order_cmp(x->unix_ns, &x->session, x->seq, y->unix_ns, &y->session, y->seq);
    if (c)
        return c;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* The items' places in the total order (then by kind). */
item_key *envlog_build_items_order(const items_ctx *ic)
{
    item_key *k = ic->n ? envlog_malloc_big(ic->n * sizeof *k, false) : NULL;
    if (!k)
        return NULL;
    for (size_t i = 0; i < ic->n; i++) {
        const envlog_snap_item *it = &ic->v[i].item;
        k[i] = (item_key){it->unix_ns, it->stamp.seq, it->stamp.session, (uint32_t)it->kind,
                          (uint32_t)i};
    }
    static const envlog_sort_key by[] = {item_ns};
    envlog_sort_keyed(k, ic->n, sizeof *k, by, 1, item_cmp, false);
    return k;
}


envlog_err envlog_build_items(build_ctx *b, items_ctx *ic)
{
    ic->b = b;
    /* In the table's order: the build sorts them by their places. */
    envlog_err e = envlog_state_items_x(b->st, false, take_item, ic);
    if (e)
        return e;
    for (size_t i = 0; i < ic->n; i++)
        if (ic->v[i].stripped)
            ic->v[i].item.record.data = ic->stripped.p + ic->v[i].strip_at;
    return items_namespaces(ic);
}

void envlog_build_items_free(items_ctx *ic)
{
    envlog_free(ic->v);
    envlog_free(ic->nss);
    envlog_buf_free(&ic->stripped);
    envlog_buf_free(&ic->scratch);
    envlog_arena_free(&ic->strip_mem);
}
