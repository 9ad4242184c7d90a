/* SPDX-License-Identifier: MIT */
/*
 * submit.c - the path every record of a session takes, and the calls that
 * record each kind.
 *
 * A record is checked by the rules every reader applies, stamped and
 * encoded under the session's mutex, then held (an OBSERVED record before
 * the first CHANGED one, or behind an open span), or written; a CHANGED
 * record first takes the session to disk.  Whatever it was accepted as,
 * the same record goes to the hook and the live state.
 */
#include "session_int.h"

envlog_err envlog_session_submit(envlog_session *s, envlog_kind kind, const void *body,
                                 envlog_effect effect, const envlog_span *sp,
                                 envlog_stamp *stamp)
{
    if (!s)
        return envlog__fail(ENVLOG_INVALID_ARG, "no session");
    if (effect == ENVLOG_BUILT_IN)
        effect = envlog_effect_of(kind, body);
    /* The rules every reader applies, at every level (OFF included: the
     * live state folds what is accepted here). */
    const char *why = envlog_record_problem(kind, effect, body, ENVLOG_TRIALS_OF_BODY);
    if (why)
        return envlog__fail(ENVLOG_INVALID_ARG, "%s record: %s", envlog_kind_name(kind), why);
    envlog_pid_watch();
    pthread_mutex_lock(&s->mu);
    envlog_err e = envlog_pid_now() == s->pid ? ENVLOG_OK : envlog_session_fork_check(s);
    if (e)
        goto out;
    envlog_stamp st = {s->id, s->next_seq, envlog_clock_mono_ns() - s->start_mono};
    size_t at = SIZE_MAX;
    bool fresh = true; /* it takes the next seq */
    if (sp && (s->level == ENVLOG_LEVEL_OFF || sp->seq_ <= s->dropped ||
               (at = envlog_held_find(s, sp->seq_)) != SIZE_MAX)) {
        st.seq = sp->seq_;
        st.offset_ns = sp->open_ns_;
        fresh = false;
    }
    bool encoded = false;
    if (s->level == ENVLOG_LEVEL_OFF || (!fresh && at == SIZE_MAX))
        goto accepted; /* OFF, or a span dropped with its opening */
    if ((e = envlog_event_encode(&s->scratch, kind, &st, effect, s->level, body)))
        goto out;
    encoded = true;
    if (s->scratch.len > ENVLOG_RECORD_MAX) {
        e = envlog__fail(ENVLOG_TOO_BIG, "a %s record of %zu bytes is over the %u limit",
                         envlog_kind_name(kind), s->scratch.len, ENVLOG_RECORD_MAX);
        goto out;
    }
    if (!fresh) {
        if ((e = envlog_held_replace(s, at, s->scratch.p, s->scratch.len)))
            goto out;
        if (!s->on_disk)
            envlog_held_trim(s, 0);
        else if ((e = envlog_session_write_held(s, false)))
            goto out;
        goto accepted;
    }
    if (!s->on_disk) {
        if (effect == ENVLOG_OBSERVED) {
            if ((e = envlog_held_hold(s, s->scratch.p, s->scratch.len, st.seq, 0)))
                goto out;
            goto accepted;
        }
        if ((e = envlog_session_go_disk(s)))
            goto out;
    } else if (s->held_count) {
        /* Behind an open span: an OBSERVED record waits with it, within the
         * budget; a CHANGED one writes what waits, openings included. */
        if (effect == ENVLOG_OBSERVED) {
            if ((e = envlog_held_push(s, s->scratch.p, s->scratch.len, st.seq, 0)))
                goto out;
            s->next_seq++;
            s->st.accepted++;
            if ((e = envlog_session_write_held(s, false)))
                goto out; /* it stays held, for the next record to write */
            goto stamped;
        }
        if ((e = envlog_session_write_held(s, true)))
            goto out;
    }
    if ((e = envlog_session_put(s, s->scratch.p, s->scratch.len, st.seq)))
        goto out;
accepted:
    if (fresh)
        s->next_seq++;
    s->st.accepted++;
stamped:
    envlog_session_hand_out(s, kind, &st, effect, body, encoded ? &s->scratch : NULL);
    if (stamp)
        *stamp = st;
out:
    pthread_mutex_unlock(&s->mu);
    return e;
}

static envlog_err record_tune(envlog_session *s, const envlog_tune *t, envlog_stamp *stamp)
{
    if (!t || !t->ns || !t->key)
        return envlog__fail(ENVLOG_INVALID_ARG, "a tune needs a namespace and a key");
    if (t->winner_ns == 0 && t->winner >= 0) {
        /* The winner's cost, so the fold and diff need not walk the trials. */
        envlog_tune c = *t;
        for (size_t i = 0; i < t->n_trials; i++)
            if (t->trials && (int64_t)t->trials[i].index == t->winner && !t->trials[i].error)
                c.winner_ns = t->trials[i].median_ns;
        return envlog_session_submit(s, ENVLOG_KIND_TUNE, &c, ENVLOG_BUILT_IN, NULL, stamp);
    }
    return envlog_session_submit(s, ENVLOG_KIND_TUNE, t, ENVLOG_BUILT_IN, NULL, stamp);
}

