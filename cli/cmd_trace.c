/* SPDX-License-Identifier: MIT */
/*
 * cmd_trace.c - `envlog trace`: the history as a Chrome trace event file
 * (the JSON object format), which Perfetto and chrome://tracing open.  Each
 * session is a process; spans, tunes and compiles are complete ("X") slices
 * on one time axis, marks are instants.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct trace_ctx {
    FILE *f;
    bool first_event;
    uint64_t origin_ns;    /* the earliest time, so ts starts near 0 */
    envlog_id128 *pids;    /* session ids in order of appearance */
    size_t n_pids, cap;
    int err;
} trace_ctx;

static void tstr(trace_ctx *t, const char *s)
{
    envlog_json_string(s ? s : "", cli_fwrite, t->f);
}

static void begin_event(trace_ctx *t)
{
    fputs(t->first_event ? "\n" : ",\n", t->f);
    t->first_event = false;
}

static size_t pid_of(trace_ctx *t, const envlog_replay_rec *r)
{
    for (size_t i = 0; i < t->n_pids; i++)
        if (!memcmp(t->pids[i].b, r->rec->stamp.session.b, 16))
            return i + 1;
    if (t->n_pids == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        envlog_id128 *p = realloc(t->pids, t->cap * sizeof *p);
        if (!p) {
            t->err = 1;
            return 0;
        }
        t->pids = p;
    }
    t->pids[t->n_pids++] = r->rec->stamp.session;
    size_t pid = t->n_pids;
    char id[33];
    envlog_id_format(&r->rec->stamp.session, id);
    const envlog_session_rec *s = r->session;
    char name[256];
    snprintf(name, sizeof name, "%s %.8s %s", s && s->label ? s->label : "session", id,
             s && s->host ? s->host : "");
    begin_event(t);
    fprintf(t->f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%zu,\"args\":{\"name\":", pid);
    tstr(t, name);
    fputs("}}", t->f);
    static const char *const threads[] = {"spans", "tunes", "compiles", "marks"};
    for (int i = 0; i < 4; i++) {
        begin_event(t);
        fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%zu,\"tid\":%d,"
                "\"args\":{\"name\":\"%s\"}}", pid, i + 1, threads[i]);
    }
    return pid;
}

static void slice(trace_ctx *t, size_t pid, int tid, const char *name, const char *cat,
                  uint64_t start_ns, uint64_t dur_ns)
{
    begin_event(t);
    double ts = start_ns >= t->origin_ns ? (start_ns - t->origin_ns) / 1e3 : 0;
    fprintf(t->f, "{\"name\":");
    tstr(t, name);
    fprintf(t->f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%zu,\"tid\":%d,\"ts\":%.3f,"
            "\"dur\":%.3f,\"args\":{", cat, pid, tid, ts, dur_ns / 1e3);
}

