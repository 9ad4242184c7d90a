/* SPDX-License-Identifier: MIT */
/*
 * push.c - `envlog push`: every sealed session the remote lacks goes up as
 * content-addressed objects (each segment, then its manifest), and then,
 * in one server-side step that first checks every object is there whole,
 * into the remote's session index.  Until that step nothing of the session
 * is visible; after it all of it is.  A push that fails on the way takes
 * back the objects it wrote unless the session became visible meanwhile
 * (another process pushed it), so a failed push leaves the remote as it
 * was; a push killed on the way leaves only objects no index names, which
 * the next push of that session writes again.
 */
#include "remote_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: the index, then the objects; ARGV: id, manifest hash, then each
 * object's size. */
static const char commit_lua[] =
    "for i = 2, #KEYS do\n"
    "  if redis.call('STRLEN', KEYS[i]) ~= tonumber(ARGV[i + 1]) then\n"
    "    return redis.error_reply('ENVLOG_INCOMPLETE object ' .. KEYS[i] .. ' is missing or "
    "not whole')\n"
    "  end\n"
    "end\n"
    "return redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])\n";

static const char takeback_lua[] =
    "if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end\n"
    "for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end\n"
    "return 1\n";

typedef struct push_keys {
    size_t n;              /* objects: segments, then the manifest */
    char (*key)[160];
    char (*size)[24];
    const char **argv;
    size_t *lens;
} push_keys;

static void keys_free(push_keys *k)
{
    envlog_free(k->key);
    envlog_free(k->size);
    envlog_free(k->argv);
    envlog_free(k->lens);
}

/* Runs `script` over the index and the objects of `k`. */
static envlog_err run_script(envlog_rsync *s, const char *script, const char *index,
                             const char *id, const char *mhash, push_keys *k,
                             envlog_rreply **out)
{
    size_t argc = 3 + 1 + k->n + 2 + k->n, a = 0;
    char nkeys[24];
    snprintf(nkeys, sizeof nkeys, "%zu", k->n + 1);
    k->argv[a++] = "EVAL";
    k->argv[a++] = script;
    k->argv[a++] = nkeys;
    k->argv[a++] = index;
    for (size_t i = 0; i < k->n; i++)
        k->argv[a++] = k->key[i];
    k->argv[a++] = id;
    k->argv[a++] = mhash;
    for (size_t i = 0; i < k->n; i++)
        k->argv[a++] = k->size[i];
    for (size_t i = 0; i < argc; i++)
        k->lens[i] = strlen(k->argv[i]);
    return envlog_rconn_call(s->c, 4096, out, (int)argc, k->argv, k->lens);
}

/* Pushes one session read whole.  *sent: it became visible now. */
static envlog_err push_one(envlog_rsync *s, envlog_local_session *ls, bool *sent)
{
    *sent = false;
    envlog_buf mb = {0};
    push_keys k = {0};
    envlog_err e = envlog_rmanifest_encode(&ls->m, &mb);
    k.n = ls->m.n_segs + 1;
    if (!e && (!(k.key = envlog_calloc(k.n, sizeof *k.key)) ||
               !(k.size = envlog_calloc(k.n, sizeof *k.size)) ||
               !(k.argv = envlog_calloc(2 * k.n + 8, sizeof *k.argv)) ||
               !(k.lens = envlog_calloc(2 * k.n + 8, sizeof *k.lens))))
        e = envlog__fail(ENVLOG_NOMEM, "pushing a session");
    if (e) {
        keys_free(&k);
        envlog_buf_free(&mb);
        return e;
    }
    envlog_hash128 mh = envlog_hash128_bytes(mb.p, mb.len);
    for (size_t i = 0; i < ls->m.n_segs; i++) {
        envlog_rkey_obj(s->cfg, &ls->m.segs[i].hash, k.key[i], sizeof k.key[i]);
        snprintf(k.size[i], sizeof k.size[i], "%" PRIu64, ls->m.segs[i].size);
    }
    envlog_rkey_obj(s->cfg, &mh, k.key[k.n - 1], sizeof k.key[0]);
    snprintf(k.size[k.n - 1], sizeof k.size[0], "%zu", mb.len);
    char index[160], id[33], mhex[33];
    envlog_rkey_index(s->cfg, index, sizeof index);
    envlog_id_format(&ls->m.session, id);
    envlog_hash_hex(&mh, mhex);
    /* The objects, pipelined; every reply read before anything else. */
    size_t queued = 0;
    for (size_t i = 0; !e && i < k.n; i++) {
        const char *argv[3] = {"SET", k.key[i],
                               i + 1 < k.n ? (const char *)ls->data[i].p : (const char *)mb.p};
        size_t lens[3] = {3, strlen(k.key[i]), i + 1 < k.n ? ls->data[i].len : mb.len};
        if (!(e = envlog_rconn_append(s->c, 3, argv, lens)))
            queued++;
    }
    envlog_err first = ENVLOG_OK;
    char what[80];
    snprintf(what, sizeof what, "storing session %.12s...", id);
    for (size_t i = 0; i < queued; i++) {
        envlog_rreply *r;
        envlog_err re = envlog_rconn_reply(s->c, 4096, &r);
        if (!re && r->type == ENVLOG_R_ERROR)
            re = envlog_rreply_fail(s->c, r, what);
        else if (!re && r->type != ENVLOG_R_STATUS)
            re = envlog__fail(ENVLOG_BAD_DATA, "%s answered SET with something else than OK",
                              envlog_rconn_label(s->c));
        envlog_rreply_free(r);
        if (re && !first)
            first = re;
        if (re == ENVLOG_IO || re == ENVLOG_TOO_BIG)
            break; /* the link is gone */
    }
    if (!e)
        e = first;
    envlog_rreply *r = NULL;
    if (!e) {
        e = run_script(s, commit_lua, index, id, mhex, &k, &r);
        if (!e && r->type == ENVLOG_R_ERROR)
            e = envlog_rreply_fail(s->c, r, what);
        else if (!e && r->type != ENVLOG_R_INTEGER)
            e = envlog__fail(ENVLOG_BAD_DATA, "%s answered the commit of session %s with "
                             "something else than a number", envlog_rconn_label(s->c), id);
        else if (!e)
            *sent = r->integer == 1;
        envlog_rreply_free(r);
        r = NULL;
    }
    if (e && e != ENVLOG_NOMEM) {
        /* Take back what this push wrote: best effort, the error stands. */
        char msg[400];
        snprintf(msg, sizeof msg, "%s", envlog_errmsg());
        if (!run_script(s, takeback_lua, index, id, mhex, &k, &r))
            envlog_rreply_free(r);
        e = envlog__fail(e, "%s; session %s is not on the remote", msg, id);
    }
    keys_free(&k);
    envlog_buf_free(&mb);
    return e;
}

