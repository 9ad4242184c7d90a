/* SPDX-License-Identifier: MIT */
/*
 * check_cuda_settle.c - registrations and how each settles, overrides that
 * nest and end in any order, and a failed kernel tried again (part of the
 * cuda suite).  The tunes run on a host stream with an injected clock; the
 * kernel retry needs NVRTC and skips without it.
 */
#include "check_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static envlog_cuda_opts host_only(void)
{
    return tc_no_device("test-1"); /* kernels are keyed without NVRTC */
}

static void tune_ok(envlog_cuda *c, envlog_cuda_tune_req *r, const char *key, size_t n,
                    envlog_cuda_tune_result *res)
{
    r->key = key;
    r->n_candidates = n;
    ck_assert_ok(envlog_cuda_tune(c, r, res));
}

static void read_counts(const envlog_cuda_stats *st, envlog_cuda_counts *x)
{
    envlog_cuda_stats_read(st, x);
    ck_assert_uint_eq(x->tunes_pending, x->tunes_registered - x->tunes_settled);
    ck_assert_uint_eq(x->kernels_pending, x->kernels_registered - x->kernels_settled);
}

START_TEST(test_every_registration_settles_once)
{
    envlog_cuda_opts o = host_only();
    tc_env t;
    tc_open(&t, "cuda-settle", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    tc_clock clk;
    tc_clock_init(&clk);
    static const double ns[] = {300, 100};
    tc_clock_fixed(&clk, ns, 2);
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.min_samples = 3;
    const char *names[] = {"a", "b"};
    envlog_cuda_tune_req r = tc_clock_req(&clk, s, NULL, names, 0);
    r.policy = &pol;
    envlog_cuda_tune_result res;
    envlog_cuda_stats *gather, *measure;
    ck_assert_ok(envlog_cuda_stats_new(&gather));
    ck_assert_ok(envlog_cuda_stats_new(&measure));
    envlog_cuda_counts x;

    /* A COMPILE_ONLY pass: a key gathered twice registers once and stays
     * pending; a single candidate is answered and settled at once. */
    envlog_cuda_override ov;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, gather, &ov));
    tune_ok(t.c, &r, "k", 2, &res);
    tune_ok(t.c, &r, "k", 2, &res);
    tune_ok(t.c, &r, "left", 2, &res);
    tune_ok(t.c, &r, "one", 1, &res);
    ck_assert_int_eq(res.winner, 0);
    ck_assert(!res.measured && !res.stored);
    ck_assert_ok(envlog_cuda_override_end(&ov));
    read_counts(gather, &x);
    ck_assert_uint_eq(x.tunes_registered, 3);
    ck_assert_uint_eq(x.tunes_single, 1);
    ck_assert_uint_eq(x.tunes_pending, 2);

    /* A later pass measures "k": the gathered registration settles, into
     * the collector that counted it, and nothing registers again. */
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_AND_AUTOTUNE, measure,
                                            &ov));
    tune_ok(t.c, &r, "k", 2, &res);
    ck_assert(res.measured && res.stored);
    ck_assert_int_eq(res.winner, 1);
    tune_ok(t.c, &r, "k", 2, &res); /* a hit registers nothing */
    ck_assert(res.hit);
    /* A single candidate is answered without running it. */
    unsigned runs = clk.runs[0];
    tune_ok(t.c, &r, "one-now", 1, &res);
    ck_assert_int_eq(res.winner, 0);
    ck_assert(!res.measured && !res.stored && res.recorded);
    ck_assert_uint_eq(clk.runs[0], runs);
    /* A failed tune is failed, not also measured. */
    clk.fail_index = TC_FAIL_ALL;
    tune_ok(t.c, &r, "fails", 2, &res);
    ck_assert_int_eq(res.winner, -1);
    clk.fail_index = -1;
    ck_assert_ok(envlog_cuda_override_end(&ov));
    read_counts(gather, &x);
    ck_assert_uint_eq(x.tunes_registered, 3);
    ck_assert_uint_eq(x.tunes_measured, 1);
    ck_assert_uint_eq(x.tunes_pending, 1); /* "left" */
    read_counts(measure, &x);
    ck_assert_uint_eq(x.tunes_registered, 2);
    ck_assert_uint_eq(x.tunes_measured, 0);
    ck_assert_uint_eq(x.tunes_single, 1);
    ck_assert_uint_eq(x.tunes_failed, 1);
    ck_assert_uint_eq(x.tunes_persisted, 0);
    ck_assert_uint_eq(x.tunes_settled, x.tunes_registered);
    read_counts(envlog_cuda_stats_of(t.c), &x);
    ck_assert_uint_eq(x.tunes_registered, 5);
    ck_assert_uint_eq(x.tunes_measured, 1);
    ck_assert_uint_eq(x.tunes_failed, 1);
    ck_assert_uint_eq(x.tunes_single, 2);
    ck_assert_uint_eq(x.tunes_persisted, 1);
    ck_assert_uint_eq(x.tunes_pending, 1);

    /* Kernels: one never asked for registers nothing; one dropped while
     * queued is abandoned. */
    envlog_cuda_kernel_desc d = {"tc_k", "extern \"C\" __global__ void tc_k() {}\n", NULL,
                                 "sm_80"};
    envlog_cuda_kernel *k1, *k2;
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k1));
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k2));
    ck_assert_ok(envlog_cuda_kernel_queue(k2));
    ck_assert_ok(envlog_cuda_kernel_queue(k2)); /* once */
    read_counts(envlog_cuda_stats_of(t.c), &x);
    ck_assert_uint_eq(x.kernels_registered, 1);
    ck_assert_uint_eq(x.kernels_pending, 1);
    envlog_cuda_kernel_free(k1);
    envlog_cuda_kernel_free(k2);
    read_counts(envlog_cuda_stats_of(t.c), &x);
    ck_assert_uint_eq(x.kernels_abandoned, 1);
    ck_assert_uint_eq(x.kernels_settled, x.kernels_registered);

    /* A gathered key never measured is abandoned when the runtime closes;
     * its collector, freed by its owner before, is held until then. */
    envlog_cuda_stats_free(measure);
    envlog_cuda_stream_close(s);
    tc_end(&t);
    read_counts(gather, &x);
    ck_assert_uint_eq(x.tunes_abandoned, 1);
    ck_assert_uint_eq(x.tunes_pending, 0);
    ck_assert_uint_eq(x.tunes_settled, x.tunes_registered);
    envlog_cuda_stats_free(gather);
    tc_free(&t);
}
END_TEST

