/* SPDX-License-Identifier: MIT */
/*
 * tuner.c - the autotuner: ask the state, else measure the candidates and
 * record how the winner was chosen.
 *
 * A tune is keyed by (namespace, key, checksum of the candidate names), so a
 * changed candidate list or another device never reuses a stale winner.
 * Every trial is recorded in the order it ran, with the policy and its
 * parameters, so "why did this candidate win?" is answered from the log.
 * An unmeasured pick (COMPILE_ONLY, or a key with one candidate) is
 * recorded but never stored: the next pass that measures must not find it.
 * A miss is one registration, settled once: measured, failed, single, or
 * abandoned when the tune stops on an error; a key gathered under
 * COMPILE_ONLY keeps its registration open until a tune measures it.
 */
#include "cuda_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RAN_SENTINEL "envlog-cuda: the candidate ran"
#define POLICY "adaptive-median"
#define ERR_LEN 256

static envlog_err check_request(const envlog_cuda *c, const envlog_cuda_tune_req *r,
                                const envlog_cuda_policy *p)
{
    if (!r || !r->key || !*r->key || !r->candidates || !r->n_candidates || !r->run ||
        !r->stream)
        return envlog__fail(ENVLOG_INVALID_ARG, "a tune needs a key, candidates, a run "
                            "function and a stream");
    if (r->stream->c != c)
        return envlog__fail(ENVLOG_INVALID_ARG, "the tune's stream is another runtime's");
    if (r->n_candidates > 65536)
        return envlog__fail(ENVLOG_INVALID_ARG, "%zu candidates is over 65536",
                            r->n_candidates);
    for (size_t i = 0; i < r->n_candidates; i++)
        if (!r->candidates[i] || !*r->candidates[i])
            return envlog__fail(ENVLOG_INVALID_ARG, "candidate %zu has no name", i);
    if (p->min_samples < 1 || p->max_samples < p->min_samples || p->max_samples > 100000 ||
        p->warmup > 1000 || !(p->drop_factor == 0 || p->drop_factor >= 1) ||
        !(p->rel_tol >= 0) || !(p->noise_z >= 0))
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "a bad policy: need 1 <= min_samples <= max_samples <= 100000, "
                            "warmup <= 1000, drop_factor 0 or >= 1, rel_tol and noise_z >= 0");
    return ENVLOG_OK;
}

/* Runs candidate `i` once; on failure writes its error to `err`. */
static bool run_once(const envlog_cuda_tune_req *r, size_t i, char *err)
{
    envlog__fail(ENVLOG_OK, "%s", RAN_SENTINEL);
    envlog_err rc = r->run(r->ctx, r->stream, i);
    if (rc == ENVLOG_OK)
        return true;
    const char *m = envlog_errmsg();
    if (strcmp(m, RAN_SENTINEL))
        snprintf(err, ERR_LEN, "%s", m);
    else
        snprintf(err, ERR_LEN, "the candidate returned %d (%s)", (int)rc,
                 envlog_strerror(rc));
    return false;
}

/* Measures candidate `i` into `t`, per the policy, on the clock of session
 * `s` (NULL: the trial's times are not known). */
static void measure(const envlog_cuda_tune_req *r, const envlog_cuda_timer *timer,
                    const envlog_cuda_policy *p, size_t i, double leader, envlog_trial *t,
                    double *samples, double *scratch, char *err, const envlog_session *s)
{
    if (s) {
        t->has_start = true;
        t->start_ns = envlog_session_clock_ns(s);
    }
    t->name = r->candidates[i];
    t->index = (uint32_t)i;
    t->sample_ns = samples;
    bool ok = true;
    for (unsigned w = 0; w < p->warmup && ok; w++)
        ok = run_once(r, i, err);
    envlog_cuda__summary sum = {0};
    size_t n = 0;
    while (ok && n < p->max_samples) {
        double ns = 0;
        envlog_err e = timer->start(timer->ctx, r->stream);
        if (e) {
            snprintf(err, ERR_LEN, "timer %s: %s", timer->name, envlog_errmsg());
            ok = false;
            break;
        }
        ok = run_once(r, i, err);
        e = timer->stop(timer->ctx, r->stream, &ns);
        if (!ok)
            break;
        if (e) {
            snprintf(err, ERR_LEN, "timer %s: %s", timer->name, envlog_errmsg());
            ok = false;
            break;
        }
        samples[n++] = ns;
        envlog_cuda__summarize(samples, n, scratch, &sum);
        if (envlog_cuda__verdict(&sum, leader, p))
            break;
    }
    t->samples = n;
    t->n_sample_ns = n;
    t->min_ns = sum.min;
    t->median_ns = sum.median;
    t->mean_ns = sum.mean;
    t->max_ns = sum.max;
    t->stddev_ns = sum.sd;
    t->error = ok ? NULL : err;
    if (s)
        t->wall_ns = envlog_session_clock_ns(s) - t->start_ns;
}

