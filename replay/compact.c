/* SPDX-License-Identifier: MIT */
/*
 * compact.c - compaction: fold everything into a new snapshot, read it back
 * and check it, put it in place as the new generation, then retire what the
 * generation before it covers.
 *
 * Generations (envlog(5)): snapshot/current is built on the snapshot that
 * was current before, which stays as snapshot/previous together with every
 * session directory previous does not cover.  So the loss of any one file
 * loses nothing: previous and those sessions fold to the same state as
 * current.  Steps, each safe to crash after:
 *  1. write snapshot/current.tmp, sync it, read it back whole and check
 *     that it folds to exactly the state it was built from;
 *  2. link the current snapshot as previous.tmp (or write an empty
 *     generation there, the first time), rename current.tmp over current,
 *     previous.tmp over previous, sync the directory;
 *  3. retire the session directories the new previous covers (renamed to
 *     <id>.removing, which no reader lists, then deleted).
 * A leftover .tmp or .removing is cleaned up by the next compaction.
 */
#include "replay_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct rm_ctx {
    int fd;
    const char *name;
    bool *left;
} rm_ctx;

static envlog_err remove_entry(void *ctx, const char *nm)
{
    rm_ctx *c = ctx;
    const envlog_io *io = envlog_io_get();
    struct stat st;
    if (io->fstatat(c->fd, nm, &st) == 0 && S_ISDIR(st.st_mode)) {
        *c->left = true;
        return ENVLOG_OK;
    }
    if (io->unlinkat(c->fd, nm, 0) && errno != ENOENT)
        return envlog__fail_errno(errno, "removing %s/%s", c->name, nm);
    return ENVLOG_OK;
}

/* Deletes the files of a directory and the directory.  Only files are
 * removed: a directory left inside is not ours to remove (nothing is
 * removed silently), so the directory stays and `*left` says so. */
static envlog_err remove_dir(int parent, const char *name, bool *left)
{
    const envlog_io *io = envlog_io_get();
    *left = false;
    int fd;
    envlog_err e = envlog_open_dir(parent, name, &fd);
    if (e)
        return e == ENVLOG_NOT_FOUND ? ENVLOG_OK : e;
    rm_ctx c = {fd, name, left};
    e = envlog_dir_each(fd, name, remove_entry, &c);
    io->close(fd);
    if (!e && !*left && io->unlinkat(parent, name, AT_REMOVEDIR) && errno != ENOENT)
        e = envlog__fail_errno(errno, "removing %s", name);
    return e;
}

/* Directories being removed (ID.removing), at most 64 a time. */
typedef struct removing {
    char names[64][48];
    size_t n;
} removing;

static envlog_err note_removing(void *ctx, const char *nm)
{
    removing *r = ctx;
    size_t len = strlen(nm);
    if (len == 41 && !strcmp(nm + 32, ".removing"))
        memcpy(r->names[r->n++], nm, len + 1);
    return r->n < 64 ? ENVLOG_OK : ENVLOG_END;
}

/* What an earlier, interrupted compaction (or an interrupted creation of
 * the environment) left. */
static envlog_err clean_leftovers(envlog_env *env, int snapfd)
{
    const envlog_io *io = envlog_io_get();
    static const char *const tmp[] = {"current.tmp", "previous.tmp"};
    for (size_t i = 0; i < 2; i++)
        if (io->unlinkat(snapfd, tmp[i], 0) && errno != ENOENT && errno != EISDIR)
            return envlog__fail_errno(errno, "removing snapshot/%s", tmp[i]);
    /* Markers of creators killed before they named theirs. */
    envlog_tmp_clean(env->dirfd, "FORMAT");
    removing r;
    r.n = 0;
    envlog_err le = envlog_dir_each(env->sessions_fd, "sessions", note_removing, &r);
    if (le)
        return le;
    /* One that cannot be removed (not a directory, or something else
     * inside) is left as it is: it never stops a compaction. */
    for (size_t i = 0; i < r.n; i++) {
        bool left;
        envlog_err e = remove_dir(env->sessions_fd, r.names[i], &left);
        if (e == ENVLOG_NOMEM)
            return e;
    }
    return ENVLOG_OK;
}

