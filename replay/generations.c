/* SPDX-License-Identifier: MIT */
/*
 * generations.c - the snapshot files of an environment and which one a
 * reader stands on.
 *
 * snapshot/current is the newest generation; snapshot/previous is the one
 * current was built on, kept together with every session directory it does
 * not cover, so that losing current (a flipped bit, a cut, a file replaced
 * by something else) loses nothing: previous and those sessions fold to
 * the same state.  Readers use current when it reads; when it does not,
 * they say so and use previous.  Compaction (compact.c) moves the
 * generations on; `envlog verify --fix` (snapcheck.c) restores previous.
 */
#include "replay_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* snapshot/NAME opened the way every file of an environment is (a regular
 * file, no symbolic link on the way): the error names what was wrong. */
static envlog_err open_generation(envlog_env *env, const char *name, int *fd, struct stat *st)
{
    const envlog_io *io = envlog_io_get();
    /* The common cases in one call (a directory and a close fewer): the file
     * there and regular, or nothing there. */
    char path[64];
    snprintf(path, sizeof path, "snapshot/%s", name);
    *fd = io->openat(env->dirfd, path, O_RDONLY | O_NONBLOCK, 0);
    if (*fd < 0 && errno == ENOENT)
        return ENVLOG_NOT_FOUND;
    if (*fd >= 0 && !io->fstat(*fd, st) && S_ISREG(st->st_mode))
        return ENVLOG_OK;
    if (*fd >= 0)
        io->close(*fd);
    /* Anything else, step by step, for an error that names its place. */
    int dfd;
    envlog_err e = envlog_open_dir(env->dirfd, "snapshot", &dfd);
    if (e == ENVLOG_BAD_DATA)
        return envlog__fail(ENVLOG_CORRUPT, "%s", envlog_errmsg());
    if (e)
        return e;
    e = envlog_open_regular(dfd, name, O_RDONLY, 0, fd, st);
    close(dfd);
    if (e == ENVLOG_BAD_DATA)
        return envlog__fail(ENVLOG_CORRUPT, "snapshot/%s", envlog_errmsg());
    if (e == ENVLOG_PERMISSION)
        return envlog__fail(ENVLOG_PERMISSION, "snapshot/%s", envlog_errmsg());
    return e;
}

envlog_err envlog_snap_map_file(envlog_env *env, const char *name, bool check_all,
                                envlog_snap **out)
{
    const envlog_io *io = envlog_io_get();
    *out = NULL;
    int fd;
    struct stat st;
    envlog_err e = open_generation(env, name, &fd, &st);
    if (e == ENVLOG_NOT_FOUND)
        return ENVLOG_OK;
    if (e)
        return e;
    if (st.st_size == 0) {
        io->close(fd);
        return envlog__fail(ENVLOG_CORRUPT, "snapshot/%s is empty", name);
    }
    size_t len = (size_t)st.st_size;
    /* Snapshots are replaced by rename, never rewritten in place, so a
     * mapping stays whole for as long as it is held.  A full check reads
     * the mapping; lookups read by pread, and the first walk maps the file
     * (envlog_snap_next): mapping and unmapping a file cost a lookup as
     * much as two of its reads. */
    void *map = NULL;
    if (check_all && (map = io->mmap(len, PROT_READ, fd)) == MAP_FAILED) {
        int err = errno;
        io->close(fd);
        return envlog__fail_errno(err, "mapping snapshot/%s", name);
    }
#ifdef MADV_POPULATE_READ
    /* Read whole: its pages mapped in one call, not a fault for each few
     * (a hint: errors ignored). */
    if (map)
        (void)madvise(map, len, MADV_POPULATE_READ);
#endif
    envlog_snap *s;
    if ((e = envlog_snap_load_fd(map, len, fd, check_all, &s))) {
        if (map)
            io->munmap(map, len);
        if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
            return e; /* not the file's fault */
        return envlog__fail(ENVLOG_CORRUPT, "snapshot/%s: %s", name, envlog_errmsg());
    }
    if (map)
        envlog_snap_own_map(s, map, len);
    *out = s;
    return ENVLOG_OK;
}

envlog_err envlog_snap_map(envlog_env *env, envlog_snap **out)
{
    return envlog_snap_map_file(env, "current", false, out);
}

