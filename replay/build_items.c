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

/* Whether the tune record `in` (checked when it was read) holds no trials
 * and is laid out as envlog writes one: stripping its trials would encode
 * the very same bytes, so they are taken as they are. */
static bool no_trials(const envlog_bytes *in)
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
