/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - the one way envlog takes memory.
 *
 * Every allocation passes here so a test can make the N-th one fail and check
 * that each caller ends in a clean ENVLOG_NOMEM (SQLite's test_malloc idea).
 */
#include "core_int.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* Large tables (a state's slots, its arena's chunks) are touched all over
 * and freshly: on 4 KiB pages every page is a fault (and, after a read of
 * the shared zero page, a second one with a TLB flush).  2 MiB pages take
 * one fault for 512 of them.  Transparent huge pages are asked for on the
 * aligned part; where the kernel has none this changes nothing. */
#define HUGE_PAGE ((size_t)2 << 20)

void *envlog_malloc_big(size_t size, bool zero)
{
    void *p = envlog_malloc(size);
    if (!p)
        return NULL;
    if (size >= 2 * HUGE_PAGE) {
        uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        uintptr_t b = ((uintptr_t)p + size) & ~(uintptr_t)(HUGE_PAGE - 1);
        if (b > a)
            (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
    }
    /* Written now, in order: a fault per huge page, none for a read of the
     * zero page followed by a write. */
    if (zero)
        memset(p, 0, size);
    return p;
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
