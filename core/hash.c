/* SPDX-License-Identifier: MIT */
/*
 * hash.c - hashing, session ids, clocks and UTF-8 validation.
 *
 * Ids are time-ordered (48-bit Unix milliseconds, then 80 random bits from
 * getrandom) so that session directories sort by creation and two machines
 * never collide.
 */
#include "core_int.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

uint64_t envlog_xxh64(const void *data, size_t n, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, n, seed);
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

void envlog_id_format(const envlog_id128 *id, char out[33])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[id->b[i] >> 4];
        out[2 * i + 1] = hex[id->b[i] & 15];
    }
    out[32] = 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

envlog_err envlog_id_parse(const char *text, envlog_id128 *id)
{
    if (!text || strlen(text) != 32)
        return envlog__fail(ENVLOG_INVALID_ARG, "'%s' is not 32 hex digits",
                            text ? text : "(null)");
    for (int i = 0; i < 16; i++) {
        int hi = hexval(text[2 * i]), lo = hexval(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return envlog__fail(ENVLOG_INVALID_ARG,
                                "'%s' is not 32 hex digits", text);
        id->b[i] = (uint8_t)(hi << 4 | lo);
    }
    return ENVLOG_OK;
}

envlog_err envlog_id_new(envlog_id128 *id)
{
    uint64_t ms = envlog_clock_unix_ns() / 1000000u;
    for (int i = 0; i < 6; i++)
        id->b[i] = (uint8_t)(ms >> (8 * (5 - i)));
    size_t got = 0;
    while (got < 10) {
        ssize_t n = getrandom(id->b + 6 + got, 10 - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return envlog__fail_errno(errno, "getrandom");
        }
        got += (size_t)n;
    }
    return ENVLOG_OK;
}

uint64_t envlog_clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t envlog_clock_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool envlog_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        /* Eight ASCII bytes at a time, none of them NUL: the common case. */
        while (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ull) ||
                ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull))
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned c = s[i];
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned min;
        if ((c & 0xe0) == 0xc0) {
            len = 2, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, min = 0x10000, c &= 0x07;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            c = c << 6 | (s[i + k] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}
