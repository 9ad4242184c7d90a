/* SPDX-License-Identifier: MIT */
/*
 * data.c - the records the benchmark writes, and envlog's side of writing
 * and reading them.
 *
 * The records are shaped like what an autotuner and a kernel cache produce:
 * a tune over 8 Triton-style configurations, each measured with CUDA events
 * (float milliseconds, so the statistics are float-exact and CBOR stores
 * them in 4 bytes), and compiles carrying a cubin-like binary.  Record `i`
 * differs from every other in key and timings; the generator is
 * deterministic, so every variant writes the same bytes.
 */
#include "bench.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const cand[8] = {
    "m128n128k64w8s3", "m128n64k64w4s4",  "m64n128k32w4s4", "m128n256k64w8s3",
    "m256n128k64w8s3", "m64n64k32w2s5",   "m128n128k32w4s4", "m64n256k32w4s4",
};
static const char *const devices[] = {"nvidia-h100-sxm5-80gb-sm90-drv550.54"};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

void bench_tune_init(bench_tune *bt)
{
    memset(bt, 0, sizeof *bt);
    bt->params[0] = (envlog_param){"min_samples", 10};
    bt->params[1] = (envlog_param){"max_samples", 100};
    bt->t.ns = "tune/triton/3.1.0/nvidia-h100-sxm5-80gb";
    bt->t.key = bt->key;
    bt->t.checksum = envlog_tune_checksum(cand, 8);
    bt->t.candidates = cand;
    bt->t.n_candidates = 8;
    bt->t.trials = bt->trials;
    bt->t.n_trials = 8;
    bt->t.policy = "median-adaptive";
    bt->t.params = bt->params;
    bt->t.n_params = 2;
    bt->t.stored = true;
}

/* Appends the decimal digits of `v`; snprintf would cost more than the
 * recording call being measured. */
static char *put_dec(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    while (n)
        *p++ = tmp[--n];
    return p;
}

void bench_tune_fill(bench_tune *bt, uint64_t i)
{
    unsigned m = 256u * (1 + (unsigned)(i % 32)), n = 256u * (1 + (unsigned)(i / 32 % 32));
    unsigned k = 128u * (1 + (unsigned)(i / 1024 % 64));
    /* "matmul:bf16:<m>x<n>x<k>:b<batch>" */
    char *p = bt->key;
    memcpy(p, "matmul:bf16:", 12);
    p = put_dec(p + 12, m);
    *p++ = 'x';
    p = put_dec(p, n);
    *p++ = 'x';
    p = put_dec(p, k);
    *p++ = ':';
    *p++ = 'b';
    p = put_dec(p, i / 65536);
    *p = 0;
    uint64_t h = mix(i + 1);
    float best = 1e30f;
    int win = 0;
    float second = 1e30f;
    for (int c = 0; c < 8; c++) {
        /* CUDA event times are float milliseconds; envlog stores ns. */
        float ms = 0.010f + (float)((h >> (c * 7)) & 127) * 0.0005f;
        float med = ms * 1e6f;
        envlog_trial *t = &bt->trials[c];
        t->name = cand[c];
        t->index = (uint32_t)c;
        t->samples = 10 + ((h >> (c * 3)) & 15);
        t->min_ns = med * 0.96f;
        t->median_ns = med;
        t->mean_ns = med * 1.013f;
        t->max_ns = med * 1.31f;
        t->stddev_ns = med * 0.021f;
        if (med < best) {
            second = best;
            best = med;
            win = c;
        } else if (med < second) {
            second = med;
        }
    }
    bt->t.winner = win;
    bt->t.margin = second / best - 1.0;
    bt->t.within_noise = bt->t.margin < 0.02;
    bt->t.wall_ns = 40000000 + (h & 0xffffff);
}

void bench_compile_init(bench_compile *bc, size_t size)
{
    memset(bc, 0, sizeof *bc);
    bc->size = size;
    bc->binary = envlog_malloc(size ? size : 1);
    if (!bc->binary)
        bench_die("out of memory for a %zu-byte binary", size);
    /* Cubin-like: instruction words with runs of zero padding. */
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < size; i++) {
        if (i % 512 < 96) {
            bc->binary[i] = 0;
            continue;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bc->binary[i] = (uint8_t)x;
    }
    static const char src[] = "extern \"C\" __global__ void gemm(const __nv_bfloat16 *a, "
                              "const __nv_bfloat16 *b, float *c, int m, int n, int k);";
    envlog_compile *c = &bc->c;
    c->ns = "kernel/nvrtc/12.4.131/sm_90";
    c->name = bc->name;
    c->source_hash = envlog_hash128_bytes(src, sizeof src - 1);
    c->options = "--gpu-architecture=sm_90 --std=c++17 -default-device -lineinfo";
    c->compiler_version = "12.4.131";
    c->arch = "sm_90";
    c->outcome = ENVLOG_COMPILED;
    c->binary_hash = envlog_hash128_bytes(bc->binary, size);
    c->binary_size = size;
    c->binary.data = bc->binary;
    c->binary.size = size;
    c->log = "";
    c->has_tune = true;
}