/* Reads snapshot/current.tmp back from the file system whole and folds it:
 * it must read completely and give the state it was built from, rules and
 * all (`why` must not change), or it never becomes current. */
envlog_err envlog_snapshot_read_back(envlog_env *env, const envlog_hash128 *want)
{
    envlog_snap *s;
    envlog_err e = envlog_snap_map_file(env, "current.tmp", true, &s);
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
        return e;
    if (e || !s)
        return envlog__fail(ENVLOG_CORRUPT, "the new snapshot does not read back: %s",
                            e ? envlog_errmsg() : "it is gone");
    envlog_snap_counts c;
    if (!envlog_snap_read_counts(s, &c) || !c.intact) {
        envlog_snap_unmap(s);
        return envlog__fail(ENVLOG_CORRUPT, "the new snapshot does not read back whole");
    }
    envlog_state *st;
    if ((e = envlog_state_from_snap(s, NULL, &st)))
        return e; /* the snapshot went with the state */
    envlog_hash128 got;
    e = envlog_state_digest(st, &got);
    envlog_state_close(st); /* and the snapshot with it */
    if (!e && memcmp(got.b, want->b, 16))
        e = envlog__fail(ENVLOG_CORRUPT, "the new snapshot reads back as another state than "
                         "the one it was built from");
    return e;
}

/* An empty generation: no entry, no watermark (every session is still
 * there), for the first compaction's previous. */
static envlog_err write_empty(int snapfd, const char *name)
{
    envlog_snapw w = {0};
    envlog_snap_manifest m = {.schema = ENVLOG_BUNDLE_SCHEMA, .name = "",
                              .envlog_version = ENVLOG_VERSION_STRING,
                              .created_unix_ns = envlog_clock_unix_ns(),
                              .evidence_level = ENVLOG_EVIDENCE_WINNERS};
    envlog_buf out = {0};
    envlog_id128 id;
    envlog_err e = envlog_id_new(&id);
    if (!e)
        e = envlog_snapw_finish(&w, &m, &id, "snapshot", &out);
    if (!e)
        e = envlog_write_new_file(snapfd, name, out.p, out.len);
    envlog_buf_free(&out);
    envlog_snapw_free(&w);
    return e;
}

/* Step 2: the new generation in place, the one it was built on kept. */
envlog_err envlog_snap_rotate(int snapfd)
{
    const envlog_io *io = envlog_io_get();
    envlog_err e = ENVLOG_OK;
    if (io->linkat(snapfd, "current", snapfd, "previous.tmp")) {
        if (errno != ENOENT)
            return envlog__fail_errno(errno, "keeping snapshot/current as the generation "
                                      "before the new one");
        if ((e = write_empty(snapfd, "previous.tmp"))) {
            io->unlinkat(snapfd, "previous.tmp", 0);
            return e;
        }
    }
    if (io->renameat(snapfd, "current.tmp", snapfd, "current")) {
        /* Nothing changed: the second name goes, as the caller's tmp does. */
        e = envlog__fail_errno(errno, "renaming snapshot/current.tmp to current");
        io->unlinkat(snapfd, "previous.tmp", 0);
        return e;
    }
    /* From here on readers use the new snapshot; previous.tmp, if a crash
     * stops us now, is cleaned up by the next compaction. */
    if (io->renameat(snapfd, "previous.tmp", snapfd, "previous"))
        return envlog__fail_errno(errno, "renaming snapshot/previous.tmp to previous");
    return envlog_dir_sync(snapfd, "snapshot/current");
}

