/* SPDX-License-Identifier: MIT */
/*
 * cuda_demo.c - the job envlog exists for, end to end, with the public API.
 *
 * Into the default environment ($ENVLOG_DIR when set, or --dir DIR) it:
 *  1. runs a COMPILE_ONLY pass that launches every built-in kernel variant for
 *     sm_80 and sm_90: the launches only queue their kernels, and one load
 *     compiles the whole queue as a parallel batch with NVRTC (no GPU needed);
 *  2. autotunes the CPU matrix multiply for several shapes, for real, and
 *     checks the winner's result against the naive one;
 *  3. where a GPU is present, autotunes the GPU matrix multiply and the
 *     reduction with CUDA events, then launches the winners and checks them
 *     against the CPU.
 * Everything is asked of the environment first, so a second run is all cache
 * hits: its session changes nothing and leaves nothing on disk, which the
 * demo checks by counting the session directories before and after.
 *
 * Exit status: 0 ok; 1 a result disagreed; 2 an error.
 */
#include "envlog.h"
#include "demo_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WHY_KEY "matmul-cpu/m=128,n=128,k=128"

static void die(envlog_err e, const char *what)
{
    fprintf(stderr, "cuda_demo: %s: %s (%s)\n", what, envlog_errmsg(), envlog_strerror(e));
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

static size_t count_sessions(envlog_env *env)
{
    envlog_session_info *in;
    size_t n;
    CHECK(envlog_sessions_list(env, &in, &n), "listing sessions");
    envlog_sessions_free(in, n);
    return n;
}

static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* The largest |a - b| relative to the largest |b|. */
static double rel_err(const float *a, const float *b, size_t n)
{
    double maxd = 0, maxb = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > maxd)
            maxd = d;
        if (fabs((double)b[i]) > maxb)
            maxb = fabs((double)b[i]);
    }
    return maxd / maxb;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "cuda_demo: out of memory\n");
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------- 1: compile-only */

static void compile_pass(envlog_cuda *c)
{
    static const char *const archs[] = {"sm_80", "sm_90"};
    size_t nb;
    const demo_kernel *b = demo_kernels(&nb);
    size_t nk = nb * 2;
    envlog_cuda_kernel **k = xmalloc(nk * sizeof *k);
    envlog_cuda_stream *s;
    CHECK(envlog_cuda_stream_open(c, ENVLOG_CUDA_STREAM_HOST, &s), "opening a stream");

    envlog_cuda_override ov;
    CHECK(envlog_cuda_override_begin(c, ENVLOG_CUDA_COMPILE_ONLY, NULL, &ov),
          "entering COMPILE_ONLY");
    for (size_t a = 0; a < 2; a++)
        for (size_t i = 0; i < nb; i++) {
            envlog_cuda_kernel_desc d = {b[i].entry, b[i].source, b[i].options, archs[a]};
            envlog_cuda_kernel **kk = &k[a * nb + i];
            CHECK(envlog_cuda_kernel_new(c, &d, kk), "registering a kernel");
            /* Under COMPILE_ONLY this only queues the kernel: the buffers
             * are never touched, so none are needed. */
            envlog_cuda_dim3 grid = demo_kernel_grid(&b[i], 1024, 1024);
            CHECK(envlog_cuda_launch(s, *kk, grid, b[i].block, 0, NULL), "launching");
        }
    size_t queued = envlog_cuda_queue_length(c);
    CHECK(envlog_cuda_override_end(&ov), "leaving COMPILE_ONLY");

    envlog_cuda_batch bt;
    CHECK(envlog_cuda_compile_queued(c, &bt), "compiling the queue");
    printf("[1] COMPILE_ONLY: %zu variants x {sm_80, sm_90}: %zu launches queued %zu "
           "kernels\n", nb, nk, queued);
    if (bt.compiled || bt.failed)
        printf("    one batch on %u thread%s in %.2f s: %zu compiled, %zu loaded from the "
               "cache, %zu failed\n", bt.threads, bt.threads == 1 ? "" : "s",
               (double)bt.wall_ns * 1e-9, bt.compiled, bt.loaded, bt.failed);
    else
        printf("    one batch in %.3f s: all %zu loaded from the cache, nothing to compile\n",
               (double)bt.wall_ns * 1e-9, bt.loaded);
    size_t bytes = 0;
    for (size_t i = 0; i < nk; i++) {
        const envlog_cuda_binary *bin = envlog_cuda_kernel_binary(k[i]);
        if (bin && bin->outcome != ENVLOG_FAILED)
            bytes += bin->size;
        else
            fprintf(stderr, "cuda_demo: kernel %zu failed: %s\n", i,
                    bin ? bin->log : "(not loaded)");
        envlog_cuda_kernel_free(k[i]);
    }
    printf("    %zu CUBINs, %zu bytes in all\n", nk, bytes);
    envlog_cuda_stream_close(s);
    free(k);
    if (bt.failed)
        exit(1);
}

