/* SPDX-License-Identifier: MIT */
/*
 * envdir.c - the environment directory: its format marker, its layout, its
 * lock, and the listing of its sessions and their segments (the file
 * helpers they use are in files.c).
 *
 * Layout: FORMAT (the marker), sessions/<id>/ (one per session that changed
 * something), snapshot/ and LOCK (compaction).  Everything below the root is
 * opened relative to a directory descriptor with O_NOFOLLOW, so nothing is
 * ever read or written through a symbolic link planted inside.
 */
#include "log_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MARKER "FORMAT"
#define MARKER_PREFIX "envlog environment format "

envlog_err envlog_env_default_path(char *out, size_t size)
{
    const char *d = getenv("ENVLOG_DIR");
    int n;
    if (d && *d)
        n = snprintf(out, size, "%s", d);
    else if ((d = getenv("XDG_CACHE_HOME")) && *d)
        n = snprintf(out, size, "%s/envlog/default", d);
    else if ((d = getenv("HOME")) && *d)
        n = snprintf(out, size, "%s/.cache/envlog/default", d);
    else
        return envlog__fail(ENVLOG_NOT_FOUND,
                            "no environment: set ENVLOG_DIR or HOME");
    if (n < 0 || (size_t)n >= size)
        return envlog__fail(ENVLOG_TOO_BIG, "environment path too long");
    return ENVLOG_OK;
}

/* Shared: wait (an exclusive holder only renames and unlinks).
 * Exclusive: try for about a second, then let the caller skip. */
static int lock_fd(int fd, bool exclusive)
{
    const envlog_io *io = envlog_io_get();
    int r;
    while ((r = exclusive ? envlog_flock_within(fd, LOCK_EX, 1000) : io->flock(fd, LOCK_SH)) &&
           errno == EINTR)
        ;
    return r;
}

envlog_err envlog_env_lock(envlog_env *env, bool exclusive, int *fd)
{
    const envlog_io *io = envlog_io_get();
    int r = 0;
    *fd = -1;
    if (!exclusive) {
        pthread_mutex_lock(&env->lock_mu);
        if (env->readers || !(r = lock_fd(env->dirfd, false))) {
            env->readers++;
            *fd = ENVLOG_LOCK_SHARED;
        }
        pthread_mutex_unlock(&env->lock_mu);
    } else if ((*fd = io->openat(env->dirfd, ".", O_RDONLY | O_DIRECTORY, 0)) < 0) {
        return envlog__fail_errno(errno, "opening %s to lock it", env->path);
    } else if ((r = lock_fd(*fd, true))) {
        int err = errno;
        io->close(*fd);
        *fd = -1;
        errno = err;
    }
    if (r == 0)
        return ENVLOG_OK;
    return errno == EWOULDBLOCK ? envlog__fail(ENVLOG_BUSY, "%s is being read", env->path)
                                : envlog__fail_errno(errno, "locking %s", env->path);
}

void envlog_env_unlock(envlog_env *env, int fd)
{
    const envlog_io *io = envlog_io_get();
    if (fd == ENVLOG_LOCK_SHARED) {
        pthread_mutex_lock(&env->lock_mu);
        if (env->readers && !--env->readers)
            io->flock(env->dirfd, LOCK_UN);
        pthread_mutex_unlock(&env->lock_mu);
    } else if (fd >= 0) {
        io->close(fd); /* releases the lock */
    }
}

bool envlog_session_dir_live(int fd)
{
    const envlog_io *io = envlog_io_get();
    if (io->flock(fd, LOCK_SH | LOCK_NB) == 0) {
        io->flock(fd, LOCK_UN);
        return false;
    }
    return errno == EWOULDBLOCK;
}

static int seg_cmp(const void *a, const void *b)
{
    const envlog_seg_name *x = a, *y = b;
    return x->segment < y->segment ? -1 : x->segment > y->segment;
}

/* A growing array of what a listing keeps. */
typedef struct listing {
    void *v;
    size_t n, cap, size;
    const char *what;
} listing;

