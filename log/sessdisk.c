/* SPDX-License-Identifier: MIT */
/*
 * sessdisk.c - a session on disk: its directory, made at its first CHANGED
 * record with the session record and the held records in order, its
 * segments (each record framed into the mapped one, rotating when it is
 * full), and the flush and close that make them durable.
 *
 * The directory is the session's own (mkdir makes it) and is held with an
 * exclusive lock while the session writes, so a reader can tell a live
 * session from one that ended.
 */
#include "session_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* A failed rotation leaves no segment open; the next record tries again. */
envlog_err envlog_session_put(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq)
{
    envlog_err e;
    if (s->seg.fd >= 0 && !envlog_segw_fits(&s->seg, n) &&
        (e = envlog_segw_seal(&s->seg)))
        return e;
    if (s->seg.fd < 0) {
        envlog_segw next;
        if ((e = envlog_segw_create(&next, s->dirfd, &s->id, s->seg.segment + 1,
                                    seq, s->seg.chain,
                                    envlog_segw_size_for(s->seg_size, n),
                                    "session", s->sync, s->batched)))
            return e;
        s->seg = next;
        s->st.segments++;
    }
    uint64_t before = s->seg.pos;
    if ((e = envlog_segw_append(&s->seg, p, n, seq)))
        return e;
    s->st.written++;
    s->st.bytes += s->seg.pos - before;
    return ENVLOG_OK;
}

/* The opening goes when `all` since the span will close with a record of
 * its own.  An entry leaves the list only once written. */
envlog_err envlog_session_write_held(envlog_session *s, bool all)
{
    while (s->held_count) {
        size_t at = s->held_head;
        if (envlog_held_is_opening(s, at) && !all && s->held_bytes <= s->budget)
            return ENVLOG_OK;
        envlog_err e = envlog_session_put(s, s->held.p + at + ENVLOG_HELD_HDR,
                                          envlog_held_len(s, at), envlog_held_seq(s, at));
        if (e)
            return e;
        envlog_held_pop(s);
    }
    return ENVLOG_OK;
}

/* The session record as it stands now. */
static void session_rec_of(const envlog_session *s, envlog_session_rec *out)
{
    envlog_session_rec r = {
        .id = s->id,
        .start_unix_ns = s->start_unix,
        .envlog_version = ENVLOG_VERSION_STRING,
        .runtime = s->runtime,
        .runtime_version = s->runtime_version,
        .label = s->label,
        .host = s->host,
        .pid = (uint64_t)s->pid,
        .os = s->uts.sysname,
        .arch = s->uts.machine,
        .devices = (const char *const *)s->devices,
        .n_devices = s->n_devices,
        .process_mode = s->process_mode,
        .level = s->level,
        .dropped = s->dropped,
    };
    *out = r;
}

/* Encodes the session record into `b` (the caller frees it). */
static envlog_err encode_session_record(envlog_session *s, envlog_buf *b)
{
    envlog_session_rec r;
    session_rec_of(s, &r);
    envlog_stamp st = {s->id, 0, 0};
    return envlog_event_encode(b, ENVLOG_KIND_SESSION, &st,
                               envlog_effect_of(ENVLOG_KIND_SESSION, &r), s->level, &r);
}

/* On failure everything created is removed again. */
envlog_err envlog_session_go_disk(envlog_session *s)
{
    const envlog_io *io = envlog_io_get();
    char name[33];
    envlog_err e;
    envlog_buf srec = {0};
    envlog_id_format(&s->id, name);
    if (s->env->sessions_fd < 0)
        return envlog__fail(ENVLOG_WRONG_STATE, "environment has no sessions directory");
    /* Memory first: once the directory exists, a failure must undo it, and
     * an undo that itself runs out of memory would leave it behind. */
    if ((e = encode_session_record(s, &srec)) || (e = envlog_env_mark_format(s->env))) {
        envlog_buf_free(&srec);
        return e;
    }
    if (io->mkdirat(s->env->sessions_fd, name, 0700)) {
        envlog_buf_free(&srec);
        return envlog__fail_errno(errno, "creating session directory %s", name);
    }
    if ((e = envlog_open_dir(s->env->sessions_fd, name, &s->dirfd)))
        goto rmdir;
    /* The directory is this session's own (mkdir made it): only a reader
     * looking whether it is live can hold its lock, for an instant. */
    if (envlog_flock_within(s->dirfd, LOCK_EX, 1000)) {
        e = envlog__fail_errno(errno, "locking session %s", name);
        goto closedir;
    }
    if (s->sync != ENVLOG_SYNC_NONE &&
        (e = envlog_dir_sync(s->env->sessions_fd, name)))
        goto closedir;
    if ((e = envlog_segw_create(&s->seg, s->dirfd, &s->id, 0, 0, 0,
                                envlog_segw_size_for(s->seg_size, s->scratch.len),
                                "session", s->sync, s->batched)))
        goto closedir;
    s->on_disk = true;
    s->st.segments = 1;
    if ((e = envlog_session_put(s, srec.p, srec.len, 0)))
        goto undo;
    /* Open spans' openings too: the spans will close with records of their
     * own, after the records that follow them here. */
    for (size_t at = s->held_head; at < s->held.len;
         at += ENVLOG_HELD_HDR + envlog_held_len(s, at))
        if ((e = envlog_session_put(s, s->held.p + at + ENVLOG_HELD_HDR,
                                    envlog_held_len(s, at), envlog_held_seq(s, at))))
            goto undo;
    envlog_held_clear(s);
    /* The records held until now reached the live state as they came;
     * their session record reaches it now, as it reached the log. */
    envlog_session_rec r;
    session_rec_of(s, &r);
    envlog_stamp st0 = {s->id, 0, 0};
    envlog_session_hand_out(s, ENVLOG_KIND_SESSION, &st0,
                            envlog_effect_of(ENVLOG_KIND_SESSION, &r), &r, &srec);
    envlog_buf_free(&srec);
    return ENVLOG_OK;
undo:
    /* Remove every segment written so far: the session never reached the
     * disk as far as any reader is concerned. */
    {
        envlog_seg_name *segs;
        size_t n;
        envlog_segw_abandon(&s->seg);
        if (envlog_list_segments(s->dirfd, &segs, &n) == ENVLOG_OK) {
            for (size_t i = 0; i < n; i++)
                io->unlinkat(s->dirfd, segs[i].name, 0);
            envlog_free(segs);
        } else {
            io->unlinkat(s->dirfd, s->seg.name, 0); /* at least the last */
        }
        s->on_disk = false;
        s->st.segments = 0;
        s->st.written = s->st.bytes = 0;
    }
closedir:
    close(s->dirfd);
    s->dirfd = -1;
rmdir:
    envlog_buf_free(&srec);
    io->unlinkat(s->env->sessions_fd, name, AT_REMOVEDIR);
    return e;
}

