/* SPDX-License-Identifier: MIT */
/*
 * codec_int.h - what the record encoder (encode.c), decoder (decode.c) and
 * the CBOR head writer (cbor_io.c) share: item heads written in place in
 * the shortest form, and the text check.
 */
#ifndef ENVLOG_CODEC_INT_H
#define ENVLOG_CODEC_INT_H

#include "core_int.h"

#include <string.h>

#define AT(base, off, type) ((type *)(void *)((char *)(base) + (off)))
#define CAT(base, off, type) ((const type *)(const void *)((const char *)(base) + (off)))

/* ------------------------------------------------------ fast lanes
 *
 * Recording a tune writes about 200 item heads; these write the common short
 * forms (small keys and counts, short strings, single floats) in place, the
 * same bytes cbor_io.c's envlog_enc_* functions write, and hand everything
 * else to them. */

/* Room for a key head (2 bytes: keys are below 256) and any fixed-size
 * value: a 9-byte number or a 17-byte hash. */
#define HEAD_ROOM 20

static inline envlog_err room(envlog_buf *b, size_t n)
{
    return b->cap - b->len >= n ? ENVLOG_OK : envlog_buf_reserve(b, n);
}

/* Writes a head of major type `major` at `w` in the shortest form (as
 * cbor_io.c does) and returns the byte after it.  Writing through a local
 * cursor, not b->len, lets the compiler keep it in a register: a byte store
 * through b->p may alias b->len. */
static inline uint8_t *put_head(uint8_t *w, uint8_t major, uint64_t v)
{
    if (v < 24) {
        *w = (uint8_t)(major | v);
        return w + 1;
    }
    if (v <= 0xff) {
        w[0] = major | 24;
        w[1] = (uint8_t)v;
        return w + 2;
    }
    if (v <= 0xffff) {
        w[0] = major | 25;
        w[1] = (uint8_t)(v >> 8);
        w[2] = (uint8_t)v;
        return w + 3;
    }
    if (v <= 0xffffffffu) {
        w[0] = major | 26;
        for (int i = 0; i < 4; i++)
            w[1 + i] = (uint8_t)(v >> (24 - 8 * i));
        return w + 5;
    }
    w[0] = major | 27;
    for (int i = 0; i < 8; i++)
        w[1 + i] = (uint8_t)(v >> (56 - 8 * i));
    return w + 9;
}

/* A double in its preferred form, as envlog_enc_double writes it. */
static inline uint8_t *put_f64(uint8_t *w, double v)
{
    float f = (float)v;
    if ((double)f == v || v != v) {
        uint32_t u;
        memcpy(&u, &f, 4);
        w[0] = 0xfa;
        for (int i = 0; i < 4; i++)
            w[1 + i] = (uint8_t)(u >> (24 - 8 * i));
        return w + 5;
    }
    uint64_t u;
    memcpy(&u, &v, 8);
    w[0] = 0xfb;
    for (int i = 0; i < 8; i++)
        w[1 + i] = (uint8_t)(u >> (56 - 8 * i));
    return w + 9;
}

/* True when the `n` bytes are all ASCII and none is NUL: then they are
 * valid UTF-8 without asking envlog_utf8_valid.  Eight bytes a word; the
 * last word overlaps the one before rather than going byte by byte, and a
 * text shorter than a word is read as two half words or three bytes (the
 * rest of the word is 0x01, which passes), all of its bytes covered. */
static inline bool plain_ascii(const char *s, size_t n)
{
    const uint64_t lo = 0x0101010101010101ULL, hi = 0x8080808080808080ULL;
    uint64_t w, acc = 0;
    if (n >= 8) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, s + i, 8);
            acc |= w | ((w - lo) & ~w);
        }
        if (i < n) {
            memcpy(&w, s + n - 8, 8);
            acc |= w | ((w - lo) & ~w);
        }
        return !(acc & hi);
    }
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        w = a | (uint64_t)b << 32;
    } else if (n) {
        w = (uint64_t)(uint8_t)s[0] | (uint64_t)(uint8_t)s[n / 2] << 8 |
            (uint64_t)(uint8_t)s[n - 1] << 16 | 0x0101010101000000ULL;
    } else {
        return true;
    }
    return !((w | ((w - lo) & ~w)) & hi);
}

static inline bool text_valid(const char *s, size_t n)
{
    return plain_ascii(s, n) || envlog_utf8_valid(s, n);
}

#endif /* ENVLOG_CODEC_INT_H */
