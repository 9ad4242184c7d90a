/* SPDX-License-Identifier: MIT */
/*
 * trace_env.c - writes the environments the trace tests draw.
 *
 *   trace_env batch DIR      a real COMPILE_ONLY batch: 24 kernels queued,
 *                            then a CPU tune that compiles them with NVRTC
 *                            on 2 threads before it measures its trials
 *                            (exit 77, saying why, where NVRTC is missing)
 *   trace_env threads DIR    spans, tunes with trials and compiles recorded
 *                            through the API from several threads, with the
 *                            shapes the layout must keep apart: spans that
 *                            close out of order on one thread, a compile
 *                            recorded without its thread and start, a tune
 *                            whose trials carry no times, marks, a span
 *                            written as its opening and its close, and one
 *                            the session ends with still open
 *
 * The session clock and thread ids are real in both; nothing here asserts
 * anything about them: tests/trace/check_trace.py reads the result.
 */
#include "envlog.h"
#include "demo_kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_KERNELS 24

static void die(const char *what, envlog_err e)
{
    fprintf(stderr, "trace_env: %s: %s (%s)\n", what, envlog_strerror(e), envlog_errmsg());
    exit(2);
}

#define TRY(what, call)                                                        \
    do {                                                                       \
        envlog_err e_ = (call);                                                \
        if (e_)                                                                \
            die(what, e_);                                                     \
    } while (0)

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- batch */

static const char fill_src[] =
    "extern \"C\" __global__ void tc_fill(float *x, float v, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }\n";

static int batch(envlog_env *env)
{
    char v[32];
    if (envlog_cuda_nvrtc_version(v, sizeof v)) {
        printf("trace_env: the NVRTC batch did not run: %s\n", envlog_errmsg());
        return 77;
    }
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "compile-batch";
    envlog_session *s;
    TRY("session", envlog_session_begin(env, &so, &s));
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    o.threads = 2;
    envlog_cuda *c;
    TRY("runtime", envlog_cuda_open(env, s, &o, &c));
    envlog_cuda_stream *st;
    TRY("stream", envlog_cuda_stream_open(c, ENVLOG_CUDA_STREAM_HOST, &st));
    envlog_cuda_kernel *k[N_KERNELS];
    char opts[N_KERNELS][32];
    envlog_cuda_override ov;
    TRY("compile-only", envlog_cuda_override_begin(c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov));
    for (int i = 0; i < N_KERNELS; i++) {
        snprintf(opts[i], sizeof opts[i], "-DVARIANT=%d", i);
        envlog_cuda_kernel_desc d = {"tc_fill", fill_src, opts[i], "sm_80"};
        TRY("kernel", envlog_cuda_kernel_new(c, &d, &k[i]));
        TRY("queue", envlog_cuda_launch(st, k[i], (envlog_cuda_dim3){1, 1, 1},
                                        (envlog_cuda_dim3){32, 1, 1}, 0, NULL));
    }
    TRY("override end", envlog_cuda_override_end(&ov));
    /* The tune compiles the queue before it measures: the batch is drawn
     * inside the tune, its workers beside it. */
    const char *names[16];
    size_t nv = demo_cpu_names(names, 16);
    demo_cpu_job x;
    TRY("matrices", demo_cpu_job_init(&x, 48, 40, 56));
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.max_samples = 8;
    envlog_cuda_tune_req r = {.key = "matmul-cpu/48x40x56", .candidates = names,
                              .n_candidates = nv, .run = demo_cpu_candidate,
                              .ctx = &x, .stream = st, .policy = &pol};
    envlog_cuda_tune_result res;
    TRY("tune", envlog_cuda_tune(c, &r, &res));
    for (int i = 0; i < N_KERNELS; i++)
        envlog_cuda_kernel_free(k[i]);
    envlog_cuda_stream_close(st);
    envlog_cuda_close(c);
    TRY("session end", envlog_session_end(s));
    demo_cpu_job_free(&x);
    return 0;
}

/* -------------------------------------------------------------- threads */

typedef struct worker {
    envlog_session *s;
    int n;
    char name[32];
} worker;

static envlog_hash128 key_of(const char *name, int i)
{
    char b[64];
    snprintf(b, sizeof b, "%s/%d", name, i);
    return envlog_hash128_bytes(b, strlen(b));
}

/* Compiles (a stand-in: a sleep) on its own thread, as a batch worker does,
 * and records each with where it ran. */
static void *compile_worker(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        uint64_t t0 = envlog_session_clock_ns(w->s);
        sleep_us(2000 + 500 * i);
        uint64_t dur = envlog_session_clock_ns(w->s) - t0;
        static const uint8_t bin[] = {0x7f, 'E', 'L', 'F'};
        envlog_compile k = {.ns = "nvrtc/13.0/sm_90", .name = w->name,
                            .kernel_key = key_of(w->name, i), .arch = "sm_90",
                            .compiler_version = "13.0", .outcome = ENVLOG_COMPILED,
                            .duration_ns = dur, .binary = {bin, sizeof bin},
                            .binary_size = sizeof bin, .has_start = true, .start_ns = t0,
                            .thread = envlog_thread_id()};
        TRY("compile", envlog_record_compile(w->s, &k, NULL));
    }
    return NULL;
}

