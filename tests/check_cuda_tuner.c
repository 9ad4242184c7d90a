/* SPDX-License-Identifier: MIT */
/*
 * check_cuda_tuner.c - the autotuner (part of the cuda suite): with an
 * injected clock, where every outcome is determined (winner, elimination,
 * convergence, noise), and with the real CPU clock, where the winner is
 * stored and a second run is a hit that writes nothing.
 */
#include "check_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct tuned {
    tc_env t;
    envlog_cuda_stream *s;
    tc_clock clk;
    envlog_cuda_tune_result res;
    tc_rec rec; /* the tune record read back */
} tuned;

/* Tunes candidates `names` with the clock's script and reads the record. */
static void run_tune(tuned *x, envlog_level level, const char *const *names, size_t n,
                     const envlog_cuda_policy *pol)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_open(&x->t, "cuda-tune", level, &o);
    x->s = tc_host_stream(&x->t);
    envlog_cuda_tune_req r = tc_clock_req(&x->clk, x->s, "k", names, n);
    r.policy = pol;
    ck_assert_ok(envlog_cuda_tune(x->t.c, &r, &x->res));
    envlog_cuda_stream_close(x->s);
    tc_end(&x->t);
    tc_recs rr;
    tc_collect(x->t.env, &rr);
    memset(&x->rec, 0, sizeof x->rec);
    /* a tune that stored nothing is OBSERVED: held in memory, never written */
    ck_assert_uint_eq(tc_count(&rr, ENVLOG_KIND_TUNE, -1), x->res.stored ? 1 : 0);
    for (size_t i = 0; i < rr.n; i++)
        if (rr.r[i].kind == ENVLOG_KIND_TUNE)
            x->rec = rr.r[i];
    tc_recs_free(&rr);
}

START_TEST(test_injected_winner)
{
    tuned x;
    tc_clock_init(&x.clk);
    static const double ns[] = {300, 100, 150};
    tc_clock_fixed(&x.clk, ns, 3);
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.drop_factor = 0; /* nothing dropped: all converge at once */
    const char *names[] = {"a", "b", "c"};
    run_tune(&x, ENVLOG_LEVEL_FULL, names, 3, &pol);
    ck_assert_int_eq(x.res.winner, 1);
    ck_assert(x.res.measured && x.res.stored && x.res.recorded);
    ck_assert_double_eq_tol(x.res.margin, 0.5, 1e-12); /* c over b */
    ck_assert(!x.res.within_noise);
    ck_assert_uint_eq(x.res.n_trials, 3);
    ck_assert_int_eq(x.rec.winner, 1);
    ck_assert(x.rec.stored);
    ck_assert(!x.rec.short_circuit);
    ck_assert_str_eq(x.rec.name, "k");
    ck_assert_str_eq(x.rec.policy, "adaptive-median/test-clock");
    ck_assert_uint_eq(x.rec.n_params, 6);
    ck_assert_uint_eq(x.rec.n_trials, 3);
    for (uint32_t i = 0; i < 3; i++) {
        ck_assert_uint_eq(x.rec.trial_index[i], i); /* in the order they ran */
        ck_assert_uint_eq(x.rec.trial_samples[i], pol.min_samples); /* converged */
        ck_assert_uint_eq(x.rec.trial_n_samples[i], pol.min_samples); /* FULL */
        ck_assert_uint_eq(x.clk.runs[i], pol.warmup + pol.min_samples);
    }
    tc_free(&x.t);
}
END_TEST

