/* SPDX-License-Identifier: MIT */
/*
 * held.c - a session's held records: what waits in memory, in seq order,
 * before the session's first CHANGED record, and behind a span still open,
 * whose seq comes before theirs (envlog(5), SPANS).
 *
 * Each entry is [u32 len][u64 seq][payload]; an open span's entry holds its
 * opening record, flagged in len, until the span closes and its full record
 * takes its place.  The budget (the pending_budget option) counts payload
 * bytes; before the disk, the oldest entries go over it, counted as
 * dropped.  Writing the entries out is the disk side's (sessdisk.c).
 */
#include "session_int.h"

#include <string.h>

uint32_t envlog_held_len(const envlog_session *s, size_t at)
{
    return envlog_get_le32(s->held.p + at) & ~ENVLOG_HELD_OPENING;
}

bool envlog_held_is_opening(const envlog_session *s, size_t at)
{
    return envlog_get_le32(s->held.p + at) & ENVLOG_HELD_OPENING;
}

uint64_t envlog_held_seq(const envlog_session *s, size_t at)
{
    uint64_t seq;
    memcpy(&seq, s->held.p + at + 4, 8);
    return seq;
}

void envlog_held_clear(envlog_session *s)
{
    s->held.len = s->held_head = s->held_bytes = 0;
    s->held_count = 0;
}

void envlog_held_pop(envlog_session *s)
{
    uint32_t len = envlog_held_len(s, s->held_head);
    s->held_head += ENVLOG_HELD_HDR + len;
    s->held_bytes -= len;
    s->held_count--;
    if (s->held_head == s->held.len)
        s->held.len = s->held_head = 0;
}

envlog_err envlog_held_push(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq,
                            uint32_t flag)
{
    if (s->held_head && s->held.cap - s->held.len < ENVLOG_HELD_HDR + n) {
        memmove(s->held.p, s->held.p + s->held_head, s->held.len - s->held_head);
        s->held.len -= s->held_head;
        s->held_head = 0;
    }
    envlog_err e = envlog_buf_reserve(&s->held, ENVLOG_HELD_HDR + n);
    if (e)
        return e;
    envlog_put_le32(s->held.p + s->held.len, (uint32_t)n | flag);
    memcpy(s->held.p + s->held.len + 4, &seq, 8);
    memcpy(s->held.p + s->held.len + ENVLOG_HELD_HDR, p, n);
    s->held.len += ENVLOG_HELD_HDR + n;
    s->held_bytes += n;
    s->held_count++;
    return ENVLOG_OK;
}

/* An open span's opening goes too: the span is then dropped when it
 * closes. */
void envlog_held_trim(envlog_session *s, size_t n)
{
    while (s->held_count && s->held_bytes + n > s->budget) {
        envlog_held_pop(s);
        s->dropped++;
    }
}

envlog_err envlog_held_hold(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq,
                            uint32_t flag)
{
    if (n > s->budget) {
        /* Oldest first: a record too big to hold drops everything held
         * before it too, so the dropped seqs stay one run after seq 0. */
        s->dropped += s->held_count + 1;
        envlog_held_clear(s);
        return ENVLOG_OK;
    }
    envlog_held_trim(s, n);
    return envlog_held_push(s, p, n, seq, flag);
}

size_t envlog_held_find(const envlog_session *s, uint64_t seq)
{
    for (size_t at = s->held_head; at < s->held.len;
         at += ENVLOG_HELD_HDR + envlog_held_len(s, at)) {
        uint64_t q = envlog_held_seq(s, at);
        if (q == seq)
            return at;
        if (q > seq)
            break;
    }
    return SIZE_MAX;
}

envlog_err envlog_held_replace(envlog_session *s, size_t at, const uint8_t *p, size_t n)
{
    uint32_t old = envlog_held_len(s, at);
    size_t tail = at + ENVLOG_HELD_HDR + old;
    if (n > old) {
        envlog_err e = envlog_buf_reserve(&s->held, n - old);
        if (e)
            return e;
    }
    memmove(s->held.p + at + ENVLOG_HELD_HDR + n, s->held.p + tail, s->held.len - tail);
    s->held.len = s->held.len - old + n;
    envlog_put_le32(s->held.p + at, (uint32_t)n);
    memcpy(s->held.p + at + ENVLOG_HELD_HDR, p, n);
    s->held_bytes = s->held_bytes - old + n;
    return ENVLOG_OK;
}

