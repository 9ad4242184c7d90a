/* SPDX-License-Identifier: MIT */
/*
 * cuda_rebuild_env.c - makes environments for tests/cuda-rebuild.sh, the test
 * of `envlog rebuild`, through the public API.
 *
 *   cuda_rebuild_env probe          exit 0 when NVRTC loads, 77 otherwise
 *   cuda_rebuild_env DIR good       at FULL: three built-in kernels (two
 *                                   CUBINs, one PTX) and one refused source;
 *                                   then at BASIC one more (its source
 *                                   recorded on its own)
 *   cuda_rebuild_env DIR timestamp  at FULL: a kernel whose binary holds
 *                                   __TIME__, so a rebuild a second later
 *                                   differs
 *   cuda_rebuild_env DIR mismatch   at FULL, by hand: a compile record whose
 *                                   source does not hash to its source_hash
 *                                   and whose binary is not NVRTC's, so the
 *                                   rebuild differs and names the input
 */
#include "envlog.h"
#include "demo_kernels.h"

#include <stdio.h>
#include <string.h>

static int fail(envlog_err e, const char *what)
{
    fprintf(stderr, "cuda_rebuild_env: %s: %s (%s)\n", what, envlog_errmsg(),
            envlog_strerror(e));
    return 2;
}

static const demo_kernel *builtin(const char *variant)
{
    size_t n;
    const demo_kernel *b = demo_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(b[i].variant, variant))
            return &b[i];
    return NULL;
}

static int session(envlog_env *env, envlog_level level, const envlog_cuda_kernel_desc *d,
                   size_t n)
{
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "rebuild-test";
    so.level = level;
    envlog_session *s;
    envlog_err e = envlog_session_begin(env, &so, &s);
    if (e)
        return fail(e, "beginning a session");
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    envlog_cuda *c;
    if ((e = envlog_cuda_open(env, s, &o, &c)))
        return fail(e, "opening the runtime");
    for (size_t i = 0; i < n; i++) {
        envlog_cuda_binary *b = NULL;
        e = envlog_cuda_compile(c, &d[i], &b);
        envlog_cuda_binary_free(b);
        if (e && e != ENVLOG_BAD_DATA)
            return fail(e, "compiling");
    }
    envlog_cuda_close(c);
    if ((e = envlog_session_end(s)))
        return fail(e, "ending the session");
    return 0;
}

static int mismatch(envlog_env *env)
{
    char v[32];
    envlog_err e = envlog_cuda_nvrtc_version(v, sizeof v);
    if (e)
        return fail(e, "asking NVRTC its version");
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "rebuild-test";
    so.level = ENVLOG_LEVEL_FULL;
    envlog_session *s;
    if ((e = envlog_session_begin(env, &so, &s)))
        return fail(e, "beginning a session");
    const char *src = "extern \"C\" __global__ void edited(float *x) { x[0] = 1.0f; }\n";
    const char *was = "extern \"C\" __global__ void edited(float *x) { x[0] = 2.0f; }\n";
    envlog_cuda_kernel_desc d = {"edited", was, "", "sm_80"};
    envlog_compile c = {.ns = "kernel/test/1/sm_80", .name = "edited", .options = "",
                        .compiler_version = v, .arch = "sm_80", .outcome = ENVLOG_COMPILED,
                        .source = src, .log = "", .binary = {"not a cubin", 11},
                        .binary_size = 11};
    if ((e = envlog_cuda_kernel_key(&d, v, &c.kernel_key)))
        return fail(e, "a kernel key");
    c.source_hash = envlog_hash128_bytes(was, strlen(was));
    c.binary_hash = envlog_hash128_bytes("not a cubin", 11);
    if ((e = envlog_record_compile(s, &c, NULL)))
        return fail(e, "recording");
    if ((e = envlog_session_end(s)))
        return fail(e, "ending the session");
    return 0;
}

int main(int argc, char **argv)
{
    char v[32];
    if (argc == 2 && !strcmp(argv[1], "probe"))
        return envlog_cuda_nvrtc_version(v, sizeof v) == ENVLOG_OK ? 0 : 77;
    if (argc != 3) {
        fprintf(stderr, "usage: cuda_rebuild_env probe | DIR good|timestamp|mismatch\n");
        return 2;
    }
    envlog_env *env;
    envlog_err e = envlog_env_open(argv[1], ENVLOG_OPEN_CREATE, &env);
    if (e)
        return fail(e, "opening the environment");
    int rc;
    if (!strcmp(argv[2], "good")) {
        const demo_kernel *m = builtin("matmul_t16w1"), *r = builtin("reduce_b256i4"),
                                  *w = builtin("matmul_t16w4");
        if (!m || !r || !w) {
            fprintf(stderr, "cuda_rebuild_env: a built-in variant is missing\n");
            return 2;
        }
        envlog_cuda_kernel_desc full[] = {
            {m->entry, m->source, m->options, "sm_80"},
            {r->entry, r->source, r->options, "sm_80"},
            {w->entry, w->source, w->options, "compute_80"},
            {"refused", "extern \"C\" __global__ void refused() { no_such_call(); }", NULL,
             "sm_80"},
        };
        envlog_cuda_kernel_desc basic[] = {{m->entry, m->source, m->options, "sm_90"}};
        rc = session(env, ENVLOG_LEVEL_FULL, full, 4);
        if (!rc)
            rc = session(env, ENVLOG_LEVEL_BASIC, basic, 1);
    } else if (!strcmp(argv[2], "timestamp")) {
        envlog_cuda_kernel_desc d[] = {
            {"stamped",
             "extern \"C\" __global__ void stamped(char *out)\n"
             "{ const char t[] = __TIME__; for (int i = 0; i < 8; i++) out[i] = t[i]; }\n",
             NULL, "sm_80"},
        };
        rc = session(env, ENVLOG_LEVEL_FULL, d, 1);
    } else if (!strcmp(argv[2], "mismatch")) {
        rc = mismatch(env);
    } else {
        fprintf(stderr, "cuda_rebuild_env: unknown mode '%s'\n", argv[2]);
        rc = 2;
    }
    envlog_env_close(env);
    return rc;
}
