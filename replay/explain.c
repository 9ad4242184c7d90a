/* SPDX-License-Identifier: MIT */
/*
 * explain.c - why a lookup missed: the entries that share its key under
 * another namespace or tune-set checksum, and what differs.
 *
 * Namespaces are stored whole and compared component by component ('/'
 * separated), so a miss can be explained offline: "sm_80 here, sm_90 asked".
 *
 * Also how one tune decided (its trials ranked, why each stopped sampling)
 * and what the standing compaction kept: the facts `envlog why` and
 * `envlog replay --until` tell, derived from records alone.
 */
#include "replay_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct near_ctx {
    envlog_table table;
    const char *ns, *key;
    uint64_t checksum;
    const char *const *cands;
    size_t n_cands;
    envlog_near *v;
    size_t n, cap;
} near_ctx;

static void add(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 3 >= size)
        return;
    if (len)
        strcpy(buf + len, "; "), len += 2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* Appends to `out` the components where `have` and `want` differ. */
static void ns_diff(const char *have, const char *want, char *out, size_t size)
{
    int comp = 1;
    while (*have || *want) {
        size_t hl = strcspn(have, "/"), wl = strcspn(want, "/");
        if (hl != wl || memcmp(have, want, hl))
            add(out, size, "namespace component %d: %.*s here, %.*s asked", comp,
                (int)(hl > 60 ? 60 : hl), have, (int)(wl > 60 ? 60 : wl), want);
        have += hl + (have[hl] == '/');
        want += wl + (want[wl] == '/');
        comp++;
    }
}

static bool has_name(const char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s))
            return true;
    return false;
}

static envlog_err visit(void *ctx, const envlog_entry *e)
{
    near_ctx *c = ctx;
    if (e->table != c->table)
        return ENVLOG_OK;
    envlog_near nr;
    memset(&nr, 0, sizeof nr);
    nr.table = e->table;
    if (e->tune) {
        const envlog_tune_entry *t = e->tune;
        if (strcmp(t->key, c->key))
            return ENVLOG_OK;
        if (!strcmp(t->ns, c->ns) && t->checksum == c->checksum)
            return ENVLOG_OK; /* that is a hit, not a near miss */
        nr.ns = t->ns;
        nr.key = t->key;
        nr.checksum = t->checksum;
        nr.origin = t->origin;
        nr.stamp = t->stamp;
        ns_diff(t->ns, c->ns, nr.differs, sizeof nr.differs);
        if (t->checksum != c->checksum) {
            add(nr.differs, sizeof nr.differs, "tune-set checksum 0x%016llx here, 0x%016llx asked",
                (unsigned long long)t->checksum, (unsigned long long)c->checksum);
            if (c->cands) {
                for (size_t i = 0; i < t->n_candidates; i++)
                    if (!has_name(c->cands, c->n_cands, t->candidates[i]))
                        add(nr.differs, sizeof nr.differs, "candidate %s only here",
                            t->candidates[i]);
                for (size_t i = 0; i < c->n_cands; i++)
                    if (!has_name(t->candidates, t->n_candidates, c->cands[i]))
                        add(nr.differs, sizeof nr.differs, "candidate %s only asked",
                            c->cands[i]);
            }
        }
    } else {
        const envlog_kernel_entry *k = e->kernel;
        char hex[33];
        envlog_id_format(&k->kernel_key, hex);
        bool same_key = !strcmp(hex, c->key), same_name = k->name && !strcmp(k->name, c->key);
        if (!same_key && !same_name)
            return ENVLOG_OK;
        if (same_key && !strcmp(k->ns, c->ns))
            return ENVLOG_OK;
        nr.ns = k->ns;
        nr.key = k->name;
        nr.origin = k->origin;
        nr.stamp = k->stamp;
        ns_diff(k->ns, c->ns, nr.differs, sizeof nr.differs);
        if (!same_key)
            add(nr.differs, sizeof nr.differs,
                "kernel key %s here (arch %s, compiler %s, options '%s')", hex,
                k->arch ? k->arch : "-", k->compiler_version ? k->compiler_version : "-",
                k->options ? k->options : "");
    }
    if (!nr.differs[0])
        add(nr.differs, sizeof nr.differs, "same namespace and key");
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        envlog_near *p = envlog_realloc(c->v, cap * sizeof *p);
        if (!p)
            return envlog__fail(ENVLOG_NOMEM, "explaining a miss");
        c->v = p;
        c->cap = cap;
    }
    c->v[c->n++] = nr;
    return ENVLOG_OK;
}

envlog_err envlog_state_explain(envlog_state *st, envlog_table table,
                                const char *ns, const char *key,
                                uint64_t checksum, const char *const *candidates,
                                size_t n_candidates, envlog_near **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!st || !ns || !key)
        return envlog__fail(ENVLOG_INVALID_ARG, "explain needs ns and key");
    near_ctx c = {table, ns, key, checksum, candidates, n_candidates, NULL, 0, 0};
    envlog_err e = envlog_state_each(st, visit, &c);
    if (e) {
        envlog_free(c.v);
        return e;
    }
    *out = c.v;
    *n = c.n;
    return ENVLOG_OK;
}

