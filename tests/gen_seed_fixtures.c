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

static envlog_session *begin(envlog_env *env, const char *label, envlog_level level,
                             const char *runtime_version)
{
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = label;
    o.level = level;
    o.runtime = "envlog-cuda";
    o.runtime_version = runtime_version;
    o.auto_compact = -1;
    envlog_session *s;
    ok(envlog_session_begin(env, &o, &s), "beginning a session");
    tick();
    return s;
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seed_fixtures DIR\n");
        return 2;
    }
    out_root = argv[1];
    gen_rebuild();
    gen_empty();
    return 0;
}
