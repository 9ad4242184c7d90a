/* SPDX-License-Identifier: MIT */
/*
 * check_cuda_modes.c - process and stream modes, their overrides, the
 * COMPILE_ONLY queue and its batch, and the statistics (part of the cuda
 * suite).  Everything but the batch compiles runs without NVRTC or a GPU.
 */
#include "check_cuda.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_process_override_nesting)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_env t;
    tc_open(&t, "cuda-ov", ENVLOG_LEVEL_BASIC, &o);
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_EXECUTE);
    envlog_cuda_override a, b, x;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &a));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_COMPILE_ONLY);
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &b));
    ck_assert_err(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_AND_AUTOTUNE, NULL, &x),
                  ENVLOG_WRONG_STATE);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "compile-and-autotune"));
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "compile-only"));
    ck_assert_err(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_EXECUTE, NULL, &x),
                  ENVLOG_WRONG_STATE);
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_COMPILE_ONLY);
    ck_assert_ok(envlog_cuda_override_end(&b));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_COMPILE_ONLY);
    ck_assert_err(envlog_cuda_override_end(&b), ENVLOG_WRONG_STATE); /* twice */
    ck_assert_ok(envlog_cuda_override_end(&a));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_EXECUTE);
    /* With none in force, any mode may begin. */
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_AND_AUTOTUNE, NULL, &x));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_COMPILE_AND_AUTOTUNE);
    ck_assert_ok(envlog_cuda_override_end(&x));
    ck_assert_err(envlog_cuda_override_begin(t.c, (envlog_cuda_mode)7, NULL, &x),
                  ENVLOG_INVALID_ARG);
    ck_assert_str_eq(envlog_cuda_mode_name(ENVLOG_CUDA_COMPILE_ONLY), "compile-only");
    ck_assert_str_eq(envlog_cuda_mode_name((envlog_cuda_mode)9), "unknown");
    /* The base mode is the runtime's. */
    o.mode = ENVLOG_CUDA_COMPILE_ONLY;
    tc_reopen(&t, ENVLOG_LEVEL_BASIC, &o);
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_COMPILE_ONLY);
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_EXECUTE, NULL, &x));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_EXECUTE);
    ck_assert_ok(envlog_cuda_override_end(&x));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_COMPILE_ONLY);
    tc_free(&t);
}
END_TEST

START_TEST(test_stream_modes)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_env t;
    tc_open(&t, "cuda-sm", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    /* The process mode sets every stream's default. */
    envlog_cuda_override ov;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    ck_assert_ok(envlog_cuda_override_end(&ov));
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_AND_AUTOTUNE, NULL, &ov));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    /* A measurement makes it execute, whatever else holds. */
    ck_assert_ok(envlog_cuda_measure_begin(s));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_ok(envlog_cuda_measure_begin(s)); /* nests */
    ck_assert_ok(envlog_cuda_measure_end(s));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_ok(envlog_cuda_measure_end(s));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    ck_assert_err(envlog_cuda_measure_end(s), ENVLOG_WRONG_STATE);
    ck_assert_ok(envlog_cuda_override_end(&ov));
    /* Stream overrides nest. */
    envlog_cuda_stream_override a, b, x;
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_DISCARD, &a));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_DISCARD, &b));
    ck_assert_ok(envlog_cuda_measure_begin(s));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_ok(envlog_cuda_measure_end(s));
    ck_assert_ok(envlog_cuda_stream_override_end(&b));
    ck_assert_err(envlog_cuda_stream_override_end(&b), ENVLOG_WRONG_STATE); /* twice */
    ck_assert_ok(envlog_cuda_stream_override_end(&a));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    /* A stream override beats the process default. */
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov));
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_EXECUTE, &x));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_ok(envlog_cuda_stream_override_end(&x));
    ck_assert_ok(envlog_cuda_override_end(&ov));
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

static void bump(void *arg)
{
    (*(int *)arg)++;
}

