/* SPDX-License-Identifier: MIT */
/*
 * io.c - the I/O function table and its POSIX implementation.
 *
 * Nothing in envlog calls open(2), write(2) or fdatasync(2) directly: it asks
 * this table, so the fault-injection and power-loss tests can replace any
 * call (Redis' rio and SQLite's VFS in miniature).
 */
#include "core_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#else
#undef SYS_openat2
#endif

static int px_open(const char *path, int flags, mode_t mode)
{
    return open(path, flags | O_CLOEXEC | O_NOFOLLOW, mode);
}
/* A name of several components ("snapshot/current") under a directory,
 * one component at a time, none of them a symbolic link or "..": what
 * openat2's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS do where the kernel has
 * no openat2 (before Linux 5.6) or a filter refuses it. */
int envlog_openat_walk(int dirfd, const char *path, int flags, mode_t mode)
{
    char part[256];
    int at = dirfd;
    for (;;) {
        const char *slash = strchr(path, '/');
        size_t len = slash ? (size_t)(slash - path) : strlen(path);
        if (len >= sizeof part || (len == 2 && !memcmp(path, "..", 2))) {
            if (at != dirfd)
                close(at);
            errno = len >= sizeof part ? ENAMETOOLONG : EXDEV;
            return -1;
        }
        memcpy(part, path, len);
        part[len] = 0;
        int fd = slash ? openat(at, part, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
                       : openat(at, part, flags | O_CLOEXEC | O_NOFOLLOW, mode);
        int err = errno;
        struct stat st;
        /* O_DIRECTORY | O_NOFOLLOW on a link says ENOTDIR; openat2, ELOOP. */
        if (fd < 0 && slash && err == ENOTDIR && !fstatat(at, part, &st, AT_SYMLINK_NOFOLLOW) &&
            S_ISLNK(st.st_mode))
            err = ELOOP;
        if (at != dirfd)
            close(at);
        if (fd < 0 || !slash) {
            errno = err;
            return fd;
        }
        at = fd;
        path = slash + 1;
    }
}

/* Whether a component of `path` is "..". */
static bool up_a_level(const char *path)
{
    for (const char *c = path; (c = strstr(c, "..")); c += 2)
        if ((c == path || c[-1] == '/') && (!c[2] || c[2] == '/'))
            return true;
    return false;
}

static int px_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    if (dirfd == AT_FDCWD || *path == '/' || !strchr(path, '/'))
        return openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW, mode);
    if (up_a_level(path)) /* as the walk does */
        return errno = EXDEV, -1;
#ifdef SYS_openat2
    /* One call where a walk costs a call per component (and a close). */
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
        .mode = flags & (O_CREAT | O_TMPFILE) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
    };
    int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM && errno != E2BIG && errno != EINVAL))
        return fd;
#endif
    return envlog_openat_walk(dirfd, path, flags, mode);
}
static int px_close(int fd) { return close(fd); }
static ssize_t px_pread(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off);
}
static ssize_t px_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite(fd, buf, n, off);
}
static int px_fsync(int fd) { return fdatasync(fd); }
static int px_ftruncate(int fd, off_t len) { return ftruncate(fd, len); }
static int px_fallocate(int fd, off_t off, off_t len)
{
    return posix_fallocate(fd, off, len);
}
static void *px_mmap(size_t len, int prot, int fd)
{
    return mmap(NULL, len, prot, MAP_SHARED, fd, 0);
}
static int px_munmap(void *p, size_t len) { return munmap(p, len); }
static int px_msync(void *p, size_t len) { return msync(p, len, MS_SYNC); }
static int px_mkdirat(int dirfd, const char *path, mode_t mode)
{
    return mkdirat(dirfd, path, mode);
}
static int px_renameat(int od, const char *op, int nd, const char *np)
{
    return renameat(od, op, nd, np);
}
static int px_linkat(int od, const char *op, int nd, const char *np)
{
    return linkat(od, op, nd, np, 0);
}

