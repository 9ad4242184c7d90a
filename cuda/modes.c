/* SPDX-License-Identifier: MIT */
/*
 * modes.c - process modes and their overrides, stream modes and theirs, and
 * the measurement that makes a stream execute.
 *
 * Two levels decide what a launch does (seeds/launch-modes.txt): the process
 * mode is the whole process's, since it governs state shared by every stream
 * (the compile queue, the tune cache, measurements that other work would
 * skew); a stream only knows whether its launches run.  The process mode sets
 * every stream's default; a measurement switches the stream it measures on
 * to EXECUTE while it measures, and the stream never knows why.  Process
 * overrides nest when they agree (mode and collector) and refuse when they
 * do not, so two parts of a program can never silently fight over state the
 * whole process shares; they may end in any order, the mode holding while
 * any is in force.  A stream is one caller's, so its overrides nest with the
 * newest deciding, each restoring what it found, as a scope guard does.
 */
#include "cuda_int.h"

envlog_cuda_mode envlog_cuda_mode_get(envlog_cuda *c)
{
    return (envlog_cuda_mode)atomic_load_explicit(&c->mode_now, memory_order_acquire);
}

envlog_err envlog_cuda_override_begin(envlog_cuda *c, envlog_cuda_mode mode,
                                      envlog_cuda_stats *collector,
                                      envlog_cuda_override *ov)
{
    if (!c || !ov || (unsigned)mode > ENVLOG_CUDA_COMPILE_AND_AUTOTUNE)
        return envlog__fail(ENVLOG_INVALID_ARG, "a bad process mode override");
    pthread_mutex_lock(&c->mu);
    if (c->top && c->top->mode_ != (int)mode) {
        envlog_cuda_mode have = (envlog_cuda_mode)c->top->mode_;
        pthread_mutex_unlock(&c->mu);
        return envlog__fail(ENVLOG_WRONG_STATE,
                            "process mode override to %s refused: an override to %s is "
                            "in force (overrides nest only with the same mode)",
                            envlog_cuda_mode_name(mode), envlog_cuda_mode_name(have));
    }
    if (c->top && collector && collector != c->top->stats_) {
        pthread_mutex_unlock(&c->mu);
        return envlog__fail(ENVLOG_WRONG_STATE,
                            "process mode override to %s refused: the override in force "
                            "counts into %s statistics collector (overrides nest only "
                            "with the same collector)", envlog_cuda_mode_name(mode),
                            c->top->stats_ ? "another" : "no");
    }
    ov->c_ = c;
    ov->up_ = c->top;
    ov->stats_ = collector ? collector : c->top ? c->top->stats_ : NULL;
    ov->mode_ = (int)mode;
    ov->live_ = 1;
    c->top = ov;
    if (ov->stats_) {
        envlog_cuda__stats_hold(ov->stats_);
        atomic_fetch_add(&c->n_collectors, 1);
    }
    atomic_store_explicit(&c->mode_now, (int)mode, memory_order_release);
    pthread_mutex_unlock(&c->mu);
    return ENVLOG_OK;
}

envlog_err envlog_cuda_override_end(envlog_cuda_override *ov)
{
    if (!ov || ov->live_ != 1 || !ov->c_)
        return envlog__fail(ENVLOG_WRONG_STATE, "this process mode override is not in force");
    envlog_cuda *c = ov->c_;
    pthread_mutex_lock(&c->mu);
    envlog_cuda_override **at = &c->top;
    while (*at && *at != ov)
        at = &(*at)->up_;
    if (!*at) {
        pthread_mutex_unlock(&c->mu);
        return envlog__fail(ENVLOG_WRONG_STATE, "this process mode override is not in force");
    }
    *at = ov->up_;
    ov->live_ = 0;
    if (ov->stats_)
        atomic_fetch_sub(&c->n_collectors, 1);
    atomic_store_explicit(&c->mode_now, c->top ? c->top->mode_ : (int)c->base,
                          memory_order_release);
    pthread_mutex_unlock(&c->mu);
    envlog_cuda__stats_release(ov->stats_);
    return ENVLOG_OK;
}

