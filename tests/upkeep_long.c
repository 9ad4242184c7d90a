/* SPDX-License-Identifier: MIT */
/*
 * upkeep_long.c - an application that only records, for thousands of
 * sessions, on an environment with the default settings (envlog(5),
 * MAINTENANCE).
 *
 *   upkeep-long [-n SESSIONS] [-d DIR]
 *
 * Each session records three tunes and a compile, drawn from a fixed set of
 * keys (so most of them lose to the first value, as a runtime that re-tunes
 * would record them) and ends; the compactions its session ends start run
 * in detached processes, which this one adopts as their subreaper and waits
 * for before the next session (sessions that last longer than a
 * compaction).  After every session:
 *  - the session directories are at most 2 x 16 x compact_sessions (a
 *    compaction waits, past compact_sessions, for its sessions to hold
 *    1/64 of the snapshot, up to 16 x compact_sessions of them; a session
 *    stays one compaction more than the snapshot that folds it);
 *  - the bytes on disk are under the bound the documented policy gives:
 *    two snapshot generations of the entries, the head and the history the
 *    retention keeps (history_sessions session records), plus the session
 *    directories.
 * At the end the state is the fold of everything recorded (the first value
 * of each key), the snapshot keeps the history of the newest
 * history_sessions sessions and no more, and the time from opening to the
 * first lookup is printed at 1, 10, 100, 1,000 sessions and the end (never
 * asserted).  Exit 0 when all held.
 */
#include "replay_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N_TUNE_KEYS 40
#define N_KERNELS 25
#define BINARY 512

static const char *const CANDS[] = {"bm64", "bm128", "bm256"};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fail(const char *what)
{
    fprintf(stderr, "upkeep-long: %s: %s\n", what, envlog_errmsg());
    return 2;
}

