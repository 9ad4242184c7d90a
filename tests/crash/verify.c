/* SPDX-License-Identifier: MIT */
/*
 * verify.c - the checks after a crash, shared by the kill -9 loop and the
 * concurrency run: every record replay hands out is one that was recorded,
 * field for field; every acknowledged record that envlog promised is there;
 * damage other than a torn tail is counted as a failure.  Public API only.
 */
#include "verify.h"

#include <stdarg.h>

void crash_acks_add(crash_acks *s, const crash_ack *a)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->a = realloc(s->a, s->cap * sizeof *s->a);
        if (!s->a)
            abort();
    }
    s->a[s->n++] = *a;
}

void crash_acks_free(crash_acks *s)
{
    free(s->a);
    memset(s, 0, sizeof *s);
}

typedef struct seen {
    uint8_t session[16];
    uint64_t seq;
    uint64_t hash;
} seen;

typedef struct vctx {
    bool big;
    seen *s;
    size_t n, cap;
    crash_verdict *v;
    int problems;
} vctx;

static void problem(vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(vctx *c, const char *fmt, ...)
{
    if (c->problems++ < 20) {
        va_list ap;
        va_start(ap, fmt);
        fputs("crash check: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

static void on_damage(void *ctx, const envlog_damage *d, bool torn)
{
    vctx *c = ctx;
    char id[33];
    envlog_id_format(&d->session, id);
    if (torn) {
        c->v->torn++;
        return;
    }
    c->v->corrupt++;
    if (!c->v->corrupt_allowed)
        problem(c, "damage that is not a torn tail: session %s segment %u offset %llu: %s",
                id, d->segment, (unsigned long long)d->offset, d->reason);
}

static envlog_err on_record(void *ctx, const envlog_replay_rec *r)
{
    vctx *c = ctx;
    const envlog_record *rec = r->rec;
    c->v->records++;
    uint64_t gseed, gn;
    int ok = crash_check_record(rec, c->big, &gseed, &gn);
    if (ok < 0)
        return ENVLOG_OK;
    char id[33];
    envlog_id_format(&rec->stamp.session, id);
    if (!ok) {
        c->v->bad_records++;
        problem(c, "record %s:%llu (%s %s) differs from what was recorded", id,
                (unsigned long long)rec->stamp.seq, envlog_kind_name(rec->kind),
                crash_ident(rec) ? crash_ident(rec) : "?");
        return ENVLOG_OK;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4096;
        c->s = realloc(c->s, c->cap * sizeof *c->s);
        if (!c->s)
            abort();
    }
    seen *s = &c->s[c->n++];
    memcpy(s->session, rec->stamp.session.b, 16);
    s->seq = rec->stamp.seq;
    crash_rec want;
    int level = 0;
    uint64_t a, b;
    crash_parse(crash_ident(rec), &a, &b, &level);
    crash_make(&want, gseed, gn, level, c->big);
    s->hash = crash_hash_made(&want, level);
    crash_rec_free(&want);
    return ENVLOG_OK;
}

/* Records and acknowledgements sort by session, then seq. */
static int stamp_cmp(const uint8_t *sa, uint64_t qa, const uint8_t *sb, uint64_t qb)
{
    int k = memcmp(sa, sb, 16);
    return k ? k : qa < qb ? -1 : qa > qb;
}

static int seen_cmp(const void *x, const void *y)
{
    const seen *a = x, *b = y;
    return stamp_cmp(a->session, a->seq, b->session, b->seq);
}

static int ack_cmp(const void *x, const void *y)
{
    const crash_ack *a = x, *b = y;
    return stamp_cmp(a->session, a->seq, b->session, b->seq);
}

int crash_verify_env(const char *dir, crash_acks *acks, bool big, crash_verdict *v)
{
    vctx c = {.big = big, .v = v};
    bool allowed = v->corrupt_allowed;
    memset(v, 0, sizeof *v);
    v->corrupt_allowed = allowed;
    envlog_env *env;
    envlog_err e = envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env);
    if (e == ENVLOG_NOT_FOUND && acks->n == 0)
        return 0; /* killed before the environment existed */
    if (e) {
        problem(&c, "opening %s: %s", dir, envlog_errmsg());
        return c.problems;
    }
    envlog_replay_opts o = {.on_damage = on_damage, .ctx = &c};
    e = envlog_replay_each(env, &o, on_record, &c);
    if (e)
        problem(&c, "replay of %s: %s (%s)", dir, envlog_errmsg(), envlog_strerror(e));
    envlog_env_close(env);
    if (c.n)
        qsort(c.s, c.n, sizeof *c.s, seen_cmp);
    /* Records held in memory count as promised once a later record of
     * their session was acknowledged on disk: that one flushed them. */
    if (acks->n)
        qsort(acks->a, acks->n, sizeof *acks->a, ack_cmp);
    bool later_on_disk = false;
    for (size_t i = acks->n; i-- > 0;) {
        const crash_ack *a = &acks->a[i];
        if (i + 1 < acks->n && memcmp(acks->a[i + 1].session, a->session, 16))
            later_on_disk = false;
        later_on_disk |= a->on_disk;
        if (!later_on_disk)
            continue;
        v->promised++;
        seen key;
        memcpy(key.session, a->session, 16);
        key.seq = a->seq;
        seen *hit = c.n ? bsearch(&key, c.s, c.n, sizeof *c.s, seen_cmp) : NULL;
        char id[33];
        envlog_id128 sid;
        memcpy(sid.b, a->session, 16);
        envlog_id_format(&sid, id);
        if (!hit) {
            v->missing++;
            problem(&c, "acknowledged record %s:%llu (%s s%llu-n%llu) is missing", id,
                    (unsigned long long)a->seq, envlog_kind_name((envlog_kind)a->kind),
                    (unsigned long long)a->seed, (unsigned long long)a->n);
        } else if (hit->hash != a->hash) {
            v->missing++;
            problem(&c, "record %s:%llu is not the one acknowledged", id,
                    (unsigned long long)a->seq);
        }
    }
    free(c.s);
    return c.problems;
}
