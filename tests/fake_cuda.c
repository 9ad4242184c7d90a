/* SPDX-License-Identifier: MIT */
/*
 * fake_cuda.c - a stand-in for libcuda.so.1 that runs on the CPU, so the
 * driver glue of envlog-cuda (loading, fingerprints, contexts, modules,
 * streams, events, memory, launches, the GPU autotune) is tested on machines
 * without a GPU.  Built as libfake_cuda.so; the cuda suite points
 * $ENVLOG_CUDA_DRIVER at it.
 *
 * It plays one device, "Fake GPU/Test" (sm_80, 4 SMs, 1 GiB), whose memory
 * is host memory.  A module is accepted when it is a CUBIN (ELF) or PTX that
 * names the function asked for.  Launches of the kernels the tests use
 * (tc_scale, envlog_matmul, envlog_reduce_sum) are carried out on the CPU;
 * others only count.  Time on the fake device advances by a cost that
 * depends on the block shape (fastest at 256 threads), so CUDA-event timing
 * and a tune over block shapes give a known winner.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;

static double device_ns;     /* the fake device's clock */
static int inited;

typedef struct function {
    char name[128];
    struct function *next;
} function;

typedef struct module {
    const char *image;
    size_t size;
    function *functions; /* freed with the module, as the driver's are */
} module;

typedef struct event {
    double t;
    int recorded;
} event;

/* Every symbol this file defines is part of the fake driver's ABI. */
#define API __attribute__((visibility("default")))

API CUresult cuInit(unsigned flags);
API CUresult cuDriverGetVersion(int *v);
API CUresult cuDeviceGetCount(int *n);
API CUresult cuDeviceGet(int *dev, int ordinal);
API CUresult cuDeviceGetName(char *name, int len, int dev);
API CUresult cuDeviceGetAttribute(int *v, int attr, int dev);
API CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev);
API CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev);
API CUresult cuDevicePrimaryCtxRelease_v2(int dev);
API CUresult cuCtxSetCurrent(void *ctx);
API CUresult cuModuleLoadData(void **mod, const void *image);
API CUresult cuModuleUnload(void *mod);
API CUresult cuModuleGetFunction(void **fn, void *mod, const char *name);
API CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, void *stream,
                            void **params, void **extra);
API CUresult cuMemAlloc_v2(uint64_t *p, size_t bytes);
API CUresult cuMemFree_v2(uint64_t p);
API CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n);
API CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n);
API CUresult cuStreamCreate(void **s, unsigned flags);
API CUresult cuStreamDestroy_v2(void *s);
API CUresult cuStreamSynchronize(void *s);
API CUresult cuEventCreate(void **e, unsigned flags);
API CUresult cuEventDestroy_v2(void *e);
API CUresult cuEventRecord(void *e, void *s);
API CUresult cuEventSynchronize(void *e);
API CUresult cuEventElapsedTime(float *ms, void *a, void *b);
API CUresult cuGetErrorName(CUresult r, const char **s);
API CUresult cuGetErrorString(CUresult r, const char **s);

enum {
    OK = 0,
    INVALID_VALUE = 1,
    NOT_INITIALIZED = 3,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    NOT_FOUND = 500,
    INVALID_HANDLE = 400
};

static int fake_ctx;

CUresult cuInit(unsigned flags)
{
    inited = flags == 0;
    return inited ? OK : INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *v)
{
    *v = 12080;
    return OK;
}

CUresult cuDeviceGetCount(int *n)
{
    *n = inited ? 1 : 0;
    return inited ? OK : NOT_INITIALIZED;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal != 0)
        return INVALID_VALUE;
    *dev = 0;
    return OK;
}

CUresult cuDeviceGetName(char *name, int len, int dev)
{
    if (dev != 0 || len < 16)
        return INVALID_VALUE;
    strcpy(name, "Fake GPU/Test");
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    if (dev != 0)
        return INVALID_VALUE;
    switch (attr) {
    case 16: *v = 4; return OK;  /* SMs */
    case 75: *v = 8; return OK;  /* compute capability */
    case 76: *v = 0; return OK;
    default: return INVALID_VALUE;
    }
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    *bytes = (size_t)1 << 30;
    return dev == 0 ? OK : INVALID_VALUE;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    *ctx = &fake_ctx;
    return dev == 0 ? OK : INVALID_VALUE;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
    return dev == 0 ? OK : INVALID_VALUE;
}

CUresult cuCtxSetCurrent(void *ctx)
{
    return ctx == &fake_ctx ? OK : INVALID_CONTEXT;
}

/* The size of an ELF64 image from its header: the end of its section
 * header table. */
