/* SPDX-License-Identifier: MIT */
/*
 * span.c - spans: a named stretch of a thread's work inside a session, with
 * its parent the span the thread has open in the same session.
 *
 * A span is stamped when it opens (envlog(5), SPANS): the seq it takes
 * orders it before everything recorded while it is open.  Its opening
 * record waits in its place among the held records until the span closes
 * and its full record takes that place, or is written as it is when what
 * follows cannot wait.
 */
#include "session_int.h"

#include <unistd.h>

static _Thread_local envlog_span *span_top;

envlog_err envlog_span_open(envlog_session *s, const char *name, envlog_span *sp)
{
    if (!s || !name || !sp)
        return envlog__fail(ENVLOG_INVALID_ARG, "a span needs a session and a name");
    sp->parent_ = 0;
    for (envlog_span *p = span_top; p; p = p->up_)
        if (p->session_ == s) {
            sp->parent_ = p->id_;
            break;
        }
    pthread_mutex_lock(&s->mu);
    envlog_err e = envlog_session_fork_check(s);
    if (!e) {
        sp->id_ = s->next_span++;
        sp->open_ns_ = envlog_clock_mono_ns() - s->start_mono;
        sp->pid_ = (uint64_t)s->pid;
        sp->seq_ = s->next_seq;
    }
    if (!e && s->level != ENVLOG_LEVEL_OFF) {
        envlog_span_rec r = {name, sp->id_, sp->parent_, sp->open_ns_, 0, NULL, 0,
                             true, envlog_thread_id(), true};
        envlog_stamp st = {s->id, sp->seq_, sp->open_ns_};
        e = envlog_event_encode(&s->scratch, ENVLOG_KIND_SPAN, &st, ENVLOG_OBSERVED,
                                s->level, &r);
        if (!e)
            e = (s->on_disk ? envlog_held_push : envlog_held_hold)(
                s, s->scratch.p, s->scratch.len, sp->seq_, ENVLOG_HELD_OPENING);
        if (!e)
            s->next_seq++;
        if (!e && s->on_disk)
            e = envlog_session_write_held(s, false); /* over budget: written at once */
    } else if (!e) {
        s->next_seq++;
    }
    pthread_mutex_unlock(&s->mu);
    if (e)
        return e;
    sp->session_ = s;
    sp->name_ = name;
    sp->up_ = span_top;
    span_top = sp;
    return ENVLOG_OK;
}

envlog_err envlog_span_close(envlog_span *sp, const envlog_attr *attrs, size_t n,
                             envlog_stamp *stamp)
{
    if (!sp || !sp->session_)
        return envlog__fail(ENVLOG_INVALID_ARG, "span is not open");
    for (envlog_span **pp = &span_top; *pp; pp = &(*pp)->up_)
        if (*pp == sp) {
            *pp = sp->up_;
            break;
        }
    envlog_session *s = sp->session_;
    sp->session_ = NULL;
    if (sp->pid_ != (uint64_t)getpid())
        return envlog__fail(ENVLOG_WRONG_STATE,
                            "span %s was opened by the parent process", sp->name_);
    if (n && !attrs)
        return envlog__fail(ENVLOG_INVALID_ARG, "span attributes missing");
    for (size_t i = 0; i < n; i++)
        if (!attrs[i].key || !attrs[i].value)
            return envlog__fail(ENVLOG_INVALID_ARG, "span attribute %zu is NULL", i);
    uint64_t now = envlog_clock_mono_ns() - s->start_mono;
    envlog_span_rec r = {sp->name_, sp->id_, sp->parent_, sp->open_ns_,
                         now - sp->open_ns_, attrs, n, true, envlog_thread_id(), false};
    return envlog_session_submit(s, ENVLOG_KIND_SPAN, &r, ENVLOG_BUILT_IN, sp, stamp);
}
