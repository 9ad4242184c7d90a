/* SPDX-License-Identifier: MIT */
/*
 * snapshot_rec.c - records a small, repeatable history for the snapshot CLI tests:
 * three tuned keys whose winner is argv[2] (0-2), one kernel whose binary
 * is seeded by argv[3], and a user record.
 *
 * usage: snapshot-rec DIR WINNER BINARY_SEED
 */
#include "envlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CANDS[] = {"tile16", "tile32", "tile64"};

static void ok(envlog_err e)
{
    if (e) {
        fprintf(stderr, "snapshot-rec: %s\n", envlog_errmsg());
        exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int w = atoi(argv[2]);
    envlog_env *env;
    ok(envlog_env_open(argv[1], ENVLOG_OPEN_CREATE, &env));
    const char *dev[] = {"sim-gpu sm_90"};
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = "cli-test";
    o.runtime = "rt";
    o.runtime_version = "1.0";
    o.devices = dev;
    o.n_devices = 1;
    o.level = ENVLOG_LEVEL_FULL;
    envlog_session *s;
    ok(envlog_session_begin(env, &o, &s));
    for (int k = 0; k < 3; k++) {
        envlog_trial tr[3];
        for (int i = 0; i < 3; i++)
            tr[i] = (envlog_trial){.name = CANDS[i], .index = (uint32_t)i, .samples = 4,
                                   .median_ns = i == w ? 100 : 150 + 10 * i};
        char key[32];
        snprintf(key, sizeof key, "matmul/%d", 256 << k);
        envlog_tune t = {.ns = "autotune/rt/1.0/sm_90", .key = key,
                         .checksum = envlog_tune_checksum(CANDS, 3), .candidates = CANDS,
                         .n_candidates = 3, .trials = tr, .n_trials = 3, .policy = "median",
                         .winner = w, .margin = 0.5, .stored = true};
        ok(envlog_record_tune(s, &t, NULL));
    }
    uint8_t bin[64];
    memset(bin, atoi(argv[3]), sizeof bin);
    envlog_compile c = {.ns = "nvrtc/13.0/sm_90", .name = "reduce", .options = "",
                        .compiler_version = "13.0", .arch = "sm_90",
                        .outcome = ENVLOG_COMPILED, .binary_size = sizeof bin,
                        .binary = {bin, sizeof bin},
                        .binary_hash = envlog_hash128_bytes(bin, sizeof bin),
                        .kernel_key = envlog_hash128_bytes("reduce", 6)};
    ok(envlog_record_compile(s, &c, NULL));
    uint8_t body[] = {0xf5}; /* true */
    ok(envlog_record_user(s, "flag", body, 1, ENVLOG_CHANGED, NULL));
    ok(envlog_session_end(s));
    envlog_env_close(env);
    return 0;
}