static envlog_err listing_add(listing *l, const void *item)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        void *p = envlog_realloc(l->v, cap * l->size);
        if (!p)
            return envlog__fail(ENVLOG_NOMEM, "listing %s", l->what);
        l->v = p;
        l->cap = cap;
    }
    memcpy((char *)l->v + l->n++ * l->size, item, l->size);
    return ENVLOG_OK;
}

static envlog_err add_id(void *ctx, const char *name)
{
    envlog_id128 id;
    if (strlen(name) != 32 || envlog_id_parse(name, &id))
        return ENVLOG_OK;
    return listing_add(ctx, &id);
}

envlog_err envlog_session_ids(envlog_env *env, envlog_id128 **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (env->sessions_fd < 0)
        return ENVLOG_OK;
    char what[4200];
    snprintf(what, sizeof what, "%s/sessions", env->path);
    listing l = {NULL, 0, 0, sizeof **ids, "sessions"};
    /* The first listing reads through the handle's own descriptor, opened
     * for it; the others each on a descriptor of their own. */
    envlog_err e = __atomic_exchange_n(&env->sessions_unread, false, __ATOMIC_ACQ_REL)
                       ? envlog_dir_each_through(env->sessions_fd, what, add_id, &l)
                       : envlog_dir_each(env->sessions_fd, what, add_id, &l);
    if (e) {
        envlog_free(l.v);
        return e;
    }
    *ids = l.v;
    *n = l.n;
    return ENVLOG_OK;
}

static envlog_err add_segment(void *ctx, const char *name)
{
    envlog_seg_name sn;
    uint32_t seg;
    uint64_t first;
    char tail[8];
    if (strlen(name) != 29 ||
        sscanf(name, "%8" SCNu32 "-%16" SCNu64 "%4s", &seg, &first, tail) != 3 ||
        strcmp(tail, ".log"))
        return ENVLOG_OK;
    envlog_seg_name_format(sn.name, seg, first);
    if (strcmp(sn.name, name))
        return ENVLOG_OK;
    sn.segment = seg;
    sn.first_seq = first;
    return listing_add(ctx, &sn);
}

envlog_err envlog_list_segments(int dirfd, envlog_seg_name **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    listing l = {NULL, 0, 0, sizeof **out, "segments"};
    envlog_err e = envlog_dir_each(dirfd, "segments", add_segment, &l);
    if (e) {
        envlog_free(l.v);
        return e;
    }
    *out = l.v;
    *n = l.n;
    if (*n)
        qsort(*out, *n, sizeof **out, seg_cmp);
    return ENVLOG_OK;
}

/* ------------------------------------------------------------ environment */

static envlog_err mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return envlog__fail(ENVLOG_INVALID_ARG, "bad environment path");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        if (envlog_io_get()->mkdirat(AT_FDCWD, buf, 0700) && errno != EEXIST)
            return envlog__fail_errno(errno, "creating %s", buf);
        buf[i] = c;
    }
    return ENVLOG_OK;
}

/* Writes the marker under a name of its own, then gives it the name FORMAT
 * with link(2), which never replaces a file: of several processes creating
 * one environment at once, exactly one marker wins and the others find it
 * there (*lost).  No process ever sees a half-written marker. */
/* Writes the marker under a name of its own, synced, then gives it the
 * name FORMAT: with link(2) when creating (`replace` false), which never
 * replaces a file, so of several processes creating one environment at
 * once exactly one marker wins and the others find it there (*lost); with
 * rename(2) when a format 1 marker gives way to this format's.  No process
 * ever sees a half-written marker. */
