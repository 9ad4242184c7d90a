/* SPDX-License-Identifier: MIT */
/*
 * snapshots.c - a snapshot on the remote, so that a new machine pulls one
 * snapshot and the sessions after it instead of all history, and the
 * remote's size is bounded as a local environment's is (envlog(5),
 * REMOTES, Snapshots).
 *
 * The remote holds at most one snapshot: an object (the file snapshot/
 * current, byte for byte) named by PREFIX:snapshot ("HASH SIZE").  A push
 * of a snapshot puts it in place only if it covers every session the
 * remote has retired (PREFIX:retired, id -> namespaces); then every session
 * of the index it covers whole is retired from the remote: moved from the
 * index to the retired set in one script that checks the pointer is still
 * this snapshot, and its objects deleted.  A pull takes the remote's
 * snapshot when the environment has none, or when the remote retired
 * sessions the environment lacks; it is checked (its hash, then read whole
 * by the snapshot reader), and put in place as a compaction puts its own,
 * the generation before kept as snapshot/previous.
 */
#include "remote_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* KEYS: pointer, retired, the new object; ARGV: the pointer expected
 * ("" for none), the retired count seen, the new pointer, its size. */
static const char set_lua[] =
    "local cur = redis.call('GET', KEYS[1])\n"
    "if not cur then cur = '' end\n"
    "if cur ~= ARGV[1] or redis.call('HLEN', KEYS[2]) ~= tonumber(ARGV[2]) then\n"
    "  return redis.error_reply('ENVLOG_CHANGED the remote snapshot changed meanwhile')\n"
    "end\n"
    "if redis.call('STRLEN', KEYS[3]) ~= tonumber(ARGV[4]) then\n"
    "  return redis.error_reply('ENVLOG_INCOMPLETE object ' .. KEYS[3] .. ' is not whole')\n"
    "end\n"
    "redis.call('SET', KEYS[1], ARGV[3])\n"
    "return 1\n";