/* A tune that stops on an error settles as abandoned. */
START_TEST(test_tune_stopped_by_an_error_is_abandoned)
{
    envlog_cuda_opts o = host_only();
    tc_env t;
    tc_open(&t, "cuda-abandon", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    tc_clock clk;
    tc_clock_init(&clk);
    static const double ns[] = {100, 100};
    tc_clock_fixed(&clk, ns, 2);
    const char *names[] = {"a", "b"};
    envlog_cuda_tune_req r = tc_clock_req(&clk, s, "nomem", names, 2);
    envlog_cuda_tune_result res;
    envlog_err e = ENVLOG_NOMEM;
    uint64_t abandoned = 0;
    for (unsigned n = 1; e == ENVLOG_NOMEM && n < 200; n++) {
        envlog_alloc_fail_after(n);
        e = envlog_cuda_tune(t.c, &r, &res);
        envlog_alloc_fail_reset();
        envlog_cuda_counts x;
        read_counts(envlog_cuda_stats_of(t.c), &x);
        ck_assert_uint_eq(x.tunes_pending, 0);
        if (e == ENVLOG_NOMEM && x.tunes_registered)
            abandoned = x.tunes_abandoned;
    }
    ck_assert_ok(e);
    ck_assert_uint_gt(abandoned, 0);
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

static void bump(void *arg)
{
    (*(int *)arg)++;
}

START_TEST(test_overrides_nest_refuse_and_end_in_any_order)
{
    envlog_cuda_opts o = host_only();
    tc_env t;
    tc_open(&t, "cuda-ovorder", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stats *c1, *c2;
    ck_assert_ok(envlog_cuda_stats_new(&c1));
    ck_assert_ok(envlog_cuda_stats_new(&c2));
    envlog_cuda_override a, b, n, x;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, c1, &a));
    ck_assert_err(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, c2, &x),
                  ENVLOG_WRONG_STATE);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "collector"));
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, c1, &b));
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &n));
    /* The outer ends first: the mode and its collector hold while any
     * override is in force. */
    ck_assert_ok(envlog_cuda_override_end(&a));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_COMPILE_ONLY);
    envlog_cuda_stream *s = tc_host_stream(&t);
    int ran = 0;
    ck_assert_ok(envlog_cuda_host_launch(s, bump, &ran)); /* discarded, into c1 */
    envlog_cuda_counts cnt;
    envlog_cuda_stats_read(c1, &cnt);
    ck_assert_uint_eq(cnt.launches_discarded, 1);
    ck_assert_int_eq(ran, 0);
    ck_assert_ok(envlog_cuda_override_end(&b));
    ck_assert_ok(envlog_cuda_override_end(&n));
    ck_assert_int_eq(envlog_cuda_mode_get(t.c), ENVLOG_CUDA_EXECUTE);
    ck_assert_err(envlog_cuda_override_end(&a), ENVLOG_WRONG_STATE);
    /* An override without a collector refuses one that has one. */
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &a));
    ck_assert_err(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, c2, &x),
                  ENVLOG_WRONG_STATE);
    ck_assert_ok(envlog_cuda_override_end(&a));

    /* Stream overrides: the newest decides, whatever the modes. */
    envlog_cuda_stream_override d, e, f;
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_EXECUTE, &d));
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_DISCARD, &e));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_EXECUTE, &f));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_ok(envlog_cuda_stream_override_end(&f));
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_DISCARD);
    /* Out of order: each restores what it found, as a guard does. */
    ck_assert_ok(envlog_cuda_stream_override_end(&d)); /* found nothing */
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_ok(envlog_cuda_stream_override_end(&e)); /* found EXECUTE */
    ck_assert_int_eq(envlog_cuda_stream_mode_get(s), ENVLOG_CUDA_STREAM_EXECUTE);
    ck_assert_err(envlog_cuda_stream_override_end(&e), ENVLOG_WRONG_STATE);
    envlog_cuda_stream_close(s);
    tc_free(&t);
    envlog_cuda_stats_free(c1);
    envlog_cuda_stats_free(c2);
}
END_TEST

