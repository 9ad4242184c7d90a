/* SPDX-License-Identifier: MIT */
/*
 * install.c - the local side of a pull: downloaded sessions checked and put
 * in place.
 *
 * A downloaded session is never trusted: its segments are written into a
 * staging directory (ENV/remotes/incoming/PID.RANDOM/ID/), read back by the
 * log's own reader (every fragment checksum, each HEADER against its name,
 * the chain, the SEAL), and only then renamed into sessions/, which no
 * reader sees half done.  What a killed pull leaves in incoming/ is removed
 * by the next one.
 *
 * The sessions of one pull are staged without a sync and put in place
 * together (envlog_install_commit(), every ENVLOG_REMOTE_INSTALL_BATCH
 * sessions and at the end): every staged file is synced, then every staged
 * directory, then each is renamed into sessions/, which is synced once.  A
 * session is still visible only once all of it is on the disk, and a pull
 * of many sessions pays for its syncs about once (on a journaling file
 * system the first sync commits what the others would have) instead of
 * three times a session.
 */
#include "remote_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tree_ctx {
    int fd;
    int depth;
} tree_ctx;

static void remove_tree(int parent, const char *name, int depth);

static envlog_err remove_in_tree(void *ctx, const char *name)
{
    tree_ctx *t = ctx;
    struct stat st;
    if (t->depth > 0 && !envlog_io_get()->fstatat(t->fd, name, &st) && S_ISDIR(st.st_mode))
        remove_tree(t->fd, name, t->depth - 1);
    else
        envlog_io_get()->unlinkat(t->fd, name, 0);
    return ENVLOG_OK;
}

/* Removes directory `name` under `parent` with what lies in it, two levels
 * deep (incoming/PID.RANDOM/ID/segments); best effort, the next pull
 * tries again. */
static void remove_tree(int parent, const char *name, int depth)
{
    const envlog_io *io = envlog_io_get();
    int fd;
    if (envlog_open_dir(parent, name, &fd)) {
        io->unlinkat(parent, name, 0);
        return;
    }
    tree_ctx t = {fd, depth};
    (void)envlog_dir_each(fd, name, remove_in_tree, &t);
    io->close(fd);
    io->unlinkat(parent, name, AT_REMOVEDIR);
}

/* Opens ENV/remotes/incoming, made if missing. */
static envlog_err incoming_open(envlog_env *env, int *fd)
{
    int rfd;
    envlog_err e = envlog_remotes_dir(env, true, &rfd);
    if (e)
        return e;
    if (envlog_io_get()->mkdirat(rfd, "incoming", 0700) && errno != EEXIST) {
        e = envlog__fail_errno(errno, "creating %s/remotes/incoming", env->path);
        close(rfd);
        return e;
    }
    e = envlog_open_dir(rfd, "incoming", fd);
    close(rfd);
    return e;
}

/* Staging directories whose pull is gone, at most 32 a time. */
typedef struct gone {
    char names[32][48];
    size_t n;
} gone;

static envlog_err note_gone(void *ctx, const char *name)
{
    gone *g = ctx;
    char *end;
    long pid = strtol(name, &end, 10);
    if (pid <= 0 || *end != '.' || strlen(name) >= sizeof g->names[0])
        return ENVLOG_OK;
    if (kill((pid_t)pid, 0) && errno == ESRCH)
        memcpy(g->names[g->n++], name, strlen(name) + 1); /* fits: checked */
    return g->n < 32 ? ENVLOG_OK : ENVLOG_END;
}

/* Removes what pulls that are gone left in incoming/. */
static void incoming_clean(int infd)
{
    gone g;
    g.n = 0;
    (void)envlog_dir_each(infd, "remotes/incoming", note_gone, &g);
    for (size_t i = 0; i < g.n; i++)
        remove_tree(infd, g.names[i], 1);
}

/* The log's reader over a staging directory: an environment handle whose
 * sessions/ is that directory, nothing else. */
