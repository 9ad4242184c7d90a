/* SPDX-License-Identifier: MIT */
/*
 * maintain.c - an environment that maintains itself (envlog(5),
 * MAINTENANCE): when a session that wrote something ends, the environment
 * looks at how much is not compacted yet and, past the thresholds of its
 * config, compacts itself in a process of its own, so the call that ends
 * the session is held up only by a directory listing and a fork.
 *
 * The compacting process is detached (its parent is gone at once), so a
 * program that ends its session and exits does not stop it; it takes the
 * compaction lock without waiting, so two that start together do the work
 * once; a crash of it at any step leaves the state as it was (compact.c).
 */
#include "replay_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct bytes_ctx {
    int dirfd;
    uint64_t n;
} bytes_ctx;

static envlog_err add_bytes(void *ctx, const char *name)
{
    bytes_ctx *c = ctx;
    struct stat st;
    if (name[0] != '.' && !envlog_io_get()->fstatat(c->dirfd, name, &st) && S_ISREG(st.st_mode))
        c->n += (uint64_t)st.st_size;
    return ENVLOG_OK;
}

/* Bytes of the regular files of a directory (what could be listed). */
static uint64_t dir_bytes(int dirfd)
{
    bytes_ctx c = {dirfd, 0};
    (void)envlog_dir_each(dirfd, "a directory", add_bytes, &c);
    return c.n;
}

envlog_err envlog_upkeep_get(envlog_env *env, envlog_upkeep *u)
{
    memset(u, 0, sizeof *u);
    envlog_err e = envlog_config_read(env, &u->config);
    if (e) {
        u->config_ok = false;
        snprintf(u->config_error, sizeof u->config_error, "%s", envlog_errmsg());
        envlog_config_defaults(&u->config);
    } else {
        u->config_ok = true;
    }
    /* The snapshot readers use now, read as a lookup reads it. */
    envlog_snap *snap = NULL;
    int gen;
    if ((e = envlog_snap_pick(env, false, NULL, NULL, &snap, &gen)))
        return e;
    uint64_t snap_bytes = 0;
    if (snap) {
        const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
        u->last_compaction_unix_ns = m->created_unix_ns;
        snprintf(u->last_reason, sizeof u->last_reason, "%s",
                 m->compacted_by ? m->compacted_by : "");
        snap_bytes = envlog_snap_size(snap);
        u->bytes += snap_bytes;
    }
    int sfd;
    if (!envlog_open_dir(env->dirfd, "snapshot", &sfd)) {
        struct stat st;
        if (!envlog_io_get()->fstatat(sfd, "previous", &st) && S_ISREG(st.st_mode))
            u->bytes += (uint64_t)st.st_size;
        close(sfd);
    }
    envlog_id128 *ids = NULL;
    size_t n = 0;
    if ((e = envlog_session_ids(env, &ids, &n))) {
        envlog_snap_unmap(snap);
        return e;
    }
    for (size_t i = 0; i < n; i++) {
        char hex[33];
        envlog_id_format(&ids[i], hex);
        int fd;
        if (envlog_open_dir(env->sessions_fd, hex, &fd))
            continue;
        uint64_t b = dir_bytes(fd);
        close(fd);
        u->sessions++;
        u->bytes += b;
        uint64_t wm;
        bool complete = false;
        if (!snap || !envlog_snap_watermark_x(snap, &ids[i], &wm, &complete) || !complete) {
            u->pending_sessions++;
            u->pending_bytes += b;
        }
    }
    envlog_free(ids);
    envlog_snap_unmap(snap);
    /* A compaction rewrites the snapshot: past the count it waits until
     * what it folds is worth a share of what it rewrites, or the count is
     * far past, so a large snapshot is not rewritten for a few small
     * sessions at every other start (envlog(5), MAINTENANCE). */
    const envlog_config *c = &u->config;
    bool by_count = u->pending_sessions >= c->compact_sessions &&
                    (u->pending_bytes * ENVLOG_COMPACT_SHARE >= snap_bytes ||
                     u->pending_sessions >= ENVLOG_COMPACT_SHARE / 4 * c->compact_sessions);
    u->due = by_count || u->pending_bytes >= c->compact_bytes ||
             (c->max_size && u->bytes > c->max_size);
    return ENVLOG_OK;
}

/* The compaction of a detached process: its own handle on the same
 * directory, the config's settings, and nothing printed. */
static void compact_here(const char *path, void *arg)
{
    const char *why = arg;
    envlog_env *env;
    if (envlog_env_open(path, 0, &env))
        return;
    envlog_config c;
    if (!envlog_config_read(env, &c)) {
        envlog_compact_opts o;
        envlog_compact_opts_from(&o, &c);
        o.reason = why;
        (void)envlog_compact_x(env, &o, NULL);
    }
    envlog_env_close(env);
}

static envlog_err maybe_compact(envlog_env *env, int want)
{
    if (!env || env->readonly || env->no_upkeep || want < 0)
        return ENVLOG_OK;
    envlog_upkeep u;
    envlog_err e = envlog_upkeep_get(env, &u);
    if (e || !u.config_ok || !u.due || (!u.config.auto_compact && want == 0))
        return e;
    /* Another compaction runs: it will find what this one would. */
    int lk = envlog_io_get()->openat(env->dirfd, "LOCK", O_RDONLY, 0);
    if (lk >= 0) {
        bool busy = flock(lk, LOCK_EX | LOCK_NB) != 0;
        if (!busy)
            flock(lk, LOCK_UN);
        close(lk);
        if (busy)
            return ENVLOG_OK;
    }
    char why[160];
    snprintf(why, sizeof why,
             "automatic: %" PRIu64 " sessions and %" PRIu64 " bytes not compacted, %" PRIu64
             " bytes in all", u.pending_sessions, u.pending_bytes, u.bytes);
    envlog_run_detached(env, compact_here, why);
    return ENVLOG_OK;
}

void envlog_run_detached(envlog_env *env, void (*fn)(const char *path, void *arg), void *arg)
{
    pid_t pid = fork();
    if (pid < 0)
        return; /* the next session end tries again */
    if (pid == 0) {
        /* The middle process: its child is the worker, adopted by init
         * as soon as this one exits. */
        pid_t c = fork();
        if (c != 0)
            _exit(0);
        setsid();
        /* Nothing of the program's but the environment's path: its
         * descriptors (sockets, pipes) close here, so the worker never
         * keeps them open behind its back. */
        long max = sysconf(_SC_OPEN_MAX);
        for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
            close(fd);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            if (null > 2)
                close(null);
        }
        fn(env->path, arg);
        _exit(0);
    }
    /* The middle process exits at once; reaping it keeps no zombie. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

envlog_err envlog_session_end(envlog_session *s)
{
    if (!s)
        return ENVLOG_OK;
    envlog_env *env = envlog_session_env(s);
    /* The remotes' automatic push (sessend.c), then upkeep. */
    int want;
    envlog_err e = envlog_session_finish(s, &want);
    (void)maybe_compact(env, want);
    return e;
}
