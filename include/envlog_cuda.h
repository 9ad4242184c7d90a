/* SPDX-License-Identifier: MIT */
/*
 * envlog_cuda.h - the optional CUDA runtime integration of envlog.
 *
 * It compiles CUDA C++ with NVRTC, loads and launches kernels through the
 * driver API, runs the process and stream modes that let a pass compile and
 * tune without doing the work, and autotunes candidates with a documented
 * policy, recording every compile and every tune into an envlog session and
 * asking the environment's state first, so a second run is all cache hits.
 *
 * Nothing here needs the CUDA Toolkit to build: NVRTC (libnvrtc.so.13, then
 * .12, then libnvrtc.so; $ENVLOG_NVRTC names another file) and the driver
 * (libcuda.so.1; $ENVLOG_CUDA_DRIVER names another file) are loaded with
 * dlopen on first use.  Where one is missing, the calls that need it return
 * ENVLOG_UNAVAILABLE with the reason in envlog_errmsg(), and everything else
 * (the modes, the statistics, the CPU backend, the tuner) works.
 *
 * Conventions are those of envlog.h: functions return an envlog_err, strings
 * passed in are copied, handles come in open/close pairs and every close or
 * free accepts NULL.
 */
#ifndef ENVLOG_CUDA_H
#define ENVLOG_CUDA_H

#include "envlog.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

/* ------------------------------------------------------------ availability */

/*! envlog_cuda_nvrtc_version() : loads NVRTC if needed and writes its version
 *  to `out`: "MAJOR.MINOR.PATCH" when the build reports it (as in
 *  "13.0.88"), else "MAJOR.MINOR".  This string is the compiler version of
 *  every kernel key.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE when no NVRTC library loads;
 *  ENVLOG_TOO_BIG when it does not fit in `size`. */
envlog_err envlog_cuda_nvrtc_version(char *out, size_t size);

/*! envlog_cuda_driver_version() : loads the driver if needed and gives its
 *  version (e.g. 13000 for CUDA 13.0).
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE when libcuda.so.1 does not load or
 *  cuInit() fails (for instance on a machine without a GPU). */
envlog_err envlog_cuda_driver_version(int *version);

/* ----------------------------------------------------------------- devices */

/* What identifies a device: its fingerprint is one namespace component. */
typedef struct envlog_cuda_device {
    int ordinal;
    char name[128];            /* e.g. "NVIDIA H200" */
    int cc_major, cc_minor;    /* compute capability */
    char arch[16];             /* "sm_90": what its native CUBIN targets */
    int driver_version;        /* e.g. 13000 */
    int sm_count;
    uint64_t memory_bytes;
    /* "<name>-sm_90-drv13000-132sm-143771MiB", the name with every byte
     * outside [A-Za-z0-9._-] replaced by '-': never holds a '/'. */
    char fingerprint[200];
} envlog_cuda_device;

/*! envlog_cuda_device_count() : the number of CUDA devices.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE without a driver. */
envlog_err envlog_cuda_device_count(int *n);

/*! envlog_cuda_device_get() : describes device `ordinal`.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE without a driver;
 *  ENVLOG_INVALID_ARG when there is no such device. */
envlog_err envlog_cuda_device_get(int ordinal, envlog_cuda_device *out);

/*! envlog_cuda_cpu_fingerprint() : the fingerprint of this machine's CPU, the
 *  device component of CPU tunes: "cpu-<model>-<n>c" (model from
 *  /proc/cpuinfo where there is one, else the machine name of uname(2); the
 *  same byte rule as device fingerprints).
 *  @return ENVLOG_OK, or ENVLOG_TOO_BIG when it does not fit in `size`. */
envlog_err envlog_cuda_cpu_fingerprint(char *out, size_t size);

/* ------------------------------------------------------------ the runtime */

