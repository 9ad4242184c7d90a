/* SPDX-License-Identifier: MIT */
/*
 * index.c - what push and pull share: the remote's key names, the
 * connection to the remote a call names, and the remote's session index
 * (the hash PREFIX:sessions, session id -> manifest hash), read with a bound
 * and every field checked, since a remote is never trusted.
 */
#include "remote_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void envlog_rkey_index(const envlog_remote_cfg *c, char *out, size_t size)
{
    snprintf(out, size, "%s:sessions", c->prefix);
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
        return envlog__fail(ENVLOG_STATE, "no environment to share");
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
    envlog_free(s->ledger);
    envlog_remotes_free(&s->remotes);
    memset(s, 0, sizeof *s);
}

bool envlog_rsync_past_deadline(const envlog_rsync *s)
{
    return s->deadline_ns && envlog_clock_mono_ns() - s->start_ns > s->deadline_ns;
}

/* 32 lower-case hex digits into 16 bytes. */
static bool hex16(const char *p, size_t n, uint8_t out[16])
{
    if (n != 32)
        return false;
    char tmp[33];
    memcpy(tmp, p, 32);
    tmp[32] = 0;
    for (size_t i = 0; i < 32; i++)
        if (!((tmp[i] >= '0' && tmp[i] <= '9') || (tmp[i] >= 'a' && tmp[i] <= 'f')))
            return false;
    envlog_id128 id;
    if (envlog_id_parse(tmp, &id))
        return false;
    memcpy(out, id.b, 16);
    return true;
}

static int ent_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
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
                !hex16(f->str, f->len, s->ent[s->n].id.b) ||
                !hex16(v->str, v->len, s->ent[s->n].manifest.b)) {
                s->bad_entries++;
                continue;
            }
            s->n++;
        }
    }
    envlog_rreply_free(r);
    if (!e && s->n)
        qsort(s->ent, s->n, sizeof *s->ent, ent_cmp);
    return e;
}

bool envlog_rsync_has(const envlog_rsync *s, const envlog_id128 *id)
{
    envlog_rentry key = {.id = *id};
    return s->n && bsearch(&key, s->ent, s->n, sizeof *s->ent, ent_cmp);
}
