/* SPDX-License-Identifier: MIT */
/*
 * cmd_diff.c - `envlog diff A B`: two environments or bundles compared
 * entry by entry (in canonical order, so the walk is one merge), then their
 * histories summarized.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A forget in a side's history, to say why an entry is missing there. */
typedef struct gone {
    envlog_forget f; /* strings owned */
    uint64_t unix_ns;
} gone;

/* A tune record's wall time, to tell a standing entry's (by its stamp). */
typedef struct tune_time {
    envlog_stamp stamp;
    uint64_t wall_ns;
} tune_time;

typedef struct side {
    const char *path;
    envlog_env *env;
    envlog_state *st;
    envlog_entry *v;
    size_t n, cap;
    /* history */
    uint64_t sessions;
    char **runtimes, **devices;
    size_t n_runtimes, n_devices;
    gone *gone;
    size_t n_gone;
    tune_time *times;
    size_t n_times, cap_times;
    bool *paired; /* per entry: told with an entry of the other side */
} side;

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

/* The last forget of side `s` that removed an entry with e's key. */
static const gone *forgotten(const side *s, const envlog_entry *e)
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

/* The wall time of the tune that set `t` (0: not known, as for a bundle). */
static uint64_t wall_of(const side *s, const envlog_tune_entry *t)
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

static int open_side(cli *c, side *s)
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
    (void)c;
    return EXIT_OK;
}

static void close_side(side *s)
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

/* The canonical order of envlog_state_each(). */
static int key_cmp(const envlog_entry *a, const envlog_entry *b)
{
    if (a->table != b->table)
        return a->table < b->table ? -1 : 1;
    const char *an = a->tune ? a->tune->ns : a->kernel->ns;
    const char *bn = b->tune ? b->tune->ns : b->kernel->ns;
    int c = strcmp(an, bn);
    if (c)
        return c;
    if (a->kernel)
        return memcmp(a->kernel->kernel_key.b, b->kernel->kernel_key.b, 16);
    if ((c = strcmp(a->tune->key, b->tune->key)))
        return c;
    return a->tune->checksum < b->tune->checksum ? -1 : a->tune->checksum > b->tune->checksum;
}

static void describe(const envlog_entry *e)
{
    char h[33];
    if (e->tune) {
        printf("tune %s %s checksum 0x%016" PRIx64 " winner %s", e->tune->ns, e->tune->key,
               e->tune->checksum, e->tune->winner ? e->tune->winner : "-");
    } else {
        envlog_id_format(&e->kernel->kernel_key, h);
        printf("kernel %s %s key %s", e->kernel->ns, e->kernel->name ? e->kernel->name : "-", h);
    }
}

static void json_key(const envlog_entry *e)
{
    char h[33];
    printf("\"table\":\"%s\",\"namespace\":", e->tune ? "tune" : "kernel");
    cli_jstr(e->tune ? e->tune->ns : e->kernel->ns);
    if (e->tune) {
        printf(",\"key\":");
        cli_jstr(e->tune->key);
        printf(",\"checksum\":\"0x%016" PRIx64 "\"", e->tune->checksum);
    } else {
        envlog_id_format(&e->kernel->kernel_key, h);
        printf(",\"kernel_key\":\"%s\",\"name\":", h);
        cli_jstr(e->kernel->name);
    }
}

/* An entry side `which` has and `other` lacks, with the forget that removed
 * it from `other` when its history holds one. */
static void only(const cli *c, const char *which, const envlog_entry *e, const side *other)
{
    const gone *g = forgotten(other, e);
    char t[32] = "";
    if (g)
        cli_time(g->unix_ns, t);
    if (c->json) {
        cli_jbegin("diff");
        printf(",\"diff\":\"only_in_%s\",", which);
        json_key(e);
        if (e->tune) {
            printf(",\"winner\":");
            cli_jstr(e->tune->winner);
        }
        if (g) {
            printf(",\"forgotten_in_other\":{\"time\":\"%s\",\"reason\":", t);
            cli_jstr(g->f.reason);
            if (g->f.under) {
                printf(",\"under\":");
                cli_jstr(g->f.under);
            }
            printf("}");
        }
        printf("}\n");
    } else {
        printf("only in %s: ", which);
        describe(e);
        putchar('\n');
        if (g)
            printf("  %s: forgotten %s%s%s%s%s%s\n", which[0] == 'A' ? "B" : "A", t,
                   g->f.under ? " (everything under " : "", g->f.under ? g->f.under : "",
                   g->f.under ? ")" : "", g->f.reason ? ": " : "",
                   g->f.reason ? g->f.reason : "");
    }
}

