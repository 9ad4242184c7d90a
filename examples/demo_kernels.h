/* SPDX-License-Identifier: MIT */
/*
 * demo_kernels.h - the kernels the examples, tests and benchmarks run: CUDA
 * matmul and reduce variants (their sources under examples/kernels/, built
 * into C strings, so they compile with NVRTC on a machine without the
 * files) and a CPU matrix multiply with cache-blocking variants, the
 * candidates of a CPU autotune.  Not part of the library: a program links
 * examples/demo_kernels.c and examples/demo_cpu.c with it.
 */
#ifndef ENVLOG_DEMO_KERNELS_H
#define ENVLOG_DEMO_KERNELS_H

#include "envlog_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ the kernels */

/* A variant of one of the demo's kernels (sources under examples/kernels/). */
typedef struct demo_kernel {
    const char *variant; /* e.g. "matmul_t32w4" */
    const char *family;  /* "matmul" or "reduce" */
    const char *entry;   /* the extern "C" entry point */
    const char *source;
    const char *options; /* the -D options that make the variant */
    unsigned tile;       /* matmul: output tile edge; reduce: 0 */
    unsigned work;       /* matmul: outputs per thread; reduce: items per thread */
    envlog_cuda_dim3 block;
} demo_kernel;

/*! demo_kernels() : every variant; `*n` gets the count.
 *  Static storage.  matmul entry points take (const float *A, const float *B,
 *  float *C, int M, int N, int K), row-major C = A B; reduce ones take
 *  (const float *in, float *out, int n) and add each block's sum into
 *  out[0] (atomicAdd: zero it first). */
const demo_kernel *demo_kernels(size_t *n);

/*! demo_kernel_grid() : the grid that covers an M x N output (matmul)
 *  or N items (reduce; M ignored) with variant `b`. */
envlog_cuda_dim3 demo_kernel_grid(const demo_kernel *b, unsigned m, unsigned n);

/* ------------------------------------------------------------ CPU matmul */

/* A blocking variant of the CPU matrix multiply (the CPU backend's
 * candidates): row-major C = A B, A m x k, B k x n. */
typedef struct demo_cpu_variant {
    const char *name;  /* "naive", "ikj", "block32", ... */
    unsigned block;    /* cache block edge; 0 for none */
} demo_cpu_variant;

/*! demo_cpu_variants() : the variants; static storage. */
const demo_cpu_variant *demo_cpu_variants(size_t *n);

/*! demo_cpu_matmul() : runs variant `v` (an index into
 *  demo_cpu_variants()).  @return ENVLOG_OK or ENVLOG_INVALID_ARG. */
envlog_err demo_cpu_matmul(size_t v, size_t m, size_t n, size_t k, const float *a,
                           const float *b, float *c);

/*! demo_cpu_names() : the variants' names, in their order, into `out` (at
 *  most `cap`): the candidate list of a CPU autotune.  @return how many. */
size_t demo_cpu_names(const char **out, size_t cap);

/* One CPU matrix multiply whose variants are the candidates of a tune. */
typedef struct demo_cpu_job {
    size_t m, n, k;
    float *a, *b, *c;   /* m x k, k x n and m x n, row-major */
    size_t variant;     /* the candidate running */
} demo_cpu_job;

/*! demo_cpu_job_init() : a job of shape m, n, k with its matrices, zeroed.
 *  @return ENVLOG_OK, or ENVLOG_NOMEM with nothing to free. */
envlog_err demo_cpu_job_init(demo_cpu_job *j, size_t m, size_t n, size_t k);
/*! demo_cpu_job_free() : frees the job's matrices. */
void demo_cpu_job_free(demo_cpu_job *j);
/*! demo_cpu_candidate() : an envlog_cuda_run_fn whose ctx is a demo_cpu_job:
 *  launches variant `index` of its multiply on host stream `s`. */
envlog_err demo_cpu_candidate(void *ctx, envlog_cuda_stream *s, size_t index);

#ifdef __cplusplus
}
#endif

#endif /* ENVLOG_DEMO_KERNELS_H */