/* ------------------------------------------------------------- 2: CPU tune */

typedef struct cpu_job {
    size_t m, n, k, variant;
    const float *a, *b;
    float *c;
} cpu_job;

static void cpu_run(void *arg)
{
    cpu_job *j = arg;
    demo_cpu_matmul(j->variant, j->m, j->n, j->k, j->a, j->b, j->c);
}

static envlog_err cpu_candidate(void *ctx, envlog_cuda_stream *s, size_t index)
{
    cpu_job *j = ctx;
    j->variant = index;
    return envlog_cuda_host_launch(s, cpu_run, j);
}

static int cpu_tunes(envlog_cuda *c, bool quick)
{
    static const size_t shapes[][3] = {
        {64, 64, 64}, {128, 128, 128}, {96, 384, 200}, {256, 256, 256}};
    size_t nshapes = quick ? 2 : sizeof shapes / sizeof shapes[0];
    size_t nv;
    const demo_cpu_variant *v = demo_cpu_variants(&nv);
    const char **names = xmalloc(nv * sizeof *names);
    for (size_t i = 0; i < nv; i++)
        names[i] = v[i].name;
    envlog_cuda_stream *s;
    CHECK(envlog_cuda_stream_open(c, ENVLOG_CUDA_STREAM_HOST, &s), "opening a stream");
    char ns[512];
    CHECK(envlog_cuda_tune_ns(c, ENVLOG_CUDA_STREAM_HOST, ns, sizeof ns), "naming");
    printf("[2] CPU autotune of the matrix multiply, %zu variants, in %s\n", nv, ns);
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.max_samples = 15;
    pol.rel_tol = 0.02;
    int bad = 0;
    for (size_t i = 0; i < nshapes; i++) {
        size_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        float *a = xmalloc(m * k * sizeof *a), *b = xmalloc(k * n * sizeof *b);
        float *out = xmalloc(m * n * sizeof *out), *ref = xmalloc(m * n * sizeof *ref);
        fill(a, m * k, 1);
        fill(b, k * n, 2);
        cpu_job j = {m, n, k, 0, a, b, out};
        char key[96];
        snprintf(key, sizeof key, "matmul-cpu/m=%zu,n=%zu,k=%zu", m, n, k);
        envlog_cuda_tune_req r = {.key = key, .candidates = names, .n_candidates = nv,
                                  .run = cpu_candidate, .ctx = &j, .stream = s,
                                  .policy = &pol};
        envlog_cuda_tune_result res;
        CHECK(envlog_cuda_tune(c, &r, &res), "tuning");
        if (res.winner < 0) {
            printf("    %-30s no winner: every candidate failed\n", key);
            bad = 1;
            continue;
        }
        demo_cpu_matmul((size_t)res.winner, m, n, k, a, b, out);
        demo_cpu_matmul(0, m, n, k, a, b, ref);
        double err = rel_err(out, ref, m * n);
        printf("    %-30s %-9s %s, margin %.1f%%%s; result %s (rel. err %.1e)\n", key,
               names[res.winner], res.hit ? "from the cache" : "measured",
               res.margin * 100, res.within_noise ? " (within noise)" : "",
               err < 1e-4 ? "agrees with naive" : "DIFFERS from naive", err);
        if (err >= 1e-4)
            bad = 1;
        free(a);
        free(b);
        free(out);
        free(ref);
    }
    envlog_cuda_stream_close(s);
    free(names);
    return bad;
}

/* ------------------------------------------------------------- 3: GPU tune */

typedef struct gpu_job {
    envlog_cuda_kernel **k;
    const demo_kernel **b;
    void **args;
    unsigned m, n;
} gpu_job;

