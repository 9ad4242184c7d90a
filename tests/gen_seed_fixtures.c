/* SPDX-License-Identifier: MIT */
/*
 * gen_seed_fixtures.c - writes the environments under fixtures/seed/ that
 * the rebuild, diff and why golden tests of issue 15's behaviours read
 * (tests/cli/{rebuild,diff,why}-seed-*).
 *
 * Run by hand (`make fixtures-seed`) and committed, as gen_replay_fixtures.c
 * is: ids and times are then fixed.  `make check` builds it and runs it into
 * a scratch directory, so it cannot rot unnoticed.
 *
 *   rebuild/   at BASIC: a kernel whose source was recorded on its own (an
 *              "envlog-cuda/source" record), and one with no source at all
 *   empty/     an environment with a session that records no compile
 *   why/       one tune whose trials stopped every way the adaptive policy
 *              stops them (converged, dropped, sample limit, error), and a
 *              later tune of the key that lost to it
 *   why-compacted/  the same, compacted at evidence none: the trials and
 *              the losing tune are gone, the entry stays
 *   diff-a/, diff-b/  one machine's tunes under runtime 0.10.0 and the same
 *              keys under 0.11.0: a candidate list grown, a winner changed
 *              within noise, a winner changed outside it, a tune time
 *              changed, a key moved to another device, and a key only in B
 *
 * Uses only the public API, like any other program that records.
 */
#include "envlog.h"
#include "envlog_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *out_root;

static void ok(envlog_err e, const char *what)
{
    if (e) {
        fprintf(stderr, "gen_seed_fixtures: %s: %s (%s)\n", what, envlog_errmsg(),
                envlog_strerror(e));
        exit(2);
    }
}