START_TEST(test_injected_elimination_and_convergence)
{
    tuned x;
    tc_clock_init(&x.clk);
    /* a: steady 100 (converges at min); b: ~500, noisy (dropped at min:
     * 500 > 2 x 100); c: ~120, noisy (never converges with rel_tol 0.001,
     * never dropped: runs to max) */
    static const double a[] = {100}, b[] = {400, 600}, c[] = {110, 130};
    x.clk.script[0] = a, x.clk.len[0] = 1;
    x.clk.script[1] = b, x.clk.len[1] = 2;
    x.clk.script[2] = c, x.clk.len[2] = 2;
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.warmup = 0;
    pol.min_samples = 4;
    pol.max_samples = 12;
    pol.rel_tol = 0.001;
    const char *names[] = {"a", "b", "c"};
    run_tune(&x, ENVLOG_LEVEL_BASIC, names, 3, &pol);
    ck_assert_int_eq(x.res.winner, 0);
    ck_assert_uint_eq(x.rec.trial_samples[0], 4);
    ck_assert_uint_eq(x.rec.trial_samples[1], 4);
    ck_assert_uint_eq(x.rec.trial_samples[2], 12);
    ck_assert_uint_eq(x.rec.trial_n_samples[0], 0); /* BASIC: no samples */
    ck_assert_double_eq_tol(x.res.margin, 0.2, 1e-12); /* c's median 120 */
    ck_assert(!x.res.within_noise);
    tc_free(&x.t);

    /* Dropping is relative to the leader so far: the first candidate is
     * never dropped, however slow. */
    tc_clock_init(&x.clk);
    static const double s1[] = {900, 1100}, f1[] = {100};
    x.clk.script[0] = s1, x.clk.len[0] = 2;
    x.clk.script[1] = f1, x.clk.len[1] = 1;
    run_tune(&x, ENVLOG_LEVEL_BASIC, names, 2, &pol);
    ck_assert_uint_eq(x.rec.trial_samples[0], 12);
    ck_assert_int_eq(x.res.winner, 1);
    tc_free(&x.t);
}
END_TEST

START_TEST(test_injected_within_noise)
{
    tuned x;
    tc_clock_init(&x.clk);
    static const double a[] = {100, 110, 90, 105, 95}, b[] = {102, 112, 92, 107, 97};
    x.clk.script[0] = a, x.clk.len[0] = 5;
    x.clk.script[1] = b, x.clk.len[1] = 5;
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.warmup = 0;
    pol.min_samples = 5;
    pol.max_samples = 5;
    const char *names[] = {"a", "b"};
    run_tune(&x, ENVLOG_LEVEL_BASIC, names, 2, &pol);
    ck_assert_int_eq(x.res.winner, 0);
    ck_assert_double_eq_tol(x.res.margin, 0.02, 1e-12);
    ck_assert(x.res.within_noise);
    ck_assert(x.rec.within_noise);
    ck_assert(x.res.stored); /* a close call is still a measured pick */
    tc_free(&x.t);

    /* An exact tie: within noise, and the lower index wins. */
    tc_clock_init(&x.clk);
    static const double tie[] = {100, 100};
    tc_clock_fixed(&x.clk, tie, 2);
    run_tune(&x, ENVLOG_LEVEL_BASIC, names, 2, &pol);
    ck_assert_int_eq(x.res.winner, 0);
    ck_assert(x.res.within_noise);
    tc_free(&x.t);
}
END_TEST

