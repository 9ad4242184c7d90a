/* SPDX-License-Identifier: MIT */
/*
 * repair.c - the one repair envlog makes, and only when asked: cutting the
 * torn tail of a session whose writer is gone.  The segment is first copied
 * byte for byte to <name>.broken, synced, and only then truncated, so
 * nothing is ever deleted silently.  A live session is never touched: the
 * repair holds the session's lock while it works.
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* True when `name` under `dirfd` holds exactly `data`. */
static bool same_file(int dirfd, const char *name, const envlog_buf *data)
{
    envlog_buf b = {0};
    bool same = envlog_read_file(dirfd, name, data->len, &b) == ENVLOG_OK &&
                b.len == data->len && !memcmp(b.p, data->p, b.len);
    envlog_buf_free(&b);
    return same;
}

/* Keeps the copy as <name>.broken.  A repair that failed after making it
 * (or an earlier repair of other bytes) left that name taken: the copy it
 * holds is used when it is this one, else the next free <name>.broken.N,
 * so a failed repair can always be run again and no copy is overwritten. */
static envlog_err copy_broken(int dirfd, const char *name, const envlog_buf *data,
                              char *out, size_t size)
{
    envlog_err e = envlog__fail(ENVLOG_IO, "%s: no free name for a .broken copy", name);
    for (int k = 0; k < 100; k++) {
        if (k)
            snprintf(out, size, "%s.broken.%d", name, k);
        else
            snprintf(out, size, "%s.broken", name);
        struct stat st;
        if (envlog_io_get()->fstatat(dirfd, out, &st) == 0) {
            if (S_ISREG(st.st_mode) && same_file(dirfd, out, data))
                return envlog_dir_sync(dirfd, out);
            continue;
        }
        e = envlog_write_new_file(dirfd, out, data->p, data->len);
        if (!e && (e = envlog_dir_sync(dirfd, out)))
            envlog_io_get()->unlinkat(dirfd, out, 0);
        return e;
    }
    return e;
}

envlog_err envlog_session_repair(envlog_env *env, const envlog_id128 *id,
                                 envlog_repair *out)
{
    const envlog_io *io = envlog_io_get();
    memset(out, 0, sizeof *out);
    if (env->readonly)
        return envlog__fail(ENVLOG_WRONG_STATE, "environment %s is open read-only", env->path);
    char name[33];
    envlog_id_format(id, name);
    int dirfd;
    envlog_err e = envlog_open_dir(env->sessions_fd, name, &dirfd);
    if (e)
        return e;
    /* A writer never comes back to a session it left, so once no writer
     * holds the lock the session cannot grow; the lock is taken below only
     * to keep two repairs apart. */
    if (envlog_session_dir_live(dirfd)) {
        close(dirfd);
        return envlog__fail(ENVLOG_BUSY, "session %s is live: its writer holds the lock",
                            name);
    }
    envlog_reader *r = NULL;
    envlog_buf data = {0};
    envlog_damage torn = {0};
    bool have_torn = false, other = false;
    if ((e = envlog_reader_open(env, id, &r)))
        goto out;
    const envlog_record *rec;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (e == ENVLOG_TRUNCATED) {
            torn = *envlog_reader_damage(r);
            have_torn = true;
        } else if (e == ENVLOG_CORRUPT) {
            other = true;
        } else if (e) {
            goto out;
        }
    }
    e = ENVLOG_OK;
    if (!have_torn) {
        snprintf(out->why, sizeof out->why, "%s",
                 other ? "damage other than a torn tail: not repaired automatically"
                       : "no torn tail");
        goto out;
    }
    char seg[40] = "";
    envlog_seg_name *segs;
    size_t n;
    if ((e = envlog_list_segments(dirfd, &segs, &n)))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (segs[i].segment == torn.segment)
            memcpy(seg, segs[i].name, sizeof seg);
    envlog_free(segs);
    if (!seg[0]) {
        e = envlog__fail(ENVLOG_NOT_FOUND, "segment %u of session %s vanished",
                         torn.segment, name);
        goto out;
    }
    if (envlog_flock_within(dirfd, LOCK_EX, 100)) {
        e = errno == EWOULDBLOCK
                ? envlog__fail(ENVLOG_BUSY, "session %s is being repaired elsewhere", name)
                : envlog__fail_errno(errno, "locking session %s", name);
        goto out;
    }
    if ((e = envlog_read_file(dirfd, seg, (uint64_t)ENVLOG_SEGMENT_MAX * 2, &data)))
        goto out;
    if ((e = copy_broken(dirfd, seg, &data, out->broken, sizeof out->broken)))
        goto out;
    int fd;
    if ((e = envlog_open_regular(dirfd, seg, O_WRONLY, 0, &fd, NULL)))
        goto out;
    if (io->ftruncate(fd, (off_t)torn.offset))
        e = envlog__fail_errno(errno, "truncating %s", seg);
    else if (io->fsync(fd))
        e = envlog__fail_errno(errno, "syncing %s", seg);
    io->close(fd);
    if (!e) {
        out->repaired = true;
        out->segment = torn.segment;
        out->cut_at = torn.offset;
        out->bytes_removed = data.len - torn.offset;
        if (other)
            snprintf(out->why, sizeof out->why,
                     "other damage remains: not repaired automatically");
    }
out:
    envlog_buf_free(&data);
    envlog_reader_close(r);
    close(dirfd); /* releases the lock */
    return e;
}
