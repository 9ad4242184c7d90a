/* SPDX-License-Identifier: MIT */
/*
 * hash.c - the hashes envlog computes: XXH3-64 for framing and key hashes,
 * XXH3-128 (whole or over pieces) for content and binary hashes, and the
 * tune-set checksum of a candidate list.
 *
 * Every hash of the formats (envlog(5)) goes through here, so the one
 * xxhash configuration holds for all of them.
 */
#include "core_int.h"

#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

uint64_t envlog_xxh64(const void *data, size_t n, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, n, seed);
}

uint64_t envlog_xxh64_2(const void *a, size_t na, const void *b, size_t nb, uint64_t seed)
{
    /* A state on the stack is initialized before a reset with a seed:
     * xxHash 0.8.1's reset keeps the state's secret when the stale state
     * holds the same seed and no external secret, so garbage that looks
     * like that is used as the secret (XXH3_INITSTATE, xxhash.h). */
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset_withSeed(&st, seed);
    XXH3_64bits_update(&st, a, na);
    XXH3_64bits_update(&st, b, nb);
    return XXH3_64bits_digest(&st);
}

envlog_hash128 envlog_hash128_bytes(const void *data, size_t size)
{
    XXH128_hash_t h = XXH3_128bits(data, size);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    envlog_hash128 out;
    memcpy(out.b, c.digest, 16);
    return out;
}

envlog_err envlog_h128_begin(envlog_h128 *h)
{
    h->st = envlog_malloc(sizeof(XXH3_state_t));
    if (!h->st)
        return envlog__fail(ENVLOG_NOMEM, "hashing");
    XXH3_128bits_reset(h->st);
    return ENVLOG_OK;
}

void envlog_h128_update(envlog_h128 *h, const void *data, size_t n)
{
    if (h->st)
        XXH3_128bits_update(h->st, data, n);
}

envlog_hash128 envlog_h128_end(envlog_h128 *h)
{
    envlog_hash128 out = {{0}};
    if (!h->st)
        return out;
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h->st));
    memcpy(out.b, c.digest, 16);
    envlog_free(h->st);
    h->st = NULL;
    return out;
}

void envlog_h128_free(envlog_h128 *h)
{
    envlog_free(h->st);
    h->st = NULL;
}

uint64_t envlog_tune_checksum(const char *const *names, size_t n)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (size_t i = 0; i < n; i++)
        XXH3_64bits_update(&st, names[i], strlen(names[i]) + 1);
    return XXH3_64bits_digest(&st);
}
