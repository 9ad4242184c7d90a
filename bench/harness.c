/* SPDX-License-Identifier: MIT */
/*
 * harness.c - timing, repetition, statistics and the output of envlog-bench.
 *
 * Every measurement is a set of variants run in turn, repetition after
 * repetition, so slow phases of a shared machine fall on all of them; a row
 * is the median of its repetitions with their spread.  The table is for
 * people; --json prints one compact object per row for tools.
 */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bench_limits bench_lim;

static int rows_emitted;
FILE *bench_out;

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ statistics */

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-quantile of sorted `v` by linear interpolation between ranks. */
static double quantile(const double *v, int n, double p)
{
    double at = p * (n - 1);
    int lo = (int)floor(at);
    int hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (at - lo);
}

bench_stat bench_stat_of(double *v, int n)
{
    bench_stat s = {0};
    if (n <= 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, dbl_cmp);
    s.n = n;
    s.min = v[0];
    s.max = v[n - 1];
    s.median = quantile(v, n, 0.5);
    s.q1 = quantile(v, n, 0.25);
    s.q3 = quantile(v, n, 0.75);
    return s;
}

/* --------------------------------------------------------------- running */

void bench_alternate(bench_variant *v, size_t n)
{
    int reps = bench_o.reps;
    if (reps > BENCH_REPS_MAX)
        reps = BENCH_REPS_MAX;
    /* Warm-up: code, page cache, allocator and disk all see each variant
     * once, at a tenth of the size, before anything is timed. */
    for (size_t i = 0; i < n; i++) {
        bench_run junk;
        v[i].fn(v[i].ctx, 0.1, &junk);
        v[i].n_runs = 0;
    }
    for (int r = 0; r < reps; r++)
        for (size_t k = 0; k < n; k++) {
            bench_variant *x = &v[((size_t)r + k) % n];
            memset(&x->runs[x->n_runs], 0, sizeof x->runs[0]);
            x->fn(x->ctx, 1.0, &x->runs[x->n_runs]);
            x->n_runs++;
        }
}

static double metric_of(const bench_run *r, bench_metric m)
{
    double secs = r->secs > 0 ? r->secs : 1e-12;
    switch (m) {
    case BENCH_RATE: return r->items / secs;
    case BENCH_NS_PER: return r->items > 0 ? r->secs * 1e9 / r->items : 0;
    case BENCH_MBPS: return r->bytes / secs / 1e6;
    case BENCH_DISK_PER: return r->items > 0 ? r->disk / r->items : 0;
    case BENCH_US_PER: return r->items > 0 ? r->secs * 1e6 / r->items : 0;
    case BENCH_SECS_MS: return r->secs * 1e3;
    }
    return 0;
}

bench_stat bench_variant_stat(const bench_variant *v, bench_metric m)
{
    double vals[BENCH_REPS_MAX];
    for (int i = 0; i < v->n_runs; i++)
        vals[i] = metric_of(&v->runs[i], m);
    return bench_stat_of(vals, v->n_runs);
}

/* ------------------------------------------------------------------ rows */

bench_row bench_row_make(const char *section, const char *unit, bench_metric m,
                         const bench_variant *envlog, const bench_variant *sqlite,
                         const char *fmt, ...)
{
    bench_row r;
    memset(&r, 0, sizeof r);
    r.section = section;
    r.unit = unit;
    r.higher_better = m == BENCH_RATE || m == BENCH_MBPS;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.metric, sizeof r.metric, fmt, ap);
    va_end(ap);
    if (envlog) {
        r.has_envlog = true;
        r.envlog = bench_variant_stat(envlog, m);
    }
    if (sqlite) {
        r.has_sqlite = true;
        r.sqlite = bench_variant_stat(sqlite, m);
    }
    return r;
}

void bench_row_limit(bench_row *r, double limit, const char *by)
{
    if (limit > 0) {
        r->has_limit = true;
        r->limit = limit;
        r->limit_by = by;
    }
}

bench_row bench_row_of_limit(const char *unit, bench_metric m, const bench_variant *v,
                             const char *by, const char *fmt, ...)
{
    bench_row r;
    memset(&r, 0, sizeof r);
    r.section = "limits";
    r.unit = unit;
    r.higher_better = m == BENCH_RATE || m == BENCH_MBPS;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.metric, sizeof r.metric, fmt, ap);
    va_end(ap);
    r.has_limit_stat = true;
    r.limit_stat = bench_variant_stat(v, m);
    bench_row_limit(&r, r.limit_stat.median, by);
    return r;
}

/* Three significant digits with an SI suffix: 1.23M, 45.6k, 789, 0.0123. */
static void fmt_num(char *out, size_t size, double v)
{
    double a = fabs(v);
    if (a >= 1e9)
        snprintf(out, size, "%.3gG", v / 1e9);
    else if (a >= 1e6)
        snprintf(out, size, "%.3gM", v / 1e6);
    else if (a >= 1e4)
        snprintf(out, size, "%.3gk", v / 1e3);
    else if (a >= 100)
        snprintf(out, size, "%.0f", v);
    else
        snprintf(out, size, "%.3g", v);
}

static bool ratio_of(const bench_row *r, double *out)
{
    if (!r->has_envlog || !r->has_sqlite || r->sqlite.median == 0)
        return false;
    *out = r->envlog.median / r->sqlite.median;
    return true;
}

/* The fraction of the limit envlog reaches (1 = at the limit). */
static bool share_of(const bench_row *r, double *out)
{
    if (!r->has_envlog || !r->has_limit || r->envlog.median == 0)
        return false;
    *out = r->higher_better ? r->envlog.median / r->limit
                            : r->limit / r->envlog.median;
    return true;
}