/* KEYS: pointer, index, retired; ARGV: the pointer, then id, namespaces. */
static const char retire_lua[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end\n"
    "local n = 0\n"
    "for i = 2, #ARGV, 2 do\n"
    "  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])\n"
    "  n = n + redis.call('HDEL', KEYS[2], ARGV[i])\n"
    "end\n"
    "return n\n";

/* --------------------------------------------------- what the remote holds */

typedef struct rsnap {
    bool present;
    envlog_hash128 hash;
    uint64_t size;
    char value[80];        /* the pointer as read ("" for none) */
} rsnap;

static envlog_err read_pointer(envlog_rsync *s, rsnap *r)
{
    memset(r, 0, sizeof *r);
    char key[160];
    envlog_rkey(s->cfg, "snapshot", key, sizeof key);
    const char *argv[2] = {"GET", key};
    envlog_rreply *rep;
    envlog_err e = envlog_rconn_call(s->c, 100, &rep, 2, argv, NULL);
    if (e)
        return e;
    if (rep->type == ENVLOG_R_ERROR) {
        e = envlog_rreply_fail(s->c, rep, "reading its snapshot");
    } else if (rep->type == ENVLOG_R_STRING) {
        unsigned long long size = 0;
        char tail;
        if (rep->len < 34 || rep->len >= sizeof r->value || !envlog_hex_hash(rep->str, 32, &r->hash) ||
            rep->str[32] != ' ' ||
            sscanf(rep->str + 33, "%llu%c", &size, &tail) != 1 || !size ||
            size > ENVLOG_REMOTE_OBJECT_MAX)
            e = envlog__fail(ENVLOG_BAD_DATA, "%s: %s is not a snapshot's hash and size",
                             envlog_rconn_label(s->c), key);
        else {
            memcpy(r->value, rep->str, rep->len);
            r->value[rep->len] = 0;
            r->size = size;
            r->present = true;
        }
    } else if (rep->type != ENVLOG_R_NIL) {
        e = envlog__fail(ENVLOG_BAD_DATA, "%s: %s is not a string (not envlog's?)",
                         envlog_rconn_label(s->c), key);
    }
    envlog_rreply_free(rep);
    return e;
}

/* Whether a namespace list "a,b,c" ("*": any) names one under or above a
 * prefix of the filter. */
static bool ns_list_matches(const char *list, const char *const *prefixes, size_t n)
{
    if (!n || !strcmp(list, "*"))
        return true;
    char one[ENVLOG_REMOTE_RETIRED_NS_MAX + 1];
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        memcpy(one, p, len);
        one[len] = 0;
        for (size_t k = 0; k < n; k++)
            if (envlog_ns_under(one, prefixes[k]) || envlog_ns_under(prefixes[k], one))
                return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* ------------------------------------------------------------------- push */

/* The environment's current snapshot, read whole and checked.
 * ENVLOG_NOT_FOUND when it has none. */
static envlog_err local_snapshot(envlog_env *env, envlog_buf *bytes, envlog_snap **snap)
{
    *snap = NULL;
    int dfd;
    envlog_err e = envlog_open_dir(env->dirfd, "snapshot", &dfd);
    if (e)
        return e;
    e = envlog_read_file(dfd, "current", ENVLOG_REMOTE_OBJECT_MAX, bytes);
    envlog_io_get()->close(dfd);
    if (e == ENVLOG_TOO_BIG)
        return envlog__fail(ENVLOG_TOO_BIG, "%s/snapshot/current is larger than a remote "
                            "object may be (512 MiB)", env->path);
    if (e)
        return e;
    envlog_snap_counts c;
    if ((e = envlog_snap_load(bytes->p, bytes->len, true, snap)))
        return envlog__fail(e, "%s/snapshot/current: %s", env->path, envlog_errmsg());
    if (!envlog_snap_read_counts(*snap, &c) || !c.intact) {
        envlog_snap_free(*snap);
        *snap = NULL;
        return envlog__fail(ENVLOG_CORRUPT, "%s/snapshot/current does not read whole (run "
                            "envlog verify): not pushed", env->path);
    }
    return ENVLOG_OK;
}

/* Whether `snap` holds all of session `id`. */
static bool covers_whole(envlog_snap *snap, const envlog_id128 *id)
{
    uint64_t last;
    bool complete = false;
    return envlog_snap_watermark_x(snap, id, &last, &complete) && complete;
}

static envlog_err call_script(envlog_rsync *s, const char *script, size_t nkeys,
                              const char **keys, size_t nargs, const char **args,
                              envlog_rreply **out)
{
    size_t argc = 3 + nkeys + nargs;
    const char **argv = envlog_calloc(argc, sizeof *argv);
    size_t *lens = envlog_calloc(argc, sizeof *lens);
    char nk[24];
    envlog_err e = ENVLOG_OK;
    if (!argv || !lens) {
        e = envlog__fail(ENVLOG_NOMEM, "calling the remote");
        goto out;
    }
    snprintf(nk, sizeof nk, "%zu", nkeys);
    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = nk;
    for (size_t i = 0; i < nkeys; i++)
        argv[3 + i] = keys[i];
    for (size_t i = 0; i < nargs; i++)
        argv[3 + nkeys + i] = args[i];
    for (size_t i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    e = envlog_rconn_call(s->c, 4096, out, (int)argc, argv, lens);
out:
    envlog_free(argv);
    envlog_free(lens);
    return e;
}

/* DELs each key, pipelined; best effort (an object no index names is only
 * space). */
static void delete_keys(envlog_rsync *s, char (*keys)[160], size_t n)
{
    size_t queued = 0;
    for (size_t i = 0; i < n; i++) {
        const char *argv[2] = {"DEL", keys[i]};
        if (envlog_rconn_append(s->c, 2, argv, NULL))
            break;
        queued++;
    }
    for (size_t i = 0; i < queued; i++) {
        envlog_rreply *r;
        if (envlog_rconn_reply(s->c, 4096, &r))
            break;
        envlog_rreply_free(r);
    }
}

/* The namespaces of a manifest as PREFIX:retired keeps them. */
static void ns_join(const envlog_rmanifest *m, char *out, size_t size)
{
    size_t off = 0;
    out[0] = 0;
    for (size_t i = 0; i < m->n_ns; i++) {
        size_t len = strlen(m->ns[i]);
        if (off + len + 2 > size || strchr(m->ns[i], ',')) {
            snprintf(out, size, "*");
            return;
        }
        if (off)
            out[off++] = ',';
        memcpy(out + off, m->ns[i], len + 1);
        off += len;
    }
}

/* Retires from the remote every session of its index that `snap` (now the
 * remote's snapshot, `value` its pointer) holds whole. */
static envlog_err retire_covered(envlog_rsync *s, envlog_snap *snap, const char *value,
                                 envlog_remote_report *rep)
{
    char kptr[160], kidx[160], kret[160];
    envlog_rkey(s->cfg, "snapshot", kptr, sizeof kptr);
    envlog_rkey_index(s->cfg, kidx, sizeof kidx);
    envlog_rkey(s->cfg, "retired", kret, sizeof kret);
    const char *keys[3] = {kptr, kidx, kret};
    envlog_err e = ENVLOG_OK;
    for (size_t i = 0; !e && i < s->n; i++) {
        const envlog_rentry *ent = &s->ent[i];
        if (!covers_whole(snap, &ent->id))
            continue;
        envlog_rmanifest m = {0};
        char ns[ENVLOG_REMOTE_RETIRED_NS_MAX + 1] = "*";
        envlog_err me = envlog_rsync_manifest(s, ent, &m);
        if (me && me != ENVLOG_BAD_DATA)
            return me;
        if (!me)
            ns_join(&m, ns, sizeof ns);
        char id[33];
        envlog_id_format(&ent->id, id);
        const char *args[3] = {value, id, ns};
        envlog_rreply *r;
        if (!(e = call_script(s, retire_lua, 3, keys, 3, args, &r))) {
            if (r->type == ENVLOG_R_ERROR)
                e = envlog_rreply_fail(s->c, r, "retiring a session its snapshot holds");
            else if (r->type != ENVLOG_R_INTEGER)
                e = envlog__fail(ENVLOG_BAD_DATA, "%s answered a retirement with something "
                                 "else than a number", envlog_rconn_label(s->c));
            else if (r->integer < 0)
                me = ENVLOG_STOPPED; /* another snapshot took its place: stop */
            else
                rep->retired += (uint64_t)r->integer;
            envlog_rreply_free(r);
        }
        if (!e && !me && m.n_segs) {
            /* Its objects: nothing names them any more. */
            char (*del)[160] = envlog_calloc(m.n_segs + 1, sizeof *del);
            if (del) {
                for (size_t k = 0; k < m.n_segs; k++)
                    envlog_rkey_obj(s->cfg, &m.segs[k].hash, del[k], sizeof del[k]);
                envlog_rkey_obj(s->cfg, &ent->manifest, del[m.n_segs], sizeof del[0]);
                delete_keys(s, del, m.n_segs + 1);
                envlog_free(del);
            }
        }
        envlog_rmanifest_free(&m);
        if (me == ENVLOG_STOPPED)
            break;
    }
    return e;
}

envlog_err envlog_rsnap_push(envlog_env *env, envlog_rsync *s, const envlog_remote_opts *o,
                             envlog_remote_report *rep)
{
    envlog_buf bytes = {0};
    envlog_snap *snap = NULL;
    rsnap r = {0};
    envlog_err e = local_snapshot(env, &bytes, &snap);
    if (e == ENVLOG_NOT_FOUND) {
        snprintf(rep->snapshot_note, sizeof rep->snapshot_note,
                 "no snapshot to push (the environment has not compacted yet)");
        e = ENVLOG_OK;
        goto out;
    }
    if (e || (e = read_pointer(s, &r)))
        goto out;
    envlog_hash128 h = envlog_hash128_bytes(bytes.p, bytes.len);
    char hex[33], value[80], size[24], count[24];
    envlog_hash_hex(&h, hex);
    snprintf(value, sizeof value, "%s %zu", hex, bytes.len);
    if (r.present && !memcmp(r.hash.b, h.b, 16)) {
        snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "snapshot %.12s... is on the "
                 "remote already", hex);
        e = o && o->dry_run ? ENVLOG_OK : retire_covered(s, snap, value, rep);
        goto out;
    }
    /* It must hold every session the remote holds only in its snapshot. */
    size_t missing = 0;
    for (size_t i = 0; i < s->n_retired; i++)
        missing += !covers_whole(snap, &s->retired[i]);
    if (missing) {
        snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "snapshot not pushed: the "
                 "remote's snapshot holds %zu session%s this one does not (pull, compact, and "
                 "push again)", missing, missing == 1 ? "" : "s");
        goto out;
    }
    rep->snapshot_bytes = bytes.len;
    if (o && o->dry_run) {
        rep->snapshot_moved = true;
        snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "would push snapshot %.12s...",
                 hex);
        goto out;
    }
    char kobj[160], kptr[160], kret[160];
    envlog_rkey_obj(s->cfg, &h, kobj, sizeof kobj);
    envlog_rkey(s->cfg, "snapshot", kptr, sizeof kptr);
    envlog_rkey(s->cfg, "retired", kret, sizeof kret);
    const char *argv[3] = {"SET", kobj, (const char *)bytes.p};
    size_t lens[3] = {3, strlen(kobj), bytes.len};
    envlog_rreply *rr;
    if ((e = envlog_rconn_call(s->c, 4096, &rr, 3, argv, lens)))
        goto out;
    if (rr->type == ENVLOG_R_ERROR)
        e = envlog_rreply_fail(s->c, rr, "storing its snapshot");
    envlog_rreply_free(rr);
    if (e)
        goto out;
    snprintf(size, sizeof size, "%zu", bytes.len);
    snprintf(count, sizeof count, "%zu", s->n_retired);
    const char *keys[3] = {kptr, kret, kobj};
    const char *args[4] = {r.value, count, value, size};
    if (!(e = call_script(s, set_lua, 3, keys, 4, args, &rr))) {
        if (rr->type == ENVLOG_R_ERROR)
            e = envlog_rreply_fail(s->c, rr, "putting its snapshot in place");
        envlog_rreply_free(rr);
    }
    if (e) {
        /* Not in place: the object goes again, unless it is the one in
         * place (another push of the same file won). */
        char msg[400];
        snprintf(msg, sizeof msg, "%s", envlog_errmsg());
        rsnap now = {0};
        if (!read_pointer(s, &now) && !(now.present && !memcmp(now.hash.b, h.b, 16)))
            delete_keys(s, &kobj, 1);
        e = envlog__fail(e, "%s; the remote's snapshot is as it was", msg);
        goto out;
    }
    rep->snapshot_moved = true;
    snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "pushed snapshot %.12s... (%zu "
             "bytes)", hex, bytes.len);
    if (r.present) {
        char old[160];
        envlog_rkey_obj(s->cfg, &r.hash, old, sizeof old);
        delete_keys(s, &old, 1);
    }
    e = retire_covered(s, snap, value, rep);
