/* SPDX-License-Identifier: MIT */
/*
 * demo_cpu.c - a CPU matrix multiply with cache-blocking variants, the
 * candidates of the CPU timing backend, and a job that runs them as the
 * candidates of a tune.
 *
 * Which loop order and block edge is fastest depends on the shape and the
 * cache sizes, which is exactly what an autotune is for: the variants are
 * all correct, and differ only in how they walk memory.
 */
#include "demo_kernels.h"

#include <stdlib.h>
#include <string.h>

static const demo_cpu_variant variants[] = {
    {"naive", 0}, {"ikj", 0}, {"block16", 16}, {"block32", 32}, {"block64", 64},
    {"block128", 128},
};

const demo_cpu_variant *demo_cpu_variants(size_t *n)
{
    if (n)
        *n = sizeof variants / sizeof variants[0];
    return variants;
}

/* i, j, k: a dot product per output, striding down B's columns. */
static void mm_naive(size_t m, size_t n, size_t k, const float *a, const float *b, float *c)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            float s = 0;
            for (size_t p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}

/* i, k, j: rows of B streamed into a row of C. */
static void mm_ikj(size_t m, size_t n, size_t k, const float *a, const float *b, float *c)
{
    memset(c, 0, m * n * sizeof *c);
    for (size_t i = 0; i < m; i++)
        for (size_t p = 0; p < k; p++) {
            const float av = a[i * k + p];
            const float *br = b + p * n;
            float *cr = c + i * n;
            for (size_t j = 0; j < n; j++)
                cr[j] += av * br[j];
        }
}

/* ikj within bs x bs x bs blocks, so the working set stays in cache. */
static void mm_blocked(size_t bs, size_t m, size_t n, size_t k, const float *a,
                       const float *b, float *c)
{
    memset(c, 0, m * n * sizeof *c);
    for (size_t i0 = 0; i0 < m; i0 += bs)
        for (size_t p0 = 0; p0 < k; p0 += bs)
            for (size_t j0 = 0; j0 < n; j0 += bs) {
                size_t i1 = i0 + bs < m ? i0 + bs : m;
                size_t p1 = p0 + bs < k ? p0 + bs : k;
                size_t j1 = j0 + bs < n ? j0 + bs : n;
                for (size_t i = i0; i < i1; i++)
                    for (size_t p = p0; p < p1; p++) {
                        const float av = a[i * k + p];
                        const float *br = b + p * n;
                        float *cr = c + i * n;
                        for (size_t j = j0; j < j1; j++)
                            cr[j] += av * br[j];
                    }
            }
}

envlog_err demo_cpu_matmul(size_t v, size_t m, size_t n, size_t k, const float *a,
                                  const float *b, float *c)
{
    if (v >= sizeof variants / sizeof variants[0] || !a || !b || !c)
        return ENVLOG_INVALID_ARG; /* a bad variant or matrix */
    if (v == 0)
        mm_naive(m, n, k, a, b, c);
    else if (v == 1)
        mm_ikj(m, n, k, a, b, c);
    else
        mm_blocked(variants[v].block, m, n, k, a, b, c);
    return ENVLOG_OK;
}

size_t demo_cpu_names(const char **out, size_t cap)
{
    size_t n = 0;
    for (; n < cap && n < sizeof variants / sizeof variants[0]; n++)
        out[n] = variants[n].name;
    return n;
}

envlog_err demo_cpu_job_init(demo_cpu_job *j, size_t m, size_t n, size_t k)
{
    *j = (demo_cpu_job){m, n, k, calloc(m * k, sizeof(float)), calloc(k * n, sizeof(float)),
                        calloc(m * n, sizeof(float)), 0};
    if (j->a && j->b && j->c)
        return ENVLOG_OK;
    demo_cpu_job_free(j);
    return ENVLOG_NOMEM;
}

void demo_cpu_job_free(demo_cpu_job *j)
{
    free(j->a);
    free(j->b);
    free(j->c);
    j->a = j->b = j->c = NULL;
}

static void job_run(void *arg)
{
    demo_cpu_job *j = arg;
    demo_cpu_matmul(j->variant, j->m, j->n, j->k, j->a, j->b, j->c);
}

envlog_err demo_cpu_candidate(void *ctx, envlog_cuda_stream *s, size_t index)
{
    demo_cpu_job *j = ctx;
    j->variant = index;
    return envlog_cuda_host_launch(s, job_run, j);
}
