/* SPDX-License-Identifier: MIT */
/*
 * pull.c - `envlog pull`: every session the remote's index lists that the
 * environment lacks (no directory, no snapshot watermark) comes down and is
 * checked before it is taken: the manifest against the hash that names it,
 * each segment against its size and hash (asked for with a bound, so a
 * remote that sends more is refused on the way), and the whole session
 * through the log's reader (envlog_session_install()).  A session that
 * fails any check is refused alone and nothing of it is written; one that
 * passes appears whole, by a rename.
 */
#include "remote_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Downloads, checks and installs one session.  ENVLOG_BAD_DATA: refused
 * (the message says why); ENVLOG_WRONG_STATE: outside the filter. */
static envlog_err pull_one(envlog_env *env, envlog_rsync *s, const envlog_rentry *ent,
                           const envlog_remote_opts *o, uint64_t *bytes)
{
    char key[160];
    envlog_rmanifest m = {0};
    envlog_err e = envlog_rsync_manifest(s, ent, &m);
    if (e)
        return e;
    envlog_buf *data = NULL;
    if (o && !envlog_rmanifest_matches(&m, o->prefixes, o->n_prefixes))
        e = ENVLOG_WRONG_STATE;
    else if (!(data = envlog_calloc(m.n_segs, sizeof *data)))
        e = envlog__fail(ENVLOG_NOMEM, "pulling a session");
    *bytes = 0;
    for (size_t i = 0; !e && i < m.n_segs; i++) {
        envlog_rkey_obj(s->cfg, &m.segs[i].hash, key, sizeof key);
        e = envlog_rsync_get(s, key, m.segs[i].size, (size_t)m.segs[i].size, &m.segs[i].hash,
                       &data[i]);
        *bytes += m.segs[i].size;
    }
    if (!e && !(o && o->dry_run))
        e = envlog_session_install(env, &m, data);
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
            e = pull_one(env, &s, ent, o, &bytes);
            it.bytes = bytes;
            if (!e) {
                it.what = ENVLOG_REMOTE_RECEIVED;
                rep->sessions++;
                rep->bytes += bytes;
                if (!(o && o->dry_run))
                    envlog_ledger_note(env, s.cfg->name, s.ledger, s.n_ledger, &ent->id);
            } else if (e == ENVLOG_WRONG_STATE) {
                it.what = ENVLOG_REMOTE_FILTERED;
                rep->filtered++;
                e = ENVLOG_OK;
            } else if (e == ENVLOG_NOT_FOUND) {
                rep->present++; /* another pull put it there meanwhile */
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
    if (!e && o && o->on_progress)
        o->on_progress(o->ctx, s.n, s.n);
    envlog_snap_unmap(cur);
    envlog_snap_unmap(prev);
    envlog_rsync_end(&s);
    return e;
}