static int trace_visit(void *ctx, const envlog_replay_rec *r)
{
    trace_ctx *t = ctx;
    const envlog_record *rec = r->rec;
    uint64_t start = r->unix_ns - rec->stamp.offset_ns; /* the session's start */
    if (!t->origin_ns || start < t->origin_ns)
        t->origin_ns = start;
    /* Every session is a process, even one with nothing to draw (a forget,
     * an import), so the trace shows each session that changed something. */
    size_t pid = pid_of(t, r);
    if (t->err)
        return 1;
    if (rec->kind != ENVLOG_KIND_SPAN && rec->kind != ENVLOG_KIND_TUNE &&
        rec->kind != ENVLOG_KIND_COMPILE && rec->kind != ENVLOG_KIND_MARK)
        return 0;
    char buf[64];
    switch (rec->kind) {
    case ENVLOG_KIND_SPAN: {
        const envlog_span_rec *s = &rec->u.span;
        slice(t, pid, 1, s->name, "span", start + s->open_ns, s->duration_ns);
        fprintf(t->f, "\"id\":%" PRIu64 ",\"parent\":%" PRIu64, s->id, s->parent);
        for (size_t i = 0; i < s->n_attrs; i++) {
            fputc(',', t->f);
            tstr(t, s->attrs[i].key);
            fputc(':', t->f);
            tstr(t, s->attrs[i].value);
        }
        break;
    }
    case ENVLOG_KIND_TUNE: {
        const envlog_tune *u = &rec->u.tune;
        uint64_t dur = u->wall_ns <= r->unix_ns - start ? u->wall_ns : 0;
        slice(t, pid, 2, u->key, "tune", r->unix_ns - dur, dur);
        fputs("\"namespace\":", t->f);
        tstr(t, u->ns);
        fputs(",\"winner\":", t->f);
        tstr(t, u->winner >= 0 && (size_t)u->winner < u->n_candidates
                    ? u->candidates[u->winner] : "");
        fprintf(t->f, ",\"margin\":%.4f,\"stored\":%s,\"trials\":%zu", u->margin,
                u->stored ? "true" : "false", u->n_trials);
        break;
    }
    case ENVLOG_KIND_COMPILE: {
        const envlog_compile *k = &rec->u.compile;
        static const char *const oc[] = {"compiled", "loaded", "failed"};
        uint64_t dur = k->duration_ns <= r->unix_ns - start ? k->duration_ns : 0;
        slice(t, pid, 3, k->name, "compile", r->unix_ns - dur, dur);
        fputs("\"namespace\":", t->f);
        tstr(t, k->ns);
        fputs(",\"arch\":", t->f);
        tstr(t, k->arch);
        fprintf(t->f, ",\"outcome\":\"%s\",\"binary_size\":%" PRIu64,
                (unsigned)k->outcome < 3 ? oc[k->outcome] : "?", k->binary_size);
        break;
    }
    case ENVLOG_KIND_MARK:
        begin_event(t);
        fputs("{\"name\":", t->f);
        tstr(t, rec->u.mark.label);
        fprintf(t->f, ",\"cat\":\"mark\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%zu,\"tid\":4,"
                "\"ts\":%.3f,\"args\":{", pid,
                r->unix_ns >= t->origin_ns ? (r->unix_ns - t->origin_ns) / 1e3 : 0);
        break;
    default: break;
    }
    envlog_id_format(&rec->stamp.session, buf);
    fprintf(t->f, "%s\"session\":\"%s\",\"seq\":%" PRIu64 "}}",
            rec->kind == ENVLOG_KIND_MARK ? "" : ",", buf, rec->stamp.seq);
    return 0;
}

static int trace_run(cli *c)
{
    const char *out = NULL;
    unsigned oflags = 0;
    for (int i = 1; i < c->argc; i++) {
        if ((!strcmp(c->argv[i], "-o") || !strcmp(c->argv[i], "--out")) && i + 1 < c->argc)
            out = c->argv[++i];
        else if (cli_out_flag(c->argv[i], &oflags))
            ;
        else
            return cli_error(EXIT_USAGE, "trace: unexpected argument '%s'", c->argv[i]);
    }
    envlog_env *env;
    int rc = cli_open_env(c, CLI_READ, &env);
    if (rc)
        return rc;
    trace_ctx t = {.f = stdout, .first_event = true};
    cli_out of;
    if ((rc = cli_out_begin("trace", out, oflags, &of))) {
        envlog_env_close(env);
        return rc;
    }
    t.f = of.f;
    /* The origin is the first session's start: records come in time order,
     * and a session's own record (offset 0) comes first of its records. */
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", t.f);
    int worst = EXIT_OK;
    envlog_replay_opts o = {.on_damage = cli_damage, .ctx = &worst, .check_snapshot = true};
    envlog_err e = envlog_replay_each(env, &o, trace_visit, &t);
    fputs("\n]}\n", t.f);
    if (e)
        rc = t.err ? cli_error(EXIT_USAGE, "trace: out of memory") : cli_fail(e, "replaying");
    int wrc = cli_out_end("trace", &of, !rc);
    if (!rc)
        rc = wrc;
    if (!cli_is_stdio(out) && !rc)
        fprintf(stderr, "envlog: wrote %s (%zu sessions); open it in Perfetto "
                "(ui.perfetto.dev) or chrome://tracing\n", out, t.n_pids);
    free(t.pids);
    envlog_env_close(env);
    return rc ? rc : worst;
}

const cli_cmd cli_cmd_trace = {
    "trace", "write a Chrome trace (Perfetto) of every session",
    "usage: envlog [-C DIR] trace [-o FILE] [--force] [--follow]\n"
    "\n"
    "Writes the history as Chrome trace event JSON (to FILE, or stdout): each\n"
    "session is a process, with spans, tunes and compiles as slices and marks\n"
    "as instants on one time axis.  Perfetto and chrome://tracing open it.\n"
    "FILE is replaced only with --force, and written as replay --out writes.\n",
    trace_run,
};
