/* SPDX-License-Identifier: MIT */
/*
 * pull.c - `envlog pull`: every session the remote's index lists that the
 * environment lacks (no directory, no snapshot watermark) comes down and is
 * checked before it is taken: the manifest against the hash that names it,
 * each segment against its size and hash (asked for with a bound, so a
 * remote that sends more is refused on the way), and the whole session
 * through the log's reader (envlog_install_stage()).  A session that
 * fails any check is refused alone and nothing of it is kept; those that
 * pass are put in place together, each appearing whole by a rename once
 * all of them are on the disk (install.c).
 */
#include "remote_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pull under way: where it reports, and its sessions on their way in. */
typedef struct pull_ctx {
    envlog_env *env;
    envlog_rsync *s;
    const envlog_remote_opts *o;
    envlog_remote_report *rep;
    envlog_install in;
} pull_ctx;

/* A staged session in place (counted, noted in the ledger), or found there
 * already (another pull put it there meanwhile); said either way. */
static void landed(void *ctx, const envlog_staged *st, bool placed)
{
    pull_ctx *p = ctx;
    envlog_remote_item it = {placed ? ENVLOG_REMOTE_RECEIVED : ENVLOG_REMOTE_PRESENT, st->id,
                             st->bytes, NULL};
    if (placed) {
        p->rep->sessions++;
        p->rep->bytes += st->bytes;
        envlog_ledger_note(p->env, p->s->cfg->name, p->s->ledger, p->s->n_ledger, &st->id);
    } else {
        p->rep->present++;
    }
    if (p->o && p->o->on_session)
        p->o->on_session(p->o->ctx, &it);
}

/* Downloads, checks and stages one session (not with dry_run).
 * ENVLOG_BAD_DATA: refused (the message says why); ENVLOG_WRONG_STATE:
 * outside the filter. */
static envlog_err pull_one(pull_ctx *p, const envlog_rentry *ent, uint64_t *bytes)
{
    char key[160];
    const envlog_remote_opts *o = p->o;
    envlog_rmanifest m = {0};
    envlog_err e = envlog_rsync_manifest(p->s, ent, &m);
    if (e)
        return e;
    envlog_buf *data = NULL;
    if (o && !envlog_rmanifest_matches(&m, o->prefixes, o->n_prefixes))
        e = ENVLOG_WRONG_STATE;
    else if (!(data = envlog_calloc(m.n_segs, sizeof *data)))
        e = envlog__fail(ENVLOG_NOMEM, "pulling a session");
    *bytes = 0;
    for (size_t i = 0; !e && i < m.n_segs; i++) {
        envlog_rkey_obj(p->s->cfg, &m.segs[i].hash, key, sizeof key);
        e = envlog_rsync_get(p->s, key, m.segs[i].size, (size_t)m.segs[i].size,
                             &m.segs[i].hash, &data[i]);
        *bytes += m.segs[i].size;
    }
    if (!e && !(o && o->dry_run))
        e = envlog_install_stage(&p->in, &m, data);
    for (size_t i = 0; data && i < m.n_segs; i++)
        envlog_buf_free(&data[i]);
    envlog_free(data);
    envlog_rmanifest_free(&m);
    return e;
}

envlog_err envlog_remote_pull(envlog_env *env, const envlog_remote_opts *o,
                              envlog_remote_report *rep)
{
    envlog_remote_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    if (env && env->readonly)
        return envlog__fail(ENVLOG_WRONG_STATE, "%s is open read-only", env->path);
    envlog_rsync s;
    envlog_err e = envlog_rsync_begin(env, o, &s);
    if (e)
        return e;
    pull_ctx p = {env, &s, o, rep, {0}};
    envlog_install_begin(env, &p.in);
    envlog_snap *cur = NULL, *prev = NULL;
    if (!(e = envlog_rsync_index(&s))) {
        /* A snapshot that does not read only means its sessions are
         * looked for as directories. */
        if (envlog_snap_map_file(env, "current", false, &cur) == ENVLOG_NOMEM ||
            envlog_snap_map_file(env, "previous", false, &prev) == ENVLOG_NOMEM)
            e = envlog__fail(ENVLOG_NOMEM, "pulling");
    }
    /* The remote's snapshot first: the sessions it holds need not come. */
    if (!e && !(e = envlog_rsnap_pull(env, &s, o, cur, prev, rep)) && rep->snapshot_moved &&
        !(o && o->dry_run)) {
        envlog_snap_unmap(cur);
        envlog_snap_unmap(prev);
        cur = prev = NULL;
        if (envlog_snap_map_file(env, "current", false, &cur) == ENVLOG_NOMEM ||
            envlog_snap_map_file(env, "previous", false, &prev) == ENVLOG_NOMEM)
            e = envlog__fail(ENVLOG_NOMEM, "pulling");
    }
    rep->remote_sessions = s.n;
    if (s.bad_entries) {
        rep->refused += s.bad_entries;
        snprintf(rep->first_problem, sizeof rep->first_problem, "%" PRIu64 " entries of the "
                 "remote's session index are not a session id and a manifest hash",
                 s.bad_entries);
    }
    for (size_t i = 0; !e && i < s.n; i++) {
        const envlog_rentry *ent = &s.ent[i];
        if (o && o->on_progress)
            o->on_progress(o->ctx, i, s.n);
        envlog_remote_item it = {ENVLOG_REMOTE_PRESENT, ent->id, 0, NULL};
        if (envlog_session_known(env, cur, prev, &ent->id)) {
            rep->present++;
            if (!(o && o->dry_run))
                envlog_ledger_note(env, s.cfg->name, s.ledger, s.n_ledger, &ent->id);
        } else if (envlog_rsync_past_deadline(&s)) {
            rep->deadline_hit = true;
            break;
        } else {
            uint64_t bytes = 0;
            size_t staged = p.in.n;
            e = pull_one(&p, ent, &bytes);
            it.bytes = bytes;
            if (!e && p.in.n > staged) {
                /* Counted and said once it is in place (landed()). */
                if (p.in.n >= ENVLOG_REMOTE_INSTALL_BATCH)
                    e = envlog_install_commit(&p.in, landed, &p);
                continue;
            }
            if (!e) { /* dry_run */
                it.what = ENVLOG_REMOTE_RECEIVED;
                rep->sessions++;
                rep->bytes += bytes;
            } else if (e == ENVLOG_WRONG_STATE) {
                it.what = ENVLOG_REMOTE_FILTERED;
                rep->filtered++;
                e = ENVLOG_OK;
            } else if (e == ENVLOG_BAD_DATA) {
                char hex[33];
                envlog_id_format(&ent->id, hex);
                it.what = ENVLOG_REMOTE_REFUSED;
                it.why = envlog_errmsg();
                if (!rep->refused++)
                    snprintf(rep->first_problem, sizeof rep->first_problem, "session %s: %s",
                             hex, envlog_errmsg());
                e = ENVLOG_OK;
            }
        }
        if (!e && o && o->on_session)
            o->on_session(o->ctx, &it);
    }
    /* What was staged goes in place even when the pull stopped early: a
     * deadline, or a link that broke after it. */
    envlog_err ce = envlog_install_commit(&p.in, landed, &p);
    if (!e)
        e = ce;
    envlog_install_end(&p.in);
    if (!e && o && o->on_progress)
        o->on_progress(o->ctx, s.n, s.n);
    envlog_snap_unmap(cur);
    envlog_snap_unmap(prev);
    envlog_rsync_end(&s);
    return e;
}
