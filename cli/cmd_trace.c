/* SPDX-License-Identifier: MIT */
/*
 * cmd_trace.c - `envlog trace`: the history as a Chrome trace event file
 * (the JSON object format), which Perfetto and chrome://tracing open.
 *
 * Each session is a process and each thread that recorded is a thread of
 * it, so work is drawn where it ran: a span on the thread that opened it, a
 * tune on the thread that ran it with its trials as child slices, a compile
 * at its recorded start on the thread that compiled it (a batch's workers
 * are threads of their own).  The viewers nest the complete ("X") slices of
 * one track by time and cannot draw two that overlap without one holding
 * the other, so every slice is read first, then each thread's slices are
 * laid out in start order on as few tracks as keep that rule: a slice that
 * would cross another goes to a second track of the same thread, named so,
 * and nothing is drawn overlapping that did not overlap.  Records written
 * before threads and starts were recorded are placed as they always were
 * (ending at their stamp) on a track of their kind.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { K_SPAN, K_TUNE, K_TRIAL, K_COMPILE, K_MARK };
static const char *const cat_name[] = {"span", "tune", "trial", "compile", "mark"};
/* The track of a record without a thread, by kind (a trial goes with its
 * tune). */
static const char *const unthreaded[] = {"spans (thread not recorded)",
                                         "tunes (thread not recorded)",
                                         "tunes (thread not recorded)",
                                         "compiles (thread not recorded)", "marks"};

typedef struct slice {
    uint64_t start, end;   /* Unix ns */
    uint64_t thread;       /* 0: not recorded */
    uint64_t order;        /* as read: ties keep it */
    uint32_t proc;         /* the session's pid in the trace, from 1 */
    uint32_t tid;          /* its track, once laid out */
    uint8_t kind;
    uint8_t group;         /* thread 0: the kind whose track it takes */
    bool opening;          /* a span's opening, until its close is read */
    bool dead;             /* an opening its close replaced */
    uint64_t span_id;
    char *name;
    char *args;            /* the members of its "args" object */
} slice;

typedef struct trace_ctx {
    slice *v;
    size_t n, cap;
    envlog_id128 *ids;     /* sessions in order of appearance */
    char **pnames;
    uint64_t *last_ns;     /* each session's last record */
    size_t n_pids, cap_pids;
    uint64_t origin;       /* the earliest session start, so ts starts near 0 */
    bool have_origin;
    int err;
} trace_ctx;

/* An args object under construction (open_memstream). */
typedef struct args {
    FILE *f;
    char *p;
    size_t n;
} args;

static void jstr(FILE *f, const char *s)
{
    envlog_json_string(s ? s : "", cli_fwrite, f);
}

static bool args_open(trace_ctx *t, args *a)
{
    a->p = NULL;
    if (!(a->f = open_memstream(&a->p, &a->n)))
        t->err = 1;
    return a->f != NULL;
}

static char *dup_text(trace_ctx *t, const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        t->err = 1;
    return d;
}

/* Adds a slice; takes `a` (closed here) and copies `name`. */
static void add_slice(trace_ctx *t, args *a, uint32_t proc, int kind, uint64_t thread,
                      const char *name, uint64_t start, uint64_t end)
{
    if (fclose(a->f) || t->err) {
        free(a->p);
        t->err = 1;
        return;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        slice *v = realloc(t->v, cap * sizeof *v);
        if (!v) {
            free(a->p);
            t->err = 1;
            return;
        }
        t->v = v;
        t->cap = cap;
    }
    slice *s = &t->v[t->n];
    *s = (slice){.start = start, .end = end < start ? start : end, .thread = thread,
                 .order = t->n, .proc = proc, .kind = (uint8_t)kind, .args = a->p};
    s->group = thread ? 0 : (uint8_t)kind;
    if (!thread && kind == K_TRIAL)
        s->group = K_TUNE;
    if (!(s->name = dup_text(t, name))) {
        free(a->p);
        return;
    }
    t->n++;
}

static uint32_t pid_of(trace_ctx *t, const envlog_replay_rec *r)
{
    for (size_t i = 0; i < t->n_pids; i++)
        if (!memcmp(t->ids[i].b, r->rec->stamp.session.b, 16))
            return (uint32_t)i + 1;
    if (t->n_pids == t->cap_pids) {
        size_t cap = t->cap_pids ? 2 * t->cap_pids : 16;
        envlog_id128 *p = realloc(t->ids, cap * sizeof *p);
        if (p)
            t->ids = p;
        char **q = p ? realloc(t->pnames, cap * sizeof *q) : NULL;
        if (q)
            t->pnames = q;
        uint64_t *l = q ? realloc(t->last_ns, cap * sizeof *l) : NULL;
        if (!l) {
            t->err = 1;
            return 0;
        }
        t->last_ns = l;
        t->cap_pids = cap;
    }
    char id[33];
    envlog_id_format(&r->rec->stamp.session, id);
    const envlog_session_rec *s = r->session;
    char name[256];
    snprintf(name, sizeof name, "%s %.8s %s", s && s->label ? s->label : "session", id,
             s && s->host ? s->host : "");
    if (!(t->pnames[t->n_pids] = dup_text(t, name)))
        return 0;
    t->last_ns[t->n_pids] = 0;
    t->ids[t->n_pids++] = r->rec->stamp.session;
    return (uint32_t)t->n_pids;
}