/* How much a tune's wall time must change to be told: timing noise moves
 * it by less (envlog(1), diff). */
#define WALL_CHANGE 0.25

static bool wall_changed(uint64_t a, uint64_t b)
{
    if (!a || !b)
        return false;
    double r = (double)b / (double)a;
    return r > 1 + WALL_CHANGE || r < 1 / (1 + WALL_CHANGE);
}

static bool same_winner(const envlog_tune_entry *x, const envlog_tune_entry *y)
{
    return !strcmp(x->winner ? x->winner : "", y->winner ? y->winner : "");
}

static void json_side(const envlog_tune_entry *x, uint64_t wall)
{
    printf("{\"namespace\":");
    cli_jstr(x->ns);
    printf(",\"checksum\":\"0x%016" PRIx64 "\",\"winner\":", x->checksum);
    cli_jstr(x->winner);
    printf(",\"cost_ns\":%.1f,\"margin\":%.6f,\"within_noise\":%s", x->winner_cost_ns,
           x->margin, x->within_noise ? "true" : "false");
    if (wall)
        printf(",\"wall_ns\":%" PRIu64, wall);
    putchar('}');
}

static void text_side(const char *which, const envlog_tune_entry *x, uint64_t wall, bool ns)
{
    char w[24];
    cli_duration(wall, w);
    printf("  %s: %s (%.0fns, margin %.1f%%%s)%s%s", which, x->winner ? x->winner : "-",
           x->winner_cost_ns, x->margin * 100, x->within_noise ? ", within noise" : "",
           wall ? ", tuned in " : "", wall ? w : "");
    if (ns)
        printf("  [%s checksum 0x%016" PRIx64 "]", x->ns, x->checksum);
    putchar('\n');
}

/* The verdict on two tunes of one key: 1 when they differ (the winner, or
 * the tune's wall time beyond WALL_CHANGE). */
static bool tune_differs(const side *sa, const side *sb, const envlog_tune_entry *x,
                         const envlog_tune_entry *y, bool *winner, bool *noise, bool *wall)
{
    *winner = !same_winner(x, y);
    *noise = *winner && (x->within_noise || y->within_noise);
    *wall = wall_changed(wall_of(sa, x), wall_of(sb, y));
    return *winner || *wall;
}

/* Compares two entries with the same key: 1 when they differ. */
static int compare(const cli *c, const side *sa, const side *sb, const envlog_entry *a,
                   const envlog_entry *b)
{
    char ha[33], hb[33];
    if (a->tune) {
        const envlog_tune_entry *x = a->tune, *y = b->tune;
        bool winner, noise, wall;
        if (!tune_differs(sa, sb, x, y, &winner, &noise, &wall))
            return 0;
        uint64_t wa = wall_of(sa, x), wb = wall_of(sb, y);
        if (c->json) {
            cli_jbegin("diff");
            printf(",\"diff\":\"%s\",", winner ? "winner" : "tune_time");
            json_key(a);
            printf(",\"noise\":%s,\"a\":", noise ? "true" : "false");
            json_side(x, wa);
            printf(",\"b\":");
            json_side(y, wb);
            printf("}\n");
        } else {
            printf("%s: %s %s\n", !winner ? "tune time differs"
                                   : noise ? "winner differs, within noise"
                                           : "winner differs",
                   x->ns, x->key);
            text_side("A", x, wa, false);
            text_side("B", y, wb, false);
        }
        return 1;
    }
    const envlog_kernel_entry *x = a->kernel, *y = b->kernel;
    if (!memcmp(x->binary_hash.b, y->binary_hash.b, 16))
        return 0;
    envlog_id_format(&x->binary_hash, ha);
    envlog_id_format(&y->binary_hash, hb);
    if (c->json) {
        cli_jbegin("diff");
        printf(",\"diff\":\"binary\",");
        json_key(a);
        printf(",\"a\":{\"binary_hash\":\"%s\",\"size\":%zu},\"b\":{\"binary_hash\":\"%s\","
               "\"size\":%zu}}\n", ha, x->binary.size, hb, y->binary.size);
    } else {
        printf("binary differs: %s %s\n  A: %s (%zu bytes)\n  B: %s (%zu bytes)\n", x->ns,
               x->name ? x->name : "-", ha, x->binary.size, hb, y->binary.size);
    }
    return 1;
}

