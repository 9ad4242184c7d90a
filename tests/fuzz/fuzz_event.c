/* SPDX-License-Identifier: MIT */
/*
 * fuzz_event.c - the event decoder and the renderers on raw CBOR payloads,
 * and the readers held to the walk of a record's map
 * (envlog_decode_walk_only): the full reader's record, the fold's copy,
 * and its slices with a memo that lives from input to input (so the
 * candidates of one input meet the bytes of the next).
 */
#include "fuzz.h"
#include "../fold_agree.h"

#include <stdlib.h>

static envlog_dec_memo memo;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    envlog_arena a = {0};
    envlog_record fold, sliced;
    envlog_text sl[ENVLOG_FIELDS_MAX];
    envlog_err e1 = fuzz_record(data, size, &a);
    envlog_err e2 = envlog_event_decode_fold(data, size, &fold, &a);
    envlog_err e3 = envlog_event_decode_slices(data, size, &sliced, &a, sl, &memo);
    envlog_arena wa = {0};
    envlog_record walked;
    envlog_decode_walk_only(true);
    envlog_err ew = envlog_event_decode(data, size, &walked, &wa);
    envlog_decode_walk_only(false);
    /* One truth: every reader takes the same records as the walk, and
     * gives its values: the fold's for the fields it reads, the full
     * reader's for all. */
    if ((e1 == ENVLOG_OK) != (ew == ENVLOG_OK) || (e2 == ENVLOG_OK) != (ew == ENVLOG_OK) ||
        (e3 == ENVLOG_OK) != (ew == ENVLOG_OK))
        abort();
    if (e1 == ENVLOG_OK) {
        envlog_arena fa = {0};
        envlog_record full;
        const envlog_schema *s;
        if (envlog_event_decode(data, size, &full, &fa) != ENVLOG_OK)
            abort();
        if ((s = envlog_schema_of(walked.kind)) && s->detail &&
            (fold_agree(&fold, NULL, &walked) || fold_agree(&sliced, sl, &walked) ||
             !fold_agree_whole(&full, &walked)))
            abort();
        envlog_arena_free(&fa);
    }
    envlog_arena_free(&wa);
    (void)envlog_cbor_check_item(data, size);
    envlog_arena_free(&a);
    return 0;
}
