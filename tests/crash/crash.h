/* SPDX-License-Identifier: MIT */
/*
 * crash.h - what the crash, power-loss and concurrency drivers share: a
 * generator that makes the same tune, compile or mark from (seed, n, level)
 * every time, and a hash of the fields of a record.
 *
 * A writer records generated records and reports each one whose call
 * returned (an "ack") through a pipe.  A checker regenerates every record it
 * reads back from the key or name it carries, so the hash of what was read
 * must equal the hash of what was recorded field for field: a record that
 * surfaces damaged, or altered in any field, is caught whether or not it was
 * acknowledged.  Public API only: the writers link nothing else.
 */
#ifndef ENVLOG_CRASH_H
#define ENVLOG_CRASH_H

#include "envlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- hashing */

typedef struct crash_h {
    uint64_t h;
} crash_h;

static inline void ch_bytes(crash_h *c, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = c->h ? c->h : 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    c->h = h;
}
static inline void ch_u64(crash_h *c, uint64_t v) { ch_bytes(c, &v, sizeof v); }
static inline void ch_f64(crash_h *c, double v) { ch_bytes(c, &v, sizeof v); }
static inline void ch_str(crash_h *c, const char *s)
{
    if (!s) {
        ch_u64(c, ~0ull);
        return;
    }
    size_t n = strlen(s);
    ch_u64(c, n);
    ch_bytes(c, s, n);
}
static inline void ch_blob(crash_h *c, envlog_bytes b)
{
    ch_u64(c, b.size);
    if (b.size)
        ch_bytes(c, b.data, b.size);
}

/* Every field the writer sets; full-only fields when `full`. */
static inline uint64_t crash_hash_tune(const envlog_tune *t, bool full)
{
    crash_h c = {0};
    ch_str(&c, t->ns);
    ch_str(&c, t->key);
    ch_u64(&c, t->checksum);
    ch_u64(&c, t->n_candidates);
    for (size_t i = 0; i < t->n_candidates; i++)
        ch_str(&c, t->candidates[i]);
    ch_u64(&c, t->n_trials);
    for (size_t i = 0; i < t->n_trials; i++) {
        const envlog_trial *r = &t->trials[i];
        ch_str(&c, r->name);
        ch_u64(&c, r->index);
        ch_u64(&c, r->samples);
        ch_f64(&c, r->min_ns);
        ch_f64(&c, r->median_ns);
        ch_f64(&c, r->mean_ns);
        ch_f64(&c, r->max_ns);
        ch_f64(&c, r->stddev_ns);
        ch_str(&c, r->error);
        if (full) {
            ch_u64(&c, r->n_sample_ns);
            for (size_t k = 0; k < r->n_sample_ns; k++)
                ch_f64(&c, r->sample_ns[k]);
        }
    }
    ch_str(&c, t->policy);
    ch_u64(&c, t->n_params);
    for (size_t i = 0; i < t->n_params; i++) {
        ch_str(&c, t->params[i].name);
        ch_f64(&c, t->params[i].value);
    }
    ch_u64(&c, (uint64_t)t->winner);
    ch_f64(&c, t->margin);
    ch_f64(&c, t->winner_ns);
    ch_u64(&c, t->within_noise);
    ch_u64(&c, t->short_circuit);
    ch_u64(&c, t->wall_ns);
    ch_u64(&c, t->stored);
    ch_u64(&c, t->imported);
    return c.h;
}

static inline uint64_t crash_hash_compile(const envlog_compile *k, bool full)
{
    crash_h c = {0};
    ch_str(&c, k->ns);
    ch_str(&c, k->name);
    ch_bytes(&c, k->kernel_key.b, 16);
    ch_bytes(&c, k->source_hash.b, 16);
    ch_str(&c, k->options);
    ch_str(&c, k->compiler_version);
    ch_str(&c, k->arch);
    ch_u64(&c, k->outcome);
    ch_u64(&c, k->duration_ns);
    ch_bytes(&c, k->binary_hash.b, 16);
    ch_u64(&c, k->binary_size);
    ch_blob(&c, k->binary);
    ch_str(&c, k->log);
    if (full) {
        ch_str(&c, k->source);
        ch_blob(&c, k->ir);
    }
    ch_u64(&c, k->has_tune);
    if (k->has_tune) {
        ch_bytes(&c, k->tune.session.b, 16);
        ch_u64(&c, k->tune.seq);
    }
    ch_u64(&c, k->imported);
    return c.h;
}

