/* SPDX-License-Identifier: MIT */
/*
 * index.c - what push, pull and the remote's snapshot share: the remote's
 * key names, the connection to the remote a call names, the remote's
 * session index (the hash PREFIX:sessions, session id -> manifest hash),
 * and its objects and manifests read back, each with a bound and every
 * field checked, since a remote is never trusted.
 */
#include "remote_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void envlog_rkey_index(const envlog_remote_cfg *c, char *out, size_t size)
{
    snprintf(out, size, "%s:sessions", c->prefix);
}

void envlog_rkey(const envlog_remote_cfg *c, const char *what, char *out, size_t size)
{
    snprintf(out, size, "%s:%s", c->prefix, what);
}

void envlog_rkey_obj(const envlog_remote_cfg *c, const envlog_hash128 *h, char *out, size_t size)
{
    char hex[33];
    envlog_hash_hex(h, hex);
    snprintf(out, size, "%s:obj:%s", c->prefix, hex);
}

envlog_err envlog_rsync_begin(envlog_env *env, const envlog_remote_opts *o, envlog_rsync *s)
{
    memset(s, 0, sizeof *s);
    if (!env || env->sessions_fd < 0)
        return envlog__fail(ENVLOG_WRONG_STATE, "no environment to share");
    envlog_err e = envlog_redis_load();
    if (!e)
        e = envlog_remotes_read(env, &s->remotes);
    if (!e)
        e = envlog_remote_pick(&s->remotes, o ? o->remote : NULL, &s->cfg);
    if (e) {
        envlog_remotes_free(&s->remotes);
        return e;
    }
    s->start_ns = envlog_clock_mono_ns();
    s->timeout_ns = o && o->timeout_ns ? o->timeout_ns : ENVLOG_REMOTE_CALL_TIMEOUT_NS;
    s->deadline_ns = o ? o->deadline_ns : 0;
    if (!(e = envlog_ledger_read(env, s->cfg->name, &s->ledger, &s->n_ledger)))
        e = envlog_rconn_open(s->cfg, s->timeout_ns, &s->c);
    if (e) {
        envlog_free(s->ledger);
        envlog_remotes_free(&s->remotes);
    }
    return e;
}

void envlog_rsync_end(envlog_rsync *s)
{
    envlog_rconn_close(s->c);
    envlog_free(s->ent);
    for (size_t i = 0; i < s->n_retired; i++)
        envlog_free(s->retired_ns[i]);
    envlog_free(s->retired_ns);
    envlog_free(s->retired);
    envlog_free(s->ledger);
    envlog_remotes_free(&s->remotes);
    memset(s, 0, sizeof *s);
}

bool envlog_rsync_past_deadline(const envlog_rsync *s)
{
    return s->deadline_ns && envlog_clock_mono_ns() - s->start_ns > s->deadline_ns;
}

