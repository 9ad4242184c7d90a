/* SPDX-License-Identifier: MIT */
/*
 * files.c - the file helpers the log and replay modules share: opening a
 * file only when it is what it claims (a regular file, never a symbolic
 * link, never a FIFO that would block the open), reading one whole,
 * writing one whole and durably, temporary names that never collide and
 * that a later run can tell stale, directories opened and synced, and locks
 * taken without waiting on an instant's holder.
 *
 * Everything goes through the I/O table, whose opens already refuse to
 * follow a symbolic link (O_NOFOLLOW), so fault injection reaches it all.
 */
#include "log_int.h"

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
#include <time.h>
#include <unistd.h>

const char *envlog_file_type_name(mode_t mode)
{
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

/* The open of envlog_open_regular() and what its failure says. */
static envlog_err open_named(int dirfd, const char *name, int flags, mode_t mode, int *fd)
{
    struct stat tmp;
    /* O_NONBLOCK: opening a FIFO planted where a file should be returns at
     * once instead of waiting for a writer; on a regular file it changes
     * nothing. */
    int f = *fd = envlog_io_get()->openat(dirfd, name, flags | O_NONBLOCK, mode);
    if (f < 0) {
        int err = errno;
        if (err == ELOOP)
            return envlog__fail(ENVLOG_PERMISSION, "%s is a symbolic link; refused", name);
        if (err == ENXIO || err == EISDIR || err == ENOTDIR) {
            if (envlog_io_get()->fstatat(dirfd, name, &tmp) == 0)
                return envlog__fail(ENVLOG_BAD_DATA, "%s is %s, not a regular file", name,
                                    envlog_file_type_name(tmp.st_mode));
        }
        return envlog__fail_errno(err, "opening %s", name);
    }
    return ENVLOG_OK;
}

/* What a descriptor of `name` is when it is not a regular file. */
static envlog_err not_regular(const char *name, const struct stat *st)
{
    return envlog__fail(ENVLOG_BAD_DATA, "%s is %s, not a regular file", name,
                        envlog_file_type_name(st->st_mode));
}

envlog_err envlog_open_regular(int dirfd, const char *name, int flags, mode_t mode,
                               int *fd, struct stat *st)
{
    const envlog_io *io = envlog_io_get();
    struct stat tmp;
    if (!st)
        st = &tmp;
    /* The type is checked on the descriptor, so what was opened is what
     * was checked. */
    int f;
    envlog_err e = open_named(dirfd, name, flags, mode, &f);
    *fd = -1;
    if (e)
        return e;
    if (io->fstat(f, st)) {
        int err = errno;
        io->close(f);
        return envlog__fail_errno(err, "stat %s", name);
    }
    if (!S_ISREG(st->st_mode)) {
        io->close(f);
        return not_regular(name, st);
    }
    *fd = f;
    return ENVLOG_OK;
}

envlog_err envlog_read_small(int dirfd, const char *name, size_t max, envlog_buf *out)
{
    const envlog_io *io = envlog_io_get();
    out->len = 0;
    int fd;
    envlog_err e = envlog_buf_reserve(out, max + 2);
    if (e || (e = open_named(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0, &fd)))
        return e;
    int err = 0;
    while (out->len <= max) {
        size_t want = max + 1 - out->len;
        ssize_t r = io->pread(fd, out->p + out->len, want, (off_t)out->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            err = r < 0 ? errno : 0;
            break;
        }
        out->len += (size_t)r;
        if ((size_t)r < want)
            break; /* a regular file's end */
    }
    /* Nothing read, too much, or a failed read: the descriptor says why
     * (not a regular file, larger than max), else the read does. */
    struct stat st;
    if (err || !out->len || out->len > max) {
        if (io->fstat(fd, &st))
            e = envlog__fail_errno(errno, "stat %s", name);
        else if (!S_ISREG(st.st_mode))
            e = not_regular(name, &st);
        else if (out->len > max)
            e = envlog__fail(ENVLOG_TOO_BIG, "%s is %" PRIu64 " bytes, over %zu", name,
                             (uint64_t)st.st_size, max);
        else if (err)
            e = envlog__fail_errno(err, "reading %s", name);
    }
    io->close(fd);
    return e;
}

int envlog_pread_full(int fd, void *buf, size_t n, off_t off)
{
    const envlog_io *io = envlog_io_get();
    size_t got = 0;
    while (got < n) {
        ssize_t r = io->pread(fd, (uint8_t *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (!r)
                errno = EIO; /* the file is shorter than it was */
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

envlog_err envlog_read_file(int dirfd, const char *name, uint64_t max,
                            envlog_buf *out)
{
    const envlog_io *io = envlog_io_get();
    out->len = 0;
    int fd;
    struct stat st;
    envlog_err e = envlog_open_regular(dirfd, name, O_RDONLY, 0, &fd, &st);
    if (e)
        return e;
    if ((uint64_t)st.st_size > max) {
        e = envlog__fail(ENVLOG_TOO_BIG, "%s is %" PRIu64 " bytes, over %" PRIu64,
                         name, (uint64_t)st.st_size, max);
    } else if (!(e = envlog_buf_reserve(out, (size_t)st.st_size + 1))) {
        size_t want = (size_t)st.st_size;
        while (out->len < want) {
            ssize_t r = io->pread(fd, out->p + out->len, want - out->len,
                                  (off_t)out->len);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                e = envlog__fail_errno(errno, "reading %s", name);
                break;
            }
            if (r == 0)
                break; /* shrank while read: use what is there */
            out->len += (size_t)r;
        }
    }
    io->close(fd);
    return e;
}

envlog_err envlog_out_open(envlog_out *o, int dirfd, const char *name)
{
    return envlog_out_open_mode(o, dirfd, name, 0600);
}

envlog_err envlog_out_open_mode(envlog_out *o, int dirfd, const char *name, unsigned mode)
{
    memset(o, 0, sizeof *o);
    o->dirfd = dirfd;
    snprintf(o->name, sizeof o->name, "%s", name);
    o->fd = envlog_io_get()->openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, (mode_t)mode);
    if (o->fd < 0)
        return envlog__fail_errno(errno, "creating %s", name);
    return ENVLOG_OK;
}

envlog_err envlog_pwrite_all(int fd, const void *data, size_t n, uint64_t off,
                             const char *name)
{
    const envlog_io *io = envlog_io_get();
    const uint8_t *p = data;
    size_t done = 0;
    while (done < n) {
        ssize_t w = io->pwrite(fd, p + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return envlog__fail_errno(w < 0 ? errno : ENOSPC, "writing %s", name);
        done += (size_t)w;
    }
    return ENVLOG_OK;
}

envlog_err envlog_out_write(envlog_out *o, const void *data, size_t n)
{
    envlog_err e = envlog_pwrite_all(o->fd, data, n, o->off, o->name);
    if (!e)
        o->off += n;
    return e;
}

envlog_err envlog_out_close(envlog_out *o, bool keep)
{
    const envlog_io *io = envlog_io_get();
    envlog_err e = ENVLOG_OK;
    if (o->fd < 0)
        return ENVLOG_OK;
    if (keep && io->fsync(o->fd))
        e = envlog__fail_errno(errno, "syncing %s", o->name);
    io->close(o->fd);
    o->fd = -1;
    if (!keep || e)
        io->unlinkat(o->dirfd, o->name, 0);
    return e;
}

envlog_err envlog_write_new_file(int dirfd, const char *name, const void *data, size_t n)
{
    return envlog_write_new_file_mode(dirfd, name, data, n, 0600);
}

envlog_err envlog_write_new_file_mode(int dirfd, const char *name, const void *data, size_t n,
                                      unsigned mode)
{
    envlog_out o;
    envlog_err e = envlog_out_open_mode(&o, dirfd, name, mode);
    if (e)
        return e;
    e = envlog_out_write(&o, data, n);
    envlog_err c = envlog_out_close(&o, !e);
    return e ? e : c;
}

/* ------------------------------------------------ directories and locks */

envlog_err envlog_open_dir(int dirfd, const char *name, int *fd)
{
    *fd = envlog_io_get()->openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
    if (*fd < 0) {
        int err = errno;
        if (err == ENOTDIR || err == ELOOP) {
            struct stat st;
            if (envlog_io_get()->fstatat(dirfd, name, &st) == 0) {
                if (S_ISLNK(st.st_mode))
                    return envlog__fail(ENVLOG_PERMISSION,
                                        "%s is a symbolic link; refused", name);
                return envlog__fail(ENVLOG_BAD_DATA, "%s is %s, not a directory", name,
                                    envlog_file_type_name(st.st_mode));
            }
        }
        return envlog__fail_errno(err, "opening directory %s", name);
    }
    return ENVLOG_OK;
}

envlog_err envlog_dir_sync(int fd, const char *what)
{
    if (envlog_io_get()->fsync(fd))
        return envlog__fail_errno(errno, "syncing directory of %s", what);
    return ENVLOG_OK;
}

int envlog_flock_within(int fd, int op, unsigned ms)
{
    const envlog_io *io = envlog_io_get();
    /* 1 ms apart: a probe holds a lock for microseconds. */
    for (unsigned waited = 0;;) {
        if (io->flock(fd, op | LOCK_NB) == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK || waited >= ms)
            return -1;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        waited++;
    }
}

/* ------------------------------------------------------- temporary names */

#define TMP_MARK ".tmp."

envlog_err envlog_tmp_name(char *out, size_t size, const char *base)
{
    envlog_id128 r;
    envlog_err e = envlog_id_new(&r);
    if (e)
        return e;
    int n = snprintf(out, size, "%s" TMP_MARK "%ld.%02x%02x%02x%02x%02x%02x", base,
                     (long)getpid(), r.b[10], r.b[11], r.b[12], r.b[13], r.b[14], r.b[15]);
    if (n < 0 || (size_t)n >= size)
        return envlog__fail(ENVLOG_TOO_BIG, "a temporary name for %s is too long", base);
    return ENVLOG_OK;
}

typedef struct tmp_clean_ctx {
    int dirfd;
    const char *base;
} tmp_clean_ctx;

static envlog_err clean_one(void *ctx, const char *name)
{
    tmp_clean_ctx *c = ctx;
    if (envlog_tmp_is_stale(c->dirfd, name, c->base))
        envlog_io_get()->unlinkat(c->dirfd, name, 0);
    return ENVLOG_OK;
}

void envlog_tmp_clean(int dirfd, const char *base)
{
    /* Best effort: what is left is cleaned the next time. */
    tmp_clean_ctx c = {dirfd, base};
    (void)envlog_dir_each(dirfd, base, clean_one, &c);
}

bool envlog_tmp_is_stale(int dirfd, const char *name, const char *base)
{
    size_t bl = strlen(base), ml = strlen(TMP_MARK);
    if (strncmp(name, base, bl) || strncmp(name + bl, TMP_MARK, ml))
        return false;
    char *end;
    long pid = strtol(name + bl + ml, &end, 10);
    if (end == name + bl + ml || *end != '.' || strlen(end + 1) != 12 || pid <= 0)
        return false;
    /* Its maker is gone (on this machine), and it is not new: a file of
     * another machine's process on a shared file system is left a while. */
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return false;
    struct stat st;
    if (envlog_io_get()->fstatat(dirfd, name, &st) || !S_ISREG(st.st_mode))
        return false;
    return time(NULL) - st.st_mtime > 60;
}