typedef struct reader_arg {
    const envlog_cuda_stats *st;
    _Atomic int stop;
    uint64_t last;
    bool monotonic;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *r = p;
    r->monotonic = true;
    while (!atomic_load(&r->stop)) {
        envlog_cuda_counts c;
        envlog_cuda_stats_read(r->st, &c);
        uint64_t v = c.launches_executed + c.launches_discarded;
        if (v < r->last)
            r->monotonic = false;
        r->last = v;
    }
    return NULL;
}

START_TEST(test_host_launches_counted_from_any_thread)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_env t;
    tc_open(&t, "cuda-launch", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    reader_arg ra = {.st = envlog_cuda_stats_of(t.c)};
    atomic_init(&ra.stop, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, reader, &ra), 0);
    int ran = 0;
    envlog_cuda_stream_override so;
    for (int i = 0; i < 20000; i++) {
        bool discard = i % 4 == 3;
        if (discard)
            ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_DISCARD, &so));
        ck_assert_ok(envlog_cuda_host_launch(s, bump, &ran));
        if (discard)
            ck_assert_ok(envlog_cuda_stream_override_end(&so));
    }
    atomic_store(&ra.stop, 1);
    pthread_join(th, NULL);
    ck_assert(ra.monotonic);
    ck_assert_int_eq(ran, 15000);
    envlog_cuda_counts c;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.launches_executed, 15000);
    ck_assert_uint_eq(c.launches_discarded, 5000);
    /* Nothing is recorded per launch. */
    envlog_session_stats ss;
    envlog_session_stats_get(t.s, &ss);
    ck_assert_uint_eq(ss.accepted, 0);
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

/* A measurement switches its stream to EXECUTE while it measures; the
 * discarding default comes back after. */