/* Lets the clock move, so records of different sessions never tie. */
static void tick(void)
{
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

static envlog_env *env_new(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", out_root, name);
    envlog_env *env;
    ok(envlog_env_open(p, ENVLOG_OPEN_CREATE | ENVLOG_OPEN_NO_UPKEEP, &env), p);
    return env;
}

static envlog_session *begin_on(envlog_env *env, const char *label, envlog_level level,
                                const char *runtime_version, const char *device)
{
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = label;
    o.level = level;
    o.runtime = "envlog-cuda";
    o.runtime_version = runtime_version;
    o.auto_compact = -1;
    if (device) {
        o.devices = &device;
        o.n_devices = 1;
    }
    envlog_session *s;
    ok(envlog_session_begin(env, &o, &s), "beginning a session");
    tick();
    return s;
}

static envlog_session *begin(envlog_env *env, const char *label, envlog_level level,
                             const char *runtime_version)
{
    return begin_on(env, label, level, runtime_version, NULL);
}

/* A candidate's trial as the adaptive policy leaves one. */
typedef struct trial_spec {
    const char *name;
    uint64_t samples;
    double median, stddev;
    const char *error;
} trial_spec;

/* A tune measured by the adaptive policy (envlog-cuda(3)), its parameters
 * the defaults; the winner is the lowest median. */
static void tuned(envlog_session *s, const char *ns, const char *key, const trial_spec *ts,
                  size_t n, double margin, bool within_noise, uint64_t wall_ns)
{
    const char *names[8];
    envlog_trial tr[8];
    int64_t winner = -1;
    for (size_t i = 0; i < n; i++) {
        names[i] = ts[i].name;
        double m = ts[i].median;
        tr[i] = (envlog_trial){.name = ts[i].name, .index = (uint32_t)i,
                               .samples = ts[i].error ? 0 : ts[i].samples,
                               .min_ns = m * 0.97, .median_ns = m, .mean_ns = m * 1.01,
                               .max_ns = m * 1.2, .stddev_ns = ts[i].stddev,
                               .error = ts[i].error};
        if (!ts[i].error && (winner < 0 || m < ts[winner].median))
            winner = (int64_t)i;
    }
    envlog_param params[] = {{"warmup", 1},      {"min_samples", 5}, {"max_samples", 50},
                             {"drop_factor", 2}, {"rel_tol", 0.01},  {"noise_z", 2}};
    envlog_tune t = {.ns = ns, .key = key, .checksum = envlog_tune_checksum(names, n),
                     .candidates = names, .n_candidates = n, .trials = tr, .n_trials = n,
                     .policy = "adaptive-median/cuda-events", .params = params,
                     .n_params = sizeof params / sizeof params[0], .winner = winner,
                     .margin = margin, .within_noise = within_noise, .wall_ns = wall_ns,
                     .stored = winner >= 0};
    ok(envlog_record_tune(s, &t, NULL), "a tune record");
    tick();
}

/* A source record as the CUDA runtime writes one (envlog-cuda(3)). */
static void source_record(envlog_session *s, const char *src)
{
    size_t n = strlen(src);
    if (n > 255)
        exit(2);
    uint8_t b[300];
    envlog_hash128 h = envlog_hash128_bytes(src, n);
    b[0] = 0x82;
    b[1] = 0x50;
    memcpy(b + 2, h.b, 16);
    b[18] = 0x78; /* text, one length byte */
    b[19] = (uint8_t)n;
    memcpy(b + 20, src, n);
    ok(envlog_record_user(s, ENVLOG_CUDA_SOURCE_KIND, b, 20 + n, ENVLOG_OBSERVED, NULL),
       "a source record");
}

static void compiled(envlog_session *s, const char *name, const char *src, const char *arch)
{
    envlog_cuda_kernel_desc d = {name, src, "", arch};
    envlog_compile c = {.name = name, .options = "", .compiler_version = "13.0.88",
                        .arch = arch, .outcome = ENVLOG_COMPILED, .duration_ns = 1000000,
                        .log = ""};
    char ns[128];
    snprintf(ns, sizeof ns, "kernel/envlog-cuda/0.1.0/%s/nvrtc-13.0.88", arch);
    c.ns = ns;
    ok(envlog_cuda_kernel_key(&d, "13.0.88", &c.kernel_key), "a kernel key");
    c.source_hash = envlog_hash128_bytes(src, strlen(src));
    char bin[64];
    snprintf(bin, sizeof bin, "binary of %s for %s", name, arch);
    c.binary = (envlog_bytes){bin, strlen(bin)};
    c.binary_hash = envlog_hash128_bytes(bin, strlen(bin));
    c.binary_size = strlen(bin);
    ok(envlog_record_compile(s, &c, NULL), "a compile record");
}

static void gen_rebuild(void)
{
    envlog_env *env = env_new("rebuild");
    envlog_session *s = begin(env, "rebuild-fixture", ENVLOG_LEVEL_BASIC, "0.1.0");
    const char *scale = "extern \"C\" __global__ void scale(float *x) { x[0] *= 2.0f; }\n";
    source_record(s, scale);
    compiled(s, "scale", scale, "sm_80");
    compiled(s, "shift", "extern \"C\" __global__ void shift(float *x) { x[0] += 1.0f; }\n",
             "sm_80");
    ok(envlog_session_end(s), "ending a session");
    envlog_env_close(env);
}

static void gen_empty(void)
{
    envlog_env *env = env_new("empty");
    envlog_session *s = begin(env, "empty-fixture", ENVLOG_LEVEL_BASIC, "0.1.0");
    ok(envlog_record_forget(s,
                            &(envlog_forget){.table = ENVLOG_TABLE_TUNE, .ns = "tune/x/1/cpu",
                                             .key = "none", .reason = "a session on disk"},
                            NULL),
       "a forget");
    ok(envlog_session_end(s), "ending a session");
    envlog_env_close(env);
}

#define NS_H100(v) "autotune/envlog-cuda/" v "/H100-SXM5-80GB:sm_90"

static const trial_spec matmul[] = {
    {"mm_128x64", 9, 12100, 300, NULL},   /* converged */
    {"mm_64x64", 5, 41000, 90, NULL},     /* over twice the best before it */
    {"mm_128x128", 50, 13900, 2100, NULL}, /* never settled */
    {"mm_256x128", 0, 0, 0, "too many resources requested for launch"},
    {"mm_128x256", 7, 12650, 250, NULL},
};

static void why_history(envlog_env *env)
{
    envlog_session *s = begin_on(env, "tuner-1", ENVLOG_LEVEL_BASIC, "0.11.0",
                                 "H100-SXM5-80GB:sm_90");
    tuned(s, NS_H100("0.11.0"), "matmul/1024x1024", matmul, 5, 12650.0 / 12100 - 1, false,
          38200000);
    ok(envlog_session_end(s), "ending a session");
    s = begin_on(env, "tuner-2", ENVLOG_LEVEL_BASIC, "0.11.0", "H100-SXM5-80GB:sm_90");
    static const trial_spec again[] = {
        {"mm_128x64", 8, 12500, 310, NULL},    {"mm_64x64", 5, 40100, 80, NULL},
        {"mm_128x128", 50, 13600, 2000, NULL}, {"mm_256x128", 0, 0, 0, "too many resources requested for launch"},
        {"mm_128x256", 6, 12300, 240, NULL},
    };
    tuned(s, NS_H100("0.11.0"), "matmul/1024x1024", again, 5, 12500.0 / 12300 - 1, true,
          35900000);
    ok(envlog_session_end(s), "ending a session");
}

static void gen_why(void)
{
    envlog_env *env = env_new("why");
    why_history(env);
    envlog_env_close(env);
    env = env_new("why-compacted");
    why_history(env);
    envlog_compact_report rep;
    ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, &rep), "compacting");
    envlog_env_close(env);
}