/*
 * Process modes (the whole process's, on every device):
 *  EXECUTE              launches run; tunes measure on a cache miss.
 *  COMPILE_ONLY         launches and every tune's candidates only queue their
 *                       kernels; nothing compiles until a later load, which
 *                       compiles the whole queue as one parallel batch.
 *                       Tunes do not measure: they return an unmeasured pick
 *                       (candidate 0), recorded with stored = false.
 *  COMPILE_AND_AUTOTUNE every launch compiles its kernel and is discarded;
 *                       tunes measure.
 * Under either mode that discards launches, buffers are left as they were:
 * anything read back is meaningless.  Such a pass only suits work driven by
 * the shapes it produces (which key the caches), never one that branches on a
 * computed value.
 */
typedef enum envlog_cuda_mode {
    ENVLOG_CUDA_EXECUTE = 0,
    ENVLOG_CUDA_COMPILE_ONLY = 1,
    ENVLOG_CUDA_COMPILE_AND_AUTOTUNE = 2
} envlog_cuda_mode;

/*! envlog_cuda_mode_name() : "execute", "compile-only",
 *  "compile-and-autotune" (the session record's process_mode); "unknown". */
const char *envlog_cuda_mode_name(envlog_cuda_mode mode);

#define ENVLOG_CUDA_DEVICE_AUTO (-1) /* the first device, when there is one */
#define ENVLOG_CUDA_DEVICE_NONE (-2) /* no device: compile and CPU work only */

typedef struct envlog_cuda_opts {
    const char *runtime;          /* namespace component; "envlog-cuda" */
    const char *runtime_version;  /* namespace component; the envlog version */
    envlog_cuda_mode mode;        /* the base process mode; EXECUTE */
    int device;                   /* an ordinal, or one of the two above;
                                     ENVLOG_CUDA_DEVICE_AUTO */
    unsigned threads;             /* batch compile threads; 0: online CPUs */
    /* The compiler version of kernel keys.  NULL (the default) asks NVRTC.
     * Set it (to what envlog_cuda_nvrtc_version() said where the kernels
     * were built) to look kernels up where NVRTC is absent, as on a machine
     * that only runs a shipped bundle: NVRTC is then needed on a miss only. */
    const char *compiler_version;
} envlog_cuda_opts;

/*! envlog_cuda_opts_init() : fills `opts` with the defaults above. */
void envlog_cuda_opts_init(envlog_cuda_opts *opts);

typedef struct envlog_cuda envlog_cuda;

/*! envlog_cuda_open() : a CUDA runtime recording into session `s` of `env`
 *  and asking `env`'s live state (envlog_env_state()) before every compile
 *  and tune.  `opts` may be NULL.  With ENVLOG_CUDA_DEVICE_AUTO a missing
 *  driver or GPU is not an error: the runtime then has no device.  The
 *  runtime may be used from many threads; a stream from one at a time.
 *  Close it before ending `s`.
 *  @return ENVLOG_OK and `*out`; ENVLOG_INVALID_ARG when `s` does not record
 *  into `env` or an option is bad; ENVLOG_UNAVAILABLE when a device ordinal
 *  was asked for and there is no driver or no such device; ENVLOG_NOMEM. */
envlog_err envlog_cuda_open(envlog_env *env, envlog_session *s,
                            const envlog_cuda_opts *opts, envlog_cuda **out);

/*! envlog_cuda_close() : frees `c`.  Kernels still queued are abandoned
 *  (counted as such); kernels and streams of `c` must be freed first.
 *  Accepts NULL. */
void envlog_cuda_close(envlog_cuda *c);

/*! envlog_cuda_device_info() : the device `c` runs on.
 *  @return ENVLOG_OK, or ENVLOG_UNAVAILABLE when it has none. */
envlog_err envlog_cuda_device_info(const envlog_cuda *c, envlog_cuda_device *out);

/*! envlog_cuda_set_threads() : the number of threads a batch compiles on
 *  (0: online CPUs).  @return ENVLOG_OK or ENVLOG_INVALID_ARG above 256. */
envlog_err envlog_cuda_set_threads(envlog_cuda *c, unsigned threads);

/* -------------------------------------------------------------- statistics */

