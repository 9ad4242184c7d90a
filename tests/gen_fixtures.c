/* SPDX-License-Identifier: MIT */
/*
 * gen_fixtures.c - writes the small environments under fixtures/envs that
 * the CLI golden tests and the interoperability check read.
 *
 *   gen_fixtures DIR      (make fixtures; never run by make check)
 *
 * Every byte is fixed: session ids, start times, offsets, host and pid are
 * chosen here, and the segments are written with the library's own segment
 * writer, so running it again gives the same files and the goldens stay
 * valid.  DIR/basic holds two sealed sessions covering every record kind;
 * DIR/damaged holds a sealed session, one with a flipped byte in the middle
 * and one whose writer died mid-record (a torn tail).
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *what, envlog_err e)
{
    fprintf(stderr, "gen_fixtures: %s: %s (%s)\n", what, envlog_errmsg(),
            envlog_strerror(e));
    exit(1);
}

#define CHECK(what, call)                                                      \
    do {                                                                       \
        envlog_err e_ = (call);                                                \
        if (e_)                                                                \
            die(what, e_);                                                     \
    } while (0)

/* One session being written. */
typedef struct gen {
    envlog_id128 id;
    int dirfd;
    envlog_segw w;
    uint64_t segsize;
    char path[4096];
    char seg_path[4200];
} gen;

static void gen_begin(gen *g, envlog_env *env, const char *hex, uint64_t segsize)
{
    CHECK("session id", envlog_id_parse(hex, &g->id));
    if (mkdirat(env->sessions_fd, hex, 0700))
        die("mkdir", ENVLOG_IO);
    CHECK("open session", envlog_open_dir(env->sessions_fd, hex, &g->dirfd));
    snprintf(g->path, sizeof g->path, "%s/sessions/%s", env->path, hex);
    g->segsize = segsize;
    CHECK("segment", envlog_segw_create(&g->w, g->dirfd, &g->id, 0, 0, 0, segsize,
                                        "session", ENVLOG_SYNC_NONE, false));
}

static void gen_put(gen *g, envlog_kind kind, uint64_t seq, envlog_effect eff,
                    envlog_level level, const void *body)
{
    envlog_buf b = {0};
    envlog_stamp st = {g->id, seq, seq ? 1000000u * seq + 12345u : 0};
    CHECK("encode", envlog_event_encode(&b, kind, &st, eff, level, body));
    if (!envlog_segw_fits(&g->w, b.len)) {
        uint32_t next = g->w.segment + 1;
        uint64_t chain = g->w.chain;
        CHECK("seal", envlog_segw_seal(&g->w));
        CHECK("segment", envlog_segw_create(&g->w, g->dirfd, &g->id, next, seq, chain,
                                            envlog_segw_size_for(g->segsize, b.len),
                                            "session", ENVLOG_SYNC_NONE, false));
    }
    CHECK("append", envlog_segw_append(&g->w, b.p, b.len, seq));
    envlog_buf_free(&b);
}

static void gen_session_record(gen *g, uint64_t start, const char *label,
                               envlog_level level, uint64_t dropped)
{
    static const char *const devs[] = {"sm_90/NVIDIA H100 80GB HBM3/580.65"};
    envlog_session_rec r = {
        .id = g->id, .start_unix_ns = start, .envlog_version = "0.1.0",
        .runtime = "example-rt", .runtime_version = "1.0", .label = label,
        .host = "fixture-host", .pid = 4242, .os = "Linux", .arch = "x86_64",
        .devices = devs, .n_devices = 1, .process_mode = "execute",
        .level = level, .dropped = dropped};
    gen_put(g, ENVLOG_KIND_SESSION, 0, ENVLOG_OBSERVED, level, &r);
}

/* Seals the last segment, or leaves it as a killed writer would. */
static void gen_end(gen *g, bool seal)
{
    snprintf(g->seg_path, sizeof g->seg_path, "%s/%s", g->path, g->w.name);
    if (seal)
        CHECK("seal", envlog_segw_seal(&g->w));
    else
        envlog_segw_abandon(&g->w);
    close(g->dirfd);
}

static envlog_hash128 hash_of(const char *s)
{
    return envlog_hash128_bytes(s, strlen(s));
}

static const char *const cands[] = {"tile16x16", "tile32x32", "tile64x32", "tile64x64"};
#define NS_TUNE "autotune/example-rt/1.0/sm_90"

