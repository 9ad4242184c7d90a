/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frames.c - the segment reader's framing and everything after it: any
 * bytes as a segment, every record found decoded and rendered as JSON, text
 * and diagnostic notation.  The checksum seed is taken from the HEADER the
 * input starts with (as a reader knows it from the file's place), so inputs
 * mutated from real segments reach the decoders behind the checksums.
 * The fold's decoding with the memo a session's reader keeps across a
 * segment's records must take exactly the records the fold's copy takes.
 */
#include "fuzz.h"

#include <stdlib.h>

static uint64_t seed_of(const uint8_t *data, size_t size)
{
    if (size < ENVLOG_FRAG_HDR)
        return 0;
    size_t len = envlog_get_le16(data + 4);
    if (ENVLOG_FRAG_HDR + len > size)
        return 0;
    envlog_seg_header h;
    memset(&h, 0, sizeof h);
    envlog_arena a = {0};
    envlog_pull pl = {data + ENVLOG_FRAG_HDR, len, 0};
    envlog_tok t;
    uint64_t seed = 0;
    if (envlog_pull_next(&pl, &t) == ENVLOG_OK &&
        envlog_struct_decode(&pl, &t, &envlog_seg_header_schema, &h, &a) == ENVLOG_OK &&
        h.segment <= UINT32_MAX)
        seed = envlog_seg_seed(&h.id, (uint32_t)h.segment);
    envlog_arena_free(&a);
    return seed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    envlog_dec_memo memo;
    memset(&memo, 0, sizeof memo);
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, data, size, seed_of(data, size), 0);
    envlog_arena a = {0};
    for (int guard = 0; guard < 100000; guard++) {
        envlog_fr_status st = envlog_frame_reader_next(&fr);
        if (st == ENVLOG_FR_END || st == ENVLOG_FR_TAIL || st == ENVLOG_FR_NOMEM)
            break;
        if (st != ENVLOG_FR_RECORD)
            continue;
        (void)envlog_payload_kind(fr.out, fr.out_len);
        fuzz_record(fr.out, fr.out_len, &a);
        envlog_record rec, sliced;
        envlog_text sl[ENVLOG_FIELDS_MAX];
        envlog_arena_reset(&a);
        envlog_err e = envlog_event_decode_fold(fr.out, fr.out_len, &rec, &a);
        /* As a session's reader decodes them: one memo across the records
         * of the segment; the same verdict as without it. */
        envlog_err m = envlog_event_decode_slices(fr.out, fr.out_len, &sliced, &a, sl, &memo);
        if ((e == ENVLOG_OK) != (m == ENVLOG_OK))
            abort();
    }
    envlog_arena_free(&a);
    envlog_frame_reader_free(&fr);
    return 0;
}