/* Retires one session the generation kept covers, if its writer is gone. */
static envlog_err retire(envlog_env *env, const envlog_session_info *in, bool *removed)
{
    const envlog_io *io = envlog_io_get();
    *removed = false;
    int fd;
    envlog_err e = envlog_open_dir(env->sessions_fd, in->id_hex, &fd);
    if (e)
        return e == ENVLOG_NOT_FOUND || e == ENVLOG_BAD_DATA || e == ENVLOG_PERMISSION
                   ? ENVLOG_OK : e;
    /* Holding the lock shared proves the writer gone (it holds it
     * exclusive for as long as it lives); a writer never returns to a
     * session it left.  Shared, a reader's look whether the session is live
     * succeeds meanwhile, so a session being retired never reads as live:
     * it reads whole, or as gone. */
    if (io->flock(fd, LOCK_SH | LOCK_NB)) {
        close(fd);
        return ENVLOG_OK;
    }
    char gone[48];
    memcpy(gone, in->id_hex, 32);
    memcpy(gone + 32, ".removing", sizeof ".removing");
    if (io->renameat(env->sessions_fd, in->id_hex, env->sessions_fd, gone)) {
        e = envlog__fail_errno(errno, "retiring session %s", in->id_hex);
        close(fd);
        return e;
    }
    close(fd);
    *removed = true;
    bool left;
    return remove_dir(env->sessions_fd, gone, &left);
}

void (*envlog_retire_hook)(envlog_env *env, const envlog_session_info *in, size_t n,
                           bool *keep);

envlog_err envlog_session_discard(envlog_env *env, const envlog_id128 *id)
{
    char hex[33], gone[48];
    envlog_id_format(id, hex);
    memcpy(gone, hex, 32);
    memcpy(gone + 32, ".removing", sizeof ".removing");
    int lk;
    envlog_err e = envlog_env_lock(env, true, &lk);
    if (e)
        return e;
    if (envlog_io_get()->renameat(env->sessions_fd, hex, env->sessions_fd, gone)) {
        e = envlog__fail_errno(errno, "discarding session %s", hex);
        envlog_env_unlock(env, lk);
        return e;
    }
    bool left;
    e = remove_dir(env->sessions_fd, gone, &left);
    envlog_env_unlock(env, lk);
    if (!e)
        e = envlog_dir_sync(env->sessions_fd, "sessions");
    return e ? e : envlog_env_state_refold(env);
}

static envlog_err out_write(void *ctx, const uint8_t *p, size_t n)
{
    return envlog_out_write(ctx, p, n);
}

/* The new snapshot's bytes on their way, counted for on_progress. */
typedef struct progress_sink {
    envlog_err (*write)(void *ctx, const uint8_t *p, size_t n);
    void *ctx;
    const envlog_compact_opts *o;
    uint64_t size, done;
} progress_sink;

static envlog_err ps_begin(void *ctx, uint64_t size)
{
    ((progress_sink *)ctx)->size = size;
    return ENVLOG_OK;
}

static envlog_err ps_write(void *ctx, const uint8_t *p, size_t n)
{
    progress_sink *s = ctx;
    envlog_err e = s->write(s->ctx, p, n);
    s->done += n;
    if (!e && s->o->on_progress)
        s->o->on_progress(s->o->ctx, "writing", s->done, s->size);
    return e;
}

static uint64_t file_size(int dirfd, const char *name)
{
    struct stat st;
    return envlog_io_get()->fstatat(dirfd, name, &st) ? 0 : (uint64_t)st.st_size;
}

envlog_err envlog_compact_lock(envlog_env *env, int *lockfd)
{
    const envlog_io *io = envlog_io_get();
    envlog_err e = envlog_open_regular(env->dirfd, "LOCK", O_RDWR | O_CREAT, 0600, lockfd,
                                       NULL);
    if (e)
        return envlog__fail(e, "%s/%s", env->path, envlog_errmsg());
    /* A session end looking whether a compaction runs holds it for an
     * instant; a compaction for its whole run. */
    if (envlog_flock_within(*lockfd, LOCK_EX, 100)) {
        e = errno == EWOULDBLOCK
                ? envlog__fail(ENVLOG_BUSY, "another compaction of %s is running", env->path)
                : envlog__fail_errno(errno, "locking %s/LOCK", env->path);
        io->close(*lockfd);
        *lockfd = -1;
    }
    return e;
}

void envlog_compact_unlock(int lockfd)
{
    if (lockfd >= 0)
        envlog_io_get()->close(lockfd); /* releases the lock */
}