/* What a statistics collector counts.  Every registration settles exactly
 * once, so at any quiet point (no work in flight) settled == registered,
 * and pending says what has not settled yet.
 *
 * A kernel is registered when it is first asked for (queued, loaded,
 * launched, or compiled by envlog_cuda_compile()), and again on each load
 * that retries an earlier failure; it settles as compiled now, loaded from
 * the cache, failed, or abandoned (dropped before it settled: freed while
 * queued or before its load completed, or still queued when the runtime
 * closed).  Stored counts the compiled binaries handed to the session as
 * CHANGED records (a part of compiled, not a settlement).
 *
 * A tune is registered on a cache miss (a hit registers nothing; a key
 * gathered under COMPILE_ONLY registers once, and the tune that later
 * measures it settles that registration).  It settles as measured (a
 * winner was chosen from measurements), failed (no candidate could be
 * measured), single (one candidate: answered without measuring), or
 * abandoned (the tune stopped on an error, or a gathered key was never
 * measured before the runtime closed, or was answered from the cache
 * meanwhile).  Persisted counts the stored picks handed to the session.
 *
 * Launches (GPU or host) are executed or discarded. */
typedef struct envlog_cuda_counts {
    uint64_t kernels_registered, kernels_compiled, kernels_loaded,
        kernels_failed, kernels_abandoned, kernels_stored;
    uint64_t tunes_registered, tunes_measured, tunes_failed, tunes_persisted;
    uint64_t launches_executed, launches_discarded;
    uint64_t tunes_single, tunes_abandoned;
    /* kernels: compiled + loaded + failed + abandoned; tunes: measured +
     * failed + single + abandoned. */
    uint64_t kernels_settled, tunes_settled;
    /* registered - settled: registrations still to settle. */
    uint64_t kernels_pending, tunes_pending;
} envlog_cuda_counts;

/* A set of atomic counters, read from any thread at any time. */
typedef struct envlog_cuda_stats envlog_cuda_stats;

/*! envlog_cuda_stats_new() : a collector with every count at 0, to hand to
 *  envlog_cuda_override_begin().  Free with envlog_cuda_stats_free().
 *  @return ENVLOG_OK or ENVLOG_NOMEM. */
envlog_err envlog_cuda_stats_new(envlog_cuda_stats **out);

/*! envlog_cuda_stats_free() : releases the caller's hold on `st`; the
 *  collector is freed once no override or pending registration still
 *  counts into it.  Accepts NULL. */
void envlog_cuda_stats_free(envlog_cuda_stats *st);

/*! envlog_cuda_stats_read() : a snapshot of the counts (each count is read
 *  atomically; a snapshot taken while work runs may be between two of them,
 *  but settlements are read before registrations, so pending is never
 *  negative).  Safe from any thread. */
void envlog_cuda_stats_read(const envlog_cuda_stats *st, envlog_cuda_counts *out);

/*! envlog_cuda_stats_of() : the collector of `c` itself, which counts all of
 *  its work; owned by `c`. */
const envlog_cuda_stats *envlog_cuda_stats_of(const envlog_cuda *c);

/* ----------------------------------------------------- process mode override */

/* An override in progress: caller-owned storage; its members are private. */
typedef struct envlog_cuda_override {
    envlog_cuda *c_;
    struct envlog_cuda_override *up_;
    envlog_cuda_stats *stats_;
    int mode_;
    int live_;
} envlog_cuda_override;

/*! envlog_cuda_mode_get() : the process mode in force: the innermost
 *  override's, else the base mode. */
envlog_cuda_mode envlog_cuda_mode_get(envlog_cuda *c);

/*! envlog_cuda_override_begin() : puts `c` in `mode` until
 *  envlog_cuda_override_end(ov).  Overrides nest when they name the same
 *  mode and the same collector; while one is in force, another mode is
 *  refused, and so is another collector (a NULL `collector` names none of
 *  its own: the work is counted into the one in force, if any).  What the
 *  work registers while `ov` is in force is counted into `collector`, and
 *  so is how each of those registrations settles, even after `ov` ended;
 *  launches are counted while it is in force.  The collector is held until
 *  the last of those settles.
 *  @return ENVLOG_OK; ENVLOG_WRONG_STATE for a conflicting mode or
 *  collector (envlog_errmsg() names both modes, or says the collectors
 *  differ); ENVLOG_INVALID_ARG. */
