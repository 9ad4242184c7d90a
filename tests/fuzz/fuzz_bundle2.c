/* SPDX-License-Identifier: MIT */
/*
 * fuzz_bundle2.c - the bundle format 2 reader: the input as a column image
 * (the decoder fed directly, past the zstd frame that would stop most
 * mutations), the snapshot it gives read whole and as the state a diff
 * reads; and the input as a whole bundle file.
 */
#include "fuzz.h"
#include "bundle_cols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *snap;
    size_t n;
    if (envlog_cols_decode(data, size, &snap, &n) == ENVLOG_OK) {
        envlog_snap *s;
        if (envlog_snap_load(snap, n, true, &s) == ENVLOG_OK) {
            envlog_state *st;
            /* (the state takes the snapshot and its bytes) */
            if (envlog_state_from_snap(s, snap, &st) == ENVLOG_OK) {
                /* (the dump reads every entry) */
                (void)envlog_state_dump(st, fuzz_null_write, NULL);
                envlog_state_close(st);
            }
            snap = NULL;
        }
        envlog_free(snap);
    }
    envlog_bundle_info *info;
    if (envlog_bundle_inspect_memory(data, size, &info) == ENVLOG_OK)
        envlog_bundle_info_free(info);
    return 0;
}