static const char fill_src[] =
    "extern \"C\" __global__ void tc_fill(float *x, float v, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }\n";

/* The launch-mode table's EXECUTE row: a discarding stream (here an
 * override nested in one that executes) compiles the kernel now, never
 * queues it, and discards the launch. */
START_TEST(test_discard_stream_under_execute_compiles_without_queuing)
{
    if (!tc_nvrtc("a launch on a discarding stream under EXECUTE"))
        return;
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    tc_env t;
    tc_open(&t, "cuda-discard-exec", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    envlog_cuda_kernel_desc d = {"tc_fill", fill_src, "-DV=5", "compute_80"};
    envlog_cuda_kernel *k;
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k));
    envlog_cuda_stream_override ex, dis;
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_EXECUTE, &ex));
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_DISCARD, &dis));
    envlog_cuda_dim3 one = {1, 1, 1};
    ck_assert_ok(envlog_cuda_launch(s, k, one, one, 0, NULL));
    ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 0);
    ck_assert_ptr_nonnull(envlog_cuda_kernel_binary(k));
    ck_assert_ok(envlog_cuda_stream_override_end(&dis));
    ck_assert_ok(envlog_cuda_stream_override_end(&ex));
    envlog_cuda_counts x;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &x);
    ck_assert_uint_eq(x.launches_discarded, 1);
    ck_assert_uint_eq(x.launches_executed, 0);
    ck_assert_uint_eq(x.kernels_compiled, 1);
    ck_assert_uint_eq(x.kernels_settled, x.kernels_registered);
    envlog_cuda_kernel_free(k);
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

