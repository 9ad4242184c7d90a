/* SPDX-License-Identifier: MIT */
/*
 * check_cuda.h - what the files of the cuda suite share: an environment
 * with a session and a runtime, the records read back through replay, an
 * injected clock for the tuner, and the skip messages for what this machine
 * lacks (NVRTC, a GPU).
 */
#ifndef ENVLOG_CHECK_CUDA_H
#define ENVLOG_CHECK_CUDA_H

#include "cuda_int.h"
#include "demo_kernels.h"
#include "testutil.h"

/* True when NVRTC loads; otherwise prints why `test` is skipped. */
bool tc_nvrtc(const char *test);

/* An environment, one session in it and a runtime on that session. */
typedef struct tc_env {
    char *dir;
    envlog_env *env;
    envlog_session *s;
    envlog_cuda *c;
} tc_env;

/* Opens a fresh environment, a session at `level` and a runtime with `o`
 * (NULL: the defaults, without a device). */
void tc_open(tc_env *t, const char *tag, envlog_level level, const envlog_cuda_opts *o);
/* Begins a new session and runtime on the same environment. */
void tc_reopen(tc_env *t, envlog_level level, const envlog_cuda_opts *o);
/* Closes the runtime and ends the session (the environment stays open). */
void tc_end(tc_env *t);
/* tc_end(), then closes the environment and removes it. */
void tc_free(tc_env *t);
/* Session directories in the environment. */
size_t tc_sessions(tc_env *t);
/* Runtime options without a device; a `compiler_version` (may be NULL)
 * keys kernels without NVRTC. */
envlog_cuda_opts tc_no_device(const char *compiler_version);
/* A host stream of t's runtime (envlog_cuda_stream_close() it). */
envlog_cuda_stream *tc_host_stream(tc_env *t);

/* A record read back, the fields the tests look at copied out. */
typedef struct tc_rec {
    envlog_kind kind;
    envlog_effect effect;
    envlog_stamp stamp;
    char name[128];          /* compile: kernel; tune: key; span: name */
    /* compile */
    envlog_outcome outcome;
    bool has_binary, has_source, has_ir, has_tune;
    envlog_stamp tune;
    char log[512];
    /* tune */
    bool stored, within_noise, short_circuit;
    int64_t winner;
    double margin;
    size_t n_trials;
    uint32_t trial_index[16];
    uint64_t trial_samples[16];
    size_t trial_n_samples[16];
    bool trial_error[16];
    char first_error[160];   /* the first failed trial's error */
    char policy[96];
    size_t n_params;
    /* span */
    uint64_t open_ns, duration_ns;
    char attrs[256];         /* "k=v,k=v" */
    /* where it ran: compile and tune (start_ns, thread), span (thread) */
    bool has_start;
    uint64_t start_ns, thread, wall_ns;
    bool trial_has_start[16];
    uint64_t trial_start_ns[16], trial_wall_ns[16];
    bool span_open;          /* a span's opening (its close follows) */
} tc_rec;

typedef struct tc_recs {
    tc_rec *r;
    size_t n;
    size_t sources;          /* "envlog-cuda/source" records (not in r) */
} tc_recs;

/* Every record of the environment, in replay's total order (sessions and
 * framing records left out). */
void tc_collect(envlog_env *env, tc_recs *out);
void tc_recs_free(tc_recs *r);
/* How many records of `kind` (and, for compiles, `outcome` unless -1). */
size_t tc_count(const tc_recs *r, envlog_kind kind, int outcome);

/* An injected clock: candidate i's samples cycle through script[i]. */
typedef struct tc_clock {
    const double *script[8];
    size_t len[8];
    size_t pos[8];
    size_t cur;              /* set by the run function */
    unsigned runs[8];        /* runs per candidate, warmup included */
    envlog_cuda_stream_mode seen[8]; /* the stream's mode during each run */
    int fail_index;          /* a candidate whose runs fail, -1 for none,
                                TC_FAIL_ALL for every one */
    envlog_err fail_code;    /* returned by a failing run without a failed
                                envlog call (0: ENVLOG_BAD_DATA, with one) */
    envlog_cuda_timer timer;
} tc_clock;

#define TC_FAIL_ALL (-2)

/* A clock with no script; fill script/len, then pass &clk->timer. */
void tc_clock_init(tc_clock *clk);
/* A run function for a tc_clock: a host launch on the stream. */
envlog_err tc_clock_run(void *ctx, envlog_cuda_stream *s, size_t index);
/* Candidate i of `clk` takes ns[i] (static storage) on every run. */
void tc_clock_fixed(tc_clock *clk, const double *ns, size_t n);
/* A tune of `names` under `key` on stream `s`, run and timed by `clk`. */
envlog_cuda_tune_req tc_clock_req(tc_clock *clk, envlog_cuda_stream *s, const char *key,
                                  const char *const *names, size_t n);

/* The test cases of the other files of the suite, added to `s`. */
void tc_cuda_modes(Suite *s);
void tc_cuda_tuner(Suite *s);
void tc_cuda_settle(Suite *s);

#endif /* ENVLOG_CHECK_CUDA_H */
