/* SPDX-License-Identifier: MIT */
/*
 * cuda_bench.c - envlog-cuda-bench: what recording costs the CUDA workload,
 * and what the COMPILE_ONLY batch gains from threads.  Ratios are printed,
 * never asserted.
 *
 *  1. Recording overhead: the demo's workload (a COMPILE_ONLY batch of the
 *     built-in kernels, then real CPU autotunes) at ENVLOG_LEVEL_BASIC
 *     against ENVLOG_LEVEL_OFF, alternating, each run in a fresh
 *     environment so every run compiles and measures.  NVRTC's own run time
 *     varies by a few percent, more than recording costs, so the records the
 *     BASIC runs wrote are also recorded again on their own, timed: that is
 *     the recording cost itself, as a share of the workload.
 *  2. Batch speed-up: the same batch on 1, 2 and 4 compile threads.
 *
 * It lives apart from envlog-bench (the .c files of bench/, the SQLite comparison):
 * `make bench-cuda` builds and runs it; `--quick` finishes in about 20 s.
 */
#include "envlog.h"
#include "demo_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    bool quick, json;
    const char *only; /* "overhead" or "batch": that section only */
    int reps;
    size_t kernels;  /* built-in variants in the batch */
    size_t shapes;   /* CPU tune shapes */
    char root[4096];
} opts;

static opts o;
static int dir_seq;

static void die(envlog_err e, const char *what)
{
    fprintf(stderr, "envlog-cuda-bench: error: %s: %s (%s)\n", what, envlog_errmsg(),
            envlog_strerror(e));
    exit(2);
}

#define CHECK(call, what)                                                      \
    do {                                                                       \
        envlog_err e_ = (call);                                                \
        if (e_)                                                                \
            die(e_, what);                                                     \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fresh_dir(char *out, size_t size, const char *tag)
{
    snprintf(out, size, "%s/%s-%d", o.root, tag, dir_seq++);
}

static void rmtree(const char *path)
{
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "envlog-cuda-bench: could not remove %s\n", path);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------ the workload */

/* What one run of the workload did. */
typedef struct work {
    double secs, batch_secs;
    envlog_session_stats ss;
    size_t compiled;
} work;

/* Runs the workload in a fresh environment at `level` with `threads`
 * compile threads (the batch only, when `tunes` is false).  Leaves the
 * environment at `dir`. */
static work workload(const char *dir, envlog_level level, unsigned threads, bool tunes)
{
    work w = {0};
    double t0 = now_s();
    envlog_env *env;
    CHECK(envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env), "opening an environment");
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "cuda-bench";
    so.level = level;
    envlog_session *s;
    CHECK(envlog_session_begin(env, &so, &s), "beginning a session");
    envlog_cuda_opts co;
    envlog_cuda_opts_init(&co);
    co.device = ENVLOG_CUDA_DEVICE_NONE;
    co.threads = threads;
    envlog_cuda *c;
    CHECK(envlog_cuda_open(env, s, &co, &c), "opening the runtime");
    envlog_cuda_stream *st;
    CHECK(envlog_cuda_stream_open(c, ENVLOG_CUDA_STREAM_HOST, &st), "opening a stream");

    size_t nb;
    const demo_kernel *b = demo_kernels(&nb);
    size_t nk = o.kernels < nb ? o.kernels : nb;
    envlog_cuda_kernel *k[64];
    envlog_cuda_override ov;
    CHECK(envlog_cuda_override_begin(c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov), "override");
    for (size_t i = 0; i < nk; i++) {
        envlog_cuda_kernel_desc d = {b[i].entry, b[i].source, b[i].options, "sm_80"};
        CHECK(envlog_cuda_kernel_new(c, &d, &k[i]), "registering a kernel");
        CHECK(envlog_cuda_launch(st, k[i], demo_kernel_grid(&b[i], 256, 256),
                                 b[i].block, 0, NULL),
              "launching");
    }
    CHECK(envlog_cuda_override_end(&ov), "override");
    double tb = now_s();
    envlog_cuda_batch bt;
    CHECK(envlog_cuda_compile_queued(c, &bt), "compiling the batch");
    w.batch_secs = now_s() - tb;
    w.compiled = bt.compiled;
    for (size_t i = 0; i < nk; i++)
        envlog_cuda_kernel_free(k[i]);

    if (tunes) {
        static const size_t shapes[][3] = {{64, 64, 64}, {128, 128, 128}, {96, 384, 200}};
        const char *names[16];
        size_t nv = demo_cpu_names(names, 16);
        envlog_cuda_policy pol;
        envlog_cuda_policy_init(&pol);
        pol.max_samples = 15;
        pol.rel_tol = 0.02;
        for (size_t i = 0; i < o.shapes && i < 3; i++) {
            demo_cpu_job j;
            CHECK(demo_cpu_job_init(&j, shapes[i][0], shapes[i][1], shapes[i][2]), "matrices");
            char key[96];
            snprintf(key, sizeof key, "matmul-cpu/m=%zu,n=%zu,k=%zu", j.m, j.n, j.k);
            envlog_cuda_tune_req r = {.key = key, .candidates = names, .n_candidates = nv,
                                      .run = demo_cpu_candidate, .ctx = &j, .stream = st,
                                      .policy = &pol};
            envlog_cuda_tune_result res;
            CHECK(envlog_cuda_tune(c, &r, &res), "tuning");
            demo_cpu_job_free(&j);
        }
    }
    envlog_cuda_stream_close(st);
    envlog_cuda_close(c);
    envlog_session_stats_get(s, &w.ss);
    CHECK(envlog_session_end(s), "ending the session");
    envlog_env_close(env);
    w.secs = now_s() - t0;
    return w;
}