static envlog_err gpu_candidate(void *ctx, envlog_cuda_stream *s, size_t index)
{
    gpu_job *j = ctx;
    envlog_cuda_dim3 grid = demo_kernel_grid(j->b[index], j->m, j->n);
    return envlog_cuda_launch(s, j->k[index], grid, j->b[index]->block, 0, j->args);
}

/* Tunes the variants of `family` for one problem; launches the winner and
 * leaves its result in `out`.  Returns the winner or -1. */
static int64_t gpu_tune(envlog_cuda *c, envlog_cuda_stream *s, const char *family,
                        const char *key, unsigned m, unsigned n, void **args,
                        envlog_cuda_dptr zero_first)
{
    size_t nb;
    const demo_kernel *all = demo_kernels(&nb);
    envlog_cuda_kernel *k[32];
    const demo_kernel *b[32];
    const char *names[32];
    size_t nc = 0;
    for (size_t i = 0; i < nb && nc < 32; i++) {
        if (strcmp(all[i].family, family))
            continue;
        envlog_cuda_kernel_desc d = {all[i].entry, all[i].source, all[i].options, NULL};
        CHECK(envlog_cuda_kernel_new(c, &d, &k[nc]), "registering a kernel");
        b[nc] = &all[i];
        names[nc] = all[i].variant;
        nc++;
    }
    gpu_job j = {k, b, args, m, n};
    envlog_cuda_policy pol;
    envlog_cuda_policy_init(&pol);
    pol.warmup = 2;
    pol.max_samples = 30;
    envlog_cuda_tune_req r = {.key = key, .candidates = names, .n_candidates = nc,
                              .run = gpu_candidate, .ctx = &j, .stream = s, .policy = &pol};
    envlog_cuda_tune_result res;
    CHECK(envlog_cuda_tune(c, &r, &res), "tuning on the GPU");
    if (res.winner >= 0) {
        if (zero_first) {
            float zero = 0;
            CHECK(envlog_cuda_memcpy_htod(c, zero_first, &zero, sizeof zero), "zeroing");
        }
        CHECK(gpu_candidate(&j, s, (size_t)res.winner) ? ENVLOG_UNAVAILABLE : ENVLOG_OK,
              "launching the winner");
        CHECK(envlog_cuda_stream_sync(s), "waiting for the GPU");
        printf("    %-34s %-14s %s, margin %.1f%%%s\n", key, names[res.winner],
               res.hit ? "from the cache" : "measured with CUDA events", res.margin * 100,
               res.within_noise ? " (within noise)" : "");
    } else {
        printf("    %-34s no winner: every candidate failed\n", key);
    }
    for (size_t i = 0; i < nc; i++)
        envlog_cuda_kernel_free(k[i]);
    return res.winner;
}