static size_t elf_size(const unsigned char *p)
{
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

CUresult cuModuleLoadData(void **mod, const void *image)
{
    const char *p = image;
    module *m = calloc(1, sizeof *m);
    if (!m)
        return INVALID_VALUE;
    m->image = p;
    if (!memcmp(p, "\177ELF", 4) && p[4] == 2) {
        m->size = elf_size(image);
    } else if (strstr(p, ".version") && strstr(p, ".target")) {
        m->size = strlen(p);
    } else {
        free(m);
        return INVALID_IMAGE;
    }
    *mod = m;
    return OK;
}

CUresult cuModuleUnload(void *mod)
{
    module *m = mod;
    while (m && m->functions) {
        function *f = m->functions;
        m->functions = f->next;
        free(f);
    }
    free(m);
    return OK;
}

CUresult cuModuleGetFunction(void **fn, void *mod, const char *name)
{
    module *m = mod;
    size_t n = strlen(name);
    int found = 0;
    for (size_t i = 0; i + n <= m->size && !found; i++)
        found = !memcmp(m->image + i, name, n);
    if (!found)
        return NOT_FOUND;
    function *f = calloc(1, sizeof *f);
    if (!f || n >= sizeof f->name) {
        free(f);
        return INVALID_VALUE;
    }
    memcpy(f->name, name, n + 1);
    f->next = m->functions;
    m->functions = f;
    *fn = f;
    return OK;
}

static void *ptr(uint64_t p)
{
    return (void *)(uintptr_t)p;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream,
                        void **params, void **extra)
{
    (void)shared;
    (void)extra;
    function *f = fn;
    if (!f || !stream || !gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024)
        return INVALID_VALUE;
    unsigned threads = bx * by * bz;
    double waste = threads > 256 ? (double)(threads - 256) : (double)(256 - threads);
    device_ns += 1000.0 * (1.0 + waste / 64.0);
    if (!strcmp(f->name, "tc_scale")) {
        float *x = ptr(*(uint64_t *)params[0]);
        float a = *(float *)params[1];
        int n = *(int *)params[2];
        long cover = (long)gx * bx;
        for (long i = 0; i < n && i < cover; i++)
            x[i] *= a;
    } else if (!strcmp(f->name, "envlog_matmul")) {
        const float *A = ptr(*(uint64_t *)params[0]), *B = ptr(*(uint64_t *)params[1]);
        float *C = ptr(*(uint64_t *)params[2]);
        int M = *(int *)params[3], N = *(int *)params[4], K = *(int *)params[5];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float s = 0;
                for (int k = 0; k < K; k++)
                    s += A[(long)i * K + k] * B[(long)k * N + j];
                C[(long)i * N + j] = s;
            }
    } else if (!strcmp(f->name, "envlog_reduce_sum")) {
        const float *in = ptr(*(uint64_t *)params[0]);
        float *out = ptr(*(uint64_t *)params[1]);
        int n = *(int *)params[2];
        double s = 0;
        for (int i = 0; i < n; i++)
            s += in[i];
        *out += (float)s;
    }
    return OK;
}

CUresult cuMemAlloc_v2(uint64_t *p, size_t bytes)
{
    void *m = calloc(1, bytes);
    if (!m)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    *p = (uint64_t)(uintptr_t)m;
    return OK;
}

CUresult cuMemFree_v2(uint64_t p)
{
    free(ptr(p));
    return OK;
}

CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n)
{
    memcpy(ptr(dst), src, n);
    return OK;
}

CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n)
{
    memcpy(dst, ptr(src), n);
    return OK;
}

CUresult cuStreamCreate(void **s, unsigned flags)
{
    (void)flags;
    *s = malloc(1);
    return *s ? OK : INVALID_VALUE;
}

CUresult cuStreamDestroy_v2(void *s)
{
    free(s);
    return OK;
}

CUresult cuStreamSynchronize(void *s)
{
    return s ? OK : INVALID_HANDLE;
}

CUresult cuEventCreate(void **e, unsigned flags)
{
    (void)flags;
    *e = calloc(1, sizeof(event));
    return *e ? OK : INVALID_VALUE;
}

CUresult cuEventDestroy_v2(void *e)
{
    free(e);
    return OK;
}

CUresult cuEventRecord(void *e, void *s)
{
    if (!e || !s)
        return INVALID_HANDLE;
    ((event *)e)->t = device_ns;
    ((event *)e)->recorded = 1;
    return OK;
}

CUresult cuEventSynchronize(void *e)
{
    return e && ((event *)e)->recorded ? OK : INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float *ms, void *a, void *b)
{
    event *x = a, *y = b;
    if (!x || !y || !x->recorded || !y->recorded)
        return INVALID_HANDLE;
    *ms = (float)((y->t - x->t) / 1e6);
    return OK;
}

CUresult cuGetErrorName(CUresult r, const char **s)
{
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; break;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
    }
    return OK;
}

CUresult cuGetErrorString(CUresult r, const char **s)
{
    *s = r == OK ? "no error" : "an error of the fake CUDA driver";
    return OK;
}