/* Records again, into `s`, every tune and compile record of an environment;
 * times only the recording calls. */
typedef struct rerecord {
    envlog_session *s;
    double secs;
    size_t n;
} rerecord;

static envlog_err rerecord_one(void *ctx, const envlog_replay_rec *r)
{
    rerecord *x = ctx;
    const envlog_record *rec = r->rec;
    double t0;
    envlog_err e;
    switch (rec->kind) {
    case ENVLOG_KIND_TUNE:
        t0 = now_s();
        e = envlog_record_tune(x->s, &rec->u.tune, NULL);
        break;
    case ENVLOG_KIND_COMPILE:
        t0 = now_s();
        e = envlog_record_compile(x->s, &rec->u.compile, NULL);
        break;
    case ENVLOG_KIND_SPAN: {
        envlog_span sp;
        t0 = now_s();
        e = envlog_span_open(x->s, rec->u.span.name, &sp);
        if (!e)
            e = envlog_span_close(&sp, rec->u.span.attrs, rec->u.span.n_attrs, NULL);
        break;
    }
    default: return ENVLOG_OK;
    }
    x->secs += now_s() - t0;
    x->n++;
    if (e)
        die(e, "recording again");
    return ENVLOG_OK;
}

static double recording_cost(const char *from, size_t *n_records, double *calls)
{
    envlog_env *src, *dst;
    char dir[4200];
    fresh_dir(dir, sizeof dir, "rerecord");
    CHECK(envlog_env_open(from, ENVLOG_OPEN_READONLY, &src), "opening");
    CHECK(envlog_env_open(dir, ENVLOG_OPEN_CREATE, &dst), "opening");
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "rerecord";
    rerecord x = {0};
    double t0 = now_s();
    CHECK(envlog_session_begin(dst, &so, &x.s), "beginning");
    double begin = now_s() - t0;
    CHECK(envlog_replay_each(src, NULL, rerecord_one, &x), "replaying");
    t0 = now_s();
    CHECK(envlog_session_end(x.s), "ending");
    double end = now_s() - t0;
    envlog_env_close(src);
    envlog_env_close(dst);
    rmtree(dir);
    *n_records = x.n;
    *calls = x.secs;
    return begin + x.secs + end;
}

/* ---------------------------------------------------------------- sections */

