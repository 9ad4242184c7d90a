/* SPDX-License-Identifier: MIT */
/*
 * gathered.c - the tunes a COMPILE_ONLY pass gathered and nothing has
 * measured yet.
 *
 * A gathered key is one registration that stays open across the pass that
 * gathered it and the pass that measures it, so each key is registered once
 * however many times it is gathered, and settled once, by the tune that
 * finally measures it (or abandoned when the runtime closes first).  The
 * list lives on the runtime, under its mutex, since the two passes may run
 * on different threads.
 */
#include "cuda_int.h"

#include <string.h>

static size_t find(const envlog_cuda *c, const char *ns, const char *key,
                   uint64_t checksum)
{
    for (size_t i = 0; i < c->n_gathered; i++) {
        const envlog_cuda__gathered *g = &c->gathered[i];
        if (g->checksum == checksum && !strcmp(g->key, key) && !strcmp(g->ns, ns))
            return i;
    }
    return SIZE_MAX;
}

bool envlog_cuda__gathered_has(envlog_cuda *c, const char *ns, const char *key,
                               uint64_t checksum)
{
    pthread_mutex_lock(&c->mu);
    bool in = find(c, ns, key, checksum) != SIZE_MAX;
    pthread_mutex_unlock(&c->mu);
    return in;
}

envlog_err envlog_cuda__gathered_add(envlog_cuda *c, const char *ns, const char *key,
                                     uint64_t checksum, envlog_cuda_stats *col)
{
    char *n = envlog_strdup(ns), *k = envlog_strdup(key);
    envlog_err e = ENVLOG_OK;
    pthread_mutex_lock(&c->mu);
    if (n && k && c->n_gathered == c->cap_gathered) {
        size_t cap = c->cap_gathered ? c->cap_gathered * 2 : 8;
        envlog_cuda__gathered *g = envlog_realloc(c->gathered, cap * sizeof *g);
        if (g) {
            c->gathered = g;
            c->cap_gathered = cap;
        }
    }
    if (!n || !k || c->n_gathered == c->cap_gathered) {
        e = envlog__fail(ENVLOG_NOMEM, "out of memory for a gathered tune");
    } else {
        c->gathered[c->n_gathered++] = (envlog_cuda__gathered){n, k, checksum, col};
        n = k = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    envlog_free(n);
    envlog_free(k);
    return e;
}

bool envlog_cuda__gathered_take(envlog_cuda *c, const char *ns, const char *key,
                                uint64_t checksum, envlog_cuda_stats **col)
{
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, ns, key, checksum);
    envlog_cuda__gathered g = {0};
    if (i != SIZE_MAX) {
        g = c->gathered[i];
        c->gathered[i] = c->gathered[--c->n_gathered];
    }
    pthread_mutex_unlock(&c->mu);
    if (i == SIZE_MAX)
        return false;
    envlog_free(g.ns);
    envlog_free(g.key);
    *col = g.col;
    return true;
}

void envlog_cuda__gathered_abandon(envlog_cuda *c)
{
    pthread_mutex_lock(&c->mu);
    envlog_cuda__gathered *all = c->gathered;
    size_t n = c->n_gathered;
    c->gathered = NULL;
    c->n_gathered = c->cap_gathered = 0;
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++) {
        envlog_cuda__settle_reg(c, all[i].col, ENVLOG_CUDA__TABANDONED);
        envlog_free(all[i].ns);
        envlog_free(all[i].key);
    }
    envlog_free(all);
}