static double spread_pct(const bench_stat *s)
{
    if (s->median == 0)
        return 0;
    double d = fmax(s->median - s->min, s->max - s->median);
    return 100.0 * d / fabs(s->median);
}

#define TABLE_FMT "%-14s %-44s %-6s %9s %9s %8s %9s %-10s %6s %6s %6s\n"

void bench_table_begin(void)
{
    if (bench_o.json)
        return;
    fprintf(bench_out, TABLE_FMT, "section", "metric", "unit", "envlog", "sqlite", "ratio",
           "limit", "bound", "share", "spr.e", "spr.s");
}

int bench_rows_emitted(void)
{
    return rows_emitted;
}

static void fputc_out(int c)
{
    fputc(c, bench_out);
}

static void json_stat(const char *name, bool has, const bench_stat *s)
{
    if (!has) {
        fprintf(bench_out, ",\"%s\":null", name);
        return;
    }
    fprintf(bench_out, ",\"%s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g,\"q1\":%.6g,"
           "\"q3\":%.6g,\"n\":%d}",
           name, s->median, s->min, s->max, s->q1, s->q3, s->n);
}

static void json_str(const char *s)
{
    fputc_out('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(bench_out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(bench_out, "\\u%04x", *s);
        else
            fputc_out(*s);
    }
    fputc_out('"');
}

void bench_emit(const bench_row *r)
{
    double ratio = 0, share = 0;
    bool has_ratio = ratio_of(r, &ratio), has_share = share_of(r, &share);
    rows_emitted++;
    if (bench_o.json) {
        fprintf(bench_out, "{\"section\":");
        json_str(r->section);
        fprintf(bench_out, ",\"metric\":");
        json_str(r->metric);
        fprintf(bench_out, ",\"unit\":");
        json_str(r->unit);
        fprintf(bench_out, ",\"better\":\"%s\"", r->higher_better ? "higher" : "lower");
        json_stat("envlog", r->has_envlog, &r->envlog);
        json_stat("sqlite", r->has_sqlite, &r->sqlite);
        if (r->baseline) {
            fprintf(bench_out, ",\"baseline\":");
            json_str(r->baseline);
        }
        if (has_ratio)
            fprintf(bench_out, ",\"ratio\":%.6g", ratio);
        else
            fprintf(bench_out, ",\"ratio\":null");
        if (r->has_limit) {
            fprintf(bench_out, ",\"limit\":%.6g,\"limit_by\":", r->limit);
            json_str(r->limit_by);
        } else {
            fprintf(bench_out, ",\"limit\":null,\"limit_by\":null");
        }
        if (has_share)
            fprintf(bench_out, ",\"share\":%.6g", share);
        else
            fprintf(bench_out, ",\"share\":null");
        if (r->has_limit_stat)
            json_stat("limit_stat", true, &r->limit_stat);
        fprintf(bench_out, "}\n");
        fflush(bench_out);
        return;
    }
    char e[32] = "-", s[32] = "-", ra[32] = "-", li[32] = "-", sh[32] = "-";
    char se[16] = "-", ss[16] = "-";
    if (r->has_envlog) {
        fmt_num(e, sizeof e, r->envlog.median);
        snprintf(se, sizeof se, "%.0f%%", spread_pct(&r->envlog));
    } else if (r->has_limit_stat) {
        snprintf(se, sizeof se, "%.0f%%", spread_pct(&r->limit_stat));
    }
    if (r->has_sqlite) {
        fmt_num(s, sizeof s, r->sqlite.median);
        snprintf(ss, sizeof ss, "%.0f%%", spread_pct(&r->sqlite));
    }
    if (has_ratio)
        snprintf(ra, sizeof ra, ratio >= 100 ? "%.0fx" : "%.3gx", ratio);
    if (r->has_limit)
        fmt_num(li, sizeof li, r->limit);
    if (has_share)
        snprintf(sh, sizeof sh, share >= 0.1 ? "%.0f%%" : "%.2g%%", 100 * share);
    fprintf(bench_out, TABLE_FMT, r->section, r->metric, r->unit, e, s, ra, li,
           r->has_limit ? r->limit_by : "-", sh, se, ss);
    fflush(bench_out);
}

/* ------------------------------------------------------------- self-test */

void bench_selftest_harness(void)
{
    double v[] = {5, 1, 3, 2, 4};
    bench_stat s = bench_stat_of(v, 5);
    bench_expect(s.n == 5 && s.median == 3 && s.min == 1 && s.max == 5 &&
                     s.q1 == 2 && s.q3 == 4,
                 "statistics of 1..5: median %g q1 %g q3 %g", s.median, s.q1, s.q3);
    double w[] = {10, 20};
    s = bench_stat_of(w, 2);
    bench_expect(s.median == 15, "median of 10, 20 is %g", s.median);
    char b[32];
    fmt_num(b, sizeof b, 1234567);
    bench_expect(!strcmp(b, "1.23M"), "1234567 formats as %s", b);
    fmt_num(b, sizeof b, 0.5);
    bench_expect(!strcmp(b, "0.5"), "0.5 formats as %s", b);
    bench_row r;
    memset(&r, 0, sizeof r);
    r.has_envlog = r.has_sqlite = r.has_limit = true;
    r.higher_better = false;
    r.envlog.median = 200;
    r.sqlite.median = 1000;
    r.limit = 100;
    double x = 0;
    bench_expect(ratio_of(&r, &x) && x == 0.2, "ratio 200/1000 is %g", x);
    bench_expect(share_of(&r, &x) && x == 0.5, "share of a lower-better limit %g", x);
}
