/* SPDX-License-Identifier: MIT */
/*
 * auto.c - automatic sharing: a runtime that never calls the CLI pulls
 * and pushes through the hooks below, and what it asked for is kept in the
 * environment by ledger.c (the ledger, the asked list, the last outcome).
 *
 * The hooks log and replay call are set here when the library is loaded:
 * a pull at envlog_env_open() (auto_pull, or ENVLOG_OPEN_PULL) bounded by
 * the remote's timeout; a push at session end (auto_push, or the session's
 * auto_push option) in a detached process (the ending call waits for the
 * config to be read and a fork, never for the network); the retire check
 * of compaction; the check of the config's remote lines.  A remote that is
 * down never fails a call that records: the local log is the truth and the
 * next push catches up.
 */
#include "remote_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static bool auto_off(void)
{
    const char *v = getenv("ENVLOG_REMOTE_AUTO");
    return v && (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no"));
}

/* Says a new failure of automatic sharing once, on standard error (the
 * status file keeps it for `envlog remote list`). */
static void note(envlog_env *env, const char *name, const char *what, envlog_err e)
{
    char text[400];
    if (!e) {
        snprintf(text, sizeof text, "%s: ok", what);
        envlog_remote_status_set(env, name, "pull", text);
        return;
    }
    snprintf(text, sizeof text, "%s failed: %s (%s)", what, envlog_errmsg(), envlog_strerror(e));
    if (envlog_remote_status_set(env, name, "pull", text))
        fprintf(stderr, "envlog: remote %s: %s; going on with the local environment\n", name,
                text);
}

static void sync_opts(envlog_remote_cfg *c, envlog_remote_opts *o, const char **ns, size_t max)
{
    memset(o, 0, sizeof *o);
    o->remote = c->name;
    o->timeout_ns = c->timeout_ns;
    o->n_prefixes = envlog_remote_ns_list(c, ns, max);
    o->prefixes = ns;
}

/* Pulls from the remotes with auto_pull on, or from every one when the
 * open asked (ENVLOG_OPEN_PULL). */
static void open_hook(envlog_env *env, bool asked)
{
    if (auto_off())
        return;
    envlog_remotes r;
    if (envlog_remotes_read(env, &r))
        return;
    for (size_t i = 0; i < r.n; i++) {
        envlog_remote_cfg c = r.v[i];
        if (!c.auto_pull && !asked)
            continue;
        const char *ns[16];
        envlog_remote_opts o;
        sync_opts(&c, &o, ns, 16);
        o.deadline_ns = c.timeout_ns;
        envlog_remote_report rep;
        note(env, c.name, "automatic pull", envlog_remote_pull(env, &o, &rep));
    }
    envlog_remotes_free(&r);
}

/* Whether a session end with auto_push option `want` pushes to `c`. */
static bool pushes_to(const envlog_remote_cfg *c, int want)
{
    return want > 0 || (want == 0 && c->auto_push);
}

/* The detached pusher: one at a time per environment, each pushing what
 * every session end before it left.  `arg` is the ending session's
 * auto_push option. */
static void push_here(const char *path, void *arg)
{
    int want = *(const int *)arg;
    envlog_env *env;
    if (envlog_env_open(path, ENVLOG_OPEN_NO_UPKEEP, &env))
        return;
    envlog_remotes r;
    int dfd = -1, lk = -1;
    if (!envlog_remotes_read(env, &r)) {
        if (!envlog_remotes_dir(env, true, &dfd) &&
            !envlog_open_regular(dfd, "push.lock", O_RDWR | O_CREAT, 0600, &lk, NULL))
            (void)envlog_flock_within(lk, LOCK_EX, 60000);
        for (size_t i = 0; i < r.n; i++) {
            envlog_remote_cfg c = r.v[i];
            if (!pushes_to(&c, want))
                continue;
            const char *ns[16];
            envlog_remote_opts o;
            sync_opts(&c, &o, ns, 16);
            o.snapshot = c.push_snapshot;
            envlog_remote_report rep;
            envlog_err e = envlog_remote_push(env, &o, &rep);
            char text[400];
            if (e)
                snprintf(text, sizeof text, "automatic push failed: %s (%s)", envlog_errmsg(),
                         envlog_strerror(e));
            else
                snprintf(text, sizeof text, "automatic push: ok");
            envlog_remote_status_set(env, c.name, "push", text);
        }
        envlog_remotes_free(&r);
    }
    if (lk >= 0)
        close(lk);
    if (dfd >= 0)
        close(dfd);
    envlog_env_close(env);
}

static void end_hook(envlog_env *env, const envlog_id128 *session, int want)
{
    if (want < 0 || auto_off())
        return;
    envlog_remotes r;
    if (envlog_remotes_read(env, &r))
        return;
    bool any = false;
    for (size_t i = 0; i < r.n; i++) {
        if (!pushes_to(&r.v[i], want))
            continue;
        any = true;
        /* What the last detached push met, said once here, where someone
         * may read it. */
        char st[400];
        envlog_remote_status_get(env, r.v[i].name, "push", st, sizeof st);
        const char *text = strchr(st, ' ');
        if (text && strstr(text, "automatic push failed") && !strstr(text, "(said)")) {
            fprintf(stderr, "envlog: remote %s: %s; recording goes on locally and the next "
                    "push catches up\n", r.v[i].name, text + 1);
            char said[420];
            snprintf(said, sizeof said, "%s (said)", text + 1);
            envlog_remote_status_set(env, r.v[i].name, "push", said);
        }
    }
    envlog_remotes_free(&r);
    /* Asked for by the session, not the config: compaction must know to
     * keep it until every remote has it. */
    if (any && want > 0)
        envlog_asked_note(env, session);
    if (any && envlog_redis_load() == ENVLOG_OK)
        envlog_run_detached(env, push_here, &want);
}

/* What is to be kept cannot be read: every sealed session stays rather
 * than a guess. */
static void keep_sealed(const envlog_session_info *in, size_t n, bool *keep)
{
    for (size_t i = 0; i < n; i++)
        keep[i] = in[i].state == ENVLOG_STATE_SEALED;
}

/* Sets keep[i] for each sealed session that a remote which is to receive
 * it lacks: every session for a remote with auto_push on, the asked ones
 * for every remote. */
static void retire_hook(envlog_env *env, const envlog_session_info *in, size_t n, bool *keep)
{
    envlog_remotes r;
    if (envlog_remotes_read(env, &r)) {
        keep_sealed(in, n, keep);
        return;
    }
    envlog_id128 *asked = NULL;
    size_t n_asked = 0;
    if (r.n && envlog_asked_read(env, &asked, &n_asked)) {
        envlog_remotes_free(&r);
        keep_sealed(in, n, keep);
        return;
    }
    for (size_t k = 0; k < r.n; k++) {
        bool every = r.v[k].auto_push;
        if (!every && !n_asked)
            continue;
        envlog_id128 *ids;
        size_t m;
        bool known = !envlog_ledger_read(env, r.v[k].name, &ids, &m);
        for (size_t i = 0; i < n; i++)
            if (in[i].state == ENVLOG_STATE_SEALED &&
                (every || envlog_id_in(asked, n_asked, &in[i].id)) &&
                (!known || !envlog_id_in(ids, m, &in[i].id)))
                keep[i] = true;
        if (known)
            envlog_free(ids);
    }
    envlog_free(asked);
    envlog_remotes_free(&r);
}

void envlog_remote_enable_auto(void)
{
    envlog_env_open_hook = open_hook;
    envlog_session_end_hook = end_hook;
    envlog_retire_hook = retire_hook;
    envlog_config_remote_check = envlog_remote_line_check;
}

__attribute__((constructor)) static void auto_init(void)
{
    envlog_remote_enable_auto();
}
