/* SPDX-License-Identifier: MIT */
/*
 * statewalk.c - every standing entry of a state in canonical order (table,
 * namespace, key, checksum): for dumps and diffs (each, dump), for
 * snapshots (items, which hand out each entry's record), and the digest
 * that says two folds came to the same state.
 */
#include "state_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Two keys' texts as strcmp orders them (bytes, then length). */
static int text_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c)
        return c;
    return an < bn ? -1 : an > bn;
}

static int entry_cmp(const void *a, const void *b)
{
    const envlog_entry_x *x = *(const envlog_entry_x *const *)a;
    const envlog_entry_x *y = *(const envlog_entry_x *const *)b;
    if (x->table != y->table)
        return x->table < y->table ? -1 : 1;
    int c = strcmp(x->ns, y->ns);
    if (c)
        return c;
    if (x->table == ENVLOG_TABLE_KERNEL)
        return memcmp(x->k.kernel_key.b, y->k.kernel_key.b, 16);
    if ((c = text_cmp(x->key, x->key_len, y->key, y->key_len)))
        return c;
    return x->k.checksum < y->k.checksum ? -1 : x->k.checksum > y->k.checksum;
}

/* The live entries in the table's order (a lock held). */
static envlog_err listed(envlog_state *st, envlog_entry_x ***out, size_t *n)
{
    size_t total = st->tab.n_tunes + st->tab.n_kernels, k = 0;
    envlog_entry_x **v = envlog_malloc((total ? total : 1) * sizeof *v);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "sorting the state");
    for (size_t i = 0; i < st->tab.n_slots; i++) {
        envlog_entry_x *e = st->tab.slots[i].e;
        if (e && e->live && k < total)
            v[k++] = e;
    }
    *out = v;
    *n = k;
    return ENVLOG_OK;
}

/* An element of a list of entries: where the entry lies. */
static uint64_t entry_at(const void *elem)
{
    return (uint64_t)(uintptr_t) * (envlog_entry_x *const *)elem;
}

static int entry_at_cmp(const void *a, const void *b)
{
    uint64_t x = entry_at(a), y = entry_at(b);
    return x < y ? -1 : x > y;
}

/* The live entries sorted canonically (a lock held). */
static envlog_err sorted(envlog_state *st, envlog_entry_x ***out, size_t *n)
{
    envlog_err e = listed(st, out, n);
    if (!e)
        qsort(*out, *n, sizeof **out, entry_cmp);
    return e;
}

envlog_err envlog_state_each(envlog_state *st,
                             envlog_err (*fn)(void *ctx, const envlog_entry *e), void *ctx)
{
    if (st->snap && !st->snap_loaded) {
        pthread_rwlock_wrlock(&st->lock);
        envlog_err e = envlog_state_load_all(st);
        pthread_rwlock_unlock(&st->lock);
        if (e)
            return e;
    }
    pthread_rwlock_rdlock(&st->lock);
    envlog_entry_x **v = NULL;
    size_t n = 0;
    envlog_err err = sorted(st, &v, &n);
    for (size_t i = 0; !err && i < n; i++) {
        const void *view;
        if ((err = envlog_entry_view(st, v[i], &view)))
            break;
        envlog_entry pub = {(envlog_table)v[i]->table,
                            v[i]->table == ENVLOG_TABLE_TUNE ? view : NULL,
                            v[i]->table == ENVLOG_TABLE_KERNEL ? view : NULL};
        err = fn(ctx, &pub);
    }
    envlog_free(v);
    pthread_rwlock_unlock(&st->lock);
    return err;
}

/* ------------------------------------------------------------------ dump */

typedef struct dump_ctx {
    envlog_write_fn fn;
    void *ctx;
    envlog_err failed; /* what the writer returned that was not ENVLOG_OK */
} dump_ctx;

static void dput(dump_ctx *d, const char *s)
{
    if (!d->failed)
        d->failed = d->fn(d->ctx, s, strlen(s));
}

static void dstr(dump_ctx *d, const char *s)
{
    if (!d->failed)
        d->failed = envlog__write_json_str(d->fn, d->ctx, s ? s : "", s ? strlen(s) : 0);
}

static void dhex(dump_ctx *d, const uint8_t *p, size_t n)
{
    dput(d, "\"");
    if (!d->failed)
        d->failed = envlog__write_hex(d->fn, d->ctx, p, n);
    dput(d, "\"");
}

static void dstamp(dump_ctx *d, const envlog_stamp *s)
{
    char buf[64];
    dput(d, ",\"set_by\":{\"session\":");
    dhex(d, s->session.b, 16);
    snprintf(buf, sizeof buf, ",\"seq\":%llu}", (unsigned long long)s->seq);
    dput(d, buf);
}

