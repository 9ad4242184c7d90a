/* SPDX-License-Identifier: MIT */
/*
 * fuzz_event.c - the event decoder and the renderers on raw CBOR payloads.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    envlog_arena a = {0};
    fuzz_record(data, size, &a);
    (void)envlog_cbor_check_item(data, size);
    envlog_arena_free(&a);
    return 0;
}
