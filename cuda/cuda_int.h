/* SPDX-License-Identifier: MIT */
/*
 * cuda_int.h - what the files of the cuda module share.
 *
 * The module builds without the CUDA Toolkit: the few NVRTC and driver types
 * and prototypes it needs are declared here as function tables filled by
 * dlsym, with every handle an opaque pointer.  It uses core, log and replay
 * through their headers only (the session, the live state), and nothing
 * there knows it exists.
 */
#ifndef ENVLOG_CUDA_INT_H
#define ENVLOG_CUDA_INT_H

#include "envlog_cuda.h"
#include "core_int.h"
#include "log_int.h"

#include <pthread.h>
#include <stdatomic.h>

/* ------------------------------------------------------------------ NVRTC */

/* nvrtcResult values we name. */
enum {
    ENVLOG_NVRTC_SUCCESS = 0,
    ENVLOG_NVRTC_ERROR_INVALID_OPTION = 5,
    ENVLOG_NVRTC_ERROR_COMPILATION = 6
};

/* The NVRTC entry points, as nvrtc.h declares them (nvrtcProgram is an
 * opaque pointer). */
typedef struct envlog_cuda_nvrtc_api {
    int (*Version)(int *major, int *minor);
    int (*CreateProgram)(void **prog, const char *src, const char *name,
                         int n_headers, const char *const *headers,
                         const char *const *include_names);
    int (*DestroyProgram)(void **prog);
    int (*CompileProgram)(void *prog, int n_options, const char *const *options);
    int (*GetPTXSize)(void *prog, size_t *size);
    int (*GetPTX)(void *prog, char *ptx);
    int (*GetCUBINSize)(void *prog, size_t *size);
    int (*GetCUBIN)(void *prog, char *cubin);
    int (*GetProgramLogSize)(void *prog, size_t *size);
    int (*GetProgramLog)(void *prog, char *log);
    const char *(*GetErrorString)(int result);
    char version[32]; /* "13.0.88" or "13.0" */
    char path[256];   /* the library that was loaded */
} envlog_cuda_nvrtc_api;

/* Loads NVRTC once per process (the outcome, success or not, is kept).
 * @return ENVLOG_OK and `*api`, or ENVLOG_UNAVAILABLE saying what was
 * tried. */
envlog_err envlog_cuda__nvrtc(const envlog_cuda_nvrtc_api **api);
/* Test hook: forgets what envlog_cuda__nvrtc() found, so the next call
 * loads again (reading $ENVLOG_NVRTC again).  Not thread-safe. */
void envlog_cuda__nvrtc_forget(void);

/* Compiles `d` (arch required); with `ir` non-NULL and a CUBIN target, the
 * PTX is appended to it.  As envlog_cuda_nvrtc_compile(). */
envlog_err envlog_cuda__nvrtc_build(const envlog_cuda_kernel_desc *d,
                                    envlog_cuda_binary **out, envlog_buf *ir);

/* Allocates a binary holding copies of `data` and `log` (either may be
 * NULL).  @return NULL when out of memory. */
envlog_cuda_binary *envlog_cuda__binary_new(const void *data, size_t size,
                                            const char *log);

/* True when `arch` is "sm_<digits>[a-z]" or "compute_<digits>[a-z]". */
bool envlog_cuda__arch_valid(const char *arch);

/* ----------------------------------------------------------------- driver */

enum {
    ENVLOG_CU_SUCCESS = 0,
    ENVLOG_CU_ERROR_NO_DEVICE = 100,
    ENVLOG_CU_ATTR_SM_COUNT = 16,
    ENVLOG_CU_ATTR_CC_MAJOR = 75,
    ENVLOG_CU_ATTR_CC_MINOR = 76,
    ENVLOG_CU_EVENT_DEFAULT = 0,
    ENVLOG_CU_STREAM_DEFAULT = 0 /* ordered with the legacy stream, so the
                                   synchronous copies need no extra sync */
};

/* The driver entry points (the ABI names behind cuda.h's macros, e.g.
 * cuMemAlloc_v2); CUdevice is an int, CUdeviceptr 64 bits, every other
 * handle an opaque pointer. */