START_TEST(test_failed_candidates)
{
    tuned x;
    tc_clock_init(&x.clk);
    static const double ns[] = {100, 50}, same[] = {100, 100};
    tc_clock_fixed(&x.clk, ns, 2);
    x.clk.fail_index = 1; /* the fastest fails */
    const char *names[] = {"a", "b"};
    run_tune(&x, ENVLOG_LEVEL_BASIC, names, 2, NULL);
    ck_assert_int_eq(x.res.winner, 0);
    ck_assert(!x.rec.trial_error[0]);
    ck_assert(x.rec.trial_error[1]);
    ck_assert_str_eq(x.rec.first_error, "candidate 1 refuses to run");
    ck_assert_double_eq(x.res.margin, 0); /* no runner-up */
    tc_free(&x.t);

    /* A run function's code is the candidate's error when no envlog call
     * failed to say more (issue 17, item 3). */
    tc_clock_init(&x.clk);
    tc_clock_fixed(&x.clk, ns, 2);
    x.clk.fail_index = 1;
    x.clk.fail_code = ENVLOG_NOSPACE;
    run_tune(&x, ENVLOG_LEVEL_BASIC, names, 2, NULL);
    ck_assert_int_eq(x.res.winner, 0);
    ck_assert_ptr_nonnull(strstr(x.rec.first_error, envlog_strerror(ENVLOG_NOSPACE)));
    tc_free(&x.t);

    tc_clock_init(&x.clk);
    tc_clock_fixed(&x.clk, same, 2);
    x.clk.fail_index = TC_FAIL_ALL;
    run_tune(&x, ENVLOG_LEVEL_BASIC, names, 2, NULL);
    ck_assert_int_eq(x.res.winner, -1);
    ck_assert(x.res.measured);
    ck_assert(!x.res.stored);
    ck_assert(x.res.recorded);
    /* not stored: OBSERVED, so the failed tune left nothing on disk */
    ck_assert_uint_eq(tc_sessions(&x.t), 0);
    tc_free(&x.t);
}
END_TEST

