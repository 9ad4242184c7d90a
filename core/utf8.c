/* SPDX-License-Identifier: MIT */
/*
 * utf8.c - UTF-8 validation of the text fields envlog writes and reads: no
 * NUL, no overlong form, no surrogate, nothing past U+10FFFF.
 */
#include "core_int.h"

#include <string.h>

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
