/* SPDX-License-Identifier: MIT */
/*
 * sort.c - sorting by a 64-bit key in linear time.
 *
 * The big sorts of a snapshot's build and check (100k entries and more:
 * the items in the total order, the INDEX's pairs, the namespaces) order
 * elements by a number first, and qsort()'s comparisons, a call each and
 * about n log n of them, took most of their time.  Here the keys, with
 * each element's place, are sorted a byte at a time (least significant
 * first; a byte all keys share is skipped), the elements are laid out in
 * that order, and only elements of equal keys are put in order by the
 * comparison.
 */
#include "core_int.h"

#include <stdlib.h>

/* Below this many elements qsort() is as fast. */
#define SORT_SMALL 256

typedef struct keyed {
    uint64_t k;
    size_t i;
} keyed;

void envlog_sort_keyed(void *base, size_t n, size_t size, uint64_t (*key)(const void *),
                       int (*cmp)(const void *, const void *), bool exact)
{
    if (n < 2)
        return;
    uint8_t *b = base;
    keyed *a = NULL, *t = NULL;
    uint8_t *tmp = NULL;
    /* (without the memory for the keys: qsort(), which needs none) */
    if (n < SORT_SMALL || !(a = envlog_malloc(n * sizeof *a)) ||
        !(t = envlog_malloc(n * sizeof *t)) || !(tmp = envlog_malloc(n * size))) {
        envlog_free(a);
        envlog_free(t);
        qsort(base, n, size, cmp);
        return;
    }
    size_t (*count)[256] = envlog_calloc(8, sizeof *count); /* each byte's values */
    if (!count) {
        envlog_free(a);
        envlog_free(t);
        envlog_free(tmp);
        qsort(base, n, size, cmp);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t k = key(b + i * size);
        a[i] = (keyed){k, i};
        for (int p = 0; p < 8; p++)
            count[p][(k >> (8 * p)) & 0xff]++;
    }
    for (int p = 0; p < 8; p++) {
        size_t *c = count[p];
        if (c[(a[0].k >> (8 * p)) & 0xff] == n)
            continue; /* every key has this byte */
        size_t at = 0;
        for (int v = 0; v < 256; v++) {
            size_t m = c[v];
            c[v] = at;
            at += m;
        }
        for (size_t i = 0; i < n; i++)
            t[c[(a[i].k >> (8 * p)) & 0xff]++] = a[i];
        keyed *s = a;
        a = t;
        t = s;
    }
    for (size_t j = 0; j < n; j++)
        memcpy(tmp + j * size, b + a[j].i * size, size);
    memcpy(b, tmp, n * size);
    for (size_t j = 0; !exact && j < n;) {
        size_t r = j + 1;
        while (r < n && a[r].k == a[j].k)
            r++;
        if (r - j > 1)
            qsort(b + j * size, r - j, size, cmp);
        j = r;
    }
    envlog_free(count);
    envlog_free(a);
    envlog_free(t);
    envlog_free(tmp);
}