/* Namespace component `i` (0: the table) of `ns`, and its length. */
static const char *component(const char *ns, int i, size_t *len)
{
    for (; i > 0 && *ns; i--) {
        const char *slash = strchr(ns, '/');
        ns = slash ? slash + 1 : ns + strlen(ns);
    }
    *len = strcspn(ns, "/");
    return ns;
}

static bool same_component(const char *a, const char *b, int i)
{
    size_t la, lb;
    const char *pa = component(a, i, &la), *pb = component(b, i, &lb);
    return la == lb && !memcmp(pa, pb, la);
}

static size_t components(const char *ns)
{
    size_t n = 1;
    for (; *ns; ns++)
        n += *ns == '/';
    return n;
}

/* The pairing rule (envlog(1), diff): two tunes of the same key pair when
 * their namespaces differ at most in the runtime version (component 3) and
 * the device (component 4), or their tune-set checksums differ.  The score
 * counts what differs (lower pairs first); -1: they do not pair. */
static int pair_score(const envlog_tune_entry *x, const envlog_tune_entry *y)
{
    size_t n = components(x->ns);
    if (strcmp(x->key, y->key) || n != components(y->ns))
        return -1;
    int score = x->checksum != y->checksum;
    for (size_t i = 0; i < n; i++)
        if (!same_component(x->ns, y->ns, (int)i)) {
            if (n < 4 || (i != 2 && i != 3))
                return -1;
            score++;
        }
    return score;
}

static bool has_cand(const envlog_tune_entry *t, const char *name)
{
    for (size_t i = 0; i < t->n_candidates; i++)
        if (!strcmp(t->candidates[i], name))
            return true;
    return false;
}

/* Candidates of `x` that `y` lacks, as text ("+a, +b") or JSON strings. */
static void cands_missing(const envlog_tune_entry *x, const envlog_tune_entry *y, bool json,
                          char sign, bool *first)
{
    for (size_t i = 0; i < x->n_candidates; i++) {
        if (has_cand(y, x->candidates[i]))
            continue;
        if (json) {
            if (!*first)
                putchar(',');
            cli_jstr(x->candidates[i]);
        } else {
            printf("%s%c%s", *first ? "" : ", ", sign, x->candidates[i]);
        }
        *first = false;
    }
}

static void json_component(const char *name, const envlog_tune_entry *x,
                           const envlog_tune_entry *y, int i)
{
    size_t la, lb;
    const char *pa = component(x->ns, i, &la), *pb = component(y->ns, i, &lb);
    printf(",\"%s\":{\"a\":\"%.*s\",\"b\":\"%.*s\"}", name, (int)la, pa, (int)lb, pb);
}

/* One key's tunes on the two sides under namespaces or candidate lists that
 * differ, told as one change with its causes. */