/* A kernel whose header is broken fails; once the header is fixed its next
 * load (or queue) tries it again and registers it again. */
START_TEST(test_failed_kernel_is_tried_again_on_next_load)
{
    if (!tc_nvrtc("a failed kernel tried again"))
        return;
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    tc_env t;
    tc_open(&t, "cuda-retry", ENVLOG_LEVEL_BASIC, &o);
    char *inc = tu_mkdtemp("cuda-retry-inc");
    static const char broken[] = "#define VALUE undeclared_thing\n";
    static const char fixed[] = "#define VALUE 2.0f\n";
    tu_write(tu_path(inc, "value.h"), broken, sizeof broken - 1);
    char opts[600];
    snprintf(opts, sizeof opts, "-I%s", inc);
    envlog_cuda_kernel_desc d = {
        "tc_set", "#include \"value.h\"\n"
                  "extern \"C\" __global__ void tc_set(float *x) { x[0] = VALUE; }\n",
        opts, "compute_80"};
    envlog_cuda_kernel *k, *q;
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k));
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &q));
    ck_assert_err(envlog_cuda_kernel_load(k), ENVLOG_BAD_DATA);
    ck_assert_err(envlog_cuda_kernel_load(q), ENVLOG_BAD_DATA);
    tu_write(tu_path(inc, "value.h"), fixed, sizeof fixed - 1);
    ck_assert_ok(envlog_cuda_kernel_load(k));
    const envlog_cuda_binary *b = envlog_cuda_kernel_binary(k);
    ck_assert_int_eq(b->outcome, ENVLOG_COMPILED);
    /* Queued again, the batch takes it: from the cache k just filled. */
    ck_assert_ok(envlog_cuda_kernel_queue(q));
    ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 1);
    envlog_cuda_batch bt;
    ck_assert_ok(envlog_cuda_compile_queued(t.c, &bt));
    ck_assert_uint_eq(bt.loaded, 1);
    ck_assert_int_eq(envlog_cuda_kernel_binary(q)->outcome, ENVLOG_LOADED);
    envlog_cuda_counts x;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &x);
    ck_assert_uint_eq(x.kernels_registered, 4);
    ck_assert_uint_eq(x.kernels_failed, 2);
    ck_assert_uint_eq(x.kernels_compiled, 1);
    ck_assert_uint_eq(x.kernels_loaded, 1);
    ck_assert_uint_eq(x.kernels_pending, 0);
    envlog_cuda_kernel_free(k);
    envlog_cuda_kernel_free(q);
    tc_end(&t);
    tc_recs rr;
    tc_collect(t.env, &rr);
    ck_assert_uint_eq(tc_count(&rr, ENVLOG_KIND_COMPILE, ENVLOG_FAILED), 2);
    ck_assert_uint_eq(tc_count(&rr, ENVLOG_KIND_COMPILE, ENVLOG_COMPILED), 1);
    tc_recs_free(&rr);
    tu_rmrf(inc);
    free(inc);
    tc_free(&t);
}
END_TEST

void tc_cuda_settle(Suite *s)
{
    TCase *tc = tu_tcase(s, "settle", 120);
    tcase_add_test(tc, test_every_registration_settles_once);
    tcase_add_test(tc, test_tune_stopped_by_an_error_is_abandoned);
    tcase_add_test(tc, test_overrides_nest_refuse_and_end_in_any_order);
    tcase_add_test(tc, test_discard_stream_under_execute_compiles_without_queuing);
    tcase_add_test(tc, test_failed_kernel_is_tried_again_on_next_load);
}
