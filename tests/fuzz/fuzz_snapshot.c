/* SPDX-License-Identifier: MIT */
/*
 * fuzz_snapshot.c - the snapshot reader: header, manifest, the index and
 * lookups through it, the full check, and iteration over every record.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int check = 0; check < 2; check++) {
        envlog_snap *s;
        if (envlog_snap_load(data, size, check, &s))
            continue;
        envlog_snap_item it;
        envlog_record rec;
        envlog_hash128 k = {{0}};
        (void)envlog_snap_find(s, ENVLOG_TABLE_TUNE, "autotune/rt/1.0/sm_90", "k0-0", NULL,
                               0, &it, &rec);
        (void)envlog_snap_find(s, ENVLOG_TABLE_KERNEL, "nvrtc/13.0/sm_90", NULL, &k, 0, &it,
                               &rec);
        uint64_t wm;
        (void)envlog_snap_watermark(s, &k, &wm);
        envlog_snap_rewind(s);
        for (int guard = 0; guard < 100000 && envlog_snap_next(s, &it, &rec) == ENVLOG_OK;
             guard++)
            fuzz_sink_record(&rec);
        envlog_snap_free(s);
    }
    return 0;
}