START_TEST(test_measurement_switches_stream)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    o.mode = ENVLOG_CUDA_COMPILE_AND_AUTOTUNE;
    tc_env t;
    tc_open(&t, "cuda-measure", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    int ran = 0;
    ck_assert_ok(envlog_cuda_host_launch(s, bump, &ran));
    ck_assert_int_eq(ran, 0);
    tc_clock clk;
    tc_clock_init(&clk);
    static const double ns[] = {200, 100};
    tc_clock_fixed(&clk, ns, 2);
    const char *names[] = {"slow", "fast"};
    envlog_cuda_tune_req r = tc_clock_req(&clk, s, "measure", names, 2);
    envlog_cuda_tune_result res;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert(res.measured);
    ck_assert_int_eq(res.winner, 1);
    ck_assert_int_eq(clk.seen[0], ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_int_eq(clk.seen[1], ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    envlog_cuda_counts c;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.launches_executed, clk.runs[0] + clk.runs[1]);
    ck_assert_uint_eq(c.launches_discarded, 1);
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

static const char mode_src[] =
    "extern \"C\" __global__ void tc_fill(float *x, float v, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }\n";

/* Launches under COMPILE_ONLY queue; the next load compiles the queue as one
 * batch, in a span, one record per kernel. */
START_TEST(test_compile_only_batch)
{
    if (!tc_nvrtc("the COMPILE_ONLY batch"))
        return;
    envlog_cuda_opts o = tc_no_device(NULL);
    o.threads = 3;
    tc_env t;
    tc_open(&t, "cuda-batch", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    static const char *const opts[] = {"-DV=1", "-DV=2", "-DV=3", "-DV=4", "-DV=1"};
    envlog_cuda_kernel *k[5];
    envlog_cuda_override ov;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov));
    for (int i = 0; i < 5; i++) {
        envlog_cuda_kernel_desc d = {"tc_fill", mode_src, opts[i], "sm_80"};
        ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k[i]));
        for (int rep = 0; rep < 2; rep++) /* twice: queued once */
            ck_assert_ok(envlog_cuda_launch(s, k[i], (envlog_cuda_dim3){1, 1, 1},
                                            (envlog_cuda_dim3){32, 1, 1}, 0, NULL));
    }
    ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 5);
    envlog_cuda_counts c;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.kernels_registered, 5);
    ck_assert_uint_eq(c.kernels_compiled, 0);
    ck_assert_uint_eq(c.launches_discarded, 10);
    for (int i = 0; i < 5; i++)
        ck_assert_ptr_null(envlog_cuda_kernel_binary(k[i]));
    envlog_session_stats ss;
    envlog_session_stats_get(t.s, &ss);
    ck_assert_uint_eq(ss.accepted, 0); /* nothing compiled, nothing recorded */
    ck_assert_ok(envlog_cuda_override_end(&ov));

    /* One load compiles the whole queue. */
    ck_assert_ok(envlog_cuda_kernel_load(k[2]));
    ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 0);
    for (int i = 0; i < 5; i++)
        ck_assert_ptr_nonnull(envlog_cuda_kernel_binary(k[i]));
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.kernels_compiled, 4);
    ck_assert_uint_eq(c.kernels_loaded, 1); /* the duplicate of -DV=1 */
    ck_assert_int_eq(envlog_cuda_kernel_binary(k[4])->outcome, ENVLOG_LOADED);
    ck_assert_mem_eq(envlog_cuda_kernel_binary(k[4])->binary_hash.b,
                     envlog_cuda_kernel_binary(k[0])->binary_hash.b, 16);
    envlog_cuda_batch bt;
    ck_assert_ok(envlog_cuda_compile_queued(t.c, &bt)); /* empty: records nothing */
    ck_assert_uint_eq(bt.kernels, 0);
    for (int i = 0; i < 5; i++)
        envlog_cuda_kernel_free(k[i]);
    envlog_cuda_stream_close(s);
    tc_end(&t);

    tc_recs r;
    tc_collect(t.env, &r);
    ck_assert_uint_eq(r.n, 7);
    /* The span is stamped when it opens, so its opening comes first, written
     * when the first compile (CHANGED) was; its close follows its five
     * compile records, in queue order. */
    ck_assert_int_eq(r.r[0].kind, ENVLOG_KIND_SPAN);
    ck_assert(r.r[0].span_open);
    ck_assert_str_eq(r.r[0].name, "envlog-cuda/compile-batch");
    const tc_rec *span = &r.r[6];
    ck_assert_int_eq(span->kind, ENVLOG_KIND_SPAN);
    ck_assert(!span->span_open);
    ck_assert_uint_eq(r.r[0].open_ns, span->open_ns);
    ck_assert_str_eq(span->name, "envlog-cuda/compile-batch");
    ck_assert_ptr_nonnull(strstr(span->attrs, "kernels=5"));
    ck_assert_ptr_nonnull(strstr(span->attrs, "compiled=4"));
    ck_assert_ptr_nonnull(strstr(span->attrs, "loaded=1"));
    ck_assert_ptr_nonnull(strstr(span->attrs, "threads=3"));
    /* Each compile says where it ran: its start inside the batch's span,
     * its end by its record, the thread that compiled it (the workers are
     * the batch's own; the duplicate was looked up on the calling thread,
     * the span's). */
    ck_assert(span->has_start);
    ck_assert_uint_eq(span->thread, envlog_thread_id());
    const tc_rec *rk = r.r + 1;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(rk[i].kind, ENVLOG_KIND_COMPILE);
        ck_assert_uint_gt(rk[i].stamp.seq, r.r[0].stamp.seq);
        ck_assert_uint_lt(rk[i].stamp.seq, span->stamp.seq);
        ck_assert_int_eq(rk[i].outcome, i == 4 ? ENVLOG_LOADED : ENVLOG_COMPILED);
        ck_assert_uint_ge(rk[i].stamp.offset_ns, span->open_ns);
        ck_assert_uint_le(rk[i].stamp.offset_ns, span->open_ns + span->duration_ns);
        ck_assert(rk[i].has_start);
        ck_assert_uint_ne(rk[i].thread, 0);
        ck_assert_uint_ge(rk[i].start_ns, span->open_ns);
        ck_assert_uint_le(rk[i].start_ns + rk[i].duration_ns, rk[i].stamp.offset_ns);
    }
    ck_assert_uint_eq(rk[4].thread, span->thread);
    ck_assert_uint_eq(rk[4].duration_ns, 0);
    tc_recs_free(&r);
    tc_free(&t);
}
END_TEST

