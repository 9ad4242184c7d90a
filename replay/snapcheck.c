/* SPDX-License-Identifier: MIT */
/*
 * snapcheck.c - `envlog verify` for snapshots: both generations read whole,
 * what the current one lost named against the generation before, and the
 * repair that puts a whole generation back (`verify --fix`).
 *
 * A damaged file is never deleted: it is set aside as
 * snapshot/current.broken (or .broken.N), a name readers ignore.
 */
#include "replay_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct check_ctx {
    void (*on_damage)(void *ctx, const envlog_damage *d, bool torn);
    void (*on_lost)(void *ctx, const envlog_entry *e);
    void *ctx;
    envlog_damage_file file;
} check_ctx;

/* Reads snapshot/`name` whole into *f, reporting each damaged place. */
static envlog_err check_file(envlog_env *env, const char *name, envlog_damage_file file,
                             const check_ctx *c, envlog_snapshot_file *f)
{
    memset(f, 0, sizeof *f);
    int dfd;
    struct stat st;
    envlog_err e = envlog_open_dir(env->dirfd, "snapshot", &dfd);
    if (e == ENVLOG_NOT_FOUND)
        return ENVLOG_OK;
    if (!e) {
        f->present = envlog_io_get()->fstatat(dfd, name, &st) == 0;
        if (f->present)
            f->bytes = (uint64_t)st.st_size;
        close(dfd);
        if (!f->present)
            return ENVLOG_OK;
    } else if (e == ENVLOG_NOMEM) {
        return e;
    }
    envlog_snap *s = NULL;
    if (!e)
        e = envlog_snap_map_file(env, name, true, &s);
    if (e == ENVLOG_NOMEM || (e == ENVLOG_IO && f->present))
        return e;
    if (e || !s) {
        f->present = true;
        snprintf(f->problem, sizeof f->problem, "%s", e ? envlog_errmsg() : "it vanished");
        if (c->on_damage) {
            envlog_damage d = {.file = file};
            snprintf(d.reason, sizeof d.reason, "%.95s", f->problem);
            c->on_damage(c->ctx, &d, false);
        }
        return ENVLOG_OK;
    }
    const envlog_snap_manifest *m = envlog_snap_manifest_get(s);
    envlog_snap_counts n;
    envlog_snap_read_counts(s, &n);
    f->readable = true;
    f->intact = n.intact;
    f->id = envlog_snap_id(s);
    f->entries = m->tunes + m->kernels + m->users;
    f->entries_read = n.tunes + n.kernels + n.users;
    f->evidence = m->evidence;
    f->evidence_read = n.evidence;
    f->sessions = m->n_wms;
    f->damaged = envlog_snap_bad_records(s);
    const envlog_damage *v;
    size_t k = envlog_snap_damages(s, &v);
    for (size_t i = 0; i < k && c->on_damage; i++) {
        envlog_damage d = v[i];
        d.file = file;
        c->on_damage(c->ctx, &d, false);
    }
    if (!n.intact) {
        const envlog_damage *first = envlog_snap_first_damage(s);
        snprintf(f->problem, sizeof f->problem,
                 "%llu of %llu entries read, %llu damaged places%s%s%.60s",
                 (unsigned long long)f->entries_read, (unsigned long long)f->entries,
                 (unsigned long long)f->damaged, n.content_ok ? "" : ", content hash wrong",
                 first ? ", the first: " : "", first ? first->reason : "");
    }
    envlog_snap_unmap(s);
    return ENVLOG_OK;
}

typedef struct lost_ctx {
    envlog_state *damaged;
    const check_ctx *c;
    uint64_t lost;
} lost_ctx;

/* An entry of the whole state that the damaged one lacks or holds
 * otherwise (another record set it) is lost. */