out:
    envlog_snap_free(snap);
    envlog_buf_free(&bytes);
    return e;
}

/* ------------------------------------------------------------------- pull */

/* What taking `got` in place of the environment's own snapshot would lose:
 * a session `mine` holds that neither `got` holds (as far) nor the remote's
 * index lists nor a session directory of the environment keeps. */
static size_t would_lose(envlog_env *env, envlog_rsync *s, envlog_snap *mine,
                         envlog_snap *got, envlog_id128 *first)
{
    size_t lost = 0;
    const envlog_snap_manifest *m = envlog_snap_manifest_get(mine);
    for (size_t i = 0; i < m->n_wms; i++) {
        const envlog_snap_wm *w = &m->wms[i];
        uint64_t last;
        if ((envlog_snap_watermark(got, &w->session, &last) && last >= w->last_seq) ||
            envlog_rsync_has(s, &w->session) || envlog_session_known(env, NULL, NULL, &w->session))
            continue;
        if (!lost++)
            *first = w->session;
    }
    return lost;
}

/* Downloads the remote's snapshot, checks it and puts it in place. */
static envlog_err take(envlog_env *env, envlog_rsync *s, const rsnap *r, envlog_snap *mine,
                       envlog_remote_report *rep)
{
    char key[160];
    envlog_rkey_obj(s->cfg, &r->hash, key, sizeof key);
    long long len = 0;
    envlog_buf b = {0};
    envlog_snap *got = NULL;
    int lockfd = -1, snapfd = -1;
    const envlog_io *io = envlog_io_get();
    envlog_err e = envlog_rsync_strlen(s, key, &len);
    if (!e && (uint64_t)len != r->size)
        e = envlog__fail(ENVLOG_BAD_DATA, "its snapshot %s is %s", key,
                         len ? "not the size its pointer gives" : "missing");
    if (!e)
        e = envlog_rsync_get(s, key, r->size, (size_t)r->size, &r->hash, &b);
    envlog_snap_counts c;
    if (!e && (e = envlog_snap_load(b.p, b.len, true, &got)))
        e = envlog__fail(e == ENVLOG_NOMEM ? e : ENVLOG_BAD_DATA, "its snapshot: %s",
                         envlog_errmsg());
    if (!e && (!envlog_snap_read_counts(got, &c) || !c.intact))
        e = envlog__fail(ENVLOG_BAD_DATA, "its snapshot does not read whole");
    if (!e && !envlog_snap_manifest_get(got)->compacted_by)
        e = envlog__fail(ENVLOG_BAD_DATA, "its snapshot is a bundle, not a snapshot");
    envlog_id128 first;
    size_t lost = 0;
    if (!e && mine && (lost = would_lose(env, s, mine, got, &first))) {
        char hex[33];
        envlog_id_format(&first, hex);
        snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "the remote's snapshot was not "
                 "taken: it lacks %zu session%s only this environment's snapshot holds (%s%s)",
                 lost, lost == 1 ? "" : "s", hex, lost > 1 ? ", ..." : "");
        goto out;
    }
    if (!e && ((e = envlog_env_mark_format(env)) || (e = envlog_compact_lock(env, &lockfd))))
        goto out;
    if (!e && io->mkdirat(env->dirfd, "snapshot", 0700) && errno != EEXIST)
        e = envlog__fail_errno(errno, "creating %s/snapshot", env->path);
    if (!e)
        e = envlog_open_dir(env->dirfd, "snapshot", &snapfd);
    if (!e) {
        io->unlinkat(snapfd, "current.tmp", 0);
        if (!(e = envlog_write_new_file(snapfd, "current.tmp", b.p, b.len)) &&
            (e = envlog_snap_rotate(snapfd)))
            io->unlinkat(snapfd, "current.tmp", 0);
    }
    if (snapfd >= 0)
        io->close(snapfd);
    envlog_compact_unlock(lockfd);
    if (!e) {
        char hex[33];
        envlog_hash_hex(&r->hash, hex);
        rep->snapshot_moved = true;
        rep->snapshot_bytes = b.len;
        snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "took the remote's snapshot "
                 "%.12s... (%zu bytes)", hex, b.len);
    }