/* The members every slice of record `r` carries last: which record it is. */
static void stamp_args(FILE *f, const envlog_record *rec)
{
    char id[33];
    envlog_id_format(&rec->stamp.session, id);
    fprintf(f, "\"session\":\"%s\",\"seq\":%" PRIu64, id, rec->stamp.seq);
}

/* A stretch that ends at `end`: where its recorded start is missing, it is
 * taken to have run just before it was recorded, within its session. */
static uint64_t start_before(uint64_t end, uint64_t dur, uint64_t session_start)
{
    return dur <= end - session_start ? end - dur : session_start;
}

/* A span is one record, or two: its opening, written when what followed
 * it could not wait, and its close, with the same id (envlog(5), SPANS).
 * The close replaces the opening; an opening never closed is drawn to its
 * session's last record. */
static void add_span(trace_ctx *t, uint32_t pid, const envlog_replay_rec *r,
                     uint64_t start)
{
    const envlog_span_rec *s = &r->rec->u.span;
    if (!s->open)
        for (size_t i = t->n; i-- > 0;)
            if (t->v[i].proc == pid && t->v[i].opening && t->v[i].span_id == s->id) {
                t->v[i].dead = true;
                t->v[i].opening = false;
                break;
            }
    args a;
    if (!args_open(t, &a))
        return;
    fprintf(a.f, "\"id\":%" PRIu64 ",\"parent\":%" PRIu64 ",", s->id, s->parent);
    if (s->n_attrs) {
        fputs("\"attrs\":{", a.f);
        for (size_t i = 0; i < s->n_attrs; i++) {
            if (i)
                fputc(',', a.f);
            jstr(a.f, s->attrs[i].key);
            fputc(':', a.f);
            jstr(a.f, s->attrs[i].value);
        }
        fputs("},", a.f);
    }
    if (s->open)
        fputs("\"closed\":false,", a.f);
    stamp_args(a.f, r->rec);
    add_slice(t, &a, pid, K_SPAN, s->has_thread ? s->thread : 0, s->name,
              start + s->open_ns, start + s->open_ns + s->duration_ns);
    if (s->open && !t->err) {
        t->v[t->n - 1].opening = true;
        t->v[t->n - 1].span_id = s->id;
    }
}

static void add_tune(trace_ctx *t, uint32_t pid, const envlog_replay_rec *r,
                     uint64_t start)
{
    const envlog_tune *u = &r->rec->u.tune;
    uint64_t thread = u->has_start ? u->thread : 0;
    uint64_t from = u->has_start ? start + u->start_ns
                                 : start_before(r->unix_ns, u->wall_ns, start);
    args a;
    if (!args_open(t, &a))
        return;
    fputs("\"namespace\":", a.f);
    jstr(a.f, u->ns);
    fputs(",\"winner\":", a.f);
    jstr(a.f, u->winner >= 0 && (size_t)u->winner < u->n_candidates
                  ? u->candidates[u->winner] : "");
    fprintf(a.f, ",\"margin\":%.4f,\"stored\":%s,\"trials\":%zu,\"start_recorded\":%s,",
            u->margin, u->stored ? "true" : "false", u->n_trials,
            u->has_start ? "true" : "false");
    stamp_args(a.f, r->rec);
    add_slice(t, &a, pid, K_TUNE, thread, u->key, from, from + u->wall_ns);
    /* Trials recorded with their times are the tune's children; older
     * trials are only counted in its args. */
    for (size_t i = 0; i < u->n_trials && !t->err; i++) {
        const envlog_trial *tr = &u->trials[i];
        if (!tr->has_start || !args_open(t, &a))
            continue;
        fprintf(a.f, "\"index\":%" PRIu32 ",\"samples\":%" PRIu64 ",\"median_ns\":%.1f,",
                tr->index, tr->samples, tr->median_ns);
        if (tr->error) {
            fputs("\"error\":", a.f);
            jstr(a.f, tr->error);
            fputc(',', a.f);
        }
        stamp_args(a.f, r->rec);
        add_slice(t, &a, pid, K_TRIAL, thread, tr->name, start + tr->start_ns,
                  start + tr->start_ns + tr->wall_ns);
    }
}

