/* SPDX-License-Identifier: MIT */
/*
 * cmd_diff.c - `envlog diff A B`: two environments or bundles compared
 * entry by entry (in canonical order, so the walk is one merge), then their
 * histories summarized.  Reading a side is diff_side.c's, the rule that
 * pairs tunes across namespaces diff_pair.c's; here the walk, and how each
 * difference is told, as text or JSON.
 */
#include "diff_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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
    const gone *g = diff_forgotten(other, e);
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
    *wall = wall_changed(diff_wall_of(sa, x), diff_wall_of(sb, y));
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
        uint64_t wa = diff_wall_of(sa, x), wb = diff_wall_of(sb, y);
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
    const char *pa = diff_component(x->ns, i, &la), *pb = diff_component(y->ns, i, &lb);
    printf(",\"%s\":{\"a\":\"%.*s\",\"b\":\"%.*s\"}", name, (int)la, pa, (int)lb, pb);
}

/* One key's tunes on the two sides under namespaces or candidate lists that
 * differ, told as one change with its causes. */
static void paired(const cli *c, const side *sa, const side *sb, const envlog_tune_entry *x,
                   const envlog_tune_entry *y)
{
    bool winner, noise, wall;
    (void)tune_differs(sa, sb, x, y, &winner, &noise, &wall);
    bool runtime = !diff_same_component(x->ns, y->ns, 2), device = !diff_same_component(x->ns, y->ns, 3);
    bool cands = x->checksum != y->checksum;
    uint64_t wa = diff_wall_of(sa, x), wb = diff_wall_of(sb, y);
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
        pa = diff_component(x->ns, 2, &la);
        pb = diff_component(y->ns, 2, &lb);
        printf(", runtime %.*s -> %.*s", (int)la, pa, (int)lb, pb);
    }
    if (device) {
        pa = diff_component(x->ns, 3, &la);
        pb = diff_component(y->ns, 3, &lb);
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
    int rc = diff_side_open(&a);
    if (!rc)
        rc = diff_side_open(&b);
    cli_progress_done();
    if (rc) {
        diff_side_close(&a);
        diff_side_close(&b);
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
    if (diff_pair_up(&a, &b, only_a, only_b, b_of)) {
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
    diff_side_close(&a);
    diff_side_close(&b);
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