static envlog_err put_marker(int dirfd, bool replace, bool *lost)
{
    const envlog_io *io = envlog_io_get();
    char text[64], tmp[96];
    int len = snprintf(text, sizeof text, MARKER_PREFIX "%d\n", ENVLOG_FORMAT_VERSION);
    *lost = false;
    envlog_err e = envlog_tmp_name(tmp, sizeof tmp, MARKER);
    if (e)
        return e;
    int fd = io->openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return envlog__fail_errno(errno, "creating " MARKER);
    ssize_t w = io->pwrite(fd, text, (size_t)len, 0);
    if (w != len)
        e = envlog__fail_errno(w < 0 ? errno : ENOSPC, "writing " MARKER);
    else if (io->fsync(fd))
        e = envlog__fail_errno(errno, "syncing " MARKER);
    io->close(fd);
    if (!e && replace && io->renameat(dirfd, tmp, dirfd, MARKER))
        e = envlog__fail_errno(errno, "replacing " MARKER);
    else if (!e && !replace && io->linkat(dirfd, tmp, dirfd, MARKER)) {
        if (errno == EEXIST)
            *lost = true;
        else
            e = envlog__fail_errno(errno, "naming " MARKER);
    }
    if (e || !replace)
        io->unlinkat(dirfd, tmp, 0);
    if (!e && !*lost)
        e = envlog_dir_sync(dirfd, MARKER);
    return e;
}

static envlog_err write_marker(int dirfd, bool *lost)
{
    return put_marker(dirfd, false, lost);
}

/* Stops at the first entry that is not a marker being written. */
static envlog_err not_a_marker(void *ctx, const char *name)
{
    if (!strncmp(name, MARKER ".tmp", strlen(MARKER ".tmp")))
        return ENVLOG_OK;
    *(bool *)ctx = false;
    return ENVLOG_END;
}

/* Whether the directory holds nothing but markers being written. */
static envlog_err dir_is_empty(envlog_env *env, bool *empty)
{
    *empty = true;
    return envlog_dir_each(env->dirfd, env->path, not_a_marker, empty);
}

static envlog_err read_marker(envlog_env *env, envlog_buf *b)
{
    envlog_err e = envlog_read_small(env->dirfd, MARKER, 4096, b);
    if (e == ENVLOG_BAD_DATA || e == ENVLOG_PERMISSION || e == ENVLOG_TOO_BIG)
        e = envlog__fail(ENVLOG_FORMAT, "%s/%s", env->path, envlog_errmsg());
    return e;
}

static envlog_err check_marker(envlog_env *env, unsigned flags)
{
    envlog_buf b = {0};
    envlog_err e = read_marker(env, &b);
    /* A marker being made by another process at this moment is either not
     * there yet or whole: a few rounds settle who made it. */
    for (int round = 0; e == ENVLOG_NOT_FOUND && round < 8; round++) {
        if (!(flags & ENVLOG_OPEN_CREATE) || env->readonly)
            break;
        bool empty;
        if ((e = dir_is_empty(env, &empty)))
            break;
        if (!empty) {
            /* Something is there: maybe the environment another process
             * just finished making. */
            if ((e = read_marker(env, &b)) == ENVLOG_NOT_FOUND)
                break;
            continue;
        }
        bool lost;
        if ((e = write_marker(env->dirfd, &lost)))
            break;
        if (!lost) {
            envlog_buf_free(&b);
            env->format = ENVLOG_FORMAT_VERSION;
            return ENVLOG_OK;
        }
        e = read_marker(env, &b);
    }
    if (e == ENVLOG_NOT_FOUND) {
        envlog_buf_free(&b);
        return envlog__fail(ENVLOG_FORMAT,
                            "%s is not an envlog environment (no " MARKER " marker)",
                            env->path);
    }
    if (e) {
        envlog_buf_free(&b);
        return e;
    }
    b.p[b.len] = 0;
    int version = 0;
    size_t pl = strlen(MARKER_PREFIX);
    if (b.len <= pl || memcmp(b.p, MARKER_PREFIX, pl) ||
        sscanf((const char *)b.p + pl, "%d", &version) != 1 || version < 1)
        e = envlog__fail(ENVLOG_FORMAT, "%s/" MARKER " is not an envlog format marker",
                         env->path);
    else if (version > ENVLOG_FORMAT_VERSION)
        e = envlog__fail(ENVLOG_FORMAT,
                         "%s has environment format %d; this envlog reads format %d and older",
                         env->path, version, ENVLOG_FORMAT_VERSION);
    env->format = version;
    envlog_buf_free(&b);
    return e;
}

