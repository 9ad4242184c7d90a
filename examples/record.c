/* SPDX-License-Identifier: MIT */
/*
 * record.c - an example of recording into an environment with envlog.
 *
 * It records three sessions into the environment given as argv[1] (or the
 * default one): one that tunes a matrix multiply and stores compiled kernels
 * inside nested spans, one that re-tunes a key without storing the result, and
 * one that only observes (a warm start), which leaves nothing on disk.
 */
#include "envlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(envlog_err e, const char *what)
{
    if (e) {
        fprintf(stderr, "record: %s: %s (%s)\n", what, envlog_errmsg(),
                envlog_strerror(e));
        exit(2);
    }
    return 0;
}

static const char *const candidates[] = {"tile16x16", "tile32x32", "tile64x32",
                                         "tile64x64"};
#define NS "autotune/example-rt/1.0/sim-gpu-80gb"

static void tune(envlog_session *s, const char *key, bool stored, double skew)
{
    envlog_trial trials[4];
    double base[] = {812.0, 455.0, 401.5, 433.0};
    for (int i = 0; i < 4; i++) {
        double m = base[i] * skew;
        trials[i] = (envlog_trial){.name = candidates[i], .index = (uint32_t)i,
                                   .samples = 10, .min_ns = m * 0.97,
                                   .median_ns = m, .mean_ns = m * 1.01,
                                   .max_ns = m * 1.1, .stddev_ns = m * 0.02};
    }
    envlog_param params[] = {{"min_samples", 5}, {"max_samples", 10},
                             {"drop_factor", 2.0}};
    envlog_tune t = {
        .ns = NS, .key = key,
        .checksum = envlog_tune_checksum(candidates, 4),
        .candidates = candidates, .n_candidates = 4,
        .trials = trials, .n_trials = 4,
        .policy = "median-adaptive", .params = params, .n_params = 3,
        .winner = 2, .margin = 433.0 / 401.5 - 1, .within_noise = false,
        .wall_ns = 2100000, .stored = stored,
    };
    check(envlog_record_tune(s, &t, NULL), "recording a tune");
}

static void compile(envlog_session *s, const char *name, const char *arch)
{
    char src[256], bin[512];
    snprintf(src, sizeof src, "extern \"C\" __global__ void %s(float *x) { x[0] = 1; }",
             name);
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (char)(i * 31 + strlen(name));
    envlog_compile c = {
        .ns = "kernels/nvrtc/13.0", .name = name,
        .source_hash = envlog_hash128_bytes(src, strlen(src)),
        .options = "--std=c++17 -default-device", .compiler_version = "13.0",
        .arch = arch, .outcome = ENVLOG_COMPILED, .duration_ns = 35000000,
        .binary_hash = envlog_hash128_bytes(bin, sizeof bin),
        .binary_size = sizeof bin, .binary = {bin, sizeof bin},
        .log = "", .source = src,
    };
    char keysrc[512];
    snprintf(keysrc, sizeof keysrc, "%s|%s|%s|%s", src, c.options,
             c.compiler_version, arch);
    c.kernel_key = envlog_hash128_bytes(keysrc, strlen(keysrc));
    check(envlog_record_compile(s, &c, NULL), "recording a compile");
}

int main(int argc, char **argv)
{
    envlog_env *env;
    check(envlog_env_open(argc > 1 ? argv[1] : NULL, ENVLOG_OPEN_CREATE, &env),
          "opening the environment");
    const char *devs[] = {"sim-gpu-80gb sm_90 driver 580.1 132 SMs 80 GiB"};
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = "build";
    o.runtime = "example-rt";
    o.runtime_version = "1.0";
    o.devices = devs;
    o.n_devices = 1;
    o.process_mode = "compile-and-autotune";
    o.level = ENVLOG_LEVEL_FULL;

    /* 1: a build: spans around compiles and tunes. */
    envlog_session *s;
    check(envlog_session_begin(env, &o, &s), "beginning a session");
    envlog_span build, kernels, tuning;
    check(envlog_span_open(s, "build", &build), "opening a span");
    check(envlog_span_open(s, "compile-kernels", &kernels), "opening a span");
    compile(s, "matmul_tile64x32", "sm_90");
    compile(s, "reduce_sum", "sm_90");
    envlog_attr ka[] = {{"kernels", "2"}};
    check(envlog_span_close(&kernels, ka, 1, NULL), "closing a span");
    check(envlog_span_open(s, "autotune", &tuning), "opening a span");
    tune(s, "matmul/m=1024,n=1024,k=1024", true, 1.0);
    tune(s, "matmul/m=4096,n=4096,k=4096", true, 16.0);
    check(envlog_span_close(&tuning, NULL, 0, NULL), "closing a span");
    check(envlog_record_mark(s, "build done", NULL), "recording a mark");
    check(envlog_span_close(&build, NULL, 0, NULL), "closing a span");
    check(envlog_session_end(s), "ending a session");

    /* 2: a re-tune that is not stored, next to one that is. */
    o.label = "retune";
    o.level = ENVLOG_LEVEL_BASIC;
    check(envlog_session_begin(env, &o, &s), "beginning a session");
    tune(s, "matmul/m=1024,n=1024,k=1024", false, 1.2);
    tune(s, "matmul/m=512,n=512,k=512", true, 0.25);
    check(envlog_session_end(s), "ending a session");

    /* 3: a warm start that only observes: no file, no directory. */
    o.label = "warm-start";
    check(envlog_session_begin(env, &o, &s), "beginning a session");
    envlog_span run;
    check(envlog_span_open(s, "inference", &run), "opening a span");
    check(envlog_record_mark(s, "all kernels found in the cache", NULL),
          "recording a mark");
    check(envlog_span_close(&run, NULL, 0, NULL), "closing a span");
    envlog_session_stats st;
    envlog_session_stats_get(s, &st);
    check(envlog_session_end(s), "ending a session");
    printf("recorded 3 sessions into %s; the warm start held %llu records and "
           "wrote %s\n", envlog_env_path(env), (unsigned long long)st.held,
           st.on_disk ? "to disk" : "nothing");
    envlog_env_close(env);
    return 0;
}