envlog_err envlog_cuda_override_begin(envlog_cuda *c, envlog_cuda_mode mode,
                                      envlog_cuda_stats *collector,
                                      envlog_cuda_override *ov);

/*! envlog_cuda_override_end() : ends `ov`.  Overrides may end in any order:
 *  the mode holds while any override is in force, then the base mode
 *  returns.
 *  @return ENVLOG_OK, or ENVLOG_WRONG_STATE when `ov` is not in force (it
 *  never began, or has ended). */
envlog_err envlog_cuda_override_end(envlog_cuda_override *ov);

/* ------------------------------------------------------------------ streams */

typedef enum envlog_cuda_stream_kind {
    ENVLOG_CUDA_STREAM_HOST = 0,  /* runs host functions; needs no GPU */
    ENVLOG_CUDA_STREAM_DEVICE = 1 /* a CUDA stream on the runtime's device */
} envlog_cuda_stream_kind;

/* What a stream does with its launches.  Its default follows the process
 * mode (EXECUTE under EXECUTE, DISCARD under the other two); a stream
 * override replaces it; a measurement makes it EXECUTE while it measures,
 * whatever else holds. */
typedef enum envlog_cuda_stream_mode {
    ENVLOG_CUDA_STREAM_EXECUTE = 0,
    ENVLOG_CUDA_STREAM_DISCARD = 1
} envlog_cuda_stream_mode;

typedef struct envlog_cuda_stream envlog_cuda_stream;

/*! envlog_cuda_stream_open() : a stream of `kind`.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE for a device stream on a runtime
 *  without a device; ENVLOG_NOMEM. */
envlog_err envlog_cuda_stream_open(envlog_cuda *c, envlog_cuda_stream_kind kind,
                                   envlog_cuda_stream **out);

/*! envlog_cuda_stream_close() : synchronizes and frees `s`.  Accepts NULL. */
void envlog_cuda_stream_close(envlog_cuda_stream *s);

/*! envlog_cuda_stream_mode_get() : what a launch on `s` does now. */
envlog_cuda_stream_mode envlog_cuda_stream_mode_get(const envlog_cuda_stream *s);

/*! envlog_cuda_stream_sync() : waits for the work queued on `s`.
 *  @return ENVLOG_OK, or ENVLOG_UNAVAILABLE with the driver's message. */
envlog_err envlog_cuda_stream_sync(envlog_cuda_stream *s);

typedef struct envlog_cuda_stream_override {
    envlog_cuda_stream *s_;
    struct envlog_cuda_stream_override *up_;
    int mode_;
    int live_;
    int prev_; /* what `s_` was forced to when it began; -1: nothing */
} envlog_cuda_stream_override;

/*! envlog_cuda_stream_override_begin() : puts `s` in `mode` until
 *  envlog_cuda_stream_override_end(ov).  Stream overrides nest with the
 *  newest deciding, whatever the modes; each remembers what it found.
 *  @return ENVLOG_OK or ENVLOG_INVALID_ARG. */
envlog_err envlog_cuda_stream_override_begin(envlog_cuda_stream *s,
                                             envlog_cuda_stream_mode mode,
                                             envlog_cuda_stream_override *ov);
/*! envlog_cuda_stream_override_end() : ends `ov`, in any order, restoring
 *  what `ov` found when it began, as a scope guard does (so after
 *  out-of-order ends, the last to end decides).
 *  @return ENVLOG_OK, or ENVLOG_WRONG_STATE when `ov` is not in force. */
envlog_err envlog_cuda_stream_override_end(envlog_cuda_stream_override *ov);

/*! envlog_cuda_measure_begin() / _end() : bracket a measurement (the tuner
 *  does this around its candidates; a throughput probe may too): `s`
 *  executes in between, whatever its mode.  They nest.
 *  @return ENVLOG_OK; _end returns ENVLOG_WRONG_STATE without a matching
 *  begin. */
envlog_err envlog_cuda_measure_begin(envlog_cuda_stream *s);
envlog_err envlog_cuda_measure_end(envlog_cuda_stream *s);