static envlog_err note_lost(void *ctx, const envlog_entry *e)
{
    lost_ctx *l = ctx;
    bool same;
    if (e->tune) {
        envlog_tune_entry t;
        same = envlog_state_winner(l->damaged, e->tune->ns, e->tune->key, e->tune->checksum,
                                   &t) == ENVLOG_OK &&
               !memcmp(&t.stamp.session, &e->tune->stamp.session, 16) &&
               t.stamp.seq == e->tune->stamp.seq;
    } else {
        envlog_kernel_entry k;
        same = envlog_state_kernel(l->damaged, e->kernel->ns, &e->kernel->kernel_key, &k) ==
                   ENVLOG_OK &&
               !memcmp(&k.stamp.session, &e->kernel->stamp.session, 16) &&
               k.stamp.seq == e->kernel->stamp.seq;
    }
    if (!same) {
        l->lost++;
        if (l->c->on_lost)
            l->c->on_lost(l->c->ctx, e);
    }
    return ENVLOG_OK;
}

envlog_err envlog_snapshot_check(envlog_env *env,
                                 void (*on_damage)(void *ctx, const envlog_damage *d,
                                                   bool torn),
                                 void (*on_lost)(void *ctx, const envlog_entry *e),
                                 void *ctx, envlog_snapshot_report *out)
{
    memset(out, 0, sizeof *out);
    if (!env)
        return envlog__fail(ENVLOG_INVALID_ARG, "no environment");
    check_ctx c = {on_damage, on_lost, ctx, ENVLOG_DAMAGE_SNAPSHOT};
    envlog_err e = check_file(env, "current", ENVLOG_DAMAGE_SNAPSHOT, &c, &out->current);
    if (!e)
        e = check_file(env, "previous", ENVLOG_DAMAGE_PREVIOUS, &c, &out->previous);
    if (e || out->current.intact || !out->current.present || !out->previous.intact)
        return e;
    /* What the whole state holds that current and the sessions do not. */
    envlog_state *whole = NULL, *damaged = NULL;
    if ((e = envlog_state_open_on(env, NULL, "previous", &whole)))
        return e;
    e = envlog_state_open_on(env, NULL, "current", &damaged);
    if (e == ENVLOG_CORRUPT || e == ENVLOG_PERMISSION)
        e = envlog_state_new(&damaged); /* nothing of it reads: all is lost */
    if (!e) {
        lost_ctx l = {damaged, &c, 0};
        e = envlog_state_each(whole, note_lost, &l);
        out->lost = l.lost;
        out->lost_known = !e;
    }
    envlog_state_close(damaged);
    envlog_state_close(whole);
    return e;
}

/* Sets snapshot/`name` aside under a .broken name of its own. */
static envlog_err set_aside(int snapfd, const char *name, char *kept, size_t size)
{
    const envlog_io *io = envlog_io_get();
    for (int k = 0; k < 1000; k++) {
        char to[48];
        if (k)
            snprintf(to, sizeof to, "%s.broken.%d", name, k);
        else
            snprintf(to, sizeof to, "%s.broken", name);
        struct stat st;
        if (envlog_io_get()->fstatat(snapfd, to, &st) == 0)
            continue;
        /* link, then unlink: a crash never leaves the name both or none. */
        if (io->linkat(snapfd, name, snapfd, to) == 0) {
            if (io->unlinkat(snapfd, name, 0) && errno != ENOENT)
                return envlog__fail_errno(errno, "setting snapshot/%s aside", name);
        } else if (errno == EEXIST) {
            continue;
        } else if (io->renameat(snapfd, name, snapfd, to)) {
            /* Not a file that links (a directory, say): moved. */
            return envlog__fail_errno(errno, "setting snapshot/%s aside", name);
        }
        snprintf(kept, size, "snapshot/%s", to);
        return ENVLOG_OK;
    }
    return envlog__fail(ENVLOG_IO, "no free name to set snapshot/%s aside", name);
}

