/* SPDX-License-Identifier: MIT */
/*
 * interop_rec.c - records a fresh environment through the public API for
 * the interoperability check (tests/interop.py): two sessions with every
 * record kind, non-ASCII text, records that span blocks and segments.
 *
 *   interop_rec DIR
 */
#include "envlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(envlog_err e, const char *what)
{
    if (e) {
        fprintf(stderr, "interop_rec: %s: %s (%s)\n", what, envlog_errmsg(),
                envlog_strerror(e));
        exit(1);
    }
}

static const char *const cands[] = {"tile16x16", "tile32x32", "tile64x32", "tile64x64"};

static void tune(envlog_session *s, const char *key, unsigned i, bool stored)
{
    double samples[6];
    envlog_trial tr[4];
    for (int k = 0; k < 6; k++)
        samples[k] = 400.0 + k * 0.1 + i;
    for (int c = 0; c < 4; c++)
        tr[c] = (envlog_trial){.name = cands[c], .index = (uint32_t)c, .samples = 6,
                               .sample_ns = samples, .n_sample_ns = 6,
                               .min_ns = 399.5 + c, .median_ns = 401.0 + c * 10,
                               .mean_ns = 401.3 + c * 10, .max_ns = 420.0 + c,
                               .stddev_ns = 1.0 / 3, .error = c == 3 ? "timeout ⏱" : NULL};
    envlog_param params[] = {{"min_samples", 3}, {"drop_factor", 2.5}};
    envlog_tune t = {.ns = "autotune/interop-rt/2.0/sm_90", .key = key,
                     .checksum = envlog_tune_checksum(cands, 4), .candidates = cands,
                     .n_candidates = 4, .trials = tr, .n_trials = 4,
                     .policy = "median-adaptive", .params = params, .n_params = 2,
                     .winner = stored ? (int64_t)(i % 3) : -1, .margin = 0.1 * i,
                     .within_noise = i % 2, .short_circuit = !stored,
                     .wall_ns = 1000000ull * i, .stored = stored};
    check(envlog_record_tune(s, &t, NULL), "tune");
}

static void session(envlog_env *env, envlog_level level, const char *label)
{
    const char *devs[] = {"sm_90/H100/580.65", "sm_80/A100 ✓/535"};
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.level = level;
    o.label = label;
    o.runtime = "interop-rt";
    o.runtime_version = "2.0";
    o.devices = devs;
    o.n_devices = 2;
    o.process_mode = "compile-and-autotune";
    o.segment_size = 2 * 32768;
    envlog_session *s;
    check(envlog_session_begin(env, &o, &s), "begin");
    check(envlog_record_mark(s, "held until the first change — 保留", NULL), "mark");
    envlog_span outer, inner;
    check(envlog_span_open(s, "model-load", &outer), "span");
    check(envlog_span_open(s, "autotune", &inner), "span");
    envlog_stamp ts = {{{0}}, 0, 0};
    static const uint8_t manifest[] = {0xa2, 0x64, 'n', 'a', 'm', 'e', 0x62, 'h', '1',
                                       0x01, 0x83, 0x01, 0x20, 0xf5};
    for (unsigned i = 0; i < 60; i++) {
        char key[64];
        snprintf(key, sizeof key, "matmul/%u/ρ", i);
        tune(s, key, i, i % 5 != 1);
        if (i % 7 == 0) {
            size_t n = i == 14 ? 100000 : 300 + i;
            uint8_t *bin = malloc(n);
            for (size_t k = 0; k < n; k++)
                bin[k] = (uint8_t)(k * 31 + i);
            envlog_compile c = {.ns = "nvrtc/12.4/sm_90", .name = "gemm",
                                .kernel_key = envlog_hash128_bytes(key, strlen(key)),
                                .source_hash = envlog_hash128_bytes("src", 3),
                                .options = "-O3", .compiler_version = "12.4.131",
                                .arch = "sm_90", .outcome = i % 2 ? ENVLOG_LOADED
                                                                  : ENVLOG_COMPILED,
                                .duration_ns = 5000u * i, .binary = {bin, n},
                                .binary_hash = envlog_hash128_bytes(bin, n),
                                .binary_size = n, .log = "ok",
                                .source = "__global__ void gemm() {}",
                                .ir = {"\x01\x02\x03", 3}, .has_tune = i > 0, .tune = ts};
            check(envlog_record_compile(s, &c, &ts), "compile");
            free(bin);
        }
        if (i == 20) {
            envlog_import im = {"bundle ü", envlog_hash128_bytes("b", 1),
                                {manifest, sizeof manifest}, 5, 1, 2};
            check(envlog_record_import(s, &im, NULL), "import");
            envlog_forget f = {ENVLOG_TABLE_KERNEL, "nvrtc/12.4/sm_90",
                               "00112233445566778899aabbccddeeff", 0, "bad binary", NULL};
            check(envlog_record_forget(s, &f, NULL), "forget");
            check(envlog_record_user(s, "profiler", manifest, sizeof manifest,
                                     ENVLOG_OBSERVED, NULL), "user");
        }
    }
    envlog_attr at[] = {{"shape", "1024×1024"}, {"dtype", "f16"}};
    check(envlog_span_close(&inner, at, 2, NULL), "span");
    check(envlog_span_close(&outer, NULL, 0, NULL), "span");
    check(envlog_session_end(s), "end");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: interop_rec DIR\n");
        return 2;
    }
    envlog_env *env;
    check(envlog_env_open(argv[1], ENVLOG_OPEN_CREATE, &env), "open");
    session(env, ENVLOG_LEVEL_BASIC, "interop basic");
    session(env, ENVLOG_LEVEL_FULL, "interop full ✓");
    envlog_env_close(env);
    return 0;
}