static envlog_err read_staged(int stagefd, const envlog_rmanifest *m)
{
    envlog_env fake;
    char path[] = "remotes/incoming";
    memset(&fake, 0, sizeof fake);
    fake.path = path;
    fake.dirfd = -1;
    fake.sessions_fd = stagefd;
    fake.readonly = true;
    envlog_reader *r;
    envlog_err e = envlog_reader_open(&fake, &m->session, &r);
    if (e)
        return envlog__fail(ENVLOG_BAD_DATA, "it does not open as a session: %s",
                            envlog_errmsg());
    const envlog_record *rec;
    uint64_t records = 0;
    bool first_ok = false;
    while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK) {
        if (records == 0)
            first_ok = rec->kind == ENVLOG_KIND_SESSION &&
                       !memcmp(rec->u.session.id.b, m->session.b, 16);
        records++;
    }
    envlog_session_state st = envlog_reader_state(r);
    if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
        const envlog_damage *d = envlog_reader_damage(r);
        e = envlog__fail(ENVLOG_BAD_DATA, "it does not read as a whole session: segment %u at "
                         "offset %llu: %s", (unsigned)d->segment, (unsigned long long)d->offset,
                         d->reason);
    } else if (e == ENVLOG_END && st != ENVLOG_STATE_SEALED) {
        e = envlog__fail(ENVLOG_BAD_DATA, "it is %s, not a sealed session",
                         envlog_session_state_name(st));
    } else if (e == ENVLOG_END && (!first_ok || records != m->records)) {
        e = envlog__fail(ENVLOG_BAD_DATA, "its records are not the ones its manifest names "
                         "(%llu read, %llu listed)", (unsigned long long)records,
                         (unsigned long long)m->records);
    } else if (e == ENVLOG_END) {
        e = ENVLOG_OK;
    }
    envlog_reader_close(r);
    return e;
}

/* This pull's staging directory, made at its first session (a pull that
 * takes nothing makes none). */
static envlog_err stage_open(envlog_install *in)
{
    const envlog_io *io = envlog_io_get();
    envlog_err e;
    if (in->infd < 0) {
        if ((e = incoming_open(in->env, &in->infd)))
            return e;
        incoming_clean(in->infd);
    }
    envlog_id128 rnd;
    if ((e = envlog_id_new(&rnd)))
        return e;
    snprintf(in->stage, sizeof in->stage, "%ld.%02x%02x%02x%02x%02x%02x", (long)getpid(),
             rnd.b[10], rnd.b[11], rnd.b[12], rnd.b[13], rnd.b[14], rnd.b[15]);
    if (io->mkdirat(in->infd, in->stage, 0700))
        e = envlog__fail_errno(errno, "creating %s/remotes/incoming/%s", in->env->path,
                               in->stage);
    else if ((e = envlog_open_dir(in->infd, in->stage, &in->stagefd)))
        io->unlinkat(in->infd, in->stage, AT_REMOVEDIR);
    /* Nothing half made: the next session tries again from the start. */
    if (e)
        in->stage[0] = 0;
    return e;
}

/* Writes one staged file, unsynced: the commit syncs it.  Its writeback
 * starts now, so that sync finds little left to do. */
static envlog_err stage_file(int dirfd, const char *name, const envlog_buf *b)
{
    const envlog_io *io = envlog_io_get();
    envlog_out o;
    envlog_err e = envlog_out_open(&o, dirfd, name);
    if (e)
        return e;
    if (!(e = envlog_out_write(&o, b->p, b->len)) && io->writeback)
        (void)io->writeback(o.fd, 0, (off_t)b->len);
    io->close(o.fd);
    if (e)
        io->unlinkat(dirfd, name, 0);
    return e;
}

void envlog_install_begin(envlog_env *env, envlog_install *in)
{
    memset(in, 0, sizeof *in);
    in->env = env;
    in->infd = in->stagefd = -1;
}

envlog_err envlog_install_stage(envlog_install *in, const envlog_rmanifest *m,
                                const envlog_buf *data)
{
    const envlog_io *io = envlog_io_get();
    envlog_err e = ENVLOG_OK;
    if (in->stagefd < 0 && (e = stage_open(in)))
        return e;
    if (in->n == in->cap) {
        size_t cap = in->cap ? 2 * in->cap : 16;
        envlog_staged *v = envlog_realloc(in->v, cap * sizeof *v);
        if (!v)
            return envlog__fail(ENVLOG_NOMEM, "pulling a session");
        in->v = v;
        in->cap = cap;
    }
    char hex[33];
    envlog_id_format(&m->session, hex);
    int sfd;
    if (io->mkdirat(in->stagefd, hex, 0700))
        return envlog__fail_errno(errno, "creating a staging directory");
    uint64_t bytes = 0;
    if (!(e = envlog_open_dir(in->stagefd, hex, &sfd))) {
        for (size_t i = 0; !e && i < m->n_segs; i++) {
            e = stage_file(sfd, m->segs[i].name, &data[i]);
            bytes += data[i].len;
        }
        close(sfd);
    }
    if (!e)
        e = read_staged(in->stagefd, m);
    if (e) {
        remove_tree(in->stagefd, hex, 0);
        return e;
    }
    in->v[in->n++] = (envlog_staged){m->session, bytes};
    return ENVLOG_OK;
}