static inline uint64_t crash_hash_mark(const envlog_mark *m)
{
    crash_h c = {0};
    ch_str(&c, m->label);
    return c.h;
}

/* ----------------------------------------------------------- generator */

static inline uint64_t crash_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define CRASH_MAX_CANDS 6
#define CRASH_MAX_SAMPLES 8

/* One generated record and the storage it points into. */
typedef struct crash_rec {
    envlog_kind kind;
    envlog_tune tune;
    envlog_compile compile;
    envlog_mark mark;
    char ns[64], key[96], policy_buf[64];
    char *policy;          /* malloc'd: may be long */
    const char *cands[CRASH_MAX_CANDS];
    char cand_buf[CRASH_MAX_CANDS][16];
    envlog_trial trials[CRASH_MAX_CANDS];
    char err_buf[CRASH_MAX_CANDS][24];
    double samples[CRASH_MAX_CANDS][CRASH_MAX_SAMPLES];
    envlog_param params[3];
    char opts[64], log[96], source[128];
    uint8_t *binary;       /* malloc'd */
    uint8_t ir[48];
} crash_rec;

static inline void crash_rec_free(crash_rec *r)
{
    free(r->policy);
    free(r->binary);
    r->policy = NULL;
    r->binary = NULL;
}

/* Makes record `n` of writer `seed` at `level` (0-2) into `r` (freed with
 * crash_rec_free).  `big` allows the occasional record of hundreds of KiB
 * (several blocks, sometimes more than a small segment).  The key or name
 * says "s<seed>-n<n>-L<level>", which is how a checker finds it again. */