static envlog_err dump_entry(void *ctx, const envlog_entry *e)
{
    dump_ctx *d = ctx;
    char buf[128];
    if (e->tune) {
        const envlog_tune_entry *t = e->tune;
        dput(d, "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"tune\",\"namespace\":");
        dstr(d, t->ns);
        dput(d, ",\"key\":");
        dstr(d, t->key);
        snprintf(buf, sizeof buf, ",\"checksum\":\"0x%016llx\",\"winner\":",
                 (unsigned long long)t->checksum);
        dput(d, buf);
        dstr(d, t->winner);
        char margin[40];
        envlog__fmt_double(t->margin, margin, sizeof margin);
        snprintf(buf, sizeof buf, ",\"winner_index\":%lld,\"margin\":%s,"
                 "\"within_noise\":%s,\"origin\":\"%s\"",
                 (long long)t->winner_index, margin, t->within_noise ? "true" : "false",
                 t->origin == ENVLOG_IMPORTED ? "imported" : "local");
        dput(d, buf);
        dstamp(d, &t->stamp);
    } else {
        const envlog_kernel_entry *k = e->kernel;
        dput(d, "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"kernel\",\"namespace\":");
        dstr(d, k->ns);
        dput(d, ",\"kernel_key\":");
        dhex(d, k->kernel_key.b, 16);
        dput(d, ",\"name\":");
        dstr(d, k->name);
        dput(d, ",\"arch\":");
        dstr(d, k->arch);
        dput(d, ",\"binary_hash\":");
        dhex(d, k->binary_hash.b, 16);
        snprintf(buf, sizeof buf, ",\"binary_size\":%zu,\"origin\":\"%s\"",
                 k->binary.size, k->origin == ENVLOG_IMPORTED ? "imported" : "local");
        dput(d, buf);
        dstamp(d, &k->stamp);
    }
    dput(d, "}\n");
    return d->failed;
}

envlog_err envlog_state_dump(envlog_state *st, envlog_write_fn fn, void *ctx)
{
    dump_ctx d = {fn, ctx, ENVLOG_OK};
    envlog_err e = envlog_state_each(st, dump_entry, &d);
    if (e)
        return e;
    pthread_rwlock_rdlock(&st->lock);
    for (size_t i = 0; !d.failed && i < st->n_users; i++) {
        dput(&d, "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"user\",\"kind\":");
        dstr(&d, st->users[i].kind);
        dput(&d, ",\"body_cbor\":");
        dhex(&d, st->users[i].body, st->users[i].size);
        dstamp(&d, &st->users[i].stamp);
        dput(&d, "}\n");
    }
    pthread_rwlock_unlock(&st->lock);
    return d.failed;
}

/* ------------------------------------------------------- for snapshots */

envlog_err envlog_state_items_x(envlog_state *st, bool canonical,
                                envlog_err (*fn)(void *ctx, const envlog_state_item *it),
                                void *ctx)
{
    pthread_rwlock_wrlock(&st->lock);
    envlog_err e = envlog_state_load_all(st);
    envlog_entry_x **v = NULL;
    size_t n = 0;
    if (!e)
        e = canonical ? sorted(st, &v, &n) : listed(st, &v, &n);
    /* In no order asked for: in the order of their memory, which is the
     * order they were folded in and their records read, so that what the
     * caller reads of each comes in a stream, not a cache miss apiece. */
    if (!e && !canonical)
        envlog_sort_keyed(v, n, sizeof *v, (const envlog_sort_key[]){entry_at}, 1, entry_at_cmp,
                          true);
    for (size_t i = 0; !e && i < n; i++) {
        envlog_entry_x *x = v[i];
        envlog_bytes b;
        pthread_mutex_lock(&st->view_mu);
        e = envlog_entry_bytes(st, x, &b);
        pthread_mutex_unlock(&st->view_mu);
        envlog_state_item it = {
            .table = (int)x->table,
            .origin = (int)x->origin,
            .rule = (int)x->rule,
            .stamp = envlog_entry_stamp(x),
            .unix_ns = x->unix_ns,
            .ns = x->ns,
            .key_hash = envlog_entry_key(x).hash,
            .payload = b,
        };
        if (!e)
            e = fn(ctx, &it);
    }
    for (size_t i = 0; !e && i < st->n_users; i++) {
        const envlog_user_rec *u = &st->users[i];
        envlog_state_item it = {.table = ENVLOG_TABLE_USER, .stamp = u->stamp,
                                .unix_ns = u->unix_ns, .ns = "",
                                .payload = {u->payload, u->payload_len}};
        e = fn(ctx, &it);
    }
    envlog_free(v);
    pthread_rwlock_unlock(&st->lock);
    return e;
}

envlog_err envlog_state_items(envlog_state *st,
                              envlog_err (*fn)(void *ctx, const envlog_state_item *it),
                              void *ctx)
{
    return envlog_state_items_x(st, true, fn, ctx);
}

/* ------------------------------------------------------------- digest */

static envlog_err digest_write(void *ctx, const char *text, size_t len)
{
    envlog_h128_update(ctx, text, len);
    return ENVLOG_OK;
}

static envlog_err digest_rule(void *ctx, const envlog_entry *e)
{
    uint8_t r = (uint8_t)(e->tune ? e->tune->rule : e->kernel->rule);
    envlog_h128_update(ctx, &r, 1);
    return ENVLOG_OK;
}

envlog_err envlog_state_digest(envlog_state *st, envlog_hash128 *out)
{
    envlog_h128 h;
    envlog_err e = envlog_h128_begin(&h);
    if (e)
        return e;
    if (!(e = envlog_state_dump(st, digest_write, &h)) &&
        !(e = envlog_state_each(st, digest_rule, &h))) {
        *out = envlog_h128_end(&h);
        return ENVLOG_OK;
    }
    envlog_h128_free(&h);
    return e;
}