static envlog_err record_compile(envlog_session *s, const envlog_compile *c,
                                 envlog_stamp *stamp)
{
    if (!c || !c->ns || !c->name)
        return envlog__fail(ENVLOG_INVALID_ARG, "a compile needs a namespace and a name");
    return envlog_session_submit(s, ENVLOG_KIND_COMPILE, c, ENVLOG_BUILT_IN, NULL, stamp);
}

/* An imported value replaces no local one and yields to the next
 * (envlog_replay_each's rules): a caller that could mark its own records
 * imported could pass its values off as a bundle's.  Only a bundle import
 * writes them, through envlog_record_imported(). */
static envlog_err imported_refused(const char *what, const char *name)
{
    return envlog__fail(ENVLOG_INVALID_ARG, "%s %s: imported is set, and only a bundle "
                        "import records imported values", what, name ? name : "?");
}

envlog_err envlog_record_tune(envlog_session *s, const envlog_tune *t,
                              envlog_stamp *stamp)
{
    return t && t->imported ? imported_refused("tune", t->key) : record_tune(s, t, stamp);
}

envlog_err envlog_record_compile(envlog_session *s, const envlog_compile *c,
                                 envlog_stamp *stamp)
{
    return c && c->imported ? imported_refused("compile of", c->name)
                            : record_compile(s, c, stamp);
}

envlog_err envlog_record_imported(envlog_session *s, envlog_kind kind, const void *body,
                                  envlog_stamp *stamp)
{
    if (kind == ENVLOG_KIND_TUNE) {
        envlog_tune t = *(const envlog_tune *)body;
        t.imported = true;
        return record_tune(s, &t, stamp);
    }
    if (kind == ENVLOG_KIND_COMPILE) {
        envlog_compile c = *(const envlog_compile *)body;
        c.imported = true;
        return record_compile(s, &c, stamp);
    }
    return envlog__fail(ENVLOG_INVALID_ARG, "only tunes and compiles are imported");
}

envlog_err envlog_record_mark(envlog_session *s, const char *label,
                              envlog_stamp *stamp)
{
    if (!label)
        return envlog__fail(ENVLOG_INVALID_ARG, "a mark needs a label");
    envlog_mark m = {label, envlog_clock_unix_ns()};
    return envlog_session_submit(s, ENVLOG_KIND_MARK, &m, ENVLOG_BUILT_IN, NULL, stamp);
}

envlog_err envlog_record_import(envlog_session *s, const envlog_import *im,
                                envlog_stamp *stamp)
{
    if (!im || !im->bundle)
        return envlog__fail(ENVLOG_INVALID_ARG, "an import needs a bundle name");
    return envlog_session_submit(s, ENVLOG_KIND_IMPORT, im, ENVLOG_BUILT_IN, NULL, stamp);
}

envlog_err envlog_record_forget(envlog_session *s, const envlog_forget *f,
                                envlog_stamp *stamp)
{
    if (f && f->under) {
        const char *why = envlog_ns_prefix_problem(f->under);
        if (why)
            return envlog__fail(ENVLOG_INVALID_ARG, "forget under '%s': %s", f->under, why);
        if (f->ns || f->key)
            return envlog__fail(ENVLOG_INVALID_ARG,
                                "a forget under a prefix names no namespace and no key");
    } else if (!f || !f->ns || !f->key) {
        return envlog__fail(ENVLOG_INVALID_ARG, "a forget needs a namespace and a key");
    }
    return envlog_session_submit(s, ENVLOG_KIND_FORGET, f, ENVLOG_BUILT_IN, NULL, stamp);
}

envlog_err envlog_record_user(envlog_session *s, const char *kind,
                              const void *cbor, size_t size,
                              envlog_effect effect, envlog_stamp *stamp)
{
    if (!kind || !*kind)
        return envlog__fail(ENVLOG_INVALID_ARG, "a user record needs a kind name");
    if (!cbor || !size)
        return envlog__fail(ENVLOG_INVALID_ARG, "a user record needs a CBOR body");
    if (effect != ENVLOG_OBSERVED && effect != ENVLOG_CHANGED)
        return envlog__fail(ENVLOG_INVALID_ARG, "unknown effect %d", (int)effect);
    envlog_user u = {kind, {cbor, size}};
    return envlog_session_submit(s, ENVLOG_KIND_USER, &u, effect, NULL, stamp);
}