typedef struct queue_ctx {
    envlog_cuda_kernel *k[3];
} queue_ctx;

static envlog_err queue_run(void *ctx, envlog_cuda_stream *s, size_t i)
{
    queue_ctx *q = ctx;
    return envlog_cuda_launch(s, q->k[i], (envlog_cuda_dim3){1, 1, 1},
                              (envlog_cuda_dim3){32, 1, 1}, 0, NULL)
               ? -1
               : 0;
}

/* Under COMPILE_ONLY a tune's candidates only queue their kernels; the pick
 * is unmeasured and never stored; the compiles name the tune. */
START_TEST(test_compile_only_tune)
{
    bool have = tc_nvrtc("the compiles of a COMPILE_ONLY tune");
    char v[32] = "test-1"; /* without NVRTC, keys need a version */
    if (have)
        ck_assert_ok(envlog_cuda_nvrtc_version(v, sizeof v));
    envlog_cuda_opts o = tc_no_device(v);
    o.mode = ENVLOG_CUDA_COMPILE_ONLY;
    tc_env t;
    tc_open(&t, "cuda-cotune", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    queue_ctx q;
    static const char *const opts[] = {"-DV=10", "-DV=20", "-DV=30"};
    for (int i = 0; i < 3; i++) {
        envlog_cuda_kernel_desc d = {"tc_fill", mode_src, opts[i], "sm_80"};
        ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &q.k[i]));
    }
    const char *names[] = {"v10", "v20", "v30"};
    envlog_cuda_tune_req r = {.key = "co-tune", .candidates = names, .n_candidates = 3,
                              .run = queue_run, .ctx = &q, .stream = s};
    envlog_cuda_tune_result res;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert_int_eq(res.winner, 0);
    ck_assert(!res.measured);
    ck_assert(!res.stored);
    ck_assert(!res.hit);
    ck_assert(res.recorded);
    ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 3);
    char ns[512];
    ck_assert_ok(envlog_cuda_tune_ns(t.c, ENVLOG_CUDA_STREAM_HOST, ns, sizeof ns));
    envlog_tune_entry ent;
    ck_assert_err(envlog_state_winner(t.c->state, ns, "co-tune",
                                      envlog_tune_checksum(names, 3), &ent),
                  ENVLOG_NOT_FOUND);
    envlog_cuda_counts c;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.tunes_registered, 1);
    ck_assert_uint_eq(c.tunes_measured, 0);
    ck_assert_uint_eq(c.tunes_persisted, 0);
    ck_assert_uint_eq(c.launches_discarded, 3);
    envlog_stamp tune_stamp = res.stamp;
    if (have) {
        ck_assert_ok(envlog_cuda_compile_queued(t.c, NULL));
        ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 0);
    }
    for (int i = 0; i < 3; i++)
        envlog_cuda_kernel_free(q.k[i]);
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.kernels_abandoned, have ? 0 : 3);
    envlog_cuda_stream_close(s);
    tc_end(&t);
    if (have) {
        tc_recs rr;
        tc_collect(t.env, &rr);
        ck_assert_uint_eq(tc_count(&rr, ENVLOG_KIND_TUNE, -1), 1);
        ck_assert_uint_eq(tc_count(&rr, ENVLOG_KIND_COMPILE, ENVLOG_COMPILED), 3);
        for (size_t i = 0; i < rr.n; i++) {
            const tc_rec *x = &rr.r[i];
            if (x->kind == ENVLOG_KIND_TUNE) {
                ck_assert(!x->stored);
                ck_assert(x->short_circuit);
                ck_assert_uint_eq(x->n_trials, 0);
                ck_assert_int_eq(x->winner, 0);
            } else if (x->kind == ENVLOG_KIND_COMPILE) {
                ck_assert(x->has_tune);
                ck_assert_uint_eq(x->tune.seq, tune_stamp.seq);
                ck_assert_mem_eq(x->tune.session.b, tune_stamp.session.b, 16);
            }
        }
        tc_recs_free(&rr);
    }
    tc_free(&t);
}
END_TEST

