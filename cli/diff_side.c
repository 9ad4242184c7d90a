/* SPDX-License-Identifier: MIT */
/*
 * diff_side.c - one side of `envlog diff`: an environment folded (with the
 * snapshot checked) or a bundle's state, its standing entries collected in
 * canonical order, and from its history what explains a difference: the
 * wall time of each stored tune, every forget, and the sessions' runtimes
 * and devices for the summary.
 */
#include "diff_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int add_unique(char ***v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i], s))
            return 0;
    char **p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p || !(p[*n] = strdup(s)))
        return 1;
    *v = p;
    (*n)++;
    return 0;
}

static envlog_err collect(void *ctx, const envlog_entry *e)
{
    side *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        envlog_entry *p = realloc(s->v, s->cap * sizeof *p);
        if (!p)
            return ENVLOG_NOMEM;
        s->v = p;
    }
    s->v[s->n++] = *e;
    return ENVLOG_OK;
}

static char *dup_or_null(const char *s, bool *oom)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *oom = true;
    return d;
}

static int keep_forget(side *s, const envlog_forget *f, uint64_t unix_ns)
{
    gone *p = realloc(s->gone, (s->n_gone + 1) * sizeof *p);
    if (!p)
        return 1;
    s->gone = p;
    bool oom = false;
    gone *g = &p[s->n_gone++];
    g->f = (envlog_forget){f->table, dup_or_null(f->ns, &oom), dup_or_null(f->key, &oom),
                           f->checksum, dup_or_null(f->reason, &oom),
                           dup_or_null(f->under, &oom)};
    g->unix_ns = unix_ns;
    return oom;
}

static void free_gone(gone *g)
{
    free((void *)(uintptr_t)g->f.ns);
    free((void *)(uintptr_t)g->f.key);
    free((void *)(uintptr_t)g->f.reason);
    free((void *)(uintptr_t)g->f.under);
}

const gone *diff_forgotten(const side *s, const envlog_entry *e)
{
    const char *ns = e->tune ? e->tune->ns : e->kernel->ns;
    char hex[33] = "";
    if (e->kernel)
        envlog_id_format(&e->kernel->kernel_key, hex);
    for (size_t i = s->n_gone; i-- > 0;) {
        const envlog_forget *f = &s->gone[i].f;
        if (f->under ? envlog_ns_under(ns, f->under)
                     : f->table == e->table && f->ns && f->key && !strcmp(f->ns, ns) &&
                           (e->tune ? !strcmp(f->key, e->tune->key) &&
                                          f->checksum == e->tune->checksum
                                    : !strcmp(f->key, hex)))
            return &s->gone[i];
    }
    return NULL;
}

static int keep_time(side *s, const envlog_record *rec)
{
    if (s->n_times == s->cap_times) {
        s->cap_times = s->cap_times ? 2 * s->cap_times : 64;
        tune_time *p = realloc(s->times, s->cap_times * sizeof *p);
        if (!p)
            return 1;
        s->times = p;
    }
    s->times[s->n_times++] = (tune_time){rec->stamp, rec->u.tune.wall_ns};
    return 0;
}

uint64_t diff_wall_of(const side *s, const envlog_tune_entry *t)
{
    for (size_t i = 0; i < s->n_times; i++)
        if (s->times[i].stamp.seq == t->stamp.seq &&
            !memcmp(s->times[i].stamp.session.b, t->stamp.session.b, 16))
            return s->times[i].wall_ns;
    return 0;
}

static envlog_err history_visit(void *ctx, const envlog_replay_rec *r)
{
    side *s = ctx;
    if (r->rec->kind == ENVLOG_KIND_TUNE && r->rec->u.tune.stored)
        return keep_time(s, r->rec) ? ENVLOG_NOMEM : ENVLOG_OK;
    if (r->rec->kind == ENVLOG_KIND_FORGET)
        return keep_forget(s, &r->rec->u.forget, r->unix_ns) ? ENVLOG_NOMEM : ENVLOG_OK;
    if (r->rec->kind != ENVLOG_KIND_SESSION)
        return ENVLOG_OK;
    const envlog_session_rec *x = &r->rec->u.session;
    char rt[512];
    snprintf(rt, sizeof rt, "%s %s", x->runtime ? x->runtime : "-",
             x->runtime_version ? x->runtime_version : "-");
    s->sessions++;
    if (add_unique(&s->runtimes, &s->n_runtimes, rt))
        return ENVLOG_NOMEM;
    for (size_t i = 0; i < x->n_devices; i++)
        if (add_unique(&s->devices, &s->n_devices, x->devices[i]))
            return ENVLOG_NOMEM;
    return ENVLOG_OK;
}

int diff_side_open(side *s)
{
    struct stat st;
    bool in = cli_is_stdio(s->path);
    if (!in && stat(s->path, &st))
        return cli_error(EXIT_USAGE, "diff: %s: %m", s->path);
    envlog_err e;
    if (!in && S_ISDIR(st.st_mode)) {
        if ((e = envlog_env_open(s->path, ENVLOG_OPEN_READONLY, &s->env)))
            return cli_fail(e, s->path);
        envlog_replay_opts loud = {.on_damage = cli_damage, .on_progress = cli_progress,
                                   .check_snapshot = true};
        char label[48];
        snprintf(label, sizeof label, "diff: reading %.32s", s->path);
        cli_progress_label(label);
        envlog_replay_opts quiet = {.check_snapshot = true};
        if ((e = envlog_state_open(s->env, &loud, &s->st)) ||
            (e = envlog_replay_each(s->env, &quiet, history_visit, s)))
            return cli_fail(e, s->path);
    } else {
        /* A bundle, a path or "-" (standard input). */
        cli_bundle_in b;
        int rc = cli_bundle_in_open("diff", s->path, &b);
        if (rc)
            return rc;
        envlog_bundle_info *bi;
        if ((e = cli_bundle_inspect(&b, &bi))) {
            cli_bundle_in_close(&b);
            return cli_fail(e, b.name);
        }
        s->sessions = bi->sessions;
        for (size_t i = 0; i < bi->n_runtimes; i++)
            add_unique(&s->runtimes, &s->n_runtimes, bi->runtimes[i]);
        for (size_t i = 0; i < bi->n_environments; i++)
            add_unique(&s->devices, &s->n_devices, bi->environments[i]);
        envlog_bundle_info_free(bi);
        e = b.path ? envlog_bundle_state(b.path, &s->st)
                   : envlog_bundle_state_memory(b.data, b.n, &s->st);
        cli_bundle_in_close(&b);
        if (e)
            return cli_fail(e, b.name);
    }
    if ((e = envlog_state_each(s->st, collect, s)))
        return cli_fail(e, s->path);
    return EXIT_OK;
}

void diff_side_close(side *s)
{
    for (size_t i = 0; i < s->n_runtimes; i++)
        free(s->runtimes[i]);
    for (size_t i = 0; i < s->n_devices; i++)
        free(s->devices[i]);
    free(s->runtimes);
    free(s->devices);
    for (size_t i = 0; i < s->n_gone; i++)
        free_gone(&s->gone[i]);
    free(s->gone);
    free(s->times);
    free(s->paired);
    free(s->v);
    envlog_state_close(s->st);
    envlog_env_close(s->env);
}