static void say(const envlog_remote_opts *o, envlog_remote_what what, const envlog_id128 *id,
                uint64_t bytes, const char *why)
{
    if (o && o->on_session) {
        envlog_remote_item it = {what, *id, bytes, why};
        o->on_session(o->ctx, &it);
    }
}

static uint64_t session_bytes(const envlog_local_session *ls)
{
    uint64_t b = 0;
    for (size_t i = 0; i < ls->m.n_segs; i++)
        b += ls->m.segs[i].size;
    return b;
}

envlog_err envlog_remote_push(envlog_env *env, const envlog_remote_opts *o,
                              envlog_remote_report *rep)
{
    envlog_remote_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    envlog_rsync s;
    envlog_err e = envlog_rsync_begin(env, o, &s);
    if (e)
        return e;
    envlog_id128 *ids = NULL;
    size_t n = 0;
    if (!(e = envlog_rsync_index(&s)))
        e = envlog_sessions_ids(env, &ids, &n);
    rep->remote_sessions = s.n;
    for (size_t i = 0; !e && i < n; i++) {
        if (o && o->on_progress)
            o->on_progress(o->ctx, i, n);
        if (envlog_rsync_has(&s, &ids[i]) || envlog_rsync_retired(&s, &ids[i])) {
            rep->present++;
            if (!(o && o->dry_run))
                envlog_ledger_note(env, s.cfg->name, s.ledger, s.n_ledger, &ids[i]);
            say(o, ENVLOG_REMOTE_PRESENT, &ids[i], 0, NULL);
            continue;
        }
        if (envlog_rsync_past_deadline(&s)) {
            rep->deadline_hit = true;
            break;
        }
        envlog_local_session ls;
        const char *why = NULL;
        e = envlog_local_session_read(env, &ids[i], &ls, &why);
        if (e == ENVLOG_WRONG_STATE || e == ENVLOG_NOT_FOUND) {
            /* Not a sealed session (or retired meanwhile): it waits. */
            if (e == ENVLOG_WRONG_STATE) {
                rep->skipped++;
                say(o, ENVLOG_REMOTE_SKIPPED, &ids[i], 0, why);
            }
            e = ENVLOG_OK;
            continue;
        }
        if (e)
            break;
        if (o && !envlog_rmanifest_matches(&ls.m, o->prefixes, o->n_prefixes)) {
            rep->filtered++;
            say(o, ENVLOG_REMOTE_FILTERED, &ids[i], session_bytes(&ls), NULL);
        } else if (o && o->dry_run) {
            rep->sessions++;
            rep->bytes += session_bytes(&ls);
            say(o, ENVLOG_REMOTE_SENT, &ids[i], session_bytes(&ls), NULL);
        } else {
            bool sent;
            if (!(e = push_one(&s, &ls, &sent))) {
                envlog_ledger_note(env, s.cfg->name, s.ledger, s.n_ledger, &ids[i]);
                if (sent) {
                    rep->sessions++;
                    rep->bytes += session_bytes(&ls);
                } else {
                    rep->present++;
                }
                say(o, sent ? ENVLOG_REMOTE_SENT : ENVLOG_REMOTE_PRESENT, &ids[i],
                    session_bytes(&ls), NULL);
            }
        }
        envlog_local_session_free(&ls);
    }
    if (!e && o && o->on_progress)
        o->on_progress(o->ctx, n, n);
    if (!e && !rep->deadline_hit && o && o->snapshot)
        e = envlog_rsnap_push(env, &s, o, rep);
    envlog_free(ids);
    envlog_rsync_end(&s);
    return e;
}