/* What each launch does under each process mode, for a GPU kernel on a host
 * stream (no GPU needed until it would run). */
START_TEST(test_launch_verdicts)
{
    if (!tc_nvrtc("launch verdicts under each mode"))
        return;
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_env t;
    tc_open(&t, "cuda-verdict", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    envlog_cuda_kernel_desc d = {"tc_fill", mode_src, "-DV=99", "compute_80"};
    envlog_cuda_kernel *k;
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k));
    envlog_cuda_dim3 one = {1, 1, 1};
    envlog_cuda_override ov;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov));
    ck_assert_ok(envlog_cuda_launch(s, k, one, one, 0, NULL));
    ck_assert_ptr_null(envlog_cuda_kernel_binary(k));
    ck_assert_ok(envlog_cuda_override_end(&ov));
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_AND_AUTOTUNE, NULL, &ov));
    ck_assert_ok(envlog_cuda_launch(s, k, one, one, 0, NULL)); /* compiles, discards */
    ck_assert_ptr_nonnull(envlog_cuda_kernel_binary(k));
    ck_assert_ok(envlog_cuda_override_end(&ov));
    /* EXECUTE would run it: a host stream cannot. */
    ck_assert_err(envlog_cuda_launch(s, k, one, one, 0, NULL), ENVLOG_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "host stream"));
    envlog_cuda_counts c;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.launches_discarded, 2);
    ck_assert_uint_eq(c.launches_executed, 0);
    ck_assert_uint_eq(c.kernels_compiled, 1);
    envlog_cuda_kernel_free(k);
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

/* A scripted workload, counted by the runtime and by an override's
 * collector, which counts only what happens while it is in force. */