/* ------------------------------------------------------------------ kernels */

/* A kernel to compile: an extern "C" __global__ function of `source`. */
typedef struct envlog_cuda_kernel_desc {
    const char *name;    /* the entry point */
    const char *source;  /* CUDA C++ */
    const char *options; /* NVRTC options, separated by spaces (no quoting);
                            NULL is ""; no -arch: that is `arch` */
    const char *arch;    /* "sm_XX": a CUBIN; "compute_XX": PTX; NULL: the
                            runtime's device (envlog_cuda_kernel_new only) */
} envlog_cuda_kernel_desc;

/*! envlog_cuda_kernel_key() : the kernel key of `d` compiled by NVRTC
 *  `compiler_version`: XXH3-128 (envlog_hash128_bytes) over
 *
 *      "envlog-cuda-kernel-key/1" 0x00
 *      for each of source, options, compiler_version, arch, in this order:
 *          its length in bytes as 8 bytes little-endian, then its bytes
 *
 *  (options NULL counts as "").  The key names a binary exactly: the entry
 *  point is not part of it, since one module serves all of its kernels.
 *  @return ENVLOG_OK, ENVLOG_INVALID_ARG, ENVLOG_NOMEM. */
envlog_err envlog_cuda_kernel_key(const envlog_cuda_kernel_desc *d,
                                  const char *compiler_version,
                                  envlog_hash128 *key);

/* A compiled (or refused) kernel.  Owned by whoever handed it out. */
typedef struct envlog_cuda_binary {
    envlog_outcome outcome;     /* COMPILED, LOADED (cache hit) or FAILED */
    envlog_hash128 kernel_key;
    envlog_hash128 binary_hash; /* zero when FAILED */
    const void *data;           /* PTX (with its NUL) or a CUBIN; NULL when
                                   FAILED */
    size_t size;
    bool ptx;                   /* data is PTX text */
    const char *log;            /* the compiler's log; never NULL */
    uint64_t duration_ns;       /* compile time; 0 for a cache hit */
    bool recorded;              /* the session accepted a record of it */
    envlog_stamp stamp;         /* that record's stamp */
} envlog_cuda_binary;

/*! envlog_cuda_binary_free() : frees a binary handed out by
 *  envlog_cuda_nvrtc_compile() or envlog_cuda_compile().  Accepts NULL. */
void envlog_cuda_binary_free(envlog_cuda_binary *b);

/*! envlog_cuda_nvrtc_compile() : compiles `d` with NVRTC and nothing else:
 *  no cache, no record (envlog rebuild uses it).  `d->arch` is required.
 *  @return ENVLOG_OK and `*out`; ENVLOG_BAD_DATA when NVRTC refused the
 *  source: `*out` then holds the log (outcome FAILED) and must be freed;
 *  ENVLOG_UNAVAILABLE without NVRTC; ENVLOG_INVALID_ARG (a bad arch, -arch
 *  among the options); ENVLOG_NOMEM. */
envlog_err envlog_cuda_nvrtc_compile(const envlog_cuda_kernel_desc *d,
                                     envlog_cuda_binary **out);

/*! envlog_cuda_compile() : the binary of `d` through the cache.  The state
 *  is asked first: a hit records an OBSERVED `loaded` compile record and
 *  hands out the stored binary; a miss compiles and records a CHANGED
 *  `compiled` record with the binary, the log and the duration (the source,
 *  and the PTX of a CUBIN as its IR, at ENVLOG_LEVEL_FULL); a refused source
 *  records a FAILED record with the log.  It compiles now, whatever the
 *  process mode.
 *  @return as envlog_cuda_nvrtc_compile(), and the session's errors. */
envlog_err envlog_cuda_compile(envlog_cuda *c, const envlog_cuda_kernel_desc *d,
                               envlog_cuda_binary **out);

/* The kind of the user records that hold kernel sources: the runtime
 * records each source it compiles (or sees refused) once per session, as an
 * OBSERVED user record whose body is the CBOR array [source_hash (a 16-byte
 * string), source (text)], before the first compile record naming that
 * source hash, at every level but OFF; so `envlog rebuild` finds sources at
 * the default level, where compile records carry none (envlog-cuda(3),
 * SOURCES). */