out:
    envlog_snap_free(got);
    envlog_buf_free(&b);
    return e;
}

envlog_err envlog_rsnap_pull(envlog_env *env, envlog_rsync *s, const envlog_remote_opts *o,
                             envlog_snap *mine, envlog_snap *prev, envlog_remote_report *rep)
{
    rsnap r;
    envlog_err e = read_pointer(s, &r);
    if (e || !r.present) {
            return e;
    }
    /* Needed: the remote holds sessions this environment lacks in its
     * snapshot only; or the environment has no snapshot at all (then one
     * snapshot is less to fetch than its sessions). */
    size_t needed = 0;
    for (size_t i = 0; i < s->n_retired; i++)
        if (ns_list_matches(s->retired_ns[i], o ? o->prefixes : NULL, o ? o->n_prefixes : 0) &&
            !envlog_session_known(env, mine, prev, &s->retired[i]))
            needed++;
    bool none = !mine && !(o && o->n_prefixes);
    if (!needed && !none) {
            return ENVLOG_OK;
    }
    if (o && o->no_snapshot) {
        if (needed)
            snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "the remote holds %zu "
                     "session%s this environment lacks in its snapshot only: not taken "
                     "(--no-snapshot)", needed, needed == 1 ? "" : "s");
    } else if (o && o->dry_run) {
        rep->snapshot_moved = true;
        rep->snapshot_bytes = r.size;
        snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "would take the remote's "
                 "snapshot (%" PRIu64 " bytes)", r.size);
    } else {
        e = take(env, s, &r, mine, rep);
        if (e == ENVLOG_BAD_DATA) {
            /* Refused as a session is: the sessions still come. */
            rep->refused++;
            snprintf(rep->snapshot_note, sizeof rep->snapshot_note, "the remote's snapshot "
                     "was refused: %s", envlog_errmsg());
            if (!rep->first_problem[0])
                snprintf(rep->first_problem, sizeof rep->first_problem, "snapshot: %s",
                         envlog_errmsg());
            e = ENVLOG_OK;
        }
    }
    return e;
}
