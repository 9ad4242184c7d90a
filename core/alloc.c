/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - the one way envlog takes memory.
 *
 * Every allocation passes here so a test can make the N-th one fail and check
 * that each caller ends in a clean ENVLOG_NOMEM (SQLite's test_malloc idea).
 */
#include "core_int.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_at;  /* 0: never fail */
static atomic_long n_allocs;

static bool should_fail(void)
{
    long k = atomic_fetch_add(&n_allocs, 1) + 1;
    long f = atomic_load(&fail_at);
    return f > 0 && k >= f;
}

void *envlog_malloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *envlog_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *envlog_realloc(void *p, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(p, size ? size : 1);
}

void envlog_free(void *p)
{
    free(p);
}

char *envlog_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = envlog_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void envlog_alloc_fail_after(long n)
{
    atomic_store(&n_allocs, 0);
    atomic_store(&fail_at, n);
}

long envlog_alloc_fail_reset(void)
{
    atomic_store(&fail_at, 0);
    return atomic_exchange(&n_allocs, 0);
}
