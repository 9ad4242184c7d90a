/* SPDX-License-Identifier: MIT */
/*
 * explain.c - why a lookup missed: the entries that share its key under
 * another namespace or tune-set checksum, and what differs.
 *
 * Namespaces are stored whole and compared component by component ('/'
 * separated), so a miss can be explained offline: "sm_80 here, sm_90 asked".
 */
#include "replay_int.h"

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
    envlog_err err;
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

static int visit(void *ctx, const envlog_entry *e)
{
    near_ctx *c = ctx;
    if (e->table != c->table)
        return 0;
    envlog_near nr;
    memset(&nr, 0, sizeof nr);
    nr.table = e->table;
    if (e->tune) {
        const envlog_tune_entry *t = e->tune;
        if (strcmp(t->key, c->key))
            return 0;
        if (!strcmp(t->ns, c->ns) && t->checksum == c->checksum)
            return 0; /* that is a hit, not a near miss */
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
            return 0;
        if (same_key && !strcmp(k->ns, c->ns))
            return 0;
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
        if (!p) {
            c->err = envlog__fail(ENVLOG_NOMEM, "explaining a miss");
            return 1;
        }
        c->v = p;
        c->cap = cap;
    }
    c->v[c->n++] = nr;
    return 0;
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
    near_ctx c = {table, ns, key, checksum, candidates, n_candidates, NULL, 0, 0,
                  ENVLOG_OK};
    envlog_err e = envlog_state_each(st, visit, &c);
    if (e == ENVLOG_STATE)
        e = c.err;
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