static int gpu_part(envlog_cuda *c)
{
    envlog_cuda_device dev;
    CHECK(envlog_cuda_device_info(c, &dev), "describing the device");
    printf("[3] GPU autotune on %s (%s)\n", dev.name, dev.fingerprint);
    envlog_cuda_stream *s;
    CHECK(envlog_cuda_stream_open(c, ENVLOG_CUDA_STREAM_DEVICE, &s), "opening a stream");
    int bad = 0;

    unsigned m = 512, n = 512, k = 512;
    size_t na = (size_t)m * k, nbm = (size_t)k * n, nc = (size_t)m * n;
    float *a = xmalloc(na * 4), *bm = xmalloc(nbm * 4), *out = xmalloc(nc * 4),
          *ref = xmalloc(nc * 4);
    fill(a, na, 3);
    fill(bm, nbm, 4);
    envlog_cuda_dptr da, db, dc;
    CHECK(envlog_cuda_mem_alloc(c, na * 4, &da), "allocating");
    CHECK(envlog_cuda_mem_alloc(c, nbm * 4, &db), "allocating");
    CHECK(envlog_cuda_mem_alloc(c, nc * 4, &dc), "allocating");
    CHECK(envlog_cuda_memcpy_htod(c, da, a, na * 4), "copying");
    CHECK(envlog_cuda_memcpy_htod(c, db, bm, nbm * 4), "copying");
    int im = (int)m, in = (int)n, ik = (int)k;
    void *margs[] = {&da, &db, &dc, &im, &in, &ik};
    char key[96];
    snprintf(key, sizeof key, "matmul-gpu/m=%u,n=%u,k=%u", m, n, k);
    if (gpu_tune(c, s, "matmul", key, m, n, margs, 0) >= 0) {
        CHECK(envlog_cuda_memcpy_dtoh(c, out, dc, nc * 4), "copying back");
        demo_cpu_matmul(4, m, n, k, a, bm, ref);
        double err = rel_err(out, ref, nc);
        printf("    GPU matmul result %s the CPU's (rel. err %.1e)\n",
               err < 1e-4 ? "agrees with" : "DIFFERS from", err);
        bad |= err >= 1e-4;
    } else {
        bad = 1;
    }
    envlog_cuda_mem_free(c, da);
    envlog_cuda_mem_free(c, db);
    envlog_cuda_mem_free(c, dc);

    int nr = 1 << 22;
    float *x = xmalloc((size_t)nr * 4);
    fill(x, (size_t)nr, 5);
    double cpu_sum = 0, abs_sum = 0;
    for (int i = 0; i < nr; i++) {
        cpu_sum += x[i];
        abs_sum += fabs(x[i]);
    }
    envlog_cuda_dptr dx, dsum;
    CHECK(envlog_cuda_mem_alloc(c, (size_t)nr * 4, &dx), "allocating");
    CHECK(envlog_cuda_mem_alloc(c, 4, &dsum), "allocating");
    CHECK(envlog_cuda_memcpy_htod(c, dx, x, (size_t)nr * 4), "copying");
    void *rargs[] = {&dx, &dsum, &nr};
    snprintf(key, sizeof key, "reduce-gpu/n=%d", nr);
    if (gpu_tune(c, s, "reduce", key, 1, (unsigned)nr, rargs, dsum) >= 0) {
        float gsum = 0;
        CHECK(envlog_cuda_memcpy_dtoh(c, &gsum, dsum, 4), "copying back");
        /* float sums in another order: agree to rounding, which grows with
         * the sum of the magnitudes */
        bool agree = fabs(gsum - cpu_sum) <= 1e-6 * abs_sum + 1e-3;
        printf("    GPU sum %.6g, CPU sum %.6g: %s\n", gsum, cpu_sum,
               agree ? "they agree" : "THEY DIFFER");
        bad |= !agree;
    } else {
        bad = 1;
    }
    envlog_cuda_mem_free(c, dx);
    envlog_cuda_mem_free(c, dsum);
    envlog_cuda_stream_close(s);
    free(a);
    free(bm);
    free(out);
    free(ref);
    free(x);
    return bad;
}

/* ------------------------------------------------------------------- main */

