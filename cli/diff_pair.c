/* SPDX-License-Identifier: MIT */
/*
 * diff_pair.c - the pairing rule of `envlog diff` (envlog(1), diff): a tune
 * only one side has is told as one change with a tune of the same key on
 * the other side when their namespaces differ at most in the runtime
 * version and the device, or their tune-set checksums differ.
 */
#include "diff_int.h"

#include <stdlib.h>
#include <string.h>

const char *diff_component(const char *ns, int i, size_t *len)
{
    for (; i > 0 && *ns; i--) {
        const char *slash = strchr(ns, '/');
        ns = slash ? slash + 1 : ns + strlen(ns);
    }
    *len = strcspn(ns, "/");
    return ns;
}

bool diff_same_component(const char *a, const char *b, int i)
{
    size_t la, lb;
    const char *pa = diff_component(a, i, &la), *pb = diff_component(b, i, &lb);
    return la == lb && !memcmp(pa, pb, la);
}

static size_t components(const char *ns)
{
    size_t n = 1;
    for (; *ns; ns++)
        n += *ns == '/';
    return n;
}

/* Two tunes of the same key pair when their namespaces differ at most in
 * the runtime version (component 3) and the device (component 4), or their
 * tune-set checksums differ.  The score counts what differs (lower pairs
 * first); -1: they do not pair. */
static int pair_score(const envlog_tune_entry *x, const envlog_tune_entry *y)
{
    size_t n = components(x->ns);
    if (strcmp(x->key, y->key) || n != components(y->ns))
        return -1;
    int score = x->checksum != y->checksum;
    for (size_t i = 0; i < n; i++)
        if (!diff_same_component(x->ns, y->ns, (int)i)) {
            if (n < 4 || (i != 2 && i != 3))
                return -1;
            score++;
        }
    return score;
}

int diff_pair_up(side *a, side *b, const bool *only_a, const bool *only_b, size_t *b_of)
{
    if (!(a->paired = calloc(a->n + 1, sizeof *a->paired)) ||
        !(b->paired = calloc(b->n + 1, sizeof *b->paired)))
        return 1;
    for (size_t i = 0; i < a->n; i++)
        b_of[i] = SIZE_MAX;
    for (int want = 1; want <= 3; want++)
        for (size_t i = 0; i < a->n; i++) {
            if (!only_a[i] || a->paired[i] || !a->v[i].tune)
                continue;
            for (size_t k = 0; k < b->n; k++)
                if (only_b[k] && !b->paired[k] && b->v[k].tune &&
                    pair_score(a->v[i].tune, b->v[k].tune) == want) {
                    a->paired[i] = b->paired[k] = true;
                    b_of[i] = k;
                    break;
                }
        }
    return 0;
}