static uint64_t tree_bytes(const char *path, uint64_t *dirs)
{
    DIR *d = opendir(path);
    uint64_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        struct stat st;
        if (lstat(p, &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (dirs)
                (*dirs)++;
            n += tree_bytes(p, NULL);
        } else {
            n += (uint64_t)st.st_size;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static void key_of(unsigned k, char *out, size_t size)
{
    snprintf(out, size, "matmul/m=%u,n=1024,k=1024", 64 * (k + 1));
}

static envlog_hash128 kernel_key(unsigned k)
{
    envlog_hash128 h;
    for (int i = 0; i < 16; i++)
        h.b[i] = (uint8_t)(k * 31 + (unsigned)i);
    return h;
}

/* One session: tunes of keys 3i..3i+2 (mod the set), a compile of kernel i
 * (mod the set); the winner and the binary depend on i, so a later value
 * differs from the first one, which stands. */
static int one_session(envlog_env *env, unsigned i)
{
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = "long";
    o.runtime = "upkeep-long";
    o.runtime_version = "1";
    envlog_session *s;
    if (envlog_session_begin(env, &o, &s))
        return fail("beginning a session");
    for (unsigned j = 0; j < 3; j++) {
        char key[64];
        key_of((3 * i + j) % N_TUNE_KEYS, key, sizeof key);
        envlog_trial tr[3];
        for (int c = 0; c < 3; c++)
            tr[c] = (envlog_trial){.name = CANDS[c], .index = (uint32_t)c, .samples = 5,
                                   .min_ns = 1000 + 100 * c, .median_ns = 1100 + 100 * c,
                                   .mean_ns = 1100 + 100 * c, .max_ns = 1500 + 100 * c};
        envlog_tune t = {.ns = "autotune/long/1.0/sm_90", .key = key,
                         .checksum = envlog_tune_checksum(CANDS, 3), .candidates = CANDS,
                         .n_candidates = 3, .trials = tr, .n_trials = 3, .policy = "min",
                         .winner = (int64_t)(i % 3), .stored = true};
        if (envlog_record_tune(s, &t, NULL))
            return fail("recording a tune");
    }
    uint8_t bin[BINARY];
    memset(bin, (int)(i & 0xff), sizeof bin);
    envlog_compile c = {.ns = "nvrtc/12.4/sm_90", .name = "gemm",
                        .kernel_key = kernel_key(i % N_KERNELS), .outcome = ENVLOG_COMPILED,
                        .binary = {bin, sizeof bin}};
    if (envlog_record_compile(s, &c, NULL))
        return fail("recording a compile");
    if (envlog_session_end(s))
        return fail("ending a session");
    return 0;
}

/* Open and one lookup, as a runtime's start does. */
static double first_lookup_ms(const char *dir)
{
    uint64_t t0 = now_ns();
    envlog_env *env;
    envlog_state *st;
    char key[64];
    key_of(0, key, sizeof key);
    envlog_tune_entry e;
    if (envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env) || envlog_env_state(env, &st) ||
        envlog_state_winner(st, "autotune/long/1.0/sm_90", key,
                            envlog_tune_checksum(CANDS, 3), &e)) {
        fprintf(stderr, "upkeep-long: first lookup: %s\n", envlog_errmsg());
        exit(2);
    }
    double ms = (double)(now_ns() - t0) / 1e6;
    envlog_env_close(env);
    return ms;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

int main(int argc, char **argv)
{
    unsigned n = 5000;
    const char *base = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "n:d:")) != -1) {
        switch (opt) {
        case 'n': n = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'd': base = optarg; break;
        default: fprintf(stderr, "usage: upkeep-long [-n SESSIONS] [-d DIR]\n"); return 2;
        }
    }
    const char *tmp = getenv("TMPDIR");
    char work[4096], dir[4200];
    snprintf(work, sizeof work, "%s/envlog-long-XXXXXX", base ? base : tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work)) {
        perror("upkeep-long: mkdtemp");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s/env", work);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1)) {
        perror("upkeep-long: prctl");
        return 2;
    }
    envlog_env *env;
    if (envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env))
        return fail("creating the environment");
    envlog_config cfg;
    envlog_config_defaults(&cfg);
    printf("upkeep-long: %u sessions with the default settings (compaction at %llu sessions "
           "or %llu bytes, history of %llu sessions)\n", n,
           (unsigned long long)cfg.compact_sessions, (unsigned long long)cfg.compact_bytes,
           (unsigned long long)cfg.history_sessions);
    fflush(stdout);
    uint64_t max_dirs = 0, max_bytes = 0, max_session = 0, compactions = 0, bound = 0;
    int failures = 0;
    uint64_t t0 = now_ns();
    for (unsigned i = 0; i < n; i++) {
        if (one_session(env, i))
            return 2;
        int st;
        for (pid_t c; (c = waitpid(-1, &st, 0)) > 0 || errno == EINTR;)
            if (c > 0) {
                compactions++;
                if (!WIFEXITED(st) || WEXITSTATUS(st)) {
                    fprintf(stderr, "upkeep-long: a compaction ended with status %d\n", st);
                    failures++;
                }
            }
        uint64_t dirs = 0;
        char sdir[4300];
        snprintf(sdir, sizeof sdir, "%s/sessions", dir);
        uint64_t sbytes = tree_bytes(sdir, &dirs);
        uint64_t bytes = tree_bytes(dir, NULL);
        if (dirs && sbytes / dirs > max_session)
            max_session = sbytes / dirs;
        /* The policy's bound: two generations, each at most the head, the
         * entries and the session records of the newest history_sessions
         * sessions (every record counted as one of the largest, with its
         * wrapper and watermark), plus the session directories. */
        uint64_t entries = (uint64_t)N_TUNE_KEYS * (700 + 96) + (uint64_t)N_KERNELS * (BINARY + 400 + 96);
        uint64_t history = cfg.history_sessions * (300 + 64 + 48);
        uint64_t most = ENVLOG_COMPACT_SHARE / 4 * cfg.compact_sessions;
        bound = 2 * (8192 + entries + history) + 2 * most * max_session;
        if (dirs > max_dirs)
            max_dirs = dirs;
        if (bytes > max_bytes)
            max_bytes = bytes;
        if (dirs > 2 * ENVLOG_COMPACT_SHARE / 4 * cfg.compact_sessions && failures++ < 5)
            fprintf(stderr, "upkeep-long: %llu session directories after session %u\n",
                    (unsigned long long)dirs, i + 1);
        if (bytes > bound && failures++ < 5)
            fprintf(stderr, "upkeep-long: %llu bytes after session %u, over the bound %llu\n",
                    (unsigned long long)bytes, i + 1, (unsigned long long)bound);
        unsigned k = i + 1;
        if (k == 1 || k == 10 || k == 100 || k == 1000 || k == n)
            printf("upkeep-long: after %5u sessions: %3llu session directories, %8llu bytes, "
                   "open + first lookup %.3f ms\n", k, (unsigned long long)dirs,
                   (unsigned long long)bytes, first_lookup_ms(dir));
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    /* The state: the first value of every key stands. */
    envlog_state *st;
    if (envlog_state_open(env, NULL, &st))
        return fail("folding the environment");
    envlog_state_stats ss;
    envlog_state_stats_get(st, &ss);
    unsigned want_tunes = n * 3 < N_TUNE_KEYS ? n * 3 : N_TUNE_KEYS;
    unsigned want_kernels = n < N_KERNELS ? n : N_KERNELS;
    if (ss.tunes != want_tunes || ss.kernels != want_kernels) {
        fprintf(stderr, "upkeep-long: %llu tunes and %llu kernels stand, want %u and %u\n",
                (unsigned long long)ss.tunes, (unsigned long long)ss.kernels, want_tunes,
                want_kernels);
        failures++;
    }
    for (unsigned k = 0; k < want_tunes; k++) {
        char key[64];
        key_of(k, key, sizeof key);
        envlog_tune_entry e;
        /* Key k is first tuned by session k / 3, whose winner is its
         * number mod 3. */
        if (envlog_state_winner(st, "autotune/long/1.0/sm_90", key,
                                envlog_tune_checksum(CANDS, 3), &e) ||
            e.winner_index != (int64_t)((k / 3) % 3) || e.rule != ENVLOG_RULE_FIRST_LOCAL) {
            fprintf(stderr, "upkeep-long: %s does not stand as first recorded\n", key);
            failures++;
        }
    }
    for (unsigned k = 0; k < want_kernels; k++) {
        envlog_hash128 kk = kernel_key(k);
        envlog_kernel_entry e;
        if (envlog_state_kernel(st, "nvrtc/12.4/sm_90", &kk, &e) ||
            e.binary.size != BINARY || ((const uint8_t *)e.binary.data)[0] != (uint8_t)k) {
            fprintf(stderr, "upkeep-long: kernel %u does not stand as first compiled\n", k);
            failures++;
        }
    }
    envlog_state_close(st);
    /* The history: the session records of the newest history_sessions
     * sessions, and the setters', no more. */
    envlog_upkeep u;
    if (envlog_upkeep_get(env, &u))
        return fail("reading the upkeep");
    envlog_snap *snap = NULL;
    int gen;
    uint64_t kept_sessions = 0;
    if (envlog_snap_pick(env, false, NULL, NULL, &snap, &gen) == ENVLOG_OK && snap) {
        envlog_snap_item it;
        envlog_record rec;
        while (envlog_snap_next(snap, &it, &rec) == ENVLOG_OK)
            kept_sessions += it.kind == ENVLOG_KIND_EVIDENCE && rec.kind == ENVLOG_KIND_SESSION;
        envlog_snap_unmap(snap);
    }
    uint64_t setters = (N_TUNE_KEYS + 2) / 3 + N_KERNELS;
    if (n > cfg.history_sessions + 2 * ENVLOG_COMPACT_SHARE / 4 * cfg.compact_sessions &&
        kept_sessions > cfg.history_sessions + setters) {
        fprintf(stderr, "upkeep-long: the snapshot keeps %llu session records\n",
                (unsigned long long)kept_sessions);
        failures++;
    }
    envlog_env_close(env);
    printf("upkeep-long: %u sessions in %.1f s, %llu automatic compactions (the last: %s); at "
           "most %llu session directories (bound %llu) and %llu bytes (bound %llu); the "
           "snapshot keeps %llu session records; %u tunes and %u kernels stand as first "
           "recorded: %s\n",
           n, secs, (unsigned long long)compactions, u.last_reason,
           (unsigned long long)max_dirs,
           (unsigned long long)(2 * ENVLOG_COMPACT_SHARE / 4 * cfg.compact_sessions),
           (unsigned long long)max_bytes, (unsigned long long)bound,
           (unsigned long long)kept_sessions, want_tunes, want_kernels,
           failures ? "FAILED" : "ok");
    if (!failures)
        nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    else
        fprintf(stderr, "upkeep-long: environment kept in %s\n", dir);
    return failures ? 1 : 0;
}