typedef struct envlog_cuda_drv {
    int (*Init)(unsigned flags);
    int (*DriverGetVersion)(int *v);
    int (*DeviceGetCount)(int *n);
    int (*DeviceGet)(int *dev, int ordinal);
    int (*DeviceGetName)(char *name, int len, int dev);
    int (*DeviceGetAttribute)(int *v, int attr, int dev);
    int (*DeviceTotalMem)(size_t *bytes, int dev);
    int (*DevicePrimaryCtxRetain)(void **ctx, int dev);
    int (*DevicePrimaryCtxRelease)(int dev);
    int (*CtxSetCurrent)(void *ctx);
    int (*ModuleLoadData)(void **mod, const void *image);
    int (*ModuleUnload)(void *mod);
    int (*ModuleGetFunction)(void **fn, void *mod, const char *name);
    int (*LaunchKernel)(void *fn, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        void *stream, void **params, void **extra);
    int (*MemAlloc)(uint64_t *p, size_t bytes);
    int (*MemFree)(uint64_t p);
    int (*MemcpyHtoD)(uint64_t dst, const void *src, size_t n);
    int (*MemcpyDtoH)(void *dst, uint64_t src, size_t n);
    int (*StreamCreate)(void **s, unsigned flags);
    int (*StreamDestroy)(void *s);
    int (*StreamSynchronize)(void *s);
    int (*EventCreate)(void **e, unsigned flags);
    int (*EventDestroy)(void *e);
    int (*EventRecord)(void *e, void *s);
    int (*EventSynchronize)(void *e);
    int (*EventElapsedTime)(float *ms, void *start, void *end);
    int (*GetErrorName)(int res, const char **s);
    int (*GetErrorString)(int res, const char **s);
    int version;
} envlog_cuda_drv;

/* Loads the driver and runs cuInit once per process (the outcome is kept).
 * @return ENVLOG_OK and `*drv`, or ENVLOG_UNAVAILABLE with the reason. */
envlog_err envlog_cuda__drv(const envlog_cuda_drv **drv);
/* Test hook, as envlog_cuda__nvrtc_forget(). */
void envlog_cuda__drv_forget(void);
/* ENVLOG_UNAVAILABLE with "what: CUDA_ERROR_X (text)". */
envlog_err envlog_cuda__drv_fail(int res, const char *what);

/* ------------------------------------------------------------- statistics */

enum {
    ENVLOG_CUDA__KREG,
    ENVLOG_CUDA__KCOMPILED,
    ENVLOG_CUDA__KLOADED,
    ENVLOG_CUDA__KFAILED,
    ENVLOG_CUDA__KABANDONED,
    ENVLOG_CUDA__KSTORED,
    ENVLOG_CUDA__TREG,
    ENVLOG_CUDA__TMEASURED,
    ENVLOG_CUDA__TFAILED,
    ENVLOG_CUDA__TPERSISTED,
    ENVLOG_CUDA__LEXECUTED,
    ENVLOG_CUDA__LDISCARDED,
    ENVLOG_CUDA__TSINGLE,
    ENVLOG_CUDA__TABANDONED,
    ENVLOG_CUDA__NCOUNTS
};

struct envlog_cuda_stats {
    _Atomic uint64_t v[ENVLOG_CUDA__NCOUNTS];
    /* The caller's hold, one per override naming it and one per open
     * registration counted into it: freed when the last goes. */
    _Atomic size_t refs;
};

/* Takes or drops a hold on `st` (NULL accepted). */
void envlog_cuda__stats_hold(envlog_cuda_stats *st);
void envlog_cuda__stats_release(envlog_cuda_stats *st);

/* Adds `n` to count `which` of `c` and of the collector in force (a launch,
 * counted where it happens). */
void envlog_cuda__count(envlog_cuda *c, int which, uint64_t n);
/* The collector in force, with a hold taken (NULL: none); c->mu held. */
envlog_cuda_stats *envlog_cuda__collector_locked(envlog_cuda *c);
/* Opens a registration: counts `which` (KREG or TREG) into `c` and the
 * collector in force, and returns that collector, held (NULL: none), which
 * the settlement is counted into. */
envlog_cuda_stats *envlog_cuda__register(envlog_cuda *c, int which);
/* Counts `which` into `c` and `col` (may be NULL). */
void envlog_cuda__count_to(envlog_cuda *c, envlog_cuda_stats *col, int which);
/* Settles a registration as `which` and drops its hold on `col`. */
void envlog_cuda__settle_reg(envlog_cuda *c, envlog_cuda_stats *col, int which);

