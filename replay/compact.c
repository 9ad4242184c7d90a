/* SPDX-License-Identifier: MIT */
/*
 * compact.c - compaction: fold everything into a new snapshot, put it in
 * place atomically, then retire the session directories it covers.
 *
 * Steps, each safe to crash after: (1) write snapshot/current.tmp and sync
 * it; (2) rename it over snapshot/current and sync the directory - from here
 * on replay reads the new snapshot and skips what its watermarks cover;
 * (3) for each covered session whose writer is gone, rename its directory to
 * <id>.removing (which no reader lists), delete its files, remove it.  A
 * leftover .tmp or .removing is cleaned up by the next compaction.
 */
#include "replay_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deletes the files of a directory and the directory. */
static envlog_err remove_dir(int parent, const char *name)
{
    const envlog_io *io = envlog_io_get();
    int fd;
    envlog_err e = envlog_open_dir(parent, name, &fd);
    if (e)
        return e == ENVLOG_NOT_FOUND ? ENVLOG_OK : e;
    int dfd = dup(fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        close(fd);
        return envlog__fail_errno(errno, "listing %s", name);
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (io->unlinkat(fd, de->d_name, 0) && errno != ENOENT) {
            e = envlog__fail_errno(errno, "removing %s/%s", name, de->d_name);
            break;
        }
    }
    closedir(d);
    close(fd);
    if (!e && io->unlinkat(parent, name, AT_REMOVEDIR) && errno != ENOENT)
        e = envlog__fail_errno(errno, "removing %s", name);
    return e;
}

/* What an earlier, interrupted compaction left. */
static envlog_err clean_leftovers(envlog_env *env, int snapfd)
{
    const envlog_io *io = envlog_io_get();
    if (io->unlinkat(snapfd, "current.tmp", 0) && errno != ENOENT)
        return envlog__fail_errno(errno, "removing snapshot/current.tmp");
    int fd = dup(env->sessions_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return envlog__fail_errno(errno, "listing sessions");
    }
    rewinddir(d);
    envlog_err e = ENVLOG_OK;
    struct dirent *de;
    char names[64][48];
    size_t n = 0;
    while ((de = readdir(d)) && n < 64) {
        size_t len = strlen(de->d_name);
        if (len == 41 && !strcmp(de->d_name + 32, ".removing"))
            memcpy(names[n++], de->d_name, len + 1);
    }
    closedir(d);
    for (size_t i = 0; i < n && !e; i++)
        e = remove_dir(env->sessions_fd, names[i]);
    return e;
}

static envlog_err write_snapshot(int snapfd, const envlog_buf *file)
{
    const envlog_io *io = envlog_io_get();
    envlog_err e = envlog_write_new_file(snapfd, "current.tmp", file->p, file->len);
    if (e)
        return e;
    if (io->renameat(snapfd, "current.tmp", snapfd, "current")) {
        e = envlog__fail_errno(errno, "renaming snapshot/current.tmp to current");
        io->unlinkat(snapfd, "current.tmp", 0);
        return e;
    }
    return envlog_dir_sync(snapfd, "snapshot/current");
}

/* Retires one session the snapshot covers, if its writer is gone. */
static envlog_err retire(envlog_env *env, const envlog_session_info *in, bool *removed)
{
    const envlog_io *io = envlog_io_get();
    *removed = false;
    int fd;
    envlog_err e = envlog_open_dir(env->sessions_fd, in->id_hex, &fd);
    if (e)
        return e == ENVLOG_NOT_FOUND ? ENVLOG_OK : e;
    /* Holding the lock proves the writer gone; a writer never returns to a
     * session it left. */
    if (io->flock(fd, LOCK_EX | LOCK_NB)) {
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
    return remove_dir(env->sessions_fd, gone);
}

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
        envlog_env_unlock(lk);
        return e;
    }
    e = remove_dir(env->sessions_fd, gone);
    envlog_env_unlock(lk);
    if (!e)
        e = envlog_dir_sync(env->sessions_fd, "sessions");
    return e;
}