/* What a miss works from. */
typedef struct tune_ctx {
    envlog_cuda *c;
    const envlog_cuda_tune_req *r;
    const envlog_cuda_policy *p;
    const char *ns;
    uint64_t checksum, t0, start_ns;
    envlog_cuda_stats *col; /* the registration's collector */
} tune_ctx;

/* A settlement of `as` that keeps the registration open: a gathered key. */
#define GATHERED (-1)

/* A miss: gathers (COMPILE_ONLY), answers a single candidate, or measures.
 * `*as` gets the count its registration settles as (left at abandoned
 * when it stopped on an error). */
static envlog_err tune_miss(const tune_ctx *x, bool gathering, bool single, int *as,
                            envlog_cuda_tune_result *out)
{
    envlog_cuda *c = x->c;
    const envlog_cuda_tune_req *r = x->r;
    const envlog_cuda_policy *p = x->p;
    const char *ns = x->ns;
    uint64_t checksum = x->checksum, t0 = x->t0, start_ns = x->start_ns;
    envlog_err e;
    const envlog_cuda_timer *timer = r->timer;
    if (!timer)
        timer = r->stream->kind == ENVLOG_CUDA_STREAM_DEVICE ? envlog_cuda_timer_events()
                                                             : envlog_cuda_timer_cpu();
    char policy[160];
    snprintf(policy, sizeof policy, POLICY "/%s", timer->name ? timer->name : "timer");
    envlog_param params[] = {
        {"warmup", p->warmup},           {"min_samples", p->min_samples},
        {"max_samples", p->max_samples}, {"drop_factor", p->drop_factor},
        {"rel_tol", p->rel_tol},         {"noise_z", p->noise_z},
    };
    envlog_tune rec = {
        .ns = ns, .key = r->key, .checksum = checksum, .candidates = r->candidates,
        .n_candidates = r->n_candidates, .policy = policy, .params = params,
        .n_params = sizeof params / sizeof params[0], .winner = -1,
        .has_start = c->s != NULL, .start_ns = start_ns, .thread = envlog_thread_id(),
    };
    envlog_stamp stamp;

    if (gathering || single) {
        /* Gather the candidates' kernels; pick without measuring (one
         * candidate needs no measurement: it is the answer). */
        char token;
        if (gathering) {
            const void *outer = envlog_cuda__tune_token_get();
            envlog_cuda__tune_token_set(&token);
            for (size_t i = 0; i < r->n_candidates; i++)
                (void)r->run(r->ctx, r->stream, i);
            envlog_cuda__tune_token_set(outer);
        }
        rec.winner = 0;
        rec.short_circuit = true;
        rec.stored = false;
        rec.wall_ns = envlog_cuda__now_ns() - t0;
        e = envlog_record_tune(c->s, &rec, &stamp);
        if (e == ENVLOG_OK) {
            out->recorded = true;
            out->stamp = stamp;
            if (gathering)
                envlog_cuda__queue_tag(c, &token, &stamp);
        }
        out->winner = 0;
        out->wall_ns = rec.wall_ns;
        if (!e)
            *as = single ? ENVLOG_CUDA__TSINGLE : GATHERED;
        return e;
    }

    /* The first tune before it measures compiles the whole queue.  Without
     * NVRTC the candidates that need it fail one by one, saying so. */
    e = envlog_cuda_compile_queued(c, NULL);
    if (e && e != ENVLOG_UNAVAILABLE)
        return e;
    size_t n = r->n_candidates;
    envlog_trial *trials = envlog_calloc(n, sizeof *trials);
    double *samples = envlog_malloc(n * p->max_samples * sizeof *samples);
    double *scratch = envlog_malloc(p->max_samples * sizeof *scratch);
    char *errs = envlog_malloc(n * ERR_LEN);
    if (!trials || !samples || !scratch || !errs) {
        envlog_free(trials);
        envlog_free(samples);
        envlog_free(scratch);
        envlog_free(errs);
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a tune of %zu candidates", n);
    }
    envlog_cuda_measure_begin(r->stream);
    double leader = -1;
    for (size_t i = 0; i < n; i++) {
        envlog_trial *t = &trials[i];
        measure(r, timer, p, i, leader, t, samples + i * p->max_samples, scratch,
                errs + i * ERR_LEN, c->s);
        if (!t->error && t->samples && (leader < 0 || t->median_ns < leader))
            leader = t->median_ns;
    }
    envlog_cuda_measure_end(r->stream);
    envlog_cuda__pick pick;
    envlog_cuda__select(trials, n, p, &pick);
    rec.trials = trials;
    rec.n_trials = n;
    rec.winner = pick.winner;
    rec.margin = pick.margin;
    rec.within_noise = pick.within_noise;
    rec.stored = pick.winner >= 0;
    rec.wall_ns = envlog_cuda__now_ns() - t0;
    *as = pick.winner < 0 ? ENVLOG_CUDA__TFAILED : ENVLOG_CUDA__TMEASURED;
    e = envlog_record_tune(c->s, &rec, &stamp);
    if (e == ENVLOG_OK) {
        out->recorded = true;
        out->stamp = stamp;
        if (rec.stored)
            envlog_cuda__count_to(c, x->col, ENVLOG_CUDA__TPERSISTED);
    }
    out->winner = pick.winner;
    out->measured = true;
    out->stored = rec.stored && e == ENVLOG_OK;
    out->margin = pick.margin;
    out->within_noise = pick.within_noise;
    out->n_trials = n;
    out->wall_ns = rec.wall_ns;
    envlog_free(trials);
    envlog_free(samples);
    envlog_free(scratch);
    envlog_free(errs);
    return e;
}