bool envlog_hex_hash(const char *p, size_t n, envlog_hash128 *out)
{
    char tmp[33];
    if (n != 32)
        return false;
    for (size_t i = 0; i < 32; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return false;
    memcpy(tmp, p, 32);
    tmp[32] = 0;
    return !envlog_id_parse(tmp, out);
}

static int ent_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

/* The retired set, every field checked (a bad one makes the set unusable:
 * nothing can be proved covered). */
static envlog_err read_retired(envlog_rsync *s)
{
    char key[160];
    envlog_rkey(s->cfg, "retired", key, sizeof key);
    const char *argv[2] = {"HGETALL", key};
    envlog_rreply *rep;
    envlog_err e = envlog_rconn_call(s->c, ENVLOG_REMOTE_INDEX_MAX, &rep, 2, argv, NULL);
    if (e)
        return e;
    if (rep->type == ENVLOG_R_ERROR)
        e = envlog_rreply_fail(s->c, rep, "listing its retired sessions");
    else if (rep->type != ENVLOG_R_ARRAY || rep->n % 2)
        e = envlog__fail(ENVLOG_BAD_DATA, "%s: %s is not a hash (not envlog's?)",
                         envlog_rconn_label(s->c), key);
    size_t n = e ? 0 : rep->n / 2;
    if (n && (!(s->retired = envlog_calloc(n, sizeof *s->retired)) ||
              !(s->retired_ns = envlog_calloc(n, sizeof *s->retired_ns))))
        e = envlog__fail(ENVLOG_NOMEM, "reading the remote's retired sessions");
    for (size_t i = 0; !e && i < n; i++) {
        const envlog_rreply *f = &rep->el[2 * i], *v = &rep->el[2 * i + 1];
        if (f->type != ENVLOG_R_STRING || v->type != ENVLOG_R_STRING ||
            !envlog_hex_hash(f->str, f->len, &s->retired[i]) || v->len > ENVLOG_REMOTE_RETIRED_NS_MAX) {
            e = envlog__fail(ENVLOG_BAD_DATA, "%s: %s holds a field that is not a session id "
                             "and its namespaces", envlog_rconn_label(s->c), key);
            break;
        }
        if (!(s->retired_ns[i] = envlog_malloc(v->len + 1))) {
            e = envlog__fail(ENVLOG_NOMEM, "reading the remote's retired sessions");
            break;
        }
        memcpy(s->retired_ns[i], v->str, v->len);
        s->retired_ns[i][v->len] = 0;
        s->n_retired++;
    }
    envlog_rreply_free(rep);
    if (!e && s->n_retired > 1) {
        /* Sorted by id, their namespaces with them. */
        struct pair { envlog_id128 id; char *ns; } *v = envlog_calloc(s->n_retired, sizeof *v);
        if (!v)
            return envlog__fail(ENVLOG_NOMEM, "reading the remote's retired sessions");
        for (size_t i = 0; i < s->n_retired; i++)
            v[i] = (struct pair){s->retired[i], s->retired_ns[i]};
        qsort(v, s->n_retired, sizeof *v, ent_cmp);
        for (size_t i = 0; i < s->n_retired; i++) {
            s->retired[i] = v[i].id;
            s->retired_ns[i] = v[i].ns;
        }
        envlog_free(v);
    }
    return e;
}

envlog_err envlog_rsync_index(envlog_rsync *s)
{
    char key[160];
    envlog_rkey_index(s->cfg, key, sizeof key);
    const char *argv[2] = {"HGETALL", key};
    envlog_rreply *r;
    envlog_err e = envlog_rconn_call(s->c, ENVLOG_REMOTE_INDEX_MAX, &r, 2, argv, NULL);
    if (e)
        return e;
    if (r->type == ENVLOG_R_ERROR) {
        e = envlog_rreply_fail(s->c, r, "listing its sessions");
    } else if (r->type != ENVLOG_R_ARRAY || r->n % 2) {
        e = envlog__fail(ENVLOG_BAD_DATA, "%s: its session index %s is not a hash (not "
                         "envlog's?)", envlog_rconn_label(s->c), key);
    } else if (r->n) {
        size_t n = r->n / 2;
        if (!(s->ent = envlog_calloc(n, sizeof *s->ent)))
            e = envlog__fail(ENVLOG_NOMEM, "reading the session index");
        for (size_t i = 0; !e && i < n; i++) {
            const envlog_rreply *f = &r->el[2 * i], *v = &r->el[2 * i + 1];
            if (f->type != ENVLOG_R_STRING || v->type != ENVLOG_R_STRING ||
                !envlog_hex_hash(f->str, f->len, &s->ent[s->n].id) ||
                !envlog_hex_hash(v->str, v->len, &s->ent[s->n].manifest)) {
                s->bad_entries++;
                continue;
            }
            s->n++;
        }
    }
    envlog_rreply_free(r);
    if (!e && s->n)
        qsort(s->ent, s->n, sizeof *s->ent, ent_cmp);
    return e ? e : read_retired(s);
}

bool envlog_rsync_has(const envlog_rsync *s, const envlog_id128 *id)
{
    envlog_rentry key = {.id = *id};
    return s->n && bsearch(&key, s->ent, s->n, sizeof *s->ent, ent_cmp);
}

bool envlog_rsync_retired(const envlog_rsync *s, const envlog_id128 *id)
{
    return envlog_id_in(s->retired, s->n_retired, id);
}

envlog_err envlog_rsync_get(envlog_rsync *s, const char *key, uint64_t size, size_t max,
                             const envlog_hash128 *hash, envlog_buf *out)
{
    const char *argv[2] = {"GET", key};
    envlog_rreply *r;
    envlog_err e = envlog_rconn_call(s->c, size ? (size_t)size : max, &r, 2, argv, NULL);
    if (e)
        return e;
    if (r->type == ENVLOG_R_ERROR)
        e = envlog_rreply_fail(s->c, r, "reading an object");
    else if (r->type == ENVLOG_R_NIL)
        e = envlog__fail(ENVLOG_BAD_DATA, "object %s is missing", key);
    else if (r->type != ENVLOG_R_STRING)
        e = envlog__fail(ENVLOG_BAD_DATA, "object %s is not a string", key);
    else if ((size && r->len != size) || r->len > max)
        e = envlog__fail(ENVLOG_BAD_DATA, "object %s has %zu bytes, not the %" PRIu64
                         " its manifest gives", key, r->len, size);
    else {
        envlog_hash128 got = envlog_hash128_bytes(r->str, r->len);
        if (memcmp(got.b, hash->b, 16))
            e = envlog__fail(ENVLOG_BAD_DATA, "object %s does not hash to its name (altered "
                             "on the remote)", key);
        else if (!(e = envlog_buf_reserve(out, r->len ? r->len : 1)))
            e = envlog_buf_append(out, r->str, r->len);
    }
    envlog_rreply_free(r);
    return e;
}

envlog_err envlog_rsync_strlen(envlog_rsync *s, const char *key, long long *out)
{
    const char *argv[2] = {"STRLEN", key};
    envlog_rreply *r;
    envlog_err e = envlog_rconn_call(s->c, 4096, &r, 2, argv, NULL);
    if (e)
        return e;
    if (r->type == ENVLOG_R_ERROR)
        e = envlog_rreply_fail(s->c, r, "sizing an object");
    else if (r->type != ENVLOG_R_INTEGER)
        e = envlog__fail(ENVLOG_BAD_DATA, "%s answered STRLEN with something else than a "
                         "number", envlog_rconn_label(s->c));
    else
        *out = r->integer;
    envlog_rreply_free(r);
    return e;
}

envlog_err envlog_rsync_manifest(envlog_rsync *s, const envlog_rentry *ent,
                                 envlog_rmanifest *m)
{
    char key[160];
    envlog_rkey_obj(s->cfg, &ent->manifest, key, sizeof key);
    long long len = 0;
    envlog_err e = envlog_rsync_strlen(s, key, &len);
    if (e)
        return e;
    if (len <= 0 || (uint64_t)len > ENVLOG_REMOTE_MANIFEST_MAX)
        return envlog__fail(ENVLOG_BAD_DATA, "its manifest %s is %s", key,
                            len <= 0 ? "missing" : "larger than 1 MiB");
    envlog_buf mb = {0};
    e = envlog_rsync_get(s, key, (uint64_t)len, ENVLOG_REMOTE_MANIFEST_MAX, &ent->manifest, &mb);
    if (!e)
        e = envlog_rmanifest_decode(mb.p, mb.len, m);
    envlog_buf_free(&mb);
    if (!e && memcmp(m->session.b, ent->id.b, 16))
        e = envlog__fail(ENVLOG_BAD_DATA, "its manifest is another session's");
    if (e)
        envlog_rmanifest_free(m);
    return e;
}
