/* SPDX-License-Identifier: MIT */
/*
 * b_scale.c - scaling: the cost per event from a thousand events to ten
 * million, recording at the default policy and reading everything back.
 *
 * Every size records into a fresh environment (one session) at sync=none,
 * so the rows show envlog's own cost per event rather than the disk's (the
 * record sections show what sync=close adds), then reads it back and
 * replays it (envlog_state_open: every record folded, one entry each); the
 * cost per event should stay flat once the fixed cost of a session
 * (directory, segment, and at the default policy a few fdatasyncs) is
 * spread thin.
 * That fixed cost, at the default policy, is its own row.
 */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* envlog_state_open over the environment at `path`: the records folded. */
static uint64_t fold_env(const char *path, uint64_t entries)
{
    envlog_env *env;
    envlog_state *st;
    envlog_state_stats ss;
    bench_check(envlog_env_open(path, ENVLOG_OPEN_READONLY, &env), "opening an environment");
    bench_check(envlog_state_open(env, NULL, &st), "folding an environment");
    envlog_state_stats_get(st, &ss);
    bench_expect(ss.tunes == entries, "the fold holds %" PRIu64 " tunes of %" PRIu64, ss.tunes,
                 entries);
    envlog_state_close(st);
    envlog_env_close(env);
    return ss.records;
}

static void one_size(uint64_t n, const char *label)
{
    bench_variant rec, rd, fold;
    char dir[4200];
    memset(&rec, 0, sizeof rec);
    memset(&rd, 0, sizeof rd);
    memset(&fold, 0, sizeof fold);
    /* Ten million events take a minute a repetition: three of them. */
    int reps = n >= 10000000 && bench_o.reps > 3 ? 3 : bench_o.reps;
    for (int r = -1; r < reps; r++) {
        /* r == -1: the warm-up, at most 10k events, not kept. */
        uint64_t k = r >= 0 ? n : n < 10000 ? n : 10000;
        double bytes = 0;
        bench_fresh_dir(dir, sizeof dir, "scale");
        uint64_t t0 = bench_now_ns();
        uint64_t logged = bench_envlog_record(dir, ENVLOG_SYNC_NONE, k, NULL, 0);
        uint64_t t1 = bench_now_ns();
        uint64_t got = bench_envlog_read(dir, &bytes);
        uint64_t t2 = bench_now_ns();
        uint64_t folded = fold_env(dir, k);
        uint64_t t3 = bench_now_ns();
        bench_expect(got == k + 1 && folded == k + 1, "read %" PRIu64 " and folded %" PRIu64
                     " of %" PRIu64 " records", got, folded, k + 1);
        bench_rmtree(dir);
        if (r < 0)
            continue;
        rec.runs[rec.n_runs++] = (bench_run){(double)(t1 - t0) / 1e9, (double)k, 0,
                                             (double)logged};
        rd.runs[rd.n_runs++] = (bench_run){(double)(t2 - t1) / 1e9, (double)got, bytes, 0};
        fold.runs[fold.n_runs++] = (bench_run){(double)(t3 - t2) / 1e9, (double)folded,
                                               bytes, 0};
    }
    bench_row row = bench_row_make("scale", "ns/ev", BENCH_NS_PER, &rec, NULL,
                                   "record tune, sync=none, %s events", label);
    /* As record-tune's bound for sync=none: the log's bytes into the page
     * cache through the mapping. */
    double per = rec.runs[0].disk / rec.runs[0].items;
    if (bench_lim.mmap_Bps > 0)
        bench_row_limit(&row, 1e9 * per / bench_lim.mmap_Bps, "pagecache");
    bench_emit(&row);
    double lim = bench_read_limit_Bps();
    const bench_variant *back[2] = {&rd, &fold};
    static const char *const what[2] = {"read back", "replay (fold)"};
    for (int i = 0; i < 2; i++) {
        row = bench_row_make("scale", "ns/ev", BENCH_NS_PER, back[i], NULL, "%s, %s events",
                             what[i], label);
        if (lim > 0 && back[i]->runs[0].items > 0)
            bench_row_limit(&row, 1e9 * back[i]->runs[0].bytes / back[i]->runs[0].items / lim,
                            "memcpy+xxh3");
        bench_emit(&row);
    }
}

void bench_section_scale(void)
{
    static const struct {
        uint64_t n;
        const char *label;
    } sz[] = {{1000, "1k"}, {10000, "10k"}, {100000, "100k"},
              {1000000, "1M"}, {10000000, "10M"}};
    size_t count = BENCH_SIZE(5u, 4u, 2u);
    bench_variant life;
    char dir[4200];
    memset(&life, 0, sizeof life);
    for (int r = 0; r < bench_o.reps && r < BENCH_REPS_MAX; r++) {
        bench_fresh_dir(dir, sizeof dir, "life");
        uint64_t t0 = bench_now_ns();
        bench_envlog_record(dir, ENVLOG_SYNC_CLOSE, 1, NULL, 0);
        uint64_t t1 = bench_now_ns();
        bench_rmtree(dir);
        life.runs[life.n_runs++] = (bench_run){(double)(t1 - t0) / 1e9, 1, 0, 0};
    }
    bench_row row = bench_row_make("scale", "us", BENCH_US_PER, &life, NULL,
                                   "fixed cost: create env, 1 tune, seal (close)");
    if (bench_lim.fsync_s > 0)
        bench_row_limit(&row, bench_lim.fsync_s * 1e6, "fdatasync");
    bench_emit(&row);
    for (size_t i = 0; i < count; i++)
        one_size(sz[i].n, sz[i].label);
}