/* Tunes gathered under COMPILE_ONLY and not measured yet (gathered.c): each
 * an open registration, settled by the tune that measures its key. */
typedef struct envlog_cuda__gathered {
    char *ns, *key;
    uint64_t checksum;
    envlog_cuda_stats *col;
} envlog_cuda__gathered;

/* True when (ns, key, checksum) is gathered. */
bool envlog_cuda__gathered_has(envlog_cuda *c, const char *ns, const char *key,
                               uint64_t checksum);
/* Keeps a registration for (ns, key, checksum).  @return ENVLOG_OK or
 * ENVLOG_NOMEM (the registration is then the caller's to settle). */
envlog_err envlog_cuda__gathered_add(envlog_cuda *c, const char *ns, const char *key,
                                     uint64_t checksum, envlog_cuda_stats *col);
/* Takes (ns, key, checksum) out: true and its collector when it was in. */
bool envlog_cuda__gathered_take(envlog_cuda *c, const char *ns, const char *key,
                                uint64_t checksum, envlog_cuda_stats **col);
/* Abandons every gathered registration (the runtime closes). */
void envlog_cuda__gathered_abandon(envlog_cuda *c);

/* ---------------------------------------------------------------- runtime */

typedef enum {
    ENVLOG_CUDA__K_NEW = 0,
    ENVLOG_CUDA__K_QUEUED,
    ENVLOG_CUDA__K_READY,
    ENVLOG_CUDA__K_FAILED
} envlog_cuda__kstate;

struct envlog_cuda_kernel {
    envlog_cuda *c;
    char *name, *source, *options, *arch;
    char *ns;                  /* kernel/<runtime>/<version>/<arch>/nvrtc-<v> */
    const char *compiler_version; /* owned by c */
    envlog_hash128 key, source_hash;
    _Atomic int st;            /* an envlog_cuda__kstate: settled under
                                  c->load_mu, queued under c->mu */
    envlog_cuda_binary *bin;
    envlog_err load_err;       /* what the load returned */
    void *module, *function;   /* the driver's, once run */
    const void *tune_token;    /* the tune that queued it, while queued */
    bool has_tune;
    envlog_stamp tune;
    bool temporary;            /* made by envlog_cuda_compile() */
    /* Its registration (under c->mu): open from when it is asked for until
     * it settles, counted into reg_col too. */
    bool reg_open;
    envlog_cuda_stats *reg_col;
    uint64_t settles;          /* how many times it settled (load_mu) */
    /* Where its compile ran (session clock, thread), set by the thread that
     * runs it, read by the one that records it. */
    bool ran_known;
    uint64_t ran_start_ns, ran_thread;
};

struct envlog_cuda_stream {
    envlog_cuda *c;
    envlog_cuda_stream_kind kind;
    void *cu;                  /* CUstream */
    void *ev_start, *ev_stop;  /* for the events timer */
    int forced;                /* the stream override's mode; -1: none */
    int measuring;
};

struct envlog_cuda {
    envlog_env *env;
    envlog_session *s;
    envlog_state *state;
    char *runtime, *runtime_version;
    char *compiler_version;    /* set once, under mu */
    envlog_cuda_mode base;
    _Atomic int mode_now;      /* the mode in force */
    pthread_mutex_t mu;        /* overrides, queue, compiler version */
    pthread_mutex_t load_mu;   /* recursive: one load or batch at a time */
    envlog_cuda_override *top;
    _Atomic int n_collectors;  /* overrides in force with a collector */
    envlog_cuda_stats stats;
    envlog_cuda_kernel **queue;
    size_t nq, capq;
    unsigned threads;
    bool has_device;
    envlog_cuda_device dev;
    int cu_dev;
    void *cu_ctx;              /* the retained primary context */
    char cpu_fp[200];
    envlog_hash128 *sources;   /* source hashes recorded (under mu) */
    size_t n_sources, cap_sources;
    envlog_cuda__gathered *gathered; /* under mu */
    size_t n_gathered, cap_gathered;
};

/* The compiler version of kernel keys (opts, else NVRTC's).  Owned by c. */
envlog_err envlog_cuda__compiler_version(envlog_cuda *c, const char **v);
/* Fills a kernel's copies and derived fields from `d`.  On error the kernel
 * holds what must be freed by envlog_cuda__kernel_clear(). */