void envlog_compact_opts_from(envlog_compact_opts *o, const envlog_config *c)
{
    memset(o, 0, sizeof *o);
    o->evidence = c->evidence;
    o->history_sessions = c->history_sessions;
    o->history_age_ns = c->history_age_ns;
    o->max_size = c->max_size;
}

envlog_err envlog_compact(envlog_env *env, envlog_evidence evidence,
                          envlog_compact_report *rep)
{
    envlog_config c;
    envlog_compact_opts o;
    envlog_err e;
    if (!env)
        return envlog__fail(ENVLOG_WRONG_STATE, "compaction needs a writable environment");
    /* The environment's own retention and bound apply. */
    if ((e = envlog_config_read(env, &c)))
        return e;
    envlog_compact_opts_from(&o, &c);
    o.evidence = evidence;
    o.reason = "envlog_compact()";
    return envlog_compact_x(env, &o, rep);
}

static envlog_err count_only(void *ctx, const uint8_t *p, size_t n)
{
    (void)p;
    *(uint64_t *)ctx += n;
    return ENVLOG_OK;
}

static int id_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

envlog_err envlog_compact_x(envlog_env *env, const envlog_compact_opts *opts,
                            envlog_compact_report *rep)
{
    const envlog_io *io = envlog_io_get();
    envlog_compact_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    if (!env || env->readonly || env->sessions_fd < 0)
        return envlog__fail(ENVLOG_WRONG_STATE, "compaction needs a writable environment");
    if (!opts)
        return envlog__fail(ENVLOG_INVALID_ARG, "no compaction options");
    envlog_evidence evidence = opts->evidence;
    if ((unsigned)evidence > ENVLOG_EVIDENCE_ALL)
        return envlog__fail(ENVLOG_INVALID_ARG, "unknown evidence level %d", (int)evidence);
    /* A dry run changes no file: it creates neither LOCK nor snapshot/
     * (without them no compaction runs, and there is no snapshot), and
     * leaves what an interrupted compaction left to the next real one. */
    bool dry = opts->dry_run;
    int lockfd = -1;
    struct stat st;
    envlog_err e = dry && io->fstatat(env->dirfd, "LOCK", &st)
                       ? ENVLOG_OK
                       : envlog_compact_lock(env, &lockfd);
    if (e)
        return e;
    int snapfd = -1;
    envlog_session_info *in = NULL;
    size_t n = 0;
    envlog_build_result res = {0};
    envlog_build_session *sealed = NULL;
    envlog_id128 *present = NULL;
    if (!dry && io->mkdirat(env->dirfd, "snapshot", 0700) && errno != EEXIST) {
        e = envlog__fail_errno(errno, "creating %s/snapshot", env->path);
        goto out;
    }
    if ((!dry || !io->fstatat(env->dirfd, "snapshot", &st)) &&
        (e = envlog_open_dir(env->dirfd, "snapshot", &snapfd))) {
        if (e == ENVLOG_BAD_DATA)
            e = envlog__fail(ENVLOG_CORRUPT, "%s/%s", env->path, envlog_errmsg());
        goto out;
    }
    if ((!dry && (e = clean_leftovers(env, snapfd))) ||
        (e = envlog_sessions_list(env, &in, &n)))
        goto out;
    if (snapfd >= 0)
        rep->bytes_before = file_size(snapfd, "current") + file_size(snapfd, "previous");
    size_t n_sealed = 0;
    if (n && (!(sealed = envlog_calloc(n, sizeof *sealed)) ||
              !(present = envlog_calloc(n, sizeof *present)))) {
        e = envlog__fail(ENVLOG_NOMEM, "compacting");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        rep->bytes_before += in[i].bytes;
        present[i] = in[i].id;
        if (in[i].state == ENVLOG_STATE_SEALED)
            sealed[n_sealed++] = (envlog_build_session){in[i].id, in[i].last_seq, true};
    }
    if (n)
        qsort(present, n, sizeof *present, id_cmp);
    /* Streamed into current.tmp as it is laid out: no copy of the file in
     * memory.  A dry run only counts its bytes. */
    envlog_out tmp = {.fd = -1};
    uint64_t counted = 0;
    if (!opts->dry_run &&
        ((e = envlog_env_mark_format(env)) || (e = envlog_out_open(&tmp, snapfd, "current.tmp"))))
        goto out;
    progress_sink ps = {opts->dry_run ? count_only : out_write,
                        opts->dry_run ? (void *)&counted : (void *)&tmp, opts, 0, 0};
    envlog_sink sink = {ps_begin, ps_write, &ps};
    envlog_build_opts bo = {.evidence = evidence, .name = "", .content = "snapshot",
                            .strict = true, .sealed = sealed, .n_sealed = n_sealed,
                            .sink = &sink, .history_sessions = opts->history_sessions,
                            .history_age_ns = opts->history_age_ns, .present = present,
                            .n_present = n, .max_size = opts->max_size,
                            .dry_run = opts->dry_run, .on_removal = opts->on_removal,
                            .ctx_removal = opts->ctx, .on_progress = opts->on_progress,
                            .ctx = opts->ctx,
                            .reason = opts->reason ? opts->reason : "envlog_compact_x()"};
    e = envlog_snapshot_build(env, &bo, &res);
    envlog_err ce = envlog_out_close(&tmp, !e);
    rep->history_dropped = res.history_dropped;
    rep->evicted = res.evicted;
    rep->evicted_bytes = res.evicted_bytes;
    rep->snapshot_bytes = opts->dry_run ? counted : tmp.off;
    rep->entries = res.entries;
    rep->evidence = res.evidence;
    rep->sessions_folded = res.n_sessions;
    if (e || (e = ce) || opts->dry_run)
        goto out;
    if ((e = envlog_snapshot_read_back(env, &res.digest)) || (e = envlog_snap_rotate(snapfd))) {
        io->unlinkat(snapfd, "current.tmp", 0);
        goto out;
    }
    rep->previous_bytes = file_size(snapfd, "previous");
    rep->bytes_after = tmp.off + rep->previous_bytes;
    /* Sessions are removed only while no replay or listing runs: one that
     * mapped the old snapshot must still find what the new one covers.
     * Readers that stay leave them for the next compaction.  Only what the
     * generation now kept as previous covers goes: the new current may be
     * lost, and previous with the sessions it does not cover is then the
     * whole state. */
    int lk = -1;
    bool may_retire = envlog_env_lock(env, true, &lk) == ENVLOG_OK;
    bool *keep = NULL;
    if (n && envlog_retire_hook && may_retire) {
        if (!(keep = envlog_calloc(n, sizeof *keep))) {
            envlog_env_unlock(env, lk);
            e = envlog__fail(ENVLOG_NOMEM, "compacting");
            goto out;
        }
        envlog_retire_hook(env, in, n, keep);
    }
    for (size_t i = 0; i < n; i++) {
        bool covered = false;
        for (size_t k = 0; k < res.n_base_wms && !covered; k++)
            covered = !memcmp(res.base_wms[k].id.b, in[i].id.b, 16) &&
                      in[i].last_seq <= res.base_wms[k].last_seq;
        bool removed = false;
        if (in[i].state == ENVLOG_STATE_LIVE) {
            rep->sessions_live++;
        } else if (in[i].state == ENVLOG_STATE_TORN || in[i].state == ENVLOG_STATE_DAMAGED) {
            rep->sessions_damaged++; /* kept for envlog verify; nothing silent */
        } else if (in[i].strays) {
            rep->sessions_stray++;
        } else if (!covered || (keep && keep[i])) {
            rep->sessions_kept++;
        } else if (may_retire && (e = retire(env, &in[i], &removed))) {
            envlog_free(keep);
            envlog_env_unlock(env, lk);
            goto out;
        }
        if (removed)
            rep->sessions_removed++;
        else
            rep->bytes_after += in[i].bytes;
    }
    envlog_free(keep);
    envlog_env_unlock(env, lk);
    if (rep->sessions_removed)
        e = envlog_dir_sync(env->sessions_fd, "sessions");
out:
    envlog_free(sealed);
    envlog_free(present);
    envlog_build_result_free(&res);
    envlog_sessions_free(in, n);
    if (snapfd >= 0)
        close(snapfd);
    envlog_compact_unlock(lockfd);
    return e;
}