envlog_err envlog_cuda_tune(envlog_cuda *c, const envlog_cuda_tune_req *r,
                            envlog_cuda_tune_result *out)
{
    if (!c || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "no runtime or result for a tune");
    memset(out, 0, sizeof *out);
    out->winner = -1;
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    if (r && r->policy)
        pol = *r->policy;
    envlog_err e = check_request(c, r, &pol);
    if (e)
        return e;
    char nsbuf[512];
    const char *ns = r->ns;
    if (!ns) {
        if ((e = envlog_cuda_tune_ns(c, r->stream->kind, nsbuf, sizeof nsbuf)))
            return e;
        ns = nsbuf;
    }
    uint64_t t0 = envlog_cuda__now_ns();
    uint64_t start_ns = c->s ? envlog_session_clock_ns(c->s) : 0;
    uint64_t checksum = envlog_tune_checksum(r->candidates, r->n_candidates);
    envlog_tune_entry ent;
    e = envlog_state_winner(c->state, ns, r->key, checksum, &ent);
    if (e == ENVLOG_OK && ent.winner_index >= 0 &&
        (size_t)ent.winner_index < r->n_candidates && ent.winner &&
        !strcmp(ent.winner, r->candidates[ent.winner_index])) {
        out->winner = ent.winner_index;
        out->hit = true;
        out->margin = ent.margin;
        out->within_noise = ent.within_noise;
        out->wall_ns = envlog_cuda__now_ns() - t0;
        /* A gathered key the cache answered meanwhile: nothing measures it. */
        envlog_cuda_stats *gcol;
        if (envlog_cuda__gathered_take(c, ns, r->key, checksum, &gcol))
            envlog_cuda__settle_reg(c, gcol, ENVLOG_CUDA__TABANDONED);
        return ENVLOG_OK;
    }
    if (e && e != ENVLOG_NOT_FOUND)
        return e;
    bool gathering = envlog_cuda_mode_get(c) == ENVLOG_CUDA_COMPILE_ONLY;
    bool single = r->n_candidates == 1;
    /* Open the registration: a key gathered before keeps the one it has. */
    bool open = true;
    envlog_cuda_stats *col = NULL;
    if (gathering && !single && envlog_cuda__gathered_has(c, ns, r->key, checksum))
        open = false;
    else if (gathering || !envlog_cuda__gathered_take(c, ns, r->key, checksum, &col))
        col = envlog_cuda__register(c, ENVLOG_CUDA__TREG);
    int as = ENVLOG_CUDA__TABANDONED;
    tune_ctx x = {c, r, &pol, ns, checksum, t0, start_ns, col};
    e = tune_miss(&x, gathering, single, &as, out);
    if (!open)
        return e;
    if (as == GATHERED && !e && !(e = envlog_cuda__gathered_add(c, ns, r->key, checksum, col)))
        return ENVLOG_OK;
    envlog_cuda__settle_reg(c, col, as == GATHERED ? ENVLOG_CUDA__TABANDONED : as);
    return e;
}