typedef struct reporter {
    void (*fn)(void *ctx, const envlog_damage *d, bool torn);
    void *ctx;
} reporter;

static void say(const reporter *r, envlog_damage_file file, const envlog_id128 *id,
                uint64_t off, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void say(const reporter *r, envlog_damage_file file, const envlog_id128 *id,
                uint64_t off, uint64_t bytes, const char *fmt, ...)
{
    if (!r->fn)
        return;
    envlog_damage d;
    memset(&d, 0, sizeof d);
    if (id)
        d.session = *id;
    d.offset = off;
    d.bytes = bytes;
    d.file = file;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d.reason, sizeof d.reason, fmt, ap);
    va_end(ap);
    r->fn(r->ctx, &d, false);
}

/* Every damage a full read of `s` found, and what it costs. */
static void say_walk(const reporter *r, const envlog_snap *s, envlog_damage_file file)
{
    const envlog_damage *v;
    size_t n = envlog_snap_damages(s, &v);
    envlog_id128 id = envlog_snap_id(s);
    for (size_t i = 0; i < n; i++) {
        envlog_damage d = v[i];
        d.file = file;
        if (r->fn)
            r->fn(r->ctx, &d, false);
    }
    uint64_t bad = envlog_snap_bad_records(s);
    if (bad > n)
        say(r, file, &id, 0, 0, "%llu more damaged places", (unsigned long long)(bad - n));
    envlog_snap_counts c;
    if (envlog_snap_read_counts(s, &c) && (c.lost || !c.content_ok))
        say(r, file, &id, 0, 0, "%llu of its entries lost%s", (unsigned long long)c.lost,
            c.content_ok ? "" : "; its content hash does not match");
}

/* Whether a loaded snapshot may be stood on whole. */
static bool whole(const envlog_snap *s, bool check_all)
{
    envlog_snap_counts c;
    return !check_all || (envlog_snap_read_counts(s, &c) && c.intact);
}

envlog_err envlog_snap_pick(envlog_env *env, bool check_all,
                            void (*on_damage)(void *ctx, const envlog_damage *d, bool torn),
                            void *ctx, envlog_snap **out, int *gen)
{
    reporter r = {on_damage, ctx};
    *out = NULL;
    *gen = ENVLOG_GEN_NONE;
    envlog_snap *cur = NULL, *prev = NULL;
    envlog_err e = envlog_snap_map_file(env, "current", check_all, &cur);
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
        return e;
    bool cur_bad = e != ENVLOG_OK;
    if (cur_bad)
        say(&r, ENVLOG_DAMAGE_SNAPSHOT, NULL, 0, 0, "%.95s", envlog_errmsg());
    else if (cur && !whole(cur, check_all)) {
        cur_bad = true;
        say_walk(&r, cur, ENVLOG_DAMAGE_SNAPSHOT);
    }
    if (cur && !cur_bad) {
        *out = cur;
        *gen = ENVLOG_GEN_CURRENT;
        return ENVLOG_OK;
    }
    e = envlog_snap_map_file(env, "previous", check_all, &prev);
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO) {
        envlog_snap_unmap(cur);
        return e;
    }
    if (e) {
        say(&r, ENVLOG_DAMAGE_PREVIOUS, NULL, 0, 0, "%.95s", envlog_errmsg());
    } else if (prev && !whole(prev, check_all)) {
        say_walk(&r, prev, ENVLOG_DAMAGE_PREVIOUS);
        envlog_snap_unmap(prev);
        prev = NULL;
    }
    if (prev) {
        /* With every session it does not cover, the generation before
         * gives the whole state. */
        if (!cur_bad) /* current is missing */
            say(&r, ENVLOG_DAMAGE_SNAPSHOT, NULL, 0, 0,
                "snapshot/current is missing; the generation before it is used");
        else
            say(&r, ENVLOG_DAMAGE_SNAPSHOT, NULL, 0, 0,
                "snapshot/current is damaged; the generation before it is used");
        envlog_snap_unmap(cur);
        *out = prev;
        *gen = ENVLOG_GEN_PREVIOUS;
        return ENVLOG_OK;
    }
    if (cur) {
        *out = cur; /* what is left of it */
        *gen = ENVLOG_GEN_CURRENT;
    }
    return ENVLOG_OK;
}