/* An unmeasured pick is never stored: a later pass measures. */
START_TEST(test_unmeasured_pick_not_stored)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_env t;
    tc_open(&t, "cuda-unmeasured", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    tc_clock clk;
    tc_clock_init(&clk);
    static const double ns[] = {100, 50, 10};
    tc_clock_fixed(&clk, ns, 2);
    const char *names[] = {"a", "b"};
    envlog_cuda_tune_req r = tc_clock_req(&clk, s, "u", names, 2);
    envlog_cuda_override ov;
    ck_assert_ok(envlog_cuda_override_begin(t.c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov));
    envlog_cuda_tune_result res;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert_int_eq(res.winner, 0);
    ck_assert(!res.measured && !res.stored && !res.hit);
    ck_assert_uint_eq(clk.runs[0], 1); /* each ran once, discarding */
    ck_assert_uint_eq(clk.runs[1], 1);
    ck_assert_int_eq(clk.seen[0], ENVLOG_CUDA_STREAM_DISCARD);
    ck_assert_ok(envlog_cuda_override_end(&ov));
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert(!res.hit);
    ck_assert(res.measured && res.stored);
    ck_assert_int_eq(res.winner, 1);
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert(res.hit);
    ck_assert_int_eq(res.winner, 1);
    /* Another candidate list is another checksum: a miss. */
    const char *more[] = {"a", "b", "c"};
    tc_clock_fixed(&clk, ns, 3);
    r.candidates = more;
    r.n_candidates = 3;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert(!res.hit);
    ck_assert_int_eq(res.winner, 2);
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

START_TEST(test_bad_requests)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_env t;
    tc_open(&t, "cuda-badreq", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    tc_clock clk;
    tc_clock_init(&clk);
    const char *names[] = {"a", NULL};
    envlog_cuda_tune_req r = {.key = "b", .candidates = names, .n_candidates = 2,
                              .run = tc_clock_run, .ctx = &clk, .stream = s};
    envlog_cuda_tune_result res;
    ck_assert_err(envlog_cuda_tune(t.c, &r, &res), ENVLOG_INVALID_ARG);
    r.n_candidates = 0;
    ck_assert_err(envlog_cuda_tune(t.c, &r, &res), ENVLOG_INVALID_ARG);
    r.n_candidates = 1;
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.min_samples = 10;
    pol.max_samples = 5;
    r.policy = &pol;
    ck_assert_err(envlog_cuda_tune(t.c, &r, &res), ENVLOG_INVALID_ARG);
    envlog_cuda_policy_init(&pol);
    pol.drop_factor = 0.5;
    ck_assert_err(envlog_cuda_tune(t.c, &r, &res), ENVLOG_INVALID_ARG);
    r.policy = NULL;
    r.key = "";
    ck_assert_err(envlog_cuda_tune(t.c, &r, &res), ENVLOG_INVALID_ARG);
    /* the events timer on a host stream: every candidate fails, no winner */
    r.key = "events-on-host";
    names[1] = "b";
    r.n_candidates = 2;
    r.timer = envlog_cuda_timer_events();
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert_int_eq(res.winner, -1);
    envlog_cuda_stream_close(s);
    tc_free(&t);
}
END_TEST

/* Allocation failures anywhere in a tune end in a clean ENVLOG_NOMEM. */
START_TEST(test_tune_alloc_faults)
{
    static const double ns[] = {100, 50};
    const char *names[] = {"a", "b"};
    bool passed = false;
    for (long n = 1; n < 500 && !passed; n++) {
        envlog_cuda_opts o = tc_no_device(NULL);
        tc_env t;
        tc_open(&t, "cuda-nomem", ENVLOG_LEVEL_BASIC, &o);
        envlog_cuda_stream *s = tc_host_stream(&t);
        tc_clock clk;
        tc_clock_init(&clk);
        tc_clock_fixed(&clk, ns, 2);
        envlog_cuda_tune_req r = tc_clock_req(&clk, s, "nomem", names, 2);
        envlog_cuda_tune_result res;
        envlog_alloc_fail_after(n);
        envlog_err e = envlog_cuda_tune(t.c, &r, &res);
        envlog_alloc_fail_reset();
        if (e == ENVLOG_OK) {
            passed = true;
            ck_assert_int_eq(res.winner, 1);
        } else {
            ck_assert_err(e, ENVLOG_NOMEM);
        }
        envlog_cuda_stream_close(s);
        tc_free(&t);
    }
    ck_assert(passed);
}
END_TEST

START_TEST(test_real_cpu_clock)
{
    envlog_cuda_opts o = tc_no_device(NULL);
    tc_env t;
    tc_open(&t, "cuda-cpu", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_stream *s = tc_host_stream(&t);
    const char *names[8];
    size_t nv = demo_cpu_names(names, 8);
    demo_cpu_job x;
    ck_assert_ok(demo_cpu_job_init(&x, 48, 40, 56));
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.max_samples = 8;
    envlog_cuda_tune_req r = {.key = "matmul-cpu/test", .candidates = names,
                              .n_candidates = nv, .run = demo_cpu_candidate, .ctx = &x, .stream = s,
                              .policy = &pol};
    envlog_cuda_tune_result res;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert(res.measured && res.stored);
    ck_assert_int_ge(res.winner, 0);
    ck_assert_uint_gt(res.wall_ns, 0);
    char ns[512];
    ck_assert_ok(envlog_cuda_tune_ns(t.c, ENVLOG_CUDA_STREAM_HOST, ns, sizeof ns));
    envlog_tune_entry ent;
    ck_assert_ok(envlog_state_winner(t.c->state, ns, r.key,
                                     envlog_tune_checksum(names, nv), &ent));
    ck_assert_str_eq(ent.winner, names[res.winner]);
    envlog_cuda_stream_close(s);
    tc_end(&t);
    ck_assert_uint_eq(tc_sessions(&t), 1);
    tc_recs rr;
    tc_collect(t.env, &rr);
    ck_assert_uint_eq(rr.n, 1);
    ck_assert_int_eq(rr.r[0].kind, ENVLOG_KIND_TUNE);
    ck_assert_int_eq(rr.r[0].effect, ENVLOG_CHANGED);
    ck_assert_str_eq(rr.r[0].policy, "adaptive-median/cpu-clock");
    ck_assert_uint_eq(rr.r[0].n_trials, nv);
    /* The tune says where it ran, and its trials when, one after another
     * inside it, so the trace draws them as its children. */
    const tc_rec *tr = &rr.r[0];
    ck_assert(tr->has_start);
    ck_assert_uint_eq(tr->thread, envlog_thread_id());
    ck_assert_uint_le(tr->start_ns + tr->wall_ns, tr->stamp.offset_ns);
    uint64_t at = tr->start_ns;
    for (size_t i = 0; i < nv; i++) {
        ck_assert_uint_eq(rr.r[0].trial_index[i], i);
        ck_assert_uint_ge(rr.r[0].trial_samples[i], pol.min_samples);
        ck_assert(!rr.r[0].trial_error[i]);
        ck_assert(tr->trial_has_start[i]);
        ck_assert_uint_ge(tr->trial_start_ns[i], at);
        at = tr->trial_start_ns[i] + tr->trial_wall_ns[i];
    }
    ck_assert_uint_le(at, tr->start_ns + tr->wall_ns);
    tc_recs_free(&rr);

    /* A second run, in a new session: a hit, nothing ran, nothing written. */
    tc_reopen(&t, ENVLOG_LEVEL_BASIC, &o);
    r.stream = s = tc_host_stream(&t);
    envlog_cuda_tune_result again;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &again));
    ck_assert(again.hit);
    ck_assert(!again.measured);
    ck_assert_int_eq(again.winner, res.winner);
    envlog_cuda_counts c;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &c);
    ck_assert_uint_eq(c.launches_executed, 0);
    envlog_session_stats ss;
    envlog_session_stats_get(t.s, &ss);
    ck_assert_uint_eq(ss.accepted, 0);
    envlog_cuda_stream_close(s);
    tc_end(&t);
    ck_assert_uint_eq(tc_sessions(&t), 1);
    demo_cpu_job_free(&x);
    tc_free(&t);
}
END_TEST