static inline void crash_make(crash_rec *r, uint64_t seed, uint64_t n, int level, bool big)
{
    memset(r, 0, sizeof *r);
    uint64_t s = seed * 0x100000001b3ull ^ n * 0x9e3779b97f4a7c15ull ^ (uint64_t)level;
    uint64_t x = crash_mix(&s);
    bool full = level == ENVLOG_LEVEL_FULL;
    /* One writer in four records mostly big records: a kill then often
     * lands inside one, which is how torn tails are made. */
    unsigned big_odds = !big ? 0 : seed % 4 == 0 ? 2 : 64;
    if (x % 16 == 0) {
        r->kind = ENVLOG_KIND_MARK;
        snprintf(r->key, sizeof r->key, "mark s%" PRIu64 "-n%" PRIu64 "-L%d", seed, n, level);
        r->mark.label = r->key;
        return;
    }
    if (x % 16 < 10) {
        envlog_tune *t = &r->tune;
        r->kind = ENVLOG_KIND_TUNE;
        snprintf(r->ns, sizeof r->ns, "autotune/crash/1/dev%" PRIu64, crash_mix(&s) % 3);
        snprintf(r->key, sizeof r->key, "s%" PRIu64 "-n%" PRIu64 "-L%d", seed, n, level);
        size_t nc = 1 + crash_mix(&s) % (CRASH_MAX_CANDS - 1);
        for (size_t i = 0; i < nc; i++) {
            snprintf(r->cand_buf[i], sizeof r->cand_buf[i], "cand%zu", i);
            r->cands[i] = r->cand_buf[i];
            envlog_trial *tr = &r->trials[i];
            tr->name = r->cands[i];
            tr->index = (uint32_t)i;
            tr->samples = crash_mix(&s) % 100;
            tr->min_ns = (double)(crash_mix(&s) % 100000) / 7;
            tr->median_ns = tr->min_ns + 1.5;
            tr->mean_ns = tr->min_ns + 2.25;
            tr->max_ns = tr->min_ns + 9;
            tr->stddev_ns = (double)(crash_mix(&s) % 1000) / 3;
            if (crash_mix(&s) % 7 == 0) {
                snprintf(r->err_buf[i], sizeof r->err_buf[i], "err %" PRIu64, crash_mix(&s) % 999);
                tr->error = r->err_buf[i];
            }
            if (full) {
                tr->n_sample_ns = crash_mix(&s) % CRASH_MAX_SAMPLES;
                for (size_t k = 0; k < tr->n_sample_ns; k++)
                    r->samples[i][k] = (double)(crash_mix(&s) % 1000000) / 13;
                tr->sample_ns = r->samples[i];
            }
        }
        size_t pad = crash_mix(&s) % 1500;
        if (big_odds && crash_mix(&s) % big_odds == 0)
            pad = 20000 + crash_mix(&s) % 80000;
        r->policy = malloc(pad + 16);
        if (!r->policy)
            abort();
        memcpy(r->policy, "median", 6);
        for (size_t i = 0; i < pad; i++)
            r->policy[6 + i] = (char)('a' + (n + i) % 26);
        r->policy[6 + pad] = 0;
        size_t np = crash_mix(&s) % 3;
        static const char *const pnames[] = {"noise", "min_samples", "budget_ms"};
        for (size_t i = 0; i < np; i++)
            r->params[i] = (envlog_param){pnames[i], (double)(crash_mix(&s) % 500) / 4};
        *t = (envlog_tune){.ns = r->ns, .key = r->key,
                           .checksum = envlog_tune_checksum(r->cands, nc),
                           .candidates = r->cands, .n_candidates = nc,
                           .trials = r->trials, .n_trials = nc, .policy = r->policy,
                           .params = r->params, .n_params = np,
                           .winner = (int64_t)(crash_mix(&s) % nc),
                           .margin = (double)(crash_mix(&s) % 100) / 8,
                           .winner_ns = 1 + (double)(crash_mix(&s) % 10000) / 3,
                           .within_noise = crash_mix(&s) & 1,
                           .short_circuit = crash_mix(&s) % 5 == 0,
                           .wall_ns = crash_mix(&s) % 1000000000u,
                           .stored = crash_mix(&s) % 10 != 0};
        return;
    }
    envlog_compile *c = &r->compile;
    r->kind = ENVLOG_KIND_COMPILE;
    snprintf(r->key, sizeof r->key, "kern s%" PRIu64 "-n%" PRIu64 "-L%d", seed, n, level);
    snprintf(r->opts, sizeof r->opts, "-O%" PRIu64 " --use_fast_math", crash_mix(&s) % 4);
    uint64_t o = crash_mix(&s) % 10;
    c->outcome = o < 7 ? ENVLOG_COMPILED : o < 9 ? ENVLOG_LOADED : ENVLOG_FAILED;
    size_t bn = 16 + crash_mix(&s) % 3000;
    if (big_odds && crash_mix(&s) % big_odds == 0)
        bn = 40000 + crash_mix(&s) % 200000;
    if (c->outcome != ENVLOG_FAILED) {
        r->binary = malloc(bn);
        if (!r->binary)
            abort();
        uint64_t bs = s;
        for (size_t i = 0; i < bn; i += 8) {
            uint64_t v = crash_mix(&bs);
            memcpy(r->binary + i, &v, bn - i < 8 ? bn - i : 8);
        }
        c->binary = (envlog_bytes){r->binary, bn};
        c->binary_size = bn;
        c->binary_hash = envlog_hash128_bytes(r->binary, bn);
    }
    snprintf(r->log, sizeof r->log, "%s log %" PRIu64,
             c->outcome == ENVLOG_FAILED ? "error:" : "ok", crash_mix(&s));
    snprintf(r->source, sizeof r->source, "__global__ void k%" PRIu64 "(float *x) {}", n);
    c->ns = "nvrtc/13.0/sm_90";
    c->name = r->key;
    c->source_hash = envlog_hash128_bytes(r->source, strlen(r->source));
    c->kernel_key = envlog_hash128_bytes(r->key, strlen(r->key));
    c->options = r->opts;
    c->compiler_version = "13.0";
    c->arch = "sm_90";
    c->duration_ns = crash_mix(&s) % 100000000u;
    c->log = r->log;
    if (full) {
        c->source = r->source;
        for (size_t i = 0; i < sizeof r->ir; i++)
            r->ir[i] = (uint8_t)crash_mix(&s);
        c->ir = (envlog_bytes){r->ir, sizeof r->ir};
    }
}