static void paired(const cli *c, const side *sa, const side *sb, const envlog_tune_entry *x,
                   const envlog_tune_entry *y)
{
    bool winner, noise, wall;
    (void)tune_differs(sa, sb, x, y, &winner, &noise, &wall);
    bool runtime = !same_component(x->ns, y->ns, 2), device = !same_component(x->ns, y->ns, 3);
    bool cands = x->checksum != y->checksum;
    uint64_t wa = wall_of(sa, x), wb = wall_of(sb, y);
    size_t la, lb;
    const char *pa, *pb;
    if (c->json) {
        cli_jbegin("diff");
        printf(",\"diff\":\"paired\",\"table\":\"tune\",\"namespace\":");
        cli_jstr(x->ns);
        printf(",\"key\":");
        cli_jstr(x->key);
        printf(",\"changed\":[");
        bool first = true;
        const char *what[] = {"runtime", "device", "candidates"};
        bool on[] = {runtime, device, cands};
        for (int i = 0; i < 3; i++)
            if (on[i]) {
                printf("%s\"%s\"", first ? "" : ",", what[i]);
                first = false;
            }
        putchar(']');
        if (runtime)
            json_component("runtime", x, y, 2);
        if (device)
            json_component("device", x, y, 3);
        if (cands) {
            printf(",\"candidates_added\":[");
            first = true;
            cands_missing(y, x, true, '+', &first);
            printf("],\"candidates_removed\":[");
            first = true;
            cands_missing(x, y, true, '-', &first);
            putchar(']');
        }
        printf(",\"winner_changed\":%s,\"noise\":%s,\"tune_time_changed\":%s,\"a\":",
               winner ? "true" : "false", noise ? "true" : "false", wall ? "true" : "false");
        json_side(x, wa);
        printf(",\"b\":");
        json_side(y, wb);
        printf("}\n");
        return;
    }
    printf("changed: tune %s", x->key);
    if (runtime) {
        pa = component(x->ns, 2, &la);
        pb = component(y->ns, 2, &lb);
        printf(", runtime %.*s -> %.*s", (int)la, pa, (int)lb, pb);
    }
    if (device) {
        pa = component(x->ns, 3, &la);
        pb = component(y->ns, 3, &lb);
        printf(", device %.*s -> %.*s", (int)la, pa, (int)lb, pb);
    }
    if (cands) {
        bool first = true;
        printf(", candidates changed (");
        cands_missing(y, x, false, '+', &first);
        cands_missing(x, y, false, '-', &first);
        printf(")");
    }
    printf("%s%s\n", !winner ? ", same winner" : noise ? ", winner differs within noise"
                                                         : ", winner differs",
           wall ? ", tune time differs" : "");
    text_side("A", x, wa, true);
    text_side("B", y, wb, true);
}

/* Pairs the tunes only one side has with the other side's (pair_score()),
 * lowest score first, ties to canonical order; b_of[i] is A's entry i's
 * partner in B, or SIZE_MAX. */
static int pair_up(side *a, side *b, const bool *only_a, const bool *only_b, size_t *b_of)
{
    if (!(a->paired = calloc(a->n + 1, sizeof *a->paired)) ||
        !(b->paired = calloc(b->n + 1, sizeof *b->paired)))
        return 1;
    for (size_t i = 0; i < a->n; i++)
        b_of[i] = SIZE_MAX;
    for (int want = 1; want <= 3; want++)
        for (size_t i = 0; i < a->n; i++) {
            if (!only_a[i] || a->paired[i] || !a->v[i].tune)
                continue;
            for (size_t k = 0; k < b->n; k++)
                if (only_b[k] && !b->paired[k] && b->v[k].tune &&
                    pair_score(a->v[i].tune, b->v[k].tune) == want) {
                    a->paired[i] = b->paired[k] = true;
                    b_of[i] = k;
                    break;
                }
        }
    return 0;
}

static void history(const cli *c, const char *which, const side *s)
{
    if (c->json) {
        cli_jbegin("diff.history");
        printf(",\"history\":\"%s\",\"path\":", which);
        cli_jstr(s->path);
        printf(",\"sessions\":%" PRIu64 ",\"entries\":%zu,\"runtimes\":[", s->sessions, s->n);
        for (size_t i = 0; i < s->n_runtimes; i++) {
            if (i)
                putchar(',');
            cli_jstr(s->runtimes[i]);
        }
        printf("],\"devices\":[");
        for (size_t i = 0; i < s->n_devices; i++) {
            if (i)
                putchar(',');
            cli_jstr(s->devices[i]);
        }
        printf("]}\n");
        return;
    }
    printf("%s: %s: %" PRIu64 " %s, %zu %s\n", which, s->path, s->sessions,
           cli_plural(s->sessions, "session", "sessions"), s->n,
           cli_plural(s->n, "entry", "entries"));
    for (size_t i = 0; i < s->n_runtimes; i++)
        printf("   runtime %s\n", s->runtimes[i]);
    for (size_t i = 0; i < s->n_devices; i++)
        printf("   device  %s\n", s->devices[i]);
}