void bench_compile_fill(bench_compile *bc, uint64_t i)
{
    envlog_compile *c = &bc->c;
    memcpy(bc->name, "gemm_bf16_m128n128k64_w8s3_v", 28);
    *put_dec(bc->name + 28, i) = 0;
    uint64_t h = mix(i + 7);
    memcpy(c->kernel_key.b, &h, 8);
    h = mix(h);
    memcpy(c->kernel_key.b + 8, &h, 8);
    c->duration_ns = 20000000 + (h & 0xffffff);
    c->tune.seq = i;
    c->tune.offset_ns = i * 1000;
}

void bench_compile_free(bench_compile *bc)
{
    envlog_free(bc->binary);
    bc->binary = NULL;
}

size_t bench_encode(envlog_buf *b, envlog_kind kind, const void *body, uint64_t seq)
{
    envlog_stamp st = {{{0}}, seq, 1000000000u + seq * 1000};
    bench_check(envlog_event_encode(b, kind, &st,
                                    envlog_effect_of(kind, body),
                                    ENVLOG_LEVEL_BASIC, body),
                "encoding a record");
    return b->len;
}

double bench_tune_payload_size(uint64_t seq)
{
    bench_tune bt;
    envlog_buf b = {0};
    double sum = 0;
    bench_tune_init(&bt);
    for (uint64_t i = 0; i < 256; i++) {
        bench_tune_fill(&bt, i);
        sum += (double)bench_encode(&b, ENVLOG_KIND_TUNE, &bt.t, seq + i);
    }
    envlog_buf_free(&b);
    return sum / 256;
}

double bench_compile_payload_size(size_t binary_size, uint64_t seq)
{
    bench_compile bc;
    envlog_buf b = {0};
    bench_compile_init(&bc, binary_size);
    bench_compile_fill(&bc, 0);
    double size = (double)bench_encode(&b, ENVLOG_KIND_COMPILE, &bc.c, seq);
    envlog_buf_free(&b);
    bench_compile_free(&bc);
    return size;
}

/* --------------------------------------------------- envlog's side of it */

uint64_t bench_envlog_record(const char *path, envlog_sync sync, uint64_t n,
                             bench_compile *bc, uint64_t first)
{
    envlog_env *env;
    envlog_session *s;
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.sync = sync;
    o.label = "envlog-bench";
    o.runtime = "triton";
    o.runtime_version = "3.1.0";
    o.devices = devices;
    o.n_devices = 1;
    o.process_mode = "execute";
    /* What is measured is recording alone: a session past the automatic
     * threshold (64 MiB) would start a compaction in the background, which
     * would run into the next measurement and race the removal of its
     * directory (b_upkeep measures compaction). */
    o.auto_compact = -1;
    bench_check(envlog_env_open(path, ENVLOG_OPEN_CREATE, &env), "opening an environment");
    bench_check(envlog_session_begin(env, &o, &s), "beginning a session");
    if (bc) {
        for (uint64_t i = first; i < first + n; i++) {
            bench_compile_fill(bc, i);
            bench_check(envlog_record_compile(s, &bc->c, NULL), "recording a compile");
        }
    } else {
        bench_tune bt;
        bench_tune_init(&bt);
        for (uint64_t i = first; i < first + n; i++) {
            bench_tune_fill(&bt, i);
            bench_check(envlog_record_tune(s, &bt.t, NULL), "recording a tune");
        }
    }
    envlog_session_stats st;
    envlog_session_stats_get(s, &st);
    bench_expect(st.written == n + 1, "session wrote %" PRIu64 " of %" PRIu64 " records",
                 st.written, n + 1);
    bench_check(envlog_session_end(s), "ending a session");
    envlog_env_close(env);
    return st.bytes;
}

uint64_t bench_envlog_read(const char *path, double *payload_bytes)
{
    envlog_env *env;
    char sdir[4200];
    uint64_t count = 0;
    bench_check(envlog_env_open(path, ENVLOG_OPEN_READONLY, &env), "opening an environment");
    snprintf(sdir, sizeof sdir, "%s/sessions", path);
    DIR *d = opendir(sdir);
    if (!d)
        bench_die("cannot list %s", sdir);
    struct dirent *de;
    while ((de = readdir(d))) {
        envlog_id128 id;
        if (envlog_id_parse(de->d_name, &id))
            continue;
        envlog_reader *r;
        const envlog_record *rec;
        envlog_err e;
        bench_check(envlog_reader_open(env, &id, &r), "opening a reader");
        while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK) {
            count++;
            *payload_bytes += (double)rec->payload.size;
        }
        if (e != ENVLOG_END)
            bench_check(e, "reading a session back");
        bench_expect(envlog_reader_state(r) == ENVLOG_STATE_SEALED,
                     "session %s reads back %s", de->d_name,
                     envlog_session_state_name(envlog_reader_state(r)));
        envlog_reader_close(r);
    }
    closedir(d);
    envlog_env_close(env);
    return count;
}