static void usage(void)
{
    fputs("usage: cuda_demo [--dir DIR] [--quick] [--level off|basic|full] [--threads N]\n"
          "       [--no-gpu]\n", stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    bool quick = false, no_gpu = false;
    envlog_level level = ENVLOG_LEVEL_FULL;
    unsigned threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--no-gpu"))
            no_gpu = true;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--level") && i + 1 < argc) {
            const char *l = argv[++i];
            level = !strcmp(l, "off") ? ENVLOG_LEVEL_OFF
                    : !strcmp(l, "basic") ? ENVLOG_LEVEL_BASIC
                    : !strcmp(l, "full") ? ENVLOG_LEVEL_FULL : (usage(), ENVLOG_LEVEL_OFF);
        } else
            usage();
    }
    double t0 = now_s();
    envlog_env *env;
    CHECK(envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env), "opening the environment");
    size_t before = count_sessions(env);
    printf("envlog CUDA demo in %s (%zu session%s recorded before)\n", envlog_env_path(env),
           before, before == 1 ? "" : "s");

    char nvrtc[32], nvrtc_why[600] = "";
    bool have_nvrtc = envlog_cuda_nvrtc_version(nvrtc, sizeof nvrtc) == ENVLOG_OK;
    if (!have_nvrtc) {
        snprintf(nvrtc_why, sizeof nvrtc_why, "%s", envlog_errmsg());
        snprintf(nvrtc, sizeof nvrtc, "none");
    }
    envlog_cuda_device dev;
    char gpu_why[512] = "";
    bool gpu = false;
    if (!no_gpu) {
        int ndev = 0;
        envlog_err de = envlog_cuda_device_count(&ndev);
        if (de)
            snprintf(gpu_why, sizeof gpu_why, "%s", envlog_errmsg());
        else if (ndev == 0)
            snprintf(gpu_why, sizeof gpu_why, "the driver reports no device");
        else if ((de = envlog_cuda_device_get(0, &dev)))
            snprintf(gpu_why, sizeof gpu_why, "%s", envlog_errmsg());
        else
            gpu = true;
    } else {
        snprintf(gpu_why, sizeof gpu_why, "--no-gpu");
    }
    char cpu_fp[200];
    CHECK(envlog_cuda_cpu_fingerprint(cpu_fp, sizeof cpu_fp), "fingerprinting the CPU");
    printf("NVRTC %s; CPU %s; GPU %s\n", nvrtc, cpu_fp, gpu ? dev.fingerprint : "none");

    const char *devices[2] = {cpu_fp, gpu ? dev.fingerprint : NULL};
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "cuda-demo";
    so.runtime = "envlog-cuda-demo";
    so.runtime_version = ENVLOG_VERSION_STRING;
    so.devices = devices;
    so.n_devices = gpu ? 2 : 1;
    so.process_mode = envlog_cuda_mode_name(ENVLOG_CUDA_EXECUTE);
    so.level = level;
    envlog_session *s;
    CHECK(envlog_session_begin(env, &so, &s), "beginning a session");
    envlog_cuda_opts co;
    envlog_cuda_opts_init(&co);
    co.runtime = "envlog-cuda-demo";
    co.device = gpu ? 0 : ENVLOG_CUDA_DEVICE_NONE;
    co.threads = threads;
    envlog_cuda *c;
    CHECK(envlog_cuda_open(env, s, &co, &c), "opening the CUDA runtime");

    envlog_span all;
    CHECK(envlog_span_open(s, "cuda-demo", &all), "opening a span");
    if (have_nvrtc)
        compile_pass(c);
    else
        printf("[1] COMPILE_ONLY pass: skipped (%s)\n", nvrtc_why);
    int bad = cpu_tunes(c, quick);
    if (gpu && have_nvrtc)
        bad |= gpu_part(c);
    else
        printf("[3] GPU autotune and launch: skipped (%s)\n",
               gpu ? "no NVRTC to compile the kernels" : gpu_why);
    CHECK(envlog_span_close(&all, NULL, 0, NULL), "closing a span");

    envlog_cuda_counts st;
    envlog_cuda_stats_read(envlog_cuda_stats_of(c), &st);
    printf("statistics: kernels %llu registered, %llu compiled, %llu loaded, %llu failed, "
           "%llu stored; tunes %llu registered, %llu measured, %llu persisted; launches "
           "%llu executed, %llu discarded\n",
           (unsigned long long)st.kernels_registered, (unsigned long long)st.kernels_compiled,
           (unsigned long long)st.kernels_loaded, (unsigned long long)st.kernels_failed,
           (unsigned long long)st.kernels_stored, (unsigned long long)st.tunes_registered,
           (unsigned long long)st.tunes_measured, (unsigned long long)st.tunes_persisted,
           (unsigned long long)st.launches_executed,
           (unsigned long long)st.launches_discarded);
    envlog_cuda_close(c);
    envlog_session_stats ss;
    envlog_session_stats_get(s, &ss);
    CHECK(envlog_session_end(s), "ending the session");
    size_t after = count_sessions(env);
    envlog_env_close(env);

    bool warm = st.kernels_compiled == 0 && st.tunes_measured == 0;
    if (warm && after == before)
        printf("everything came from the cache: this session changed nothing and left "
               "nothing on disk (%zu session directories before, %zu after; %llu records "
               "held in memory, none written)\n",
               before, after, (unsigned long long)ss.held);
    else
        printf("this session recorded %llu records (%llu bytes) into %zu new session "
               "director%s (%zu before, %zu after); run it again to see it all come from "
               "the cache\n",
               (unsigned long long)ss.written, (unsigned long long)ss.bytes, after - before,
               after - before == 1 ? "y" : "ies", before, after);
    if (warm && after != before) {
        fprintf(stderr, "cuda_demo: a run that changed nothing left a session on disk\n");
        bad = 1;
    }
    printf("demo took %.1f s; `envlog why %s` explains one winner\n", now_s() - t0, WHY_KEY);
    return bad ? 1 : 0;
}