START_TEST(test_statistics_scripted_workload)
{
    bool have = tc_nvrtc("the kernel half of the scripted workload");
    char v[32] = "test-1";
    if (have)
        ck_assert_ok(envlog_cuda_nvrtc_version(v, sizeof v));
    envlog_cuda_opts o = tc_no_device(v);
    tc_env t;
    tc_open(&t, "cuda-stats", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    envlog_cuda_stats *col;
    ck_assert_ok(envlog_cuda_stats_new(&col));
    int ran = 0;
    ck_assert_ok(envlog_cuda_host_launch(s, bump, &ran)); /* before: not in col */

    envlog_cuda_override ov, inner;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_AND_AUTOTUNE, col, &ov));
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_AND_AUTOTUNE, col, &inner));
    for (int i = 0; i < 3; i++)
        ck_assert_ok(envlog_cuda_host_launch(s, bump, &ran)); /* discarded */
    tc_clock clk;
    tc_clock_init(&clk);
    static const double ns[] = {300, 100, 150};
    tc_clock_fixed(&clk, ns, 3);
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.warmup = 1;
    pol.min_samples = 3;
    pol.drop_factor = 0;
    const char *names[] = {"a", "b", "c"};
    envlog_cuda_tune_req r = tc_clock_req(&clk, s, "stats", names, 3);
    r.policy = &pol;
    envlog_cuda_tune_result res;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res)); /* measured: 3 x (1 + 3) runs */
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res)); /* a hit */
    ck_assert(res.hit);
    clk.fail_index = TC_FAIL_ALL;
    envlog_cuda_tune_req rf = r;
    rf.key = "stats-failing";
    rf.n_candidates = 2;
    ck_assert_ok(envlog_cuda_tune(t.c, &rf, &res)); /* fails: no winner */
    ck_assert_int_eq(res.winner, -1);
    ck_assert(!res.stored);
    if (have) {
        envlog_cuda_kernel_desc good = {"tc_fill", mode_src, "-DV=7", "sm_80"};
        envlog_cuda_kernel_desc bad = {"tc_fill", "this is not CUDA", NULL, "sm_80"};
        envlog_cuda_binary *bin;
        ck_assert_ok(envlog_cuda_compile(t.c, &good, &bin));
        envlog_cuda_binary_free(bin);
        ck_assert_ok(envlog_cuda_compile(t.c, &good, &bin));
        envlog_cuda_binary_free(bin);
        ck_assert_err(envlog_cuda_compile(t.c, &bad, &bin), ENVLOG_BAD_DATA);
        envlog_cuda_binary_free(bin);
    }
    envlog_cuda_kernel_desc q = {"tc_fill", mode_src, "-DV=8", "sm_80"};
    envlog_cuda_kernel *k;
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &q, &k));
    ck_assert_ok(envlog_cuda_kernel_queue(k));
    envlog_cuda_kernel_free(k); /* abandoned */
    ck_assert_ok(envlog_cuda_override_end(&inner));
    ck_assert_ok(envlog_cuda_override_end(&ov));
    ck_assert_ok(envlog_cuda_host_launch(s, bump, &ran)); /* after: not in col */

    envlog_cuda_counts x;
    envlog_cuda_stats_read(col, &x);
    ck_assert_uint_eq(x.launches_discarded, 3);
    ck_assert_uint_eq(x.launches_executed, 3 * (1 + 3)); /* warmup + converged samples */
    ck_assert_uint_eq(x.tunes_registered, 2); /* the hit registers nothing */
    ck_assert_uint_eq(x.tunes_measured, 1);   /* the failure is not measured */
    ck_assert_uint_eq(x.tunes_failed, 1);
    ck_assert_uint_eq(x.tunes_persisted, 1);
    ck_assert_uint_eq(x.kernels_registered, have ? 4 : 1);
    ck_assert_uint_eq(x.kernels_compiled, have ? 1 : 0);
    ck_assert_uint_eq(x.kernels_loaded, have ? 1 : 0);
    ck_assert_uint_eq(x.kernels_failed, have ? 1 : 0);
    ck_assert_uint_eq(x.kernels_stored, have ? 1 : 0);
    ck_assert_uint_eq(x.kernels_abandoned, 1);
    envlog_cuda_counts all;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &all);
    ck_assert_uint_eq(all.launches_executed, x.launches_executed + 2);
    ck_assert_uint_eq(all.tunes_registered, 2);
    ck_assert_uint_eq(x.kernels_settled, x.kernels_registered);
    ck_assert_uint_eq(x.tunes_settled, x.tunes_registered);
    envlog_cuda_stream_close(s);
    tc_free(&t);
    envlog_cuda_stats_free(col);
}
END_TEST

void tc_cuda_modes(Suite *s)
{
    TCase *tc = tu_tcase(s, "modes", 120);
    tcase_add_test(tc, test_process_override_nesting);
    tcase_add_test(tc, test_stream_modes);
    tcase_add_test(tc, test_host_launches_counted_from_any_thread);
    tcase_add_test(tc, test_measurement_switches_stream);
    tcase_add_test(tc, test_compile_only_batch);
    tcase_add_test(tc, test_compile_only_tune);
    tcase_add_test(tc, test_launch_verdicts);
    tcase_add_test(tc, test_statistics_scripted_workload);
}
