/* SPDX-License-Identifier: MIT */
/*
 * timing.c - the tuner's timing backends: the CPU clock and CUDA events.
 *
 * A backend is a start/stop pair around one run of a candidate.  GPU work is
 * asynchronous, so a host clock around a launch measures the launch, not the
 * kernel: CUDA events recorded on the stream time what the device did.  CPU
 * candidates have only the host clock.  Tests pass a timer of their own.
 */
#include "cuda_int.h"

typedef struct cpu_clock {
    uint64_t t0;
} cpu_clock;

static _Thread_local cpu_clock cpu_state;

static envlog_err cpu_start(void *ctx, envlog_cuda_stream *s)
{
    (void)ctx;
    envlog_err e = envlog_cuda_stream_sync(s);
    cpu_state.t0 = envlog_cuda__now_ns();
    return e;
}

static envlog_err cpu_stop(void *ctx, envlog_cuda_stream *s, double *elapsed_ns)
{
    (void)ctx;
    envlog_err e = envlog_cuda_stream_sync(s);
    *elapsed_ns = (double)(envlog_cuda__now_ns() - cpu_state.t0);
    return e;
}

static const envlog_cuda_timer cpu_timer = {"cpu-clock", cpu_start, cpu_stop, NULL};

const envlog_cuda_timer *envlog_cuda_timer_cpu(void)
{
    return &cpu_timer;
}

static envlog_err events_start(void *ctx, envlog_cuda_stream *s)
{
    (void)ctx;
    if (s->kind != ENVLOG_CUDA_STREAM_DEVICE)
        return envlog__fail(ENVLOG_INVALID_ARG, "CUDA events time a device stream only");
    const envlog_cuda_drv *d;
    envlog_err e = envlog_cuda__drv(&d);
    if (e)
        return e;
    int r = d->CtxSetCurrent(s->c->cu_ctx);
    if (!r && !s->ev_start)
        r = d->EventCreate(&s->ev_start, ENVLOG_CU_EVENT_DEFAULT);
    if (!r && !s->ev_stop)
        r = d->EventCreate(&s->ev_stop, ENVLOG_CU_EVENT_DEFAULT);
    if (!r)
        r = d->EventRecord(s->ev_start, s->cu);
    return r ? envlog_cuda__drv_fail(r, "recording a start event") : ENVLOG_OK;
}

static envlog_err events_stop(void *ctx, envlog_cuda_stream *s, double *elapsed_ns)
{
    (void)ctx;
    if (s->kind != ENVLOG_CUDA_STREAM_DEVICE || !s->ev_start)
        return envlog__fail(ENVLOG_WRONG_STATE, "CUDA events: stop without a start");
    const envlog_cuda_drv *d;
    envlog_err e = envlog_cuda__drv(&d);
    if (e)
        return e;
    float ms = 0;
    int r = d->CtxSetCurrent(s->c->cu_ctx);
    if (!r)
        r = d->EventRecord(s->ev_stop, s->cu);
    if (!r)
        r = d->EventSynchronize(s->ev_stop);
    if (!r)
        r = d->EventElapsedTime(&ms, s->ev_start, s->ev_stop);
    if (r)
        return envlog_cuda__drv_fail(r, "timing with CUDA events");
    *elapsed_ns = (double)ms * 1e6;
    return ENVLOG_OK;
}

static const envlog_cuda_timer events_timer = {"cuda-events", events_start, events_stop,
                                               NULL};

const envlog_cuda_timer *envlog_cuda_timer_events(void)
{
    return &events_timer;
}
