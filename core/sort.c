/* SPDX-License-Identifier: MIT */
/*
 * sort.c - sorting by 64-bit keys in linear time.
 *
 * The big sorts of a snapshot's build and check (100k entries and more:
 * the items in the total order, the INDEX's pairs, the namespaces, the
 * entries' stamps) order elements by numbers first, and qsort()'s
 * comparisons, a call each and about n log n of them, took most of their
 * time.  Here the keys, with each element's place, are sorted a byte at a
 * time (least significant first; a byte all keys share is skipped), each
 * run of equal keys then by the next key, the elements are laid out in
 * that order, and only elements equal in every key are put in order by
 * the comparison.
 */
#include "core_int.h"

#include <stdlib.h>

/* Below this many elements qsort() is as fast. */
#define SORT_SMALL 256

typedef struct keyed {
    uint64_t k;
    size_t i;
} keyed;

typedef struct sorter {
    const uint8_t *b;
    size_t size;
    const envlog_sort_key *keys;
    size_t n_keys;
    keyed *t;              /* as many as the elements: where a pass scatters */
    size_t (*count)[256];  /* each byte's values */
    uint8_t *tie;          /* [j]: equal in every key to element j - 1 (NULL: exact) */
} sorter;

static int keyed_cmp(const void *x, const void *y)
{
    const keyed *a = x, *b = y;
    return (a->k > b->k) - (a->k < b->k);
}

/* a[0..n) by k. */
static void sort_run(sorter *s, keyed *a, keyed *t, size_t n)
{
    if (n < SORT_SMALL) {
        qsort(a, n, sizeof *a, keyed_cmp);
        return;
    }
    memset(s->count, 0, 8 * sizeof *s->count);
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < 8; p++)
            s->count[p][(a[i].k >> (8 * p)) & 0xff]++;
    keyed *from = a, *to = t;
    for (int p = 0; p < 8; p++) {
        size_t *c = s->count[p];
        if (c[(from[0].k >> (8 * p)) & 0xff] == n)
            continue; /* every key has this byte */
        size_t at = 0;
        for (int v = 0; v < 256; v++) {
            size_t m = c[v];
            c[v] = at;
            at += m;
        }
        for (size_t i = 0; i < n; i++)
            to[c[(from[i].k >> (8 * p)) & 0xff]++] = from[i];
        keyed *x = from;
        from = to;
        to = x;
    }
    if (from != a)
        memcpy(a, from, n * sizeof *a);
}

/* a[0..n) (t beside it) by keys[level], then each run of equal keys by
 * the keys after it; `at`: where a lies among all the elements. */
static void sort_level(sorter *s, size_t level, keyed *a, keyed *t, size_t n, size_t at)
{
    for (size_t j = 0; j < n; j++)
        a[j].k = s->keys[level](s->b + a[j].i * s->size);
    sort_run(s, a, t, n);
    for (size_t j = 0; j < n;) {
        size_t r = j + 1;
        while (r < n && a[r].k == a[j].k)
            r++;
        if (r - j > 1 && level + 1 < s->n_keys)
            sort_level(s, level + 1, a + j, t + j, r - j, at + j);
        else if (r - j > 1 && s->tie)
            memset(s->tie + at + j + 1, 1, r - j - 1);
        j = r;
    }
}

void envlog_sort_keyed(void *base, size_t n, size_t size, const envlog_sort_key *keys,
                       size_t n_keys, int (*cmp)(const void *, const void *), bool exact)
{
    if (n < 2)
        return;
    sorter s = {base, size, keys, n_keys, NULL, NULL, NULL};
    keyed *a = NULL;
    uint8_t *tmp = NULL;
    /* (without the memory for the keys: qsort(), which needs none; large
     * ones on huge pages, a fault per 2 MiB of them) */
    if (n < SORT_SMALL || !n_keys || !(a = envlog_malloc_big(n * sizeof *a, false)) ||
        !(s.t = envlog_malloc_big(n * sizeof *s.t, false)) ||
        !(tmp = envlog_malloc_big(n * size, false)) ||
        !(s.count = envlog_malloc(8 * sizeof *s.count)) ||
        (!exact && !(s.tie = envlog_malloc_big(n, true)))) {
        envlog_free(a);
        envlog_free(s.t);
        envlog_free(tmp);
        envlog_free(s.count);
        qsort(base, n, size, cmp);
        return;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (keyed){0, i};
    sort_level(&s, 0, a, s.t, n, 0);
    uint8_t *b = base;
    for (size_t j = 0; j < n; j++)
        memcpy(tmp + j * size, b + a[j].i * size, size);
    memcpy(b, tmp, n * size);
    for (size_t j = 0; s.tie && j < n;) {
        size_t r = j + 1;
        while (r < n && s.tie[r])
            r++;
        if (r - j > 1)
            qsort(b + j * size, r - j, size, cmp);
        j = r;
    }
    envlog_free(s.tie);
    envlog_free(s.count);
    envlog_free(a);
    envlog_free(s.t);
    envlog_free(tmp);
}