envlog_err envlog_session_close_disk(envlog_session *s)
{
    if (!s->on_disk)
        return ENVLOG_OK;
    /* What waits behind spans never closed goes first, their openings
     * with it: they opened, and their seqs are taken. */
    envlog_err e = envlog_session_write_held(s, true);
    envlog_err se = envlog_segw_seal(&s->seg);
    e = e ? e : se;
    if (!e && s->sync != ENVLOG_SYNC_NONE)
        e = envlog_dir_sync(s->dirfd, "session directory");
    close(s->dirfd); /* releases the writer's lock */
    s->dirfd = -1;
    s->on_disk = false;
    return e;
}

/* Under ENVLOG_SYNC_NONE nothing was synced when earlier segments were
 * sealed, nor the session directory's entry when it was made: a flush must
 * sync them too, or it would promise records a power loss still takes. */
static envlog_err sync_unsynced(envlog_session *s)
{
    const envlog_io *io = envlog_io_get();
    envlog_seg_name *segs;
    size_t n;
    envlog_err e = envlog_list_segments(s->dirfd, &segs, &n);
    for (size_t i = 0; !e && i < n; i++) {
        /* The open segment is synced by the caller; with none open (a
         * rotation failed) the last one sealed needs it too. */
        uint32_t end = s->seg.fd >= 0 ? s->seg.segment : s->seg.segment + 1;
        if (segs[i].segment < s->flushed_seg || segs[i].segment >= end)
            continue;
        int fd;
        if (!(e = envlog_open_regular(s->dirfd, segs[i].name, O_RDONLY, 0, &fd, NULL))) {
            if (io->fsync(fd))
                e = envlog__fail_errno(errno, "syncing segment %s", segs[i].name);
            io->close(fd);
        }
    }
    envlog_free(segs);
    if (!e)
        e = envlog_dir_sync(s->env->sessions_fd, "sessions directory");
    return e;
}

envlog_err envlog_session_flush(envlog_session *s)
{
    pthread_mutex_lock(&s->mu);
    envlog_err e = envlog_session_fork_check(s);
    if (!e && s->on_disk) {
        if (s->sync == ENVLOG_SYNC_NONE)
            e = sync_unsynced(s);
        if (!e)
            e = envlog_segw_sync(&s->seg);
        if (!e)
            e = envlog_dir_sync(s->dirfd, "session directory");
        if (!e)
            s->flushed_seg = s->seg.fd >= 0 ? s->seg.segment : s->seg.segment + 1;
    }
    pthread_mutex_unlock(&s->mu);
    return e;
}

envlog_err envlog_session_close(envlog_session *s)
{
    if (!s)
        return ENVLOG_OK;
    pthread_mutex_lock(&s->mu);
    envlog_err e = ENVLOG_OK;
    if (s->pid == getpid())
        e = envlog_session_close_disk(s);
    else if (s->on_disk) {
        envlog_segw_abandon(&s->seg);
        close(s->dirfd);
        s->dirfd = -1;
        s->on_disk = false;
    }
    pthread_mutex_unlock(&s->mu);
    /* Among the live sessions until its directory's lock is let go: a fork
     * by another thread meanwhile waits for the mutex, and its child finds
     * nothing to let go of; out of the list first, the child would have
     * kept the lock (and the session "live" to every reader) for as long
     * as it held its copy of the descriptor. */
    envlog_session_live_remove(s);
    envlog_session_free(s);
    return e;
}