static void add_compile(trace_ctx *t, uint32_t pid, const envlog_replay_rec *r,
                        uint64_t start)
{
    static const char *const oc[] = {"compiled", "loaded", "failed"};
    const envlog_compile *k = &r->rec->u.compile;
    uint64_t from = k->has_start ? start + k->start_ns
                                 : start_before(r->unix_ns, k->duration_ns, start);
    args a;
    if (!args_open(t, &a))
        return;
    fputs("\"namespace\":", a.f);
    jstr(a.f, k->ns);
    fputs(",\"arch\":", a.f);
    jstr(a.f, k->arch);
    fprintf(a.f, ",\"outcome\":\"%s\",\"binary_size\":%" PRIu64 ",\"start_recorded\":%s,",
            (unsigned)k->outcome < 3 ? oc[k->outcome] : "?", k->binary_size,
            k->has_start ? "true" : "false");
    stamp_args(a.f, r->rec);
    add_slice(t, &a, pid, K_COMPILE, k->has_start ? k->thread : 0, k->name, from,
              from + k->duration_ns);
}

static envlog_err trace_visit(void *ctx, const envlog_replay_rec *r)
{
    trace_ctx *t = ctx;
    const envlog_record *rec = r->rec;
    uint64_t start = r->unix_ns - rec->stamp.offset_ns; /* the session's start */
    if (!t->have_origin || start < t->origin)
        t->origin = start;
    t->have_origin = true;
    /* Every session is a process, even one with nothing to draw (a forget,
     * an import), so the trace shows each session that changed something. */
    uint32_t pid = pid_of(t, r);
    if (t->err)
        return ENVLOG_NOMEM;
    if (r->unix_ns > t->last_ns[pid - 1])
        t->last_ns[pid - 1] = r->unix_ns;
    args a;
    switch (rec->kind) {
    case ENVLOG_KIND_SPAN: add_span(t, pid, r, start); break;
    case ENVLOG_KIND_TUNE: add_tune(t, pid, r, start); break;
    case ENVLOG_KIND_COMPILE: add_compile(t, pid, r, start); break;
    case ENVLOG_KIND_MARK:
        if (args_open(t, &a)) {
            stamp_args(a.f, rec);
            add_slice(t, &a, pid, K_MARK, 0, rec->u.mark.label, r->unix_ns, r->unix_ns);
        }
        break;
    default: break;
    }
    return t->err ? ENVLOG_NOMEM : ENVLOG_OK;
}

/* Track order: by process, thread (unthreaded tracks after the threads),
 * then start; a longer slice first, so it holds those that start with it. */