static uint64_t file_size(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) ? 0 : (uint64_t)st.st_size;
}

envlog_err envlog_compact(envlog_env *env, envlog_evidence evidence,
                          envlog_compact_report *rep)
{
    const envlog_io *io = envlog_io_get();
    envlog_compact_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    if (!env || env->readonly || env->sessions_fd < 0)
        return envlog__fail(ENVLOG_STATE, "compaction needs a writable environment");
    if ((unsigned)evidence > ENVLOG_EVIDENCE_ALL)
        return envlog__fail(ENVLOG_INVALID_ARG, "unknown evidence level %d", (int)evidence);
    int lockfd = io->openat(env->dirfd, "LOCK", O_RDWR | O_CREAT, 0600);
    if (lockfd < 0)
        return envlog__fail_errno(errno, "opening %s/LOCK", env->path);
    envlog_err e = ENVLOG_OK;
    int snapfd = -1;
    envlog_session_info *in = NULL;
    size_t n = 0;
    envlog_build_result res = {0};
    if (io->flock(lockfd, LOCK_EX | LOCK_NB)) {
        e = errno == EWOULDBLOCK
                ? envlog__fail(ENVLOG_BUSY, "another compaction of %s is running", env->path)
                : envlog__fail_errno(errno, "locking %s/LOCK", env->path);
        goto out;
    }
    if (io->mkdirat(env->dirfd, "snapshot", 0700) && errno != EEXIST) {
        e = envlog__fail_errno(errno, "creating %s/snapshot", env->path);
        goto out;
    }
    if ((e = envlog_open_dir(env->dirfd, "snapshot", &snapfd)) ||
        (e = clean_leftovers(env, snapfd)) ||
        (e = envlog_sessions_list(env, &in, &n)))
        goto out;
    rep->bytes_before = file_size(snapfd, "current");
    for (size_t i = 0; i < n; i++)
        rep->bytes_before += in[i].bytes;
    envlog_build_opts bo = {evidence, "", NULL, 0, "snapshot", false};
    if ((e = envlog_snapshot_build(env, &bo, &res)) ||
        (e = write_snapshot(snapfd, &res.file)))
        goto out;
    rep->entries = res.entries;
    rep->evidence = res.evidence;
    rep->sessions_folded = res.n_sessions;
    rep->bytes_after = res.file.len;
    /* Sessions are removed only while no replay or listing runs: one that
     * mapped the old snapshot must still find what the new one covers.
     * Readers that stay leave them for the next compaction. */
    int lk = -1;
    bool may_retire = envlog_env_lock(env, true, &lk) == ENVLOG_OK;
    for (size_t i = 0; i < n; i++) {
        uint64_t wm = 0;
        bool covered = false;
        for (size_t k = 0; k < res.n_sessions && !covered; k++)
            if (!memcmp(res.sessions[k].id.b, in[i].id.b, 16)) {
                covered = in[i].last_seq <= res.sessions[k].last_seq;
                wm = res.sessions[k].last_seq;
            }
        (void)wm;
        bool removed = false;
        if (in[i].state == ENVLOG_STATE_LIVE) {
            rep->sessions_live++;
        } else if (in[i].state == ENVLOG_STATE_TORN || in[i].state == ENVLOG_STATE_DAMAGED) {
            rep->sessions_damaged++; /* kept for envlog verify; nothing silent */
        } else if (covered && may_retire && (e = retire(env, &in[i], &removed))) {
            envlog_env_unlock(lk);
            goto out;
        }
        if (removed)
            rep->sessions_removed++;
        else
            rep->bytes_after += in[i].bytes;
    }
    envlog_env_unlock(lk);
    if (rep->sessions_removed)
        e = envlog_dir_sync(env->sessions_fd, "sessions");
out:
    envlog_build_result_free(&res);
    envlog_sessions_free(in, n);
    if (snapfd >= 0)
        close(snapfd);
    io->close(lockfd); /* releases the lock */
    return e;
}