envlog_err envlog_env_mark_format(envlog_env *env)
{
    /* Sessions of one handle may begin on several threads at once: each
     * may replace the marker, with the same bytes. */
    if (__atomic_load_n(&env->format, __ATOMIC_ACQUIRE) >= ENVLOG_FORMAT_VERSION)
        return ENVLOG_OK;
    if (env->readonly)
        return envlog__fail(ENVLOG_WRONG_STATE, "%s is open read-only", env->path);
    bool lost;
    envlog_err e = put_marker(env->dirfd, true, &lost);
    if (e)
        return envlog__fail(e, "%s: marking the environment format %d: %s", env->path,
                            ENVLOG_FORMAT_VERSION, envlog_errmsg());
    __atomic_store_n(&env->format, ENVLOG_FORMAT_VERSION, __ATOMIC_RELEASE);
    return ENVLOG_OK;
}

void (*envlog_env_open_hook)(envlog_env *env, bool asked);

envlog_err envlog_env_open(const char *path, unsigned flags, envlog_env **out)
{
    char def[4096];
    envlog_err e;
    *out = NULL;
    if (!path) {
        if ((e = envlog_env_default_path(def, sizeof def)))
            return e;
        path = def;
    }
    if (!*path)
        return envlog__fail(ENVLOG_INVALID_ARG, "empty environment path");
    if ((flags & ENVLOG_OPEN_PULL) && (flags & ENVLOG_OPEN_READONLY))
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "ENVLOG_OPEN_PULL writes: not with ENVLOG_OPEN_READONLY");
    envlog_env *env = envlog_calloc(1, sizeof *env);
    if (!env)
        return envlog__fail(ENVLOG_NOMEM, "opening environment");
    env->dirfd = env->sessions_fd = -1;
    pthread_mutex_init(&env->state_mu, NULL);
    pthread_mutex_init(&env->lock_mu, NULL);
    env->readonly = flags & ENVLOG_OPEN_READONLY;
    env->no_upkeep = flags & ENVLOG_OPEN_NO_UPKEEP;
    if (!(env->path = envlog_strdup(path))) {
        e = envlog__fail(ENVLOG_NOMEM, "opening environment");
        goto fail;
    }
    if ((flags & ENVLOG_OPEN_CREATE) && !env->readonly && (e = mkdir_p(path)))
        goto fail;
    env->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (env->dirfd < 0) {
        e = envlog__fail_errno(errno, "opening environment %s", path);
        goto fail;
    }
    if ((e = check_marker(env, flags)))
        goto fail;
    if (!env->readonly && envlog_io_get()->mkdirat(env->dirfd, "sessions", 0700) &&
        errno != EEXIST) {
        e = envlog__fail_errno(errno, "creating %s/sessions", path);
        goto fail;
    }
    e = envlog_open_dir(env->dirfd, "sessions", &env->sessions_fd);
    env->sessions_unread = !e;
    if (e == ENVLOG_NOT_FOUND && env->readonly)
        e = ENVLOG_OK; /* an environment with no session yet */
    if (e)
        goto fail;
    bool asked = flags & ENVLOG_OPEN_PULL;
    if (envlog_env_open_hook && !env->readonly && (!env->no_upkeep || asked))
        envlog_env_open_hook(env, asked);
    *out = env;
    return ENVLOG_OK;
fail:
    envlog_env_close(env);
    return e;
}

void envlog_env_close(envlog_env *env)
{
    if (!env)
        return;
    if (env->state_free)
        env->state_free(env->state);
    pthread_mutex_destroy(&env->state_mu);
    pthread_mutex_destroy(&env->lock_mu);
    if (env->sessions_fd >= 0)
        close(env->sessions_fd);
    if (env->dirfd >= 0)
        close(env->dirfd);
    envlog_free(env->path);
    envlog_free(env);
}

const char *envlog_env_path(const envlog_env *env)
{
    return env->path;
}

int envlog_env_format(const envlog_env *env)
{
    return __atomic_load_n(&env->format, __ATOMIC_ACQUIRE);
}