static void gen_diff(void)
{
    static const trial_spec reduce_a[] = {{"tree", 8, 5020, 60, NULL},
                                          {"warp", 8, 5080, 70, NULL}};
    static const trial_spec reduce_b[] = {{"tree", 8, 5090, 60, NULL},
                                          {"warp", 8, 5040, 70, NULL}};
    static const trial_spec softmax_a[] = {{"online", 6, 3100, 20, NULL},
                                           {"two_pass", 6, 4400, 30, NULL}};
    static const trial_spec softmax_b[] = {{"online", 6, 4700, 20, NULL},
                                           {"two_pass", 6, 3900, 30, NULL}};
    static const trial_spec scan[] = {{"blelloch", 6, 2200, 15, NULL},
                                      {"hillis", 6, 2600, 20, NULL}};
    static const trial_spec conv[] = {{"direct", 6, 9100, 40, NULL},
                                      {"winograd", 6, 7300, 35, NULL}};
    envlog_env *env = env_new("diff-a");
    envlog_session *s = begin_on(env, "nightly-0.10", ENVLOG_LEVEL_BASIC, "0.10.0",
                                 "H100-SXM5-80GB:sm_90");
    tuned(s, NS_H100("0.10.0"), "matmul/1024x1024", matmul, 3, 13900.0 / 12100 - 1, false,
          21000000);
    tuned(s, NS_H100("0.10.0"), "reduce/4096", reduce_a, 2, 5080.0 / 5020 - 1, true, 900000);
    tuned(s, NS_H100("0.10.0"), "softmax/256", softmax_a, 2, 4400.0 / 3100 - 1, false,
          1200000);
    tuned(s, NS_H100("0.10.0"), "scan/32", scan, 2, 2600.0 / 2200 - 1, false, 400000);
    ok(envlog_session_end(s), "ending a session");
    envlog_env_close(env);

    env = env_new("diff-b");
    s = begin_on(env, "nightly-0.11", ENVLOG_LEVEL_BASIC, "0.11.0", "H100-SXM5-80GB:sm_90");
    tuned(s, NS_H100("0.11.0"), "matmul/1024x1024", matmul, 5, 12650.0 / 12100 - 1, false,
          38200000);
    tuned(s, NS_H100("0.11.0"), "reduce/4096", reduce_b, 2, 5090.0 / 5040 - 1, true, 950000);
    tuned(s, NS_H100("0.11.0"), "softmax/256", softmax_b, 2, 4700.0 / 3900 - 1, false,
          2900000);
    tuned(s, NS_H100("0.11.0"), "conv/3x3", conv, 2, 9100.0 / 7300 - 1, false, 700000);
    ok(envlog_session_end(s), "ending a session");
    s = begin_on(env, "nightly-0.11-a100", ENVLOG_LEVEL_BASIC, "0.11.0", "A100-SXM4-40GB:sm_80");
    tuned(s, "autotune/envlog-cuda/0.11.0/A100-SXM4-40GB:sm_80", "scan/32", scan, 2,
          2600.0 / 2200 - 1, false, 410000);
    ok(envlog_session_end(s), "ending a session");
    envlog_env_close(env);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seed_fixtures DIR\n");
        return 2;
    }
    out_root = argv[1];
    gen_rebuild();
    gen_empty();
    gen_why();
    gen_diff();
    return 0;
}