envlog_err envlog_cuda_stream_open(envlog_cuda *c, envlog_cuda_stream_kind kind,
                                   envlog_cuda_stream **out)
{
    if (!c || !out || (kind != ENVLOG_CUDA_STREAM_HOST && kind != ENVLOG_CUDA_STREAM_DEVICE))
        return envlog__fail(ENVLOG_INVALID_ARG, "a bad stream");
    if (kind == ENVLOG_CUDA_STREAM_DEVICE && !c->has_device)
        return envlog__fail(ENVLOG_UNAVAILABLE,
                            "a device stream needs a GPU; this CUDA runtime has none");
    envlog_cuda_stream *s = envlog_calloc(1, sizeof *s);
    if (!s)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a stream");
    s->c = c;
    s->kind = kind;
    s->forced = -1;
    if (kind == ENVLOG_CUDA_STREAM_DEVICE) {
        const envlog_cuda_drv *d;
        envlog_err e = envlog_cuda__drv(&d);
        int r = 0;
        if (!e && !(r = d->CtxSetCurrent(c->cu_ctx)))
            r = d->StreamCreate(&s->cu, ENVLOG_CU_STREAM_DEFAULT);
        if (e || r) {
            envlog_free(s);
            return e ? e : envlog_cuda__drv_fail(r, "cuStreamCreate");
        }
    }
    *out = s;
    return ENVLOG_OK;
}

void envlog_cuda_stream_close(envlog_cuda_stream *s)
{
    if (!s)
        return;
    if (s->kind == ENVLOG_CUDA_STREAM_DEVICE) {
        const envlog_cuda_drv *d;
        if (envlog_cuda__drv(&d) == ENVLOG_OK) {
            d->CtxSetCurrent(s->c->cu_ctx);
            if (s->cu) {
                d->StreamSynchronize(s->cu);
                d->StreamDestroy(s->cu);
            }
            if (s->ev_start)
                d->EventDestroy(s->ev_start);
            if (s->ev_stop)
                d->EventDestroy(s->ev_stop);
        }
    }
    envlog_free(s);
}

envlog_cuda_stream_mode envlog_cuda_stream_mode_get(const envlog_cuda_stream *s)
{
    if (s->measuring > 0)
        return ENVLOG_CUDA_STREAM_EXECUTE;
    if (s->forced >= 0)
        return (envlog_cuda_stream_mode)s->forced;
    return envlog_cuda_mode_get(s->c) == ENVLOG_CUDA_EXECUTE ? ENVLOG_CUDA_STREAM_EXECUTE
                                                              : ENVLOG_CUDA_STREAM_DISCARD;
}

envlog_err envlog_cuda_stream_override_begin(envlog_cuda_stream *s,
                                             envlog_cuda_stream_mode mode,
                                             envlog_cuda_stream_override *ov)
{
    if (!s || !ov || (mode != ENVLOG_CUDA_STREAM_EXECUTE && mode != ENVLOG_CUDA_STREAM_DISCARD))
        return envlog__fail(ENVLOG_INVALID_ARG, "a bad stream mode override");
    ov->s_ = s;
    ov->up_ = NULL;
    ov->mode_ = (int)mode;
    ov->prev_ = s->forced;
    ov->live_ = 1;
    s->forced = (int)mode;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_stream_override_end(envlog_cuda_stream_override *ov)
{
    if (!ov || ov->live_ != 1 || !ov->s_)
        return envlog__fail(ENVLOG_WRONG_STATE, "this stream mode override is not in force");
    ov->s_->forced = ov->prev_;
    ov->live_ = 0;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_measure_begin(envlog_cuda_stream *s)
{
    if (!s)
        return envlog__fail(ENVLOG_INVALID_ARG, "no stream to measure on");
    s->measuring++;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_measure_end(envlog_cuda_stream *s)
{
    if (!s || s->measuring <= 0)
        return envlog__fail(ENVLOG_WRONG_STATE, "no measurement in progress on this stream");
    s->measuring--;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_stream_sync(envlog_cuda_stream *s)
{
    if (!s)
        return envlog__fail(ENVLOG_INVALID_ARG, "no stream");
    if (s->kind != ENVLOG_CUDA_STREAM_DEVICE)
        return ENVLOG_OK;
    const envlog_cuda_drv *d;
    envlog_err e = envlog_cuda__drv(&d);
    if (e)
        return e;
    int r = d->CtxSetCurrent(s->c->cu_ctx);
    if (!r)
        r = d->StreamSynchronize(s->cu);
    return r ? envlog_cuda__drv_fail(r, "cuStreamSynchronize") : ENVLOG_OK;
}