#define ENVLOG_CUDA_SOURCE_KIND "envlog-cuda/source"

/* A kernel the runtime knows: compiled when first loaded, then launched. */
typedef struct envlog_cuda_kernel envlog_cuda_kernel;

/*! envlog_cuda_kernel_new() : makes a kernel of `d` for `c` without
 *  compiling it (it is registered, and counted, when first asked for).  @return ENVLOG_OK and `*out`; ENVLOG_INVALID_ARG;
 *  ENVLOG_UNAVAILABLE when `d->arch` is NULL and `c` has no device, or when
 *  the compiler version is unknown (no NVRTC, no opts.compiler_version). */
envlog_err envlog_cuda_kernel_new(envlog_cuda *c, const envlog_cuda_kernel_desc *d,
                                  envlog_cuda_kernel **out);

/*! envlog_cuda_kernel_free() : frees `k`; a registration of it that has
 *  not settled (queued, or a load that stopped on an error) is abandoned.
 *  Accepts NULL. */
void envlog_cuda_kernel_free(envlog_cuda_kernel *k);

/*! envlog_cuda_kernel_load() : makes `k`'s binary ready: the whole compile
 *  queue is compiled first, as one batch, then `k` if it was not in it (as
 *  envlog_cuda_compile() would).  A kernel that loaded loads once: later
 *  calls return at once.  One that failed is tried again by its next load
 *  (or queue, or launch), which registers it again: the cache first, then
 *  NVRTC, so a fixed header or a cached binary can succeed.
 *  @return ENVLOG_OK; ENVLOG_BAD_DATA when `k` failed to compile (its log is
 *  in envlog_cuda_kernel_binary()); ENVLOG_UNAVAILABLE without NVRTC. */
envlog_err envlog_cuda_kernel_load(envlog_cuda_kernel *k);

/*! envlog_cuda_kernel_binary() : `k`'s binary once loaded (or its failure),
 *  else NULL.  Owned by `k`. */
const envlog_cuda_binary *envlog_cuda_kernel_binary(const envlog_cuda_kernel *k);

/*! envlog_cuda_kernel_queue() : queues `k` for the next batch (what a launch
 *  does under COMPILE_ONLY); a kernel that failed is queued to be tried
 *  again.  Queuing a queued or loaded kernel does nothing.  @return ENVLOG_OK or ENVLOG_NOMEM. */
envlog_err envlog_cuda_kernel_queue(envlog_cuda_kernel *k);

/* What a batch did. */
typedef struct envlog_cuda_batch {
    size_t kernels;   /* kernels taken from the queue */
    size_t compiled, loaded, failed;
    unsigned threads; /* compile threads used */
    uint64_t wall_ns;
} envlog_cuda_batch;

/*! envlog_cuda_compile_queued() : compiles the whole queue now as one batch
 *  over the runtime's threads.  The cache is asked for each kernel first
 *  (each hit an OBSERVED `loaded` record, in queue order); the misses then
 *  compile in parallel (two of one key compile once) and are recorded in
 *  queue order; all of it inside a span "envlog-cuda/compile-batch" whose
 *  attributes give the counts (kernels, compiled, loaded, failed, threads).
 *  An empty queue records nothing.  `out` may be NULL.  A kernel that fails
 *  is counted, not returned as an error.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE without NVRTC (the queue is kept);
 *  the session's errors. */
envlog_err envlog_cuda_compile_queued(envlog_cuda *c, envlog_cuda_batch *out);

/*! envlog_cuda_queue_length() : kernels waiting in the queue. */
size_t envlog_cuda_queue_length(envlog_cuda *c);

/* ----------------------------------------------------------------- launches */

typedef struct envlog_cuda_dim3 {
    unsigned x, y, z;
} envlog_cuda_dim3;

