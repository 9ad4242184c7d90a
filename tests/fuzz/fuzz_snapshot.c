/* SPDX-License-Identifier: MIT */
/*
 * fuzz_snapshot.c - the snapshot reader: header, manifest, the index and
 * lookups through it, the full check, and iteration over every record;
 * in memory (as bundles are read) and from a file read by pread (as
 * snapshot/current is for lookups: the unchecked first search, then the
 * checked one).
 */
#include "fuzz.h"

#include <sys/mman.h>
#include <unistd.h>

/* A descriptor of a file in memory holding `data`, or -1. */
static int as_file(const uint8_t *data, size_t size)
{
    static int fd = -2;
    if (fd == -2)
        fd = memfd_create("fuzz-snapshot", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        return -1;
    return dup(fd); /* the snapshot closes its own */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int pass = 0; pass < 3; pass++) {
        envlog_snap *s;
        int fd = pass == 2 ? as_file(data, size) : -1;
        if (pass == 2 && fd < 0)
            continue;
        if (envlog_snap_load_fd(pass == 2 ? NULL : data, size, fd, pass == 1, &s))
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