static void put_tune(gen *g, uint64_t seq, const char *key, bool stored, envlog_level lv)
{
    static const double base[] = {812.0, 455.5, 401.25, 433.0};
    static const double samples[] = {401.0, 401.25, 402.5};
    envlog_trial tr[4];
    for (int i = 0; i < 4; i++)
        tr[i] = (envlog_trial){.name = cands[i], .index = (uint32_t)i, .samples = 3,
                               .sample_ns = samples, .n_sample_ns = 3,
                               .min_ns = base[i] - 1, .median_ns = base[i],
                               .mean_ns = base[i] + 0.5, .max_ns = base[i] + 2,
                               .stddev_ns = 0.75};
    tr[3].error = stored ? NULL : "launch failed: too many resources requested";
    envlog_param params[] = {{"min_samples", 3}, {"noise", 0.02}};
    envlog_tune t = {.ns = NS_TUNE, .key = key,
                     .checksum = envlog_tune_checksum(cands, 4), .candidates = cands,
                     .n_candidates = 4, .trials = tr, .n_trials = 4,
                     .policy = "median-adaptive", .params = params, .n_params = 2,
                     .winner = stored ? 2 : -1, .margin = stored ? 433.0 / 401.25 - 1 : 0,
                     .within_noise = false, .short_circuit = !stored,
                     .wall_ns = 2100000 + seq, .stored = stored};
    gen_put(g, ENVLOG_KIND_TUNE, seq, stored ? ENVLOG_CHANGED : ENVLOG_OBSERVED, lv, &t);
}

static void put_compile(gen *g, uint64_t seq, const char *name, envlog_outcome oc,
                        bool with_tune, envlog_level lv)
{
    static const char src[] = "__global__ void k(float *x) { x[threadIdx.x] *= 2; }";
    uint8_t bin[48];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (uint8_t)(i * 37 + seq);
    envlog_compile c = {
        .ns = "nvrtc/12.4/sm_90", .name = name, .kernel_key = hash_of(name),
        .source_hash = hash_of(src), .options = "--use_fast_math -arch=sm_90",
        .compiler_version = "12.4.131", .arch = "sm_90", .outcome = oc,
        .duration_ns = oc == ENVLOG_LOADED ? 0 : 31000000 + seq,
        .binary_size = oc == ENVLOG_FAILED ? 0 : sizeof bin,
        .log = oc == ENVLOG_FAILED ? "error: identifier \"y\" is undefined" : NULL,
        .source = src, .ir = {"// ptx\n.version 8.4\n", 21}};
    if (oc == ENVLOG_COMPILED)
        c.binary = (envlog_bytes){bin, sizeof bin};
    if (oc != ENVLOG_FAILED)
        c.binary_hash = envlog_hash128_bytes(bin, sizeof bin);
    if (with_tune) {
        c.has_tune = true;
        c.tune = (envlog_stamp){g->id, 2, 2000000 + 12345};
    }
    gen_put(g, ENVLOG_KIND_COMPILE, seq, envlog_effect_of(ENVLOG_KIND_COMPILE, &c), lv, &c);
}

/* A CBOR body built with the library's own encoder. */
static envlog_bytes body(envlog_buf *b, const char *name)
{
    b->len = 0;
    CHECK("body", envlog_enc_map(b, 3));
    CHECK("body", envlog_enc_text(b, "name", 4));
    CHECK("body", envlog_enc_text(b, name, strlen(name)));
    CHECK("body", envlog_enc_text(b, "gpu_util", 8));
    CHECK("body", envlog_enc_double(b, 0.875));
    CHECK("body", envlog_enc_uint(b, 7));
    CHECK("body", envlog_enc_array(b, 3));
    for (int i = 1; i <= 3; i++)
        CHECK("body", envlog_enc_int(b, -i));
    return (envlog_bytes){b->p, b->len};
}