/*! envlog_cuda_launch() : launches `k` on `s` with cuLaunchKernel's
 *  arguments (`args`: one pointer to each parameter's value).  Under
 *  COMPILE_ONLY it queues `k` (unless loaded); otherwise it loads `k`.  Then
 *  if `s` executes, `k` runs (asynchronously: see envlog_cuda_stream_sync());
 *  else the launch is discarded.  Either way it is counted.
 *  @return ENVLOG_OK; ENVLOG_BAD_DATA when `k` failed to compile;
 *  ENVLOG_UNAVAILABLE when it should run and cannot (a host stream, no
 *  driver, a module the device refuses: the driver's message). */
envlog_err envlog_cuda_launch(envlog_cuda_stream *s, envlog_cuda_kernel *k,
                              envlog_cuda_dim3 grid, envlog_cuda_dim3 block,
                              unsigned shared_bytes, void **args);

/*! envlog_cuda_host_launch() : calls fn(arg) now if `s` executes, else
 *  discards it; counted as a launch.  On a device stream it first waits for
 *  the stream.  @return ENVLOG_OK, or the stream's error. */
envlog_err envlog_cuda_host_launch(envlog_cuda_stream *s, void (*fn)(void *arg),
                                   void *arg);

/* ------------------------------------------------------------ device memory */

typedef uint64_t envlog_cuda_dptr;

/*! envlog_cuda_mem_alloc() : `bytes` of device memory.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE without a device or when the
 *  driver refuses (its message); ENVLOG_INVALID_ARG for 0 bytes. */
envlog_err envlog_cuda_mem_alloc(envlog_cuda *c, size_t bytes, envlog_cuda_dptr *out);
/*! envlog_cuda_mem_free() : frees `p`; 0 is accepted. */
void envlog_cuda_mem_free(envlog_cuda *c, envlog_cuda_dptr p);
/*! envlog_cuda_memcpy_htod() / _dtoh() : synchronous copies.
 *  @return ENVLOG_OK or ENVLOG_UNAVAILABLE (the driver's message). */
envlog_err envlog_cuda_memcpy_htod(envlog_cuda *c, envlog_cuda_dptr dst,
                                   const void *src, size_t n);
envlog_err envlog_cuda_memcpy_dtoh(envlog_cuda *c, void *dst, envlog_cuda_dptr src,
                                   size_t n);

/* ------------------------------------------------------------------- timing */

/* A timing backend: start() before a candidate runs on `s`, stop() after,
 * giving the elapsed nanoseconds.  Tests inject their own clock this way. */
typedef struct envlog_cuda_timer {
    const char *name; /* recorded in the tune's policy name */
    envlog_err (*start)(void *ctx, envlog_cuda_stream *s);
    envlog_err (*stop)(void *ctx, envlog_cuda_stream *s, double *elapsed_ns);
    void *ctx;
} envlog_cuda_timer;

/*! envlog_cuda_timer_cpu() : "cpu-clock": CLOCK_MONOTONIC around the run (on
 *  a device stream, after waiting for it). */
const envlog_cuda_timer *envlog_cuda_timer_cpu(void);

/*! envlog_cuda_timer_events() : "cuda-events": two CUDA events recorded on a
 *  device stream, then cuEventElapsedTime.  Its stop() fails on a host
 *  stream.  Safe for one measurement at a time per stream. */
const envlog_cuda_timer *envlog_cuda_timer_events(void);

/* -------------------------------------------------------------------- tuner */

/*
 * The policy "adaptive-median" (its name and every parameter below are
 * recorded with each tune):
 *  - Candidates run in list order.  Each runs `warmup` times unmeasured, then
 *    is sampled (one run = one sample) at least `min_samples` and at most
 *    `max_samples` times.
 *  - After each sample from `min_samples` on, a candidate stops early when it
 *    has converged: stddev / sqrt(n) <= rel_tol * median; or when it is
 *    dropped: its median > drop_factor * the best median so far of the
 *    candidates before it.  A failed run ends the candidate with an error.
 *  - Score: the median of the samples; the lowest wins, ties to the lower
 *    index.  margin = runner-up median / winner median - 1 (0 with one
 *    measured candidate).  within_noise: runner-up median - winner median <=
 *    noise_z * sqrt(sd_w^2 / n_w + sd_r^2 / n_r) (a two-sample z-test).
 *  - A tune with no measured candidate has no winner, is not stored and is
 *    counted as failed.
 */