/* A directory whose files are synced, and the first error met. */
typedef struct sync_ctx {
    int fd;
    envlog_err e;
} sync_ctx;

static envlog_err sync_file(void *ctx, const char *name)
{
    const envlog_io *io = envlog_io_get();
    sync_ctx *c = ctx;
    int fd = io->openat(c->fd, name, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0 || io->fsync(fd))
        c->e = envlog__fail_errno(errno, "syncing a downloaded segment %s", name);
    if (fd >= 0)
        io->close(fd);
    return c->e;
}

/* Syncs the files of staged session `hex` (`dir` false), or its directory. */
static envlog_err sync_staged(int stagefd, const char *hex, bool dir)
{
    sync_ctx c = {-1, ENVLOG_OK};
    envlog_err e = envlog_open_dir(stagefd, hex, &c.fd);
    if (e)
        return e;
    if (dir)
        e = envlog_dir_sync(c.fd, "a downloaded session");
    else if (!(e = envlog_dir_each(c.fd, "a downloaded session", sync_file, &c)))
        e = c.e;
    close(c.fd);
    return e;
}

envlog_err envlog_install_commit(envlog_install *in, envlog_install_fn fn, void *ctx)
{
    if (!in->n)
        return ENVLOG_OK;
    const envlog_io *io = envlog_io_get();
    envlog_env *env = in->env;
    char hex[33];
    /* 1 in place, 2 there already (another pull put it there meanwhile). */
    uint8_t *how = envlog_calloc(in->n, 1);
    envlog_err e = how ? ENVLOG_OK : envlog__fail(ENVLOG_NOMEM, "pulling");
    /* Every file, then every directory: all on the disk before any is
     * renamed into sight. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; !e && i < in->n; i++) {
            envlog_id_format(&in->v[i].id, hex);
            e = sync_staged(in->stagefd, hex, pass == 1);
        }
    if (!e)
        e = envlog_env_mark_format(env);
    size_t placed = 0;
    for (size_t i = 0; !e && i < in->n; i++) {
        envlog_id_format(&in->v[i].id, hex);
        if (!io->renameat(in->stagefd, hex, env->sessions_fd, hex)) {
            how[i] = 1;
            placed++;
        } else if (errno == EEXIST || errno == ENOTEMPTY) {
            how[i] = 2;
        } else {
            e = envlog__fail_errno(errno, "putting session %s in place", hex);
        }
    }
    envlog_err se = placed ? envlog_dir_sync(env->sessions_fd, "sessions") : ENVLOG_OK;
    for (size_t i = 0; how && i < in->n; i++) {
        if (how[i] != 1) {
            envlog_id_format(&in->v[i].id, hex);
            remove_tree(in->stagefd, hex, 0);
        }
        if (how[i] && (how[i] == 2 || !se))
            fn(ctx, &in->v[i], how[i] == 1);
    }
    envlog_free(how);
    in->n = 0;
    return e ? e : se;
}

void envlog_install_end(envlog_install *in)
{
    if (in->stagefd >= 0)
        close(in->stagefd);
    if (in->stage[0])
        remove_tree(in->infd, in->stage, 1);
    if (in->infd >= 0)
        close(in->infd);
    envlog_free(in->v);
    memset(in, 0, sizeof *in);
    in->infd = in->stagefd = -1;
}

bool envlog_session_known(envlog_env *env, envlog_snap *snap, envlog_snap *prev,
                          const envlog_id128 *id)
{
    char hex[33];
    envlog_id_format(id, hex);
    struct stat st;
    if (env->sessions_fd >= 0 && !envlog_io_get()->fstatat(env->sessions_fd, hex, &st))
        return true;
    uint64_t wm;
    return (snap && envlog_snap_watermark(snap, id, &wm)) ||
           (prev && envlog_snap_watermark(prev, id, &wm));
}