static int diff_run(cli *c)
{
    side a = {0}, b = {0};
    for (int i = 1; i < c->argc; i++) {
        if (i == c->dashdash)
            continue;
        const char *x = c->argv[i];
        if (!cli_operand(c, i) && !strcmp(x, "--json"))
            c->json = true;
        else if (!cli_operand(c, i) && x[0] == '-' && x[1])
            return cli_bad_arg(c, "diff", x);
        else if (!a.path)
            a.path = c->argv[i];
        else if (!b.path)
            b.path = c->argv[i];
        else
            return cli_error(EXIT_USAGE, "diff: two sides, A and B");
    }
    if (!a.path || !b.path)
        return cli_error(EXIT_USAGE, "usage: envlog diff A B (environments or bundles)");
    if (cli_is_stdio(a.path) && cli_is_stdio(b.path))
        return cli_error(EXIT_USAGE, "diff: only one side can be '-' (standard input)");
    int rc = open_side(c, &a);
    if (!rc)
        rc = open_side(c, &b);
    cli_progress_done();
    if (rc) {
        close_side(&a);
        close_side(&b);
        return rc;
    }
    /* First the entries only one side has, to pair them; then the walk
     * that tells the differences in canonical order. */
    bool *only_a = calloc(a.n + 1, sizeof *only_a), *only_b = calloc(b.n + 1, sizeof *only_b);
    size_t *b_of = calloc(a.n + 1, sizeof *b_of);
    if (!only_a || !only_b || !b_of) {
        rc = cli_error(EXIT_USAGE, "diff: out of memory");
        goto done;
    }
    size_t i = 0, k = 0, differ = 0;
    while (i < a.n || k < b.n) {
        int cmp = i == a.n ? 1 : k == b.n ? -1 : key_cmp(&a.v[i], &b.v[k]);
        if (cmp < 0)
            only_a[i++] = true;
        else if (cmp > 0)
            only_b[k++] = true;
        else
            i++, k++;
    }
    if (pair_up(&a, &b, only_a, only_b, b_of)) {
        rc = cli_error(EXIT_USAGE, "diff: out of memory");
        goto done;
    }
    for (i = k = 0; i < a.n || k < b.n;) {
        int cmp = i == a.n ? 1 : k == b.n ? -1 : key_cmp(&a.v[i], &b.v[k]);
        if (cmp < 0) {
            if (a.paired[i])
                paired(c, &a, &b, a.v[i].tune, b.v[b_of[i]].tune);
            else
                only(c, "A", &a.v[i], &b);
            i++;
            differ++;
        } else if (cmp > 0) {
            if (!b.paired[k]) {
                only(c, "B", &b.v[k], &a);
                differ++;
            }
            k++;
        } else {
            differ += (size_t)compare(c, &a, &b, &a.v[i++], &b.v[k++]);
        }
    }
    if (!c->json && differ)
        putchar('\n');
    history(c, "A", &a);
    history(c, "B", &b);
    if (c->json) {
        cli_jbegin("diff.summary");
        printf(",\"differences\":%zu}\n", differ);
    } else
        printf("%zu difference%s\n", differ, differ == 1 ? "" : "s");
    rc = differ ? EXIT_DAMAGE : EXIT_OK;
done:
    free(only_a);
    free(only_b);
    free(b_of);
    close_side(&a);
    close_side(&b);
    return rc;
}

const cli_cmd cli_cmd_diff = {
    "diff", "compare two environments or bundles",
    "usage: envlog diff A B [--json]\n"
    "\n"
    "Compares the standing entries of A and B (each an environment directory or\n"
    "a bundle file): entries only in A, only in B, winners that differ (both\n"
    "winners, their costs and margins; within noise when either margin is),\n"
    "tune times that differ, kernels whose binaries differ (by hash).  Tunes of\n"
    "one key under another runtime version, device or candidate list are paired\n"
    "as one change saying which (see envlog(1) for the rule);\n"
    "then a history summary of each side (sessions, runtime versions, devices).\n"
    "Exit status 0 when the entries are equal, 1 when they differ.\n",
    diff_run,
};
