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

/* Large tables (a state's slots, its arena's chunks, a reader's window)
 * are touched all over and freshly: on 4 KiB pages every page is a fault,
 * and under a hypervisor's page tables a fault costs 10-13 us here, more
 * than reading the page (bench/RESULTS.md).  2 MiB pages take one fault
 * for 512 of them.  A block of ENVLOG_BIG_MIN bytes or more is taken whole
 * huge pages, aligned to one, and transparent huge pages are asked for on
 * all of it; where the kernel has none this changes nothing.  A smaller
 * one is plain memory: a huge page for it would be mostly waste. */
#define HUGE_PAGE ((size_t)2 << 20)

size_t envlog_big_size(size_t size)
{
    if (size < ENVLOG_BIG_MIN || size > SIZE_MAX - HUGE_PAGE)
        return size;
    return (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

void *envlog_malloc_big(size_t size, bool zero)
{
    size_t n = envlog_big_size(size);
    void *p;
    if (size < ENVLOG_BIG_MIN) {
        p = envlog_malloc(size);
    } else {
        if (should_fail() || posix_memalign(&p, HUGE_PAGE, n))
            return NULL;
        (void)madvise(p, n, MADV_HUGEPAGE);
    }
    if (!p)
        return NULL;
    /* Written now, in order: a fault per huge page, none for a read of the
     * zero page followed by a write. */
    if (zero)
        memset(p, 0, size);
    return p;
}

void *envlog_realloc_big(void *p, size_t used, size_t size)
{
    if (size < ENVLOG_BIG_MIN)
        return envlog_realloc(p, size);
    /* Moved to whole huge pages: copying what it holds costs less than a
     * fault for each fresh small page a realloc would add. */
    void *q = envlog_malloc_big(size, false);
    if (q) {
        if (used)
            memcpy(q, p, used);
        envlog_free(p);
    }
    return q;
}

/* Whole huge pages: a mapping's ends fall on pages, whatever `size`. */
static size_t reserved_size(size_t size)
{
    return size > SIZE_MAX - 2 * HUGE_PAGE ? 0 : (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

void *envlog_reserve(size_t size)
{
    size_t n = reserved_size(size ? size : 1);
    if (should_fail() || !n)
        return NULL;
    /* Mapped a huge page over, then trimmed to start on one. */
    uint8_t *m = mmap(NULL, n + HUGE_PAGE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    size_t head = (HUGE_PAGE - (uintptr_t)m % HUGE_PAGE) % HUGE_PAGE;
    if (head)
        (void)munmap(m, head);
    (void)munmap(m + head + n, HUGE_PAGE - head);
    if (n >= ENVLOG_BIG_MIN)
        (void)madvise(m + head, n, MADV_HUGEPAGE);
    return m + head;
}

void envlog_unreserve(void *p, size_t size)
{
    if (p)
        (void)munmap(p, reserved_size(size ? size : 1));
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