static void overhead(void)
{
    int reps = o.reps;
    double off[16] = {0}, basic[16] = {0}, cost[16] = {0}, calls[16] = {0};
    size_t n_records = 0;
    uint64_t bytes = 0;
    for (int r = 0; r < reps; r++) {
        for (int pass = 0; pass < 2; pass++) {
            /* alternate which level goes first */
            bool is_basic = (pass == 0) == (r % 2 == 1);
            char dir[4200];
            fresh_dir(dir, sizeof dir, is_basic ? "basic" : "off");
            work w = workload(dir, is_basic ? ENVLOG_LEVEL_BASIC : ENVLOG_LEVEL_OFF, 0, true);
            if (is_basic) {
                basic[r] = w.secs;
                bytes = w.ss.bytes;
                cost[r] = recording_cost(dir, &n_records, &calls[r]);
            } else {
                off[r] = w.secs;
            }
            rmtree(dir);
        }
    }
    double off_lo = off[0], off_hi = off[0];
    for (int r = 1; r < reps; r++) {
        off_lo = off[r] < off_lo ? off[r] : off_lo;
        off_hi = off[r] > off_hi ? off[r] : off_hi;
    }
    double mo = median(off, reps), mb = median(basic, reps), mc = median(cost, reps);
    double mcalls = median(calls, reps);
    if (o.json) {
        printf("{\"section\":\"overhead\",\"off_s\":%.6f,\"basic_s\":%.6f,\"ratio\":%.6f,"
               "\"off_spread\":%.6f,\"records\":%zu,\"bytes\":%llu,\"recording_s\":%.6f,"
               "\"recording_share\":%.8f,\"calls_s\":%.6f,\"reps\":%d}\n",
               mo, mb, mb / mo, (off_hi - off_lo) / mo, n_records, (unsigned long long)bytes,
               mc, mc / mo, mcalls, reps);
        return;
    }
    printf("recording overhead on the demo workload (%zu kernels + CPU tunes of %zu "
           "shape%s, %d repetitions, alternating)\n",
           o.kernels, o.shapes, o.shapes == 1 ? "" : "s", reps);
    printf("  level OFF     median %8.3f s   (spread of the OFF runs %.1f%%)\n", mo,
           100 * (off_hi - off_lo) / mo);
    printf("  level BASIC   median %8.3f s\n", mb);
    printf("  BASIC / OFF   %.4f            (whole-run ratio: within the spread above)\n",
           mb / mo);
    printf("  the %zu records BASIC wrote (%llu bytes), recorded again on their own: "
           "%.3f ms = %.4f%% of the OFF run (target: under 1%%)\n",
           n_records, (unsigned long long)bytes, mc * 1e3, 100 * mc / mo);
    printf("    of which %.3f ms in the recording calls, the rest creating, syncing and "
           "sealing the session (ENVLOG_SYNC_CLOSE)\n", mcalls * 1e3);
}

static void speedup(void)
{
    static const unsigned threads[] = {1, 2, 4};
    double t[3][16];
    size_t compiled = 0;
    for (int r = 0; r < o.reps; r++)
        for (int i = 0; i < 3; i++) {
            int k = (i + r) % 3;
            char dir[4200];
            fresh_dir(dir, sizeof dir, "batch");
            work w = workload(dir, ENVLOG_LEVEL_BASIC, threads[k], false);
            t[k][r] = w.batch_secs;
            compiled = w.compiled;
            rmtree(dir);
        }
    double m[3];
    for (int i = 0; i < 3; i++)
        m[i] = median(t[i], o.reps);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (o.json) {
        for (int i = 0; i < 3; i++)
            printf("{\"section\":\"batch\",\"threads\":%u,\"kernels\":%zu,\"secs\":%.6f,"
                   "\"speedup\":%.4f,\"cpus\":%ld}\n",
                   threads[i], compiled, m[i], m[0] / m[i], ncpu);
        return;
    }
    printf("COMPILE_ONLY batch of %zu kernels (sm_80), %d repetitions, %ld CPU%s online\n",
           compiled, o.reps, ncpu, ncpu == 1 ? "" : "s");
    for (int i = 0; i < 3; i++)
        printf("  %u thread%s  median %7.3f s   speed-up %.2f%s\n", threads[i],
               threads[i] == 1 ? " " : "s", m[i], m[0] / m[i],
               (long)threads[i] > ncpu ? "   (more threads than CPUs)" : "");
}

int main(int argc, char **argv)
{
    o.reps = 3;
    o.kernels = 12;
    o.shapes = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            o.quick = true;
        } else if (!strcmp(argv[i], "--json")) {
            o.json = true;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            o.only = argv[++i];
        } else {
            fprintf(stderr, "usage: envlog-cuda-bench [--quick] [--json] "
                            "[--only overhead|batch]\n");
            return 2;
        }
    }
    if (o.quick) {
        o.reps = 2;
        o.kernels = 6;
        o.shapes = 1;
    }
    char v[32];
    envlog_err e = envlog_cuda_nvrtc_version(v, sizeof v);
    if (e) {
        printf("envlog-cuda-bench: skipped: %s\n", envlog_errmsg());
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(o.root, sizeof o.root, "%s/envlog-cuda-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(o.root)) {
        perror("envlog-cuda-bench: mkdtemp");
        return 2;
    }
    if (!o.json)
        printf("envlog-cuda-bench: NVRTC %s%s\n", v, o.quick ? " (--quick)" : "");
    double t0 = now_s();
    if (!o.only || !strcmp(o.only, "overhead"))
        overhead();
    if (!o.only || !strcmp(o.only, "batch"))
        speedup();
    rmtree(o.root);
    if (!o.json)
        printf("# %.1f s\n", now_s() - t0);
    return 0;
}
