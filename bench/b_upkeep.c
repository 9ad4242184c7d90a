/* SPDX-License-Identifier: MIT */
/*
 * b_upkeep.c - the first lookup of an environment that maintains itself,
 * after 1, 10, 100, 1,000 and 10,000 recorded sessions.
 *
 * The data is built once per size (untimed): sessions of a runtime that
 * only records, each three tunes and a compile of a 4 KiB kernel, with the
 * default settings, so the environment compacts itself at session ends (in
 * detached processes, which this process adopts and waits for: sessions
 * last longer than a compaction).  Beside it, the same environment
 * compacted by hand (twice, so no session directory is left), and a SQLite
 * file holding the same entries (as the lookup section's).
 *
 * One timed operation is a fresh open and first lookup of a random key
 * that stands, as a runtime's start pays it (its own process start aside):
 *  - envlog: the environment as it maintained itself;
 *  - SQLite: open + indexed select + decode;
 *  - the limit column: the environment compacted by hand (the target: the
 *    self-maintained one within 2x of it, under 1 ms at 10,000 sessions).
 * Beside each, untimed by the harness but clocked as it is recorded: how
 * long a session end takes when it starts a compaction, against the
 * median of those that do not (the limit column).
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define UK_KEYS 3000     /* distinct tune keys the sessions draw from */
#define UK_KERNELS 500
#define UK_BINARY 4096

typedef enum uk_side { UK_AUTO, UK_SQLITE, UK_COMPACTED, UK_SIDES } uk_side;

typedef struct uk_ctx {
    uk_side side;
    const char *env, *db;
    uint64_t keys;       /* keys that stand: 0 .. keys-1 */
    uint64_t ops;
    uint64_t draw;
} uk_ctx;

static uint64_t uk_draw(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ULL;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    return z ^ (z >> 31);
}

/* Waits for the compactions this process adopted. */
static unsigned uk_reap(void)
{
    unsigned n = 0;
    int st;
    for (pid_t c; (c = waitpid(-1, &st, 0)) > 0 || errno == EINTR;)
        n += c > 0;
    return n;
}

/* How long the session ends took, those that started a compaction apart
 * (microseconds). */
typedef struct uk_ends {
    double *plain, *trigger;
    int n_plain, n_trigger;
} uk_ends;

/* N sessions with the default settings into a new environment at `path`. */
static unsigned uk_record(const char *path, uint64_t n, uk_ends *ends)
{
    envlog_env *env;
    bench_tune bt;
    bench_compile bc;
    unsigned compactions = 0;
    bench_tune_init(&bt);
    bench_compile_init(&bc, UK_BINARY);
    bench_check(envlog_env_open(path, ENVLOG_OPEN_CREATE, &env), "creating the environment");
    for (uint64_t i = 0; i < n; i++) {
        envlog_session_opts o;
        envlog_session_opts_init(&o);
        o.label = "upkeep";
        envlog_session *s;
        bench_check(envlog_session_begin(env, &o, &s), "beginning a session");
        for (uint64_t j = 0; j < 3; j++) {
            bench_tune_fill(&bt, (3 * i + j) % UK_KEYS);
            bench_check(envlog_record_tune(s, &bt.t, NULL), "recording a tune");
        }
        bench_compile_fill(&bc, i % UK_KERNELS);
        bench_check(envlog_record_compile(s, &bc.c, NULL), "recording a compile");
        uint64_t t0 = bench_now_ns();
        bench_check(envlog_session_end(s), "ending a session");
        double us = (double)(bench_now_ns() - t0) / 1e3;
        unsigned started = uk_reap();
        compactions += started;
        if (started)
            ends->trigger[ends->n_trigger++] = us;
        else
            ends->plain[ends->n_plain++] = us;
    }
    envlog_env_close(env);
    bench_compile_free(&bc);
    return compactions;
}