START_TEST(test_policy_functions)
{
    double x[] = {5, 1, 4, 2, 3}, scratch[5];
    envlog_cuda__summary s;
    envlog_cuda__summarize(x, 5, scratch, &s);
    ck_assert_double_eq(s.min, 1);
    ck_assert_double_eq(s.max, 5);
    ck_assert_double_eq(s.median, 3);
    ck_assert_double_eq(s.mean, 3);
    ck_assert_double_eq_tol(s.sd, sqrt(2.5), 1e-12);
    envlog_cuda__summarize(x, 4, scratch, &s);
    ck_assert_double_eq(s.median, 3); /* (2 + 4) / 2 */
    envlog_cuda_policy p;
    envlog_cuda_policy_init(&p);
    ck_assert_uint_eq(p.min_samples, 5);
    envlog_cuda__summarize(x, 4, scratch, &s);
    ck_assert_int_eq(envlog_cuda__verdict(&s, -1, &p), 0); /* under min */
    double flat[] = {7, 7, 7, 7, 7};
    envlog_cuda__summarize(flat, 5, scratch, &s);
    ck_assert_int_eq(envlog_cuda__verdict(&s, -1, &p), 1);
    ck_assert_int_eq(envlog_cuda__verdict(&s, 3, &p), 2);   /* 7 > 2 x 3 */
    ck_assert_int_eq(envlog_cuda__verdict(&s, 3.5, &p), 1); /* not above */
}
END_TEST

void tc_cuda_tuner(Suite *s)
{
    TCase *tc = tu_tcase(s, "tuner", 120);
    tcase_add_test(tc, test_policy_functions);
    tcase_add_test(tc, test_injected_winner);
    tcase_add_test(tc, test_injected_elimination_and_convergence);
    tcase_add_test(tc, test_injected_within_noise);
    tcase_add_test(tc, test_failed_candidates);
    tcase_add_test(tc, test_unmeasured_pick_not_stored);
    tcase_add_test(tc, test_bad_requests);
    tcase_add_test(tc, test_tune_alloc_faults);
    tcase_add_test(tc, test_real_cpu_clock);
}