static void *span_worker(void *arg)
{
    worker *w = arg;
    envlog_span outer, inner;
    TRY("span", envlog_span_open(w->s, w->name, &outer));
    for (int i = 0; i < w->n; i++) {
        TRY("span", envlog_span_open(w->s, "step", &inner));
        sleep_us(1000);
        TRY("span", envlog_span_close(&inner, NULL, 0, NULL));
    }
    TRY("span", envlog_span_close(&outer, NULL, 0, NULL));
    return NULL;
}

static void tune(envlog_session *s, const char *key, bool times)
{
    static const char *const cands[] = {"tile64", "tile128", "tile256"};
    envlog_trial tr[3];
    uint64_t t0 = envlog_session_clock_ns(s);
    for (int i = 0; i < 3; i++) {
        uint64_t a = envlog_session_clock_ns(s);
        sleep_us(1500 * (i + 1));
        tr[i] = (envlog_trial){.name = cands[i], .index = (uint32_t)i, .samples = 5,
                               .min_ns = 100.0 * (i + 1), .median_ns = 110.0 * (i + 1),
                               .mean_ns = 111.0 * (i + 1), .max_ns = 130.0 * (i + 1)};
        if (times) {
            tr[i].has_start = true;
            tr[i].start_ns = a;
            tr[i].wall_ns = envlog_session_clock_ns(s) - a;
        }
    }
    envlog_tune t = {.ns = "autotune/trace-test/1.0/sm_90", .key = key,
                     .checksum = envlog_tune_checksum(cands, 3), .candidates = cands,
                     .n_candidates = 3, .trials = tr, .n_trials = 3,
                     .policy = "median", .winner = 0, .margin = 1.0, .stored = true,
                     .wall_ns = envlog_session_clock_ns(s) - t0};
    if (times) {
        t.has_start = true;
        t.start_ns = t0;
        t.thread = envlog_thread_id();
    }
    TRY("tune", envlog_record_tune(s, &t, NULL));
}

static int threads(envlog_env *env)
{
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "threads";
    envlog_session *s;
    TRY("session", envlog_session_begin(env, &so, &s));
    envlog_span all, a, b;
    TRY("span", envlog_span_open(s, "all", &all));
    TRY("mark", envlog_record_mark(s, "start", NULL));
    /* Two compile workers at once, and two threads with spans of their own. */
    worker w[4] = {{s, 6, "kernel_a"}, {s, 6, "kernel_b"}, {s, 4, "spans-1"},
                   {s, 4, "spans-2"}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&th[i], NULL, i < 2 ? compile_worker : span_worker, &w[i]))
            die("thread", ENVLOG_NOMEM);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    tune(s, "matmul/with-times", true);
    tune(s, "matmul/without-times", false);
    /* A compile recorded the old way: no thread, no start. */
    static const uint8_t bin[] = {1, 2, 3};
    envlog_compile k = {.ns = "nvrtc/13.0/sm_90", .name = "untimed_kernel",
                        .kernel_key = key_of("untimed", 0), .arch = "sm_90",
                        .compiler_version = "13.0", .outcome = ENVLOG_COMPILED,
                        .duration_ns = 3000000, .binary = {bin, sizeof bin},
                        .binary_size = sizeof bin};
    TRY("compile", envlog_record_compile(s, &k, NULL));
    /* Spans that end out of order on one thread cross: a is open when b
     * opens, and closes first. */
    TRY("span", envlog_span_open(s, "crossing-a", &a));
    sleep_us(1000);
    TRY("span", envlog_span_open(s, "crossing-b", &b));
    sleep_us(1000);
    TRY("span", envlog_span_close(&a, NULL, 0, NULL));
    sleep_us(1000);
    TRY("span", envlog_span_close(&b, NULL, 0, NULL));
    envlog_attr at[] = {{"phase", "all"}, {"quote", "\"x\""}};
    TRY("span", envlog_span_close(&all, at, 2, NULL));
    /* A span the session ends with still open: its opening is written
     * then, with what followed it. */
    envlog_span never;
    TRY("span", envlog_span_open(s, "never-closed", &never));
    sleep_us(1000);
    TRY("mark", envlog_record_mark(s, "end", NULL));
    TRY("session end", envlog_session_end(s));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "batch") && strcmp(argv[1], "threads"))) {
        fprintf(stderr, "usage: trace_env batch|threads DIR\n");
        return 2;
    }
    envlog_env *env;
    TRY("environment", envlog_env_open(argv[2], ENVLOG_OPEN_CREATE | ENVLOG_OPEN_NO_UPKEEP, &env));
    int rc = !strcmp(argv[1], "batch") ? batch(env) : threads(env);
    envlog_env_close(env);
    return rc;
}
