/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frames.c - the segment reader's framing and everything after it: any
 * bytes as a segment (seeded as session segments are), every record found
 * decoded and rendered as JSON, text and diagnostic notation.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const envlog_id128 id = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
    /* The first byte picks the seed: the fixtures' segments are seeded with
     * their own ids, so seed 0 lets inputs without checksums get far too. */
    uint64_t seed = size && data[0] & 1 ? envlog_seg_seed(&id, 0) : 0;
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, data, size, seed, 0);
    envlog_arena a = {0};
    for (int guard = 0; guard < 100000; guard++) {
        envlog_fr_status st = envlog_frame_reader_next(&fr);
        if (st == ENVLOG_FR_END || st == ENVLOG_FR_TAIL)
            break;
        if (st != ENVLOG_FR_RECORD)
            continue;
        (void)envlog_payload_kind(fr.out, fr.out_len);
        fuzz_record(fr.out, fr.out_len, &a);
    }
    envlog_arena_free(&a);
    envlog_frame_reader_free(&fr);
    return 0;
}