static void run_first_lookup(void *vctx, double scale, bench_run *out)
{
    uk_ctx *c = vctx;
    bench_tune bt;
    uint64_t ops = (uint64_t)((double)c->ops * scale);
    double secs = 0;
    if (!ops)
        ops = 1;
    bench_tune_init(&bt);
    for (uint64_t i = 0; i < ops; i++) {
        bench_tune_fill(&bt, uk_draw(&c->draw) % c->keys);
        secs += (double)(c->side == UK_SQLITE ? bench_first_select(c->db, &bt, NULL)
                                              : bench_first_lookup(c->env, &bt, NULL)) /
                1e9;
    }
    *out = (bench_run){secs, (double)ops, 0, 0};
}

static void upkeep_row(uint64_t n)
{
    char dir[4096], autoenv[4200], handenv[4200], db[4200], cmd[9000];
    bench_new_dir(dir, sizeof dir, "upkeep");
    snprintf(autoenv, sizeof autoenv, "%s/auto", dir);
    snprintf(handenv, sizeof handenv, "%s/hand", dir);
    snprintf(db, sizeof db, "%s/cache.db", dir);
    uk_ends ends = {calloc(n, sizeof(double)), calloc(n, sizeof(double)), 0, 0};
    bench_expect(ends.plain && ends.trigger, "out of memory");
    unsigned compactions = uk_record(autoenv, n, &ends);
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", autoenv, handenv);
    bench_expect(system(cmd) == 0, "copying %s", autoenv);
    envlog_env *env;
    bench_check(envlog_env_open(handenv, 0, &env), "opening the copy");
    for (int i = 0; i < 2; i++)
        bench_check(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL), "compacting by hand");
    uint64_t rows;
    bench_entries_db(env, db, &rows);
    envlog_env_close(env);
    envlog_upkeep u;
    bench_check(envlog_env_open(autoenv, ENVLOG_OPEN_READONLY, &env), "opening");
    bench_check(envlog_upkeep_get(env, &u), "reading the upkeep");
    envlog_env_close(env);
    uint64_t keys = 3 * n < UK_KEYS ? 3 * n : UK_KEYS;
    static const char *const names[UK_SIDES] = {"envlog", "sqlite", "compacted"};
    uk_ctx ctx[UK_SIDES];
    bench_variant v[UK_SIDES];
    for (int i = 0; i < UK_SIDES; i++) {
        ctx[i] = (uk_ctx){(uk_side)i, i == UK_COMPACTED ? handenv : autoenv, db, keys,
                          BENCH_SIZE(200, 100, 4), 0x5eed + (uint64_t)i};
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = names[i];
        v[i].fn = run_first_lookup;
        v[i].ctx = &ctx[i];
    }
    bench_alternate(v, UK_SIDES);
    bench_row r = bench_row_make("upkeep", "us", BENCH_US_PER, &v[UK_AUTO], &v[UK_SQLITE],
                                 "open + first lookup after %" PRIu64 " sessions (%" PRIu64
                                 " pending, %u auto-compactions, %" PRIu64 " KiB)",
                                 n, u.pending_sessions, compactions, u.bytes >> 10);
    bench_row_limit(&r, bench_variant_stat(&v[UK_COMPACTED], BENCH_US_PER).median,
                    "compacted");
    bench_emit(&r);
    /* What a session end that starts a compaction costs its caller (the
     * fork of the detached compactor), beside one that does not. */
    if (ends.n_trigger && ends.n_plain) {
        bench_row e;
        memset(&e, 0, sizeof e);
        e.section = "upkeep";
        e.unit = "us";
        snprintf(e.metric, sizeof e.metric,
                 "session end starting a compaction (%d of %" PRIu64 " sessions)",
                 ends.n_trigger, n);
        e.has_envlog = true;
        e.envlog = bench_stat_of(ends.trigger, ends.n_trigger);
        bench_row_limit(&e, bench_stat_of(ends.plain, ends.n_plain).median, "plain end");
        bench_emit(&e);
    }
    free(ends.plain);
    free(ends.trigger);
    bench_rmtree(dir);
}

void bench_section_upkeep(void)
{
    /* The compactions the session ends start are adopted here and waited
     * for, one session after another. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1))
        bench_die("prctl: %s", strerror(errno));
    static const uint64_t sizes[] = {1, 10, 100, 1000, 10000};
    size_t n = bench_o.selftest ? 2 : bench_o.quick ? 4 : 5;
    for (size_t i = 0; i < n; i++)
        upkeep_row(sizes[i]);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}