static inline uint64_t crash_hash_made(const crash_rec *r, int level)
{
    bool full = level == ENVLOG_LEVEL_FULL;
    return r->kind == ENVLOG_KIND_TUNE      ? crash_hash_tune(&r->tune, full)
           : r->kind == ENVLOG_KIND_COMPILE ? crash_hash_compile(&r->compile, full)
                                            : crash_hash_mark(&r->mark);
}

/* Parses "s<seed>-n<n>-L<level>" out of a key, name or label. */
static inline bool crash_parse(const char *text, uint64_t *seed, uint64_t *n, int *level)
{
    if (!text)
        return false;
    const char *p = strchr(text, 's');
    while (p) {
        if (sscanf(p, "s%" SCNu64 "-n%" SCNu64 "-L%d", seed, n, level) == 3)
            return *level >= 0 && *level <= 2;
        p = strchr(p + 1, 's');
    }
    return false;
}

/* The text a record of a generated kind carries its identity in. */
static inline const char *crash_ident(const envlog_record *rec)
{
    switch (rec->kind) {
    case ENVLOG_KIND_TUNE: return rec->u.tune.key;
    case ENVLOG_KIND_COMPILE: return rec->u.compile.name;
    case ENVLOG_KIND_MARK: return rec->u.mark.label;
    default: return NULL;
    }
}

/* Regenerates the record `rec` claims to be and compares every field.
 * @return 1 when it matches, 0 when it does not, -1 when it carries no
 * generated identity (a session record, say).  `big` as for crash_make. */
static inline int crash_check_record(const envlog_record *rec, bool big, uint64_t *seed_out,
                                     uint64_t *n_out)
{
    uint64_t seed, n;
    int level;
    if (rec->kind != ENVLOG_KIND_TUNE && rec->kind != ENVLOG_KIND_COMPILE &&
        rec->kind != ENVLOG_KIND_MARK)
        return -1;
    if (!crash_parse(crash_ident(rec), &seed, &n, &level))
        return 0;
    crash_rec want;
    crash_make(&want, seed, n, level, big);
    int ok = want.kind == rec->kind;
    if (ok) {
        bool full = level == ENVLOG_LEVEL_FULL;
        uint64_t got = rec->kind == ENVLOG_KIND_TUNE      ? crash_hash_tune(&rec->u.tune, full)
                       : rec->kind == ENVLOG_KIND_COMPILE ? crash_hash_compile(&rec->u.compile, full)
                                                          : crash_hash_mark(&rec->u.mark);
        ok = got == crash_hash_made(&want, level);
    }
    crash_rec_free(&want);
    if (seed_out)
        *seed_out = seed;
    if (n_out)
        *n_out = n;
    return ok;
}

/* Records `r` into `s`. */
static inline envlog_err crash_record(envlog_session *s, const crash_rec *r, envlog_stamp *st)
{
    switch (r->kind) {
    case ENVLOG_KIND_TUNE: return envlog_record_tune(s, &r->tune, st);
    case ENVLOG_KIND_COMPILE: return envlog_record_compile(s, &r->compile, st);
    default: return envlog_record_mark(s, r->mark.label, st);
    }
}

/* ------------------------------------------------------------------ acks */

/* What a writer sends after each recording call that returned ENVLOG_OK:
 * written with one write(2), well under PIPE_BUF, so a kill never leaves
 * half an ack in the pipe. */
typedef struct crash_ack {
    uint8_t session[16];
    uint64_t seq;
    uint64_t seed;
    uint64_t n;
    uint64_t hash;
    uint8_t kind;
    uint8_t level;
    uint8_t on_disk;   /* the session was on disk when the call returned */
    uint8_t synced;    /* every record up to this one has been synced */
    uint8_t pad[4];
    uint64_t offset_ns; /* the stamp's offset (for the concurrency run) */
} crash_ack;

#endif /* ENVLOG_CRASH_H */