static void gen_basic(const char *root)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/basic", root);
    envlog_env *env;
    CHECK("environment", envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env));
    envlog_buf b = {0};

    /* A tuning session: every kind, BASIC level. */
    gen g;
    gen_begin(&g, env, "018fcf2a7c404a1b9c3d4e5f60718293", 2 * ENVLOG_BLOCK);
    gen_session_record(&g, 1717171717123000000ull, "nightly-tune", ENVLOG_LEVEL_BASIC, 0);
    envlog_mark m = {"warm-up done", 1717171717200000000ull};
    gen_put(&g, ENVLOG_KIND_MARK, 1, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC, &m);
    put_tune(&g, 2, "matmul/1024x1024/f16", true, ENVLOG_LEVEL_BASIC);
    put_compile(&g, 3, "gemm_tile64x32", ENVLOG_COMPILED, true, ENVLOG_LEVEL_BASIC);
    put_compile(&g, 4, "gemm_tile64x32", ENVLOG_LOADED, false, ENVLOG_LEVEL_BASIC);
    envlog_attr at[] = {{"shape", "1024x1024"}, {"dtype", "f16"}};
    envlog_span_rec inner = {"autotune", 2, 1, 1500000, 2400000, at, 2};
    gen_put(&g, ENVLOG_KIND_SPAN, 5, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC, &inner);
    envlog_span_rec outer = {"model-load", 1, 0, 1000000, 4700000, NULL, 0};
    gen_put(&g, ENVLOG_KIND_SPAN, 6, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC, &outer);
    envlog_import im = {"h100-linux", hash_of("h100-linux bundle"), body(&b, "h100-linux"),
                        12, 1, 0};
    gen_put(&g, ENVLOG_KIND_IMPORT, 7, ENVLOG_CHANGED, ENVLOG_LEVEL_BASIC, &im);
    envlog_forget f = {ENVLOG_TABLE_TUNE, NS_TUNE, "conv/3x3", 42, "stale after a driver update", NULL};
    gen_put(&g, ENVLOG_KIND_FORGET, 8, ENVLOG_CHANGED, ENVLOG_LEVEL_BASIC, &f);
    envlog_user u = {"profiler-sample", body(&b, "sample")};
    gen_put(&g, ENVLOG_KIND_USER, 9, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC, &u);
    gen_end(&g, true);

    /* A FULL session with non-ASCII text and two records dropped before
     * its first change: its events start at seq 3. */
    gen_begin(&g, env, "018fcf2b1e904c2d8e7f6a5b4c3d2e1f", 2 * ENVLOG_BLOCK);
    gen_session_record(&g, 1717175317456000000ull, "ünïcødé run ✓", ENVLOG_LEVEL_FULL, 2);
    put_tune(&g, 3, "softmax/ρ=0.5", false, ENVLOG_LEVEL_FULL);
    put_compile(&g, 4, "softmax_bad", ENVLOG_FAILED, false, ENVLOG_LEVEL_FULL);
    put_tune(&g, 5, "softmax/ρ=0.5", true, ENVLOG_LEVEL_FULL);
    put_compile(&g, 6, "softmax_ok", ENVLOG_COMPILED, false, ENVLOG_LEVEL_FULL);
    envlog_mark m2 = {"done — 完了", 1717175318000000000ull};
    gen_put(&g, ENVLOG_KIND_MARK, 7, ENVLOG_OBSERVED, ENVLOG_LEVEL_FULL, &m2);
    gen_end(&g, true);
    envlog_buf_free(&b);
    envlog_env_close(env);
}

static void flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    uint8_t c;
    if (fd < 0 || pread(fd, &c, 1, at) != 1)
        die(path, ENVLOG_IO);
    c ^= 0x20;
    if (pwrite(fd, &c, 1, at) != 1)
        die(path, ENVLOG_IO);
    close(fd);
}

static void gen_damaged(const char *root)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/damaged", root);
    envlog_env *env;
    CHECK("environment", envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env));
    gen g;

    /* Sealed and whole. */
    gen_begin(&g, env, "018fd0a1000040008000000000000001", 2 * ENVLOG_BLOCK);
    gen_session_record(&g, 1717250000000000000ull, "good", ENVLOG_LEVEL_BASIC, 0);
    put_tune(&g, 1, "rmsnorm/16", true, ENVLOG_LEVEL_BASIC);
    gen_end(&g, true);

    /* A byte flipped inside the second of four tunes. */
    gen_begin(&g, env, "018fd0a2000040008000000000000002", 2 * ENVLOG_BLOCK);
    gen_session_record(&g, 1717250100000000000ull, "flipped", ENVLOG_LEVEL_BASIC, 0);
    uint64_t off2 = 0;
    for (uint64_t s = 1; s <= 4; s++) {
        if (s == 2)
            off2 = g.w.pos;
        char key[32];
        snprintf(key, sizeof key, "layernorm/%llu", (unsigned long long)s);
        put_tune(&g, s, key, true, ENVLOG_LEVEL_BASIC);
    }
    gen_end(&g, true);
    flip_byte(g.seg_path, (off_t)off2 + 40);

    /* Its writer died in the middle of its third tune. */
    gen_begin(&g, env, "018fd0a3000040008000000000000003", 2 * ENVLOG_BLOCK);
    gen_session_record(&g, 1717250200000000000ull, "torn", ENVLOG_LEVEL_BASIC, 0);
    uint64_t off3 = 0, end3 = 0;
    for (uint64_t s = 1; s <= 3; s++) {
        if (s == 3)
            off3 = g.w.pos;
        char key[32];
        snprintf(key, sizeof key, "swiglu/%llu", (unsigned long long)s);
        put_tune(&g, s, key, true, ENVLOG_LEVEL_BASIC);
    }
    end3 = g.w.pos;
    gen_end(&g, false);
    if (truncate(g.seg_path, (off_t)(off3 + (end3 - off3) / 2)))
        die("truncate", ENVLOG_IO);
    envlog_env_close(env);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_fixtures DIR\n");
        return 2;
    }
    if (mkdir(argv[1], 0755) && errno != EEXIST)
        die(argv[1], ENVLOG_IO);
    gen_basic(argv[1]);
    gen_damaged(argv[1]);
    return 0;
}