static int slice_cmp(const void *pa, const void *pb)
{
    const slice *a = pa, *b = pb;
    if (a->proc != b->proc)
        return a->proc < b->proc ? -1 : 1;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    if (a->thread != b->thread)
        return a->thread < b->thread ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end > b->end ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* One track of a thread: the slices still open on it, innermost last. */
typedef struct lane {
    uint64_t *ends;
    size_t n, cap;
    uint32_t tid;
} lane;

static void ts_print(FILE *f, const char *key, uint64_t ns)
{
    fprintf(f, ",\"%s\":%" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

static void thread_meta(FILE *f, const slice *s, uint32_t tid, size_t lane_no)
{
    char name[96];
    if (s->thread && lane_no)
        snprintf(name, sizeof name, "thread %" PRIu64 " (overlapping, %zu)", s->thread,
                 lane_no + 1);
    else if (s->thread)
        snprintf(name, sizeof name, "thread %" PRIu64, s->thread);
    else if (lane_no)
        snprintf(name, sizeof name, "%s (overlapping, %zu)", unthreaded[s->group],
                 lane_no + 1);
    else
        snprintf(name, sizeof name, "%s", unthreaded[s->group]);
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRIu32
            ",\"tid\":%" PRIu32 ",\"args\":{\"name\":", s->proc, tid);
    jstr(f, name);
    fprintf(f, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%" PRIu32
            ",\"tid\":%" PRIu32 ",\"args\":{\"sort_index\":%" PRIu32 "}}", s->proc, tid,
            tid);
}

/* Lays each thread's slices out on tracks and writes every event. */
static int trace_write(trace_ctx *t, FILE *f)
{
    size_t live = 0;
    for (size_t i = 0; i < t->n; i++) {
        slice *s = &t->v[i];
        if (s->dead) {
            free(s->name);
            free(s->args);
            continue;
        }
        if (s->opening && t->last_ns[s->proc - 1] > s->start)
            s->end = t->last_ns[s->proc - 1];
        t->v[live++] = *s;
    }
    t->n = live;
    qsort(t->v, t->n, sizeof *t->v, slice_cmp);
    char origin[24];
    snprintf(origin, sizeof origin, "%" PRIu64, t->origin);
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"origin_unix_ns\":\"%s\","
            "\"envlog_version\":\"%s\"},\"traceEvents\":[\n", origin, ENVLOG_VERSION_STRING);
    for (size_t p = 0; p < t->n_pids; p++) {
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%zu,\"args\":"
                "{\"name\":", p ? ",\n" : "", p + 1);
        jstr(f, t->pnames[p]);
        fprintf(f, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%zu,"
                "\"args\":{\"sort_index\":%zu}}", p + 1, p + 1);
    }
    lane *lanes = NULL;
    size_t n_lanes = 0, cap_lanes = 0;
    uint32_t next_tid = 0;
    for (size_t i = 0; i < t->n; i++) {
        slice *s = &t->v[i];
        const slice *prev = i ? &t->v[i - 1] : NULL;
        if (!prev || prev->proc != s->proc)
            next_tid = 0;
        if (!prev || prev->proc != s->proc || prev->group != s->group ||
            prev->thread != s->thread)
            for (size_t l = 0; l < n_lanes; l++)
                lanes[l].n = 0, lanes[l].tid = 0;
        size_t l = 0;
        /* Marks are instants: they take one track and nest in nothing. */
        for (; s->kind != K_MARK && l < n_lanes; l++) {
            lane *ln = &lanes[l];
            while (ln->n && ln->ends[ln->n - 1] <= s->start)
                ln->n--;
            if (!ln->tid || !ln->n || ln->ends[ln->n - 1] >= s->end)
                break;
        }
        if (l == n_lanes) {
            if (n_lanes == cap_lanes) {
                size_t cap = cap_lanes ? 2 * cap_lanes : 8;
                lane *nl = realloc(lanes, cap * sizeof *nl);
                if (!nl)
                    goto nomem;
                lanes = nl;
                cap_lanes = cap;
            }
            lanes[n_lanes++] = (lane){0};
        }
        lane *ln = &lanes[l];
        if (!ln->tid) {
            ln->tid = ++next_tid;
            thread_meta(f, s, ln->tid, l);
        }
        if (s->kind != K_MARK) {
            if (ln->n == ln->cap) {
                size_t cap = ln->cap ? 2 * ln->cap : 16;
                uint64_t *ne = realloc(ln->ends, cap * sizeof *ne);
                if (!ne)
                    goto nomem;
                ln->ends = ne;
                ln->cap = cap;
            }
            ln->ends[ln->n++] = s->end;
        }
        s->tid = ln->tid;
        fputs(",\n{\"name\":", f);
        jstr(f, s->name);
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"%s\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32,
                cat_name[s->kind], s->kind == K_MARK ? "i" : "X", s->proc, s->tid);
        ts_print(f, "ts", s->start - t->origin);
        if (s->kind == K_MARK)
            fputs(",\"s\":\"p\"", f);
        else
            ts_print(f, "dur", s->end - s->start);
        fprintf(f, ",\"args\":{%s}}", s->args);
    }
    fputs("\n]}\n", f);
    for (size_t l = 0; l < n_lanes; l++)
        free(lanes[l].ends);
    free(lanes);
    return 0;
nomem:
    for (size_t l = 0; l < n_lanes; l++)
        free(lanes[l].ends);
    free(lanes);
    return -1;
}

static void trace_free(trace_ctx *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].name);
        free(t->v[i].args);
    }
    for (size_t i = 0; i < t->n_pids; i++)
        free(t->pnames[i]);
    free(t->v);
    free(t->ids);
    free(t->pnames);
    free(t->last_ns);
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
            return cli_bad_arg(c, "trace", c->argv[i]);
    }
    envlog_env *env;
    int rc = cli_open_env(c, CLI_READ, &env);
    if (rc)
        return rc;
    trace_ctx t = {0};
    cli_out of;
    if ((rc = cli_out_begin("trace", out, oflags, &of))) {
        envlog_env_close(env);
        return rc;
    }
    int worst = EXIT_OK;
    envlog_replay_opts o = {.on_damage = cli_damage, .ctx = &worst, .check_snapshot = true};
    envlog_err e = envlog_replay_each(env, &o, trace_visit, &t);
    if (!e && !t.err && trace_write(&t, of.f))
        t.err = 1;
    if (e || t.err)
        rc = t.err ? cli_error(EXIT_USAGE, "trace: out of memory") : cli_fail(e, "replaying");
    int wrc = cli_out_end("trace", &of, !rc);
    if (!rc)
        rc = wrc;
    if (!cli_is_stdio(out) && !rc)
        fprintf(stderr, "envlog: wrote %s (%zu %s); open it in Perfetto "
                "(ui.perfetto.dev) or chrome://tracing\n", out, t.n_pids,
                cli_plural(t.n_pids, "session", "sessions"));
    trace_free(&t);
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
