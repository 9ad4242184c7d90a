/* SPDX-License-Identifier: MIT */
/*
 * text.c - words and columns for people: singular or plural by count,
 * durations in a unit that suits them, and columns padded by the width a
 * terminal gives text (a CJK character takes two cells, a combining accent
 * none), not by its bytes.
 */
#define _XOPEN_SOURCE 700
#include "cli.h"

#include <inttypes.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

const char *cli_plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

void cli_duration(uint64_t ns, char out[24])
{
    if (ns < 1000)
        snprintf(out, 24, "%" PRIu64 "ns", ns);
    else if (ns < 1000000)
        snprintf(out, 24, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(out, 24, "%.1fms", (double)ns / 1e6);
    else
        snprintf(out, 24, "%.2fs", (double)ns / 1e9);
}

/* One UTF-8 sequence at s (n bytes left): its code point in *cp and its
 * length; an invalid byte is itself, one cell wide (as terminals show
 * U+FFFD). */
static size_t next_cp(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = 0xFFFD;
        return 1;
    }
    unsigned v = len == 1 ? c : c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        v = v << 6 | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

size_t cli_width(const char *s)
{
    static int utf8 = -1;
    if (utf8 < 0) /* wcwidth() knows Unicode only under a UTF-8 locale */
        utf8 = setlocale(LC_CTYPE, "C.UTF-8") != NULL || setlocale(LC_CTYPE, "C.utf8") != NULL;
    size_t w = 0, n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned cp;
        i += next_cp((const unsigned char *)s + i, n - i, &cp);
        int cw = utf8 ? wcwidth((wchar_t)cp) : 1;
        w += cw < 0 ? 1 : (size_t)cw;
    }
    return w;
}

void cli_pad(const char *s, size_t width)
{
    fputs(s, stdout);
    for (size_t w = cli_width(s); w < width; w++)
        putchar(' ');
}