envlog_err envlog_snapshot_repair(envlog_env *env, envlog_snapshot_fix *out)
{
    const envlog_io *io = envlog_io_get();
    memset(out, 0, sizeof *out);
    if (!env || env->readonly)
        return envlog__fail(ENVLOG_WRONG_STATE, "a repair needs a writable environment");
    int lockfd;
    envlog_err e = envlog_compact_lock(env, &lockfd);
    if (e)
        return e;
    envlog_snapshot_report ck;
    int snapfd = -1;
    if ((e = envlog_snapshot_check(env, NULL, NULL, NULL, &ck)))
        goto out;
    bool cur_bad = ck.current.present && !ck.current.intact;
    bool prev_bad = ck.previous.present && !ck.previous.intact;
    if (!cur_bad && !prev_bad && (ck.current.present || !ck.previous.present)) {
        snprintf(out->what, sizeof out->what, "both snapshot generations read whole");
        goto out;
    }
    if ((e = envlog_open_dir(env->dirfd, "snapshot", &snapfd))) {
        snprintf(out->what, sizeof out->what, "snapshot is not a directory: %.150s",
                 envlog_errmsg());
        e = ENVLOG_OK;
        goto out;
    }
    if (!cur_bad && !prev_bad) { /* current missing, previous whole */
        if (io->renameat(snapfd, "previous", snapfd, "current")) {
            e = envlog__fail_errno(errno, "putting snapshot/previous back as current");
            goto out;
        }
        out->repaired = out->restored = true;
        snprintf(out->what, sizeof out->what,
                 "snapshot/current was missing: the generation before it is current again");
    } else if (!cur_bad) { /* previous damaged, current whole */
        if ((e = set_aside(snapfd, "previous", out->kept, sizeof out->kept)))
            goto out;
        out->repaired = true;
        snprintf(out->what, sizeof out->what,
                 "snapshot/previous was damaged and is set aside; the next compaction keeps "
                 "a new one");
    } else if (!prev_bad && ck.previous.present) {
        /* The generation before, with the sessions it does not cover, is
         * the whole state. */
        if ((e = set_aside(snapfd, "current", out->kept, sizeof out->kept)))
            goto out;
        if (io->renameat(snapfd, "previous", snapfd, "current")) {
            e = envlog__fail_errno(errno, "putting snapshot/previous back as current");
            goto out;
        }
        out->repaired = out->restored = true;
        out->lost = 0;
        snprintf(out->what, sizeof out->what,
                 "the generation before the damaged one is current again; nothing is lost");
    } else {
        /* No whole generation: a new current from what reads. */
        envlog_build_opts bo = {.evidence = ENVLOG_EVIDENCE_ALL, .name = "",
                                .content = "snapshot"};
        envlog_build_result res;
        if ((e = envlog_snapshot_build(env, &bo, &res)))
            goto out;
        io->unlinkat(snapfd, "current.tmp", 0);
        e = envlog_write_new_file(snapfd, "current.tmp", res.file.p, res.file.len);
        if (!e && (e = envlog_snapshot_read_back(env, &res.digest)))
            io->unlinkat(snapfd, "current.tmp", 0);
        envlog_build_result_free(&res);
        if (e)
            goto out;
        if (ck.current.present &&
            (e = set_aside(snapfd, "current", out->kept, sizeof out->kept))) {
            io->unlinkat(snapfd, "current.tmp", 0);
            goto out;
        }
        if (io->renameat(snapfd, "current.tmp", snapfd, "current")) {
            e = envlog__fail_errno(errno, "renaming snapshot/current.tmp to current");
            goto out;
        }
        char kept2[64] = "";
        if (prev_bad && (e = set_aside(snapfd, "previous", kept2, sizeof kept2)))
            goto out;
        out->repaired = out->salvaged = true;
        uint64_t claimed = ck.current.readable ? ck.current.entries : 0;
        uint64_t got = ck.current.readable ? ck.current.entries_read : 0;
        out->lost = claimed - got;
        snprintf(out->what, sizeof out->what,
                 "no generation read whole: a new snapshot/current holds what did "
                 "(%llu entries lost%s)",
                 (unsigned long long)out->lost,
                 ck.current.readable ? "" : "; the damaged one's count is not known");
    }
    e = envlog_dir_sync(snapfd, "snapshot");
out:
    if (snapfd >= 0)
        close(snapfd);
    envlog_compact_unlock(lockfd);
    return e;
}
