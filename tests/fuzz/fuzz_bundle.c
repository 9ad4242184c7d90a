/* SPDX-License-Identifier: MIT */
/*
 * fuzz_bundle.c - the bundle reader: zstd frames, size limits, the snapshot
 * inside, and the state a bundle holds (every entry walked and dumped).
 */
#include "fuzz.h"

static envlog_err each(void *ctx, const envlog_entry *e)
{
    (void)ctx;
    return (e->tune ? e->tune->ns : e->kernel->ns) ? ENVLOG_OK : ENVLOG_BAD_DATA;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    envlog_bundle_info *info;
    if (envlog_bundle_inspect_memory(data, size, &info) == ENVLOG_OK)
        envlog_bundle_info_free(info);
    /* The state a bundle holds, as diff reads it. */
    uint8_t *raw;
    size_t n;
    if (fuzz_inflate(data, size, &raw, &n) == 0) {
        envlog_snap *s;
        if (envlog_snap_load(raw, n, false, &s) == ENVLOG_OK) {
            envlog_state *st;
            if (envlog_state_from_snap(s, NULL, &st) == ENVLOG_OK) {
                (void)envlog_state_each(st, each, NULL);
                (void)envlog_state_dump(st, fuzz_null_write, NULL);
                envlog_state_close(st);
            } else {
                envlog_snap_free(s);
            }
        }
        free(raw);
    }
    return 0;
}
