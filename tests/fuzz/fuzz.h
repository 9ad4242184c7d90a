/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what the fuzz targets share: sinks that exercise the renderers
 * on whatever a target decoded.  Each target defines LLVMFuzzerTestOneInput;
 * libFuzzer drives it under `make fuzz`, and replay.c runs it over the
 * stored corpus in `make check`.
 */
#ifndef ENVLOG_FUZZ_H
#define ENVLOG_FUZZ_H

#include "replay_int.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline envlog_err fuzz_null_write(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    (void)text;
    (void)len;
    return ENVLOG_OK;
}

static inline void fuzz_sink_record(const envlog_record *rec)
{
    (void)envlog_record_json(rec, fuzz_null_write, NULL);
    (void)envlog_record_text(rec, fuzz_null_write, NULL);
    (void)envlog_cbor_diag(rec->payload.data, rec->payload.size, fuzz_null_write, NULL);
}

static inline envlog_err fuzz_record(const uint8_t *p, size_t n, envlog_arena *a)
{
    envlog_record rec;
    envlog_arena_reset(a);
    envlog_err e = envlog_event_decode(p, n, &rec, a);
    if (e == ENVLOG_OK)
        fuzz_sink_record(&rec);
    else
        (void)envlog_cbor_diag(p, n, fuzz_null_write, NULL);
    return e;
}

/* A bounded inflate for the state path (the library's own is private). */
static inline int fuzz_inflate(const uint8_t *z, size_t n, uint8_t **out, size_t *len)
{
    unsigned long long c = ZSTD_getFrameContentSize(z, n);
    if (c == ZSTD_CONTENTSIZE_ERROR || c == ZSTD_CONTENTSIZE_UNKNOWN || c > (1u << 24))
        return -1;
    *out = malloc((size_t)c + 1);
    if (!*out)
        return -1;
    size_t r = ZSTD_decompress(*out, (size_t)c, z, n);
    if (ZSTD_isError(r)) {
        free(*out);
        return -1;
    }
    *len = r;
    return 0;
}

#endif /* ENVLOG_FUZZ_H */