typedef struct envlog_cuda_policy {
    unsigned warmup;      /* default 1 */
    unsigned min_samples; /* default 5 */
    unsigned max_samples; /* default 50 */
    double drop_factor;   /* default 2.0; 0 never drops */
    double rel_tol;       /* default 0.01 */
    double noise_z;       /* default 2.0 */
} envlog_cuda_policy;

/*! envlog_cuda_policy_init() : fills `p` with the defaults above. */
void envlog_cuda_policy_init(envlog_cuda_policy *p);

/* Runs candidate `index` once on `s`: launches through envlog_cuda_launch()
 * or envlog_cuda_host_launch() on `s`, so that the modes apply.  Returns
 * ENVLOG_OK, or any other code when the candidate failed (returning what
 * the failed envlog call returned is simplest): that candidate stops, its
 * trial takes envlog_errmsg() as its error when the last envlog call failed
 * (else the code), and the tune goes on with the next candidate. */
typedef envlog_err (*envlog_cuda_run_fn)(void *ctx, envlog_cuda_stream *s, size_t index);

typedef struct envlog_cuda_tune_req {
    const char *key;                  /* the tune key, e.g. "matmul/m=128" */
    const char *ns;                   /* NULL: envlog_cuda_tune_ns() */
    const char *const *candidates;    /* their names give the checksum */
    size_t n_candidates;
    envlog_cuda_run_fn run;
    void *ctx;
    envlog_cuda_stream *stream;       /* where candidates run */
    const envlog_cuda_timer *timer;   /* NULL: events on a device stream,
                                         the CPU clock on a host stream */
    const envlog_cuda_policy *policy; /* NULL: the defaults */
} envlog_cuda_tune_req;

typedef struct envlog_cuda_tune_result {
    int64_t winner;       /* index into candidates; -1 for none */
    bool hit;             /* the state had a winner: nothing ran */
    bool measured;        /* candidates were measured */
    bool stored;          /* the pick was recorded as stored */
    double margin;
    bool within_noise;
    size_t n_trials;
    uint64_t wall_ns;
    bool recorded;        /* a tune record was accepted */
    envlog_stamp stamp;   /* its stamp */
} envlog_cuda_tune_result;

/*! envlog_cuda_tune_ns() : the default namespace of a tune on a stream of
 *  `kind`: "tune/<runtime>/<runtime version>/<fingerprint>", the device's
 *  fingerprint for a device stream, the CPU's for a host stream.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE (a device stream, no device);
 *  ENVLOG_TOO_BIG. */
envlog_err envlog_cuda_tune_ns(envlog_cuda *c, envlog_cuda_stream_kind kind,
                               char *out, size_t size);

/*! envlog_cuda_tune() : picks a candidate for `r->key`.  The state is asked
 *  first (envlog_state_winner on ns, key and the checksum of the names): a
 *  hit returns the standing winner and records nothing.  A miss with one
 *  candidate answers it without measuring (under COMPILE_ONLY, after running
 *  it once to queue its kernels): an unmeasured pick, short_circuit, never
 *  stored, counted as single.  Under COMPILE_ONLY
 *  a miss runs each candidate once on the discarding stream (which queues
 *  their kernels, each compile record later naming this tune) and records
 *  an unmeasured pick of candidate 0, never stored.  Otherwise a miss
 *  compiles the queue, measures the candidates per the policy with `s` in
 *  measurement (executing), and records the tune: every trial in the order
 *  it ran, the policy and parameters, the winner, margin and noise flag,
 *  stored when a candidate was measured.
 *  @return ENVLOG_OK and `*out` (a failed tune is ENVLOG_OK with winner -1);
 *  ENVLOG_INVALID_ARG; the timer's and the session's errors. */
envlog_err envlog_cuda_tune(envlog_cuda *c, const envlog_cuda_tune_req *r,
                            envlog_cuda_tune_result *out);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* ENVLOG_CUDA_H */
