/* SPDX-License-Identifier: MIT */
/*
 * demo_kernels.c - the CUDA kernels of the examples, and their variants.
 *
 * The sources live under examples/kernels/ as ordinary .cu files; the build
 * turns each into a C string literal (mk/demo.mk makes <name>.cu.inc), so
 * a program carries them and a machine without the sources, or without
 * the toolkit, can still compile them with NVRTC.  A variant is a set of -D
 * options over one source, so each has its own kernel key.
 */
#include "demo_kernels.h"

static const char matmul_src[] =
#include "matmul.cu.inc"
    ;

static const char reduce_src[] =
#include "reduce.cu.inc"
    ;

#define MM(v, t, w, opts)                                                      \
    {v, "matmul", "envlog_matmul", matmul_src, opts, t, w, {t, (t) / (w), 1}}
#define RD(v, b, i, opts)                                                      \
    {v, "reduce", "envlog_reduce_sum", reduce_src, opts, 0, i, {b, 1, 1}}

static const demo_kernel builtins[] = {
    MM("matmul_t8w1", 8, 1, "-DTILE=8 -DWPT=1"),
    MM("matmul_t16w1", 16, 1, "-DTILE=16 -DWPT=1"),
    MM("matmul_t16w4", 16, 4, "-DTILE=16 -DWPT=4"),
    MM("matmul_t32w1", 32, 1, "-DTILE=32 -DWPT=1"),
    MM("matmul_t32w4", 32, 4, "-DTILE=32 -DWPT=4"),
    MM("matmul_t32w8", 32, 8, "-DTILE=32 -DWPT=8"),
    MM("matmul_t64w8", 64, 8, "-DTILE=64 -DWPT=8"),
    MM("matmul_t64w16", 64, 16, "-DTILE=64 -DWPT=16"),
    RD("reduce_b128i4", 128, 4, "-DBLOCK=128 -DIPT=4"),
    RD("reduce_b256i4", 256, 4, "-DBLOCK=256 -DIPT=4"),
    RD("reduce_b256i8", 256, 8, "-DBLOCK=256 -DIPT=8"),
    RD("reduce_b512i2", 512, 2, "-DBLOCK=512 -DIPT=2"),
};

const demo_kernel *demo_kernels(size_t *n)
{
    if (n)
        *n = sizeof builtins / sizeof builtins[0];
    return builtins;
}

envlog_cuda_dim3 demo_kernel_grid(const demo_kernel *b, unsigned m,
                                          unsigned n)
{
    envlog_cuda_dim3 g = {1, 1, 1};
    if (b->tile) {
        g.x = (n + b->tile - 1) / b->tile;
        g.y = (m + b->tile - 1) / b->tile;
    } else {
        unsigned per = b->block.x * b->work;
        g.x = (n + per - 1) / per;
    }
    if (!g.x)
        g.x = 1;
    if (!g.y)
        g.y = 1;
    return g;
}