static int px_unlinkat(int dirfd, const char *path, int flags)
{
    return unlinkat(dirfd, path, flags);
}
static int px_flock(int fd, int op) { return flock(fd, op); }
static int px_fstat(int fd, struct stat *st) { return fstat(fd, st); }
static int px_writeback(int fd, off_t off, off_t len)
{
    return sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE);
}
static int px_fstatat(int dirfd, const char *path, struct stat *st)
{
    return fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW);
}
/* A listing read by getdents64 straight into a buffer of its own: what
 * fdopendir() adds (an fstat and two fcntl calls a listing) is most of a
 * short listing's cost. */
typedef struct px_dir {
    int fd;
    bool own;
    size_t pos, len;
    char buf[32768];
} px_dir;

static void *px_opendir(int dirfd, bool through)
{
    px_dir *d = envlog_malloc(sizeof *d);
    if (!d) {
        errno = ENOMEM;
        return NULL;
    }
    d->pos = d->len = 0;
    d->own = !through;
    d->fd = through ? dirfd : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->fd < 0) {
        int err = errno;
        envlog_free(d);
        errno = err;
        return NULL;
    }
    return d;
}
static int px_readdir(void *dir, const char **name)
{
    px_dir *d = dir;
    for (;;) {
        if (d->pos >= d->len) {
            ssize_t n = getdents64(d->fd, d->buf, sizeof d->buf);
            if (n <= 0)
                return n < 0 ? -1 : 0;
            d->len = (size_t)n;
            d->pos = 0;
        }
        struct dirent64 *de = (struct dirent64 *)(void *)(d->buf + d->pos);
        d->pos += de->d_reclen;
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            *name = de->d_name;
            return 1;
        }
    }
}
static void px_closedir(void *dir)
{
    px_dir *d = dir;
    if (d->own)
        close(d->fd);
    envlog_free(d);
}

static const envlog_io posix_io = {
    .open = px_open,
    .openat = px_openat,
    .close = px_close,
    .pread = px_pread,
    .pwrite = px_pwrite,
    .fsync = px_fsync,
    .ftruncate = px_ftruncate,
    .fallocate = px_fallocate,
    .mmap = px_mmap,
    .munmap = px_munmap,
    .msync = px_msync,
    .mkdirat = px_mkdirat,
    .renameat = px_renameat,
    .linkat = px_linkat,
    .unlinkat = px_unlinkat,
    .flock = px_flock,
    .fstat = px_fstat,
    .writeback = px_writeback,
    .fstatat = px_fstatat,
    .opendir = px_opendir,
    .readdir = px_readdir,
    .closedir = px_closedir,
};

static const envlog_io *current = &posix_io;

uint64_t envlog_page_size(void)
{
    static _Atomic uint64_t page;
    uint64_t p = page;
    if (!p) {
        long v = sysconf(_SC_PAGESIZE);
        page = p = v > 0 ? (uint64_t)v : 4096;
    }
    return p;
}

const envlog_io *envlog_io_get(void) { return current; }
const envlog_io *envlog_io_posix(void) { return &posix_io; }
void envlog_io_set(const envlog_io *io) { current = io ? io : &posix_io; }

static envlog_err dir_each(int dirfd, bool through, const char *what,
                           envlog_err (*fn)(void *ctx, const char *name), void *ctx)
{
    const envlog_io *io = current;
    void *d = io->opendir(dirfd, through);
    if (!d)
        return envlog__fail_errno(errno, "listing %s", what);
    envlog_err e = ENVLOG_OK;
    const char *name;
    int rc = 0;
    while (!e && (rc = io->readdir(d, &name)) > 0)
        e = fn(ctx, name);
    if (!e && rc < 0)
        e = envlog__fail_errno(errno, "listing %s", what);
    io->closedir(d);
    return e == ENVLOG_END ? ENVLOG_OK : e;
}

envlog_err envlog_dir_each(int dirfd, const char *what,
                           envlog_err (*fn)(void *ctx, const char *name), void *ctx)
{
    return dir_each(dirfd, false, what, fn, ctx);
}

envlog_err envlog_dir_each_through(int fd, const char *what,
                                   envlog_err (*fn)(void *ctx, const char *name), void *ctx)
{
    return dir_each(fd, true, what, fn, ctx);
}
