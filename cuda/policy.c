/* SPDX-License-Identifier: MIT */
/*
 * policy.c - the adaptive sampling policy and the scoring rule, as pure
 * functions of the samples, so tests can drive them with any clock.
 *
 * The median is the score: one preempted run inflates a mean but barely
 * moves a median.  Sampling stops once the mean is known to within rel_tol
 * of the median (a standard error rule), or as soon as a candidate is
 * clearly out of the race, which is where most of a tune's time would go.
 */
#include "cuda_int.h"

#include <math.h>
#include <string.h>

void envlog_cuda_policy_init(envlog_cuda_policy *p)
{
    p->warmup = 1;
    p->min_samples = 5;
    p->max_samples = 50;
    p->drop_factor = 2.0;
    p->rel_tol = 0.01;
    p->noise_z = 2.0;
}

void envlog_cuda__summarize(const double *x, size_t n, double *scratch,
                            envlog_cuda__summary *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n == 0)
        return;
    memcpy(scratch, x, n * sizeof *x);
    for (size_t i = 1; i < n; i++) {
        double v = scratch[i];
        size_t j = i;
        for (; j > 0 && scratch[j - 1] > v; j--)
            scratch[j] = scratch[j - 1];
        scratch[j] = v;
    }
    out->min = scratch[0];
    out->max = scratch[n - 1];
    out->median = n % 2 ? scratch[n / 2] : (scratch[n / 2 - 1] + scratch[n / 2]) / 2;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    out->mean = sum / (double)n;
    if (n > 1) {
        double ss = 0;
        for (size_t i = 0; i < n; i++)
            ss += (x[i] - out->mean) * (x[i] - out->mean);
        out->sd = sqrt(ss / (double)(n - 1));
    }
}

int envlog_cuda__verdict(const envlog_cuda__summary *s, double leader,
                         const envlog_cuda_policy *p)
{
    if (s->n < p->min_samples)
        return 0;
    if (p->drop_factor > 0 && leader >= 0 && s->median > p->drop_factor * leader)
        return 2;
    if (s->sd / sqrt((double)s->n) <= p->rel_tol * s->median)
        return 1;
    return 0;
}

void envlog_cuda__select(const envlog_trial *trials, size_t n,
                         const envlog_cuda_policy *p, envlog_cuda__pick *out)
{
    out->winner = out->runner_up = -1;
    out->margin = 0;
    out->within_noise = false;
    const envlog_trial *w = NULL, *r = NULL;
    for (size_t i = 0; i < n; i++) {
        const envlog_trial *t = &trials[i];
        if (t->error || t->samples == 0)
            continue;
        if (!w || t->median_ns < w->median_ns ||
            (t->median_ns == w->median_ns && t->index < w->index)) {
            r = w;
            w = t;
        } else if (!r || t->median_ns < r->median_ns ||
                   (t->median_ns == r->median_ns && t->index < r->index)) {
            r = t;
        }
    }
    if (!w)
        return;
    out->winner = w->index;
    if (!r)
        return;
    out->runner_up = r->index;
    out->margin = w->median_ns > 0 ? r->median_ns / w->median_ns - 1 : 0;
    double se = sqrt(w->stddev_ns * w->stddev_ns / (double)w->samples +
                     r->stddev_ns * r->stddev_ns / (double)r->samples);
    out->within_noise = r->median_ns - w->median_ns <= p->noise_z * se;
}