void envlog_near_free(envlog_near *near)
{
    envlog_free(near);
}

const char *envlog_stop_name(envlog_stop stop)
{
    static const char *const names[] = {"unknown", "converged", "dropped", "sample-limit",
                                        "error"};
    return (unsigned)stop < sizeof names / sizeof names[0] ? names[stop] : "unknown";
}

static bool param(const envlog_tune *t, const char *name, double *v)
{
    for (size_t i = 0; i < t->n_params; i++)
        if (t->params[i].name && !strcmp(t->params[i].name, name)) {
            *v = t->params[i].value;
            return true;
        }
    return false;
}

static bool measured(const envlog_trial *r)
{
    return !r->error && r->samples > 0;
}

/* The adaptive policy's verdict after the last sample (envlog-cuda(3)),
 * for what of it the tune recorded; `leader` is the best median of the
 * trials run before (negative: none). */
static envlog_stop stop_of(const envlog_tune *t, const envlog_trial *r, double leader)
{
    if (r->error)
        return ENVLOG_STOP_ERROR;
    double min_s = 1, max_s, drop, tol;
    (void)param(t, "min_samples", &min_s);
    if ((double)r->samples >= min_s) {
        if (param(t, "drop_factor", &drop) && drop > 0 && leader >= 0 &&
            r->median_ns > drop * leader)
            return ENVLOG_STOP_DROPPED;
        if (param(t, "rel_tol", &tol) && r->samples > 0 &&
            r->stddev_ns / sqrt((double)r->samples) <= tol * r->median_ns)
            return ENVLOG_STOP_CONVERGED;
    }
    if (param(t, "max_samples", &max_s) && (double)r->samples >= max_s)
        return ENVLOG_STOP_SAMPLE_LIMIT;
    return ENVLOG_STOP_UNKNOWN;
}

static bool ranks_before(const envlog_trial *a, const envlog_trial *b)
{
    if (measured(a) != measured(b))
        return measured(a);
    if (!measured(a))
        return false; /* failed ones keep the order they ran in */
    return a->median_ns < b->median_ns || (a->median_ns == b->median_ns && a->index < b->index);
}

envlog_err envlog_tune_rank(const envlog_tune *t, envlog_rank *out, int64_t *runner_up)
{
    if (runner_up)
        *runner_up = -1;
    if (!t || (!out && t->n_trials))
        return envlog__fail(ENVLOG_INVALID_ARG, "ranking needs a tune and room for its trials");
    double leader = -1, winner_cost = t->winner_ns;
    for (size_t i = 0; i < t->n_trials; i++) {
        const envlog_trial *r = &t->trials[i];
        if (winner_cost <= 0 && t->winner >= 0 && r->index == (uint64_t)t->winner && measured(r))
            winner_cost = r->median_ns;
        out[i] = (envlog_rank){.trial = i, .cost_ns = measured(r) ? r->median_ns : 0,
                               .stop = stop_of(t, r, leader)};
        if (measured(r) && (leader < 0 || r->median_ns < leader))
            leader = r->median_ns;
    }
    /* Insertion sort: stable, and a tune has a handful of candidates. */
    for (size_t i = 1; i < t->n_trials; i++) {
        envlog_rank v = out[i];
        size_t j = i;
        for (; j > 0 && ranks_before(&t->trials[v.trial], &t->trials[out[j - 1].trial]); j--)
            out[j] = out[j - 1];
        out[j] = v;
    }
    for (size_t i = 0; i < t->n_trials; i++) {
        const envlog_trial *r = &t->trials[out[i].trial];
        if (measured(r) && winner_cost > 0)
            out[i].percent = r->median_ns / winner_cost * 100;
        if (runner_up && *runner_up < 0 && measured(r) &&
            (t->winner < 0 || r->index != (uint64_t)t->winner))
            *runner_up = r->index;
    }
    return ENVLOG_OK;
}

envlog_err envlog_compaction_get(envlog_env *env, envlog_compaction *out)
{
    memset(out, 0, sizeof *out);
    if (!env)
        return envlog__fail(ENVLOG_INVALID_ARG, "no environment");
    envlog_snap *snap = NULL;
    int gen;
    envlog_err e = envlog_snap_pick(env, false, NULL, NULL, &snap, &gen);
    if (e || !snap)
        return e;
    const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
    out->present = true;
    out->created_unix_ns = m->created_unix_ns;
    snprintf(out->reason, sizeof out->reason, "%s", m->compacted_by ? m->compacted_by : "");
    out->evidence = (envlog_evidence)m->evidence_level;
    out->sessions = m->n_wms;
    envlog_snap_item it;
    envlog_record rec;
    envlog_snap_rewind(snap);
    while ((e = envlog_snap_next(snap, &it, &rec)) == ENVLOG_OK) {
        out->records++;
        out->entries += it.kind == ENVLOG_KIND_ENTRY;
        if (it.unix_ns > out->last_unix_ns)
            out->last_unix_ns = it.unix_ns;
    }
    envlog_snap_rewind(snap);
    envlog_snap_unmap(snap);
    return e == ENVLOG_END ? ENVLOG_OK : e;
}