envlog_err envlog_cuda__kernel_init(envlog_cuda *c, const envlog_cuda_kernel_desc *d,
                                    envlog_cuda_kernel *k);
void envlog_cuda__kernel_clear(envlog_cuda_kernel *k);
/* Loads one kernel (c->load_mu held): the state, else NVRTC; records it. */
envlog_err envlog_cuda__obtain(envlog_cuda_kernel *k);
/* The state's binary for `k`: ENVLOG_OK and a LOADED binary, or
 * ENVLOG_NOT_FOUND. */
envlog_err envlog_cuda__lookup(envlog_cuda_kernel *k, envlog_cuda_binary **out);
/* Notes, on the thread about to compile `k`, where its compile starts. */
void envlog_cuda__compile_starts(envlog_cuda_kernel *k);
/* Records `b` (COMPILED, LOADED or FAILED) for `k`, counts it, and keeps it
 * as k's binary.  `ir` is the PTX of a CUBIN, or empty.  The record is
 * placed where envlog_cuda__compile_starts() said, or, for a lookup, here
 * and now. */
envlog_err envlog_cuda__settle(envlog_cuda_kernel *k, envlog_cuda_binary *b,
                               envlog_bytes ir);
/* Records k's source as an "envlog-cuda/source" user record unless `c`
 * recorded that source hash already (sources.c). */
envlog_err envlog_cuda__record_source(envlog_cuda_kernel *k);
/* ENVLOG_BAD_DATA for a kernel that failed, naming its log's first line. */
envlog_err envlog_cuda__failed(const envlog_cuda_kernel *k);
/* On a miss, the NVRTC here must be the one k's key names:
 * ENVLOG_UNAVAILABLE (naming both) otherwise, or NVRTC's own error. */
envlog_err envlog_cuda__compiler_matches(const envlog_cuda_kernel *k);
/* Opens k's registration unless one is open. */
void envlog_cuda__kernel_register(envlog_cuda_kernel *k);
/* Settles k's open registration as `which` (nothing when none is open). */
void envlog_cuda__kernel_settled(envlog_cuda_kernel *k, int which);
/* Makes a kernel runnable on the device: its module and function. */
envlog_err envlog_cuda__kernel_module(envlog_cuda_kernel *k);

/* The tune a thread is queuing kernels for (COMPILE_ONLY), or NULL. */
void envlog_cuda__tune_token_set(const void *token);
const void *envlog_cuda__tune_token_get(void);
/* Gives the queued kernels of `token` that tune's stamp. */
void envlog_cuda__queue_tag(envlog_cuda *c, const void *token,
                            const envlog_stamp *stamp);
/* Takes kernel `k` out of the queue (c->mu held); true when it was in. */
bool envlog_cuda__queue_remove(envlog_cuda *c, envlog_cuda_kernel *k);

/* Sanitizes `in` into `out` (every byte outside [A-Za-z0-9._-] becomes
 * '-'), truncating to `size`. */
void envlog_cuda__sanitize(const char *in, char *out, size_t size);

/* Monotonic nanoseconds. */
uint64_t envlog_cuda__now_ns(void);


/* ------------------------------------------------------------------ tuner */

/* Statistics of one candidate's samples. */
typedef struct envlog_cuda__summary {
    size_t n;
    double min, median, mean, max, sd; /* sd: sample standard deviation */
} envlog_cuda__summary;

/* Summarizes `x[0..n)`; `scratch` holds n doubles (sorted into it). */
void envlog_cuda__summarize(const double *x, size_t n, double *scratch,
                            envlog_cuda__summary *out);
/* The policy's verdict after a sample: 0 go on, 1 converged, 2 dropped
 * (slower than drop_factor times `leader`, the best median before it, or
 * a negative value when there is none). */
int envlog_cuda__verdict(const envlog_cuda__summary *s, double leader,
                         const envlog_cuda_policy *p);

typedef struct envlog_cuda__pick {
    int64_t winner;    /* candidate index, -1 for none */
    int64_t runner_up; /* candidate index, -1 for none */
    double margin;
    bool within_noise;
} envlog_cuda__pick;

/* Applies the scoring rule to the trials (errors excluded). */
void envlog_cuda__select(const envlog_trial *trials, size_t n,
                         const envlog_cuda_policy *p, envlog_cuda__pick *out);

#endif /* ENVLOG_CUDA_INT_H */
