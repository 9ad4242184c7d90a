/* SPDX-License-Identifier: MIT */
/*
 * ids.c - session ids: made, formatted as 32 hex digits, parsed back.
 *
 * Ids are time-ordered (48-bit Unix milliseconds, then 80 random bits from
 * getrandom) so that session directories sort by creation and two machines
 * never collide.
 */
#include "core_int.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

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
