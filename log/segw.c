/* SPDX-License-Identifier: MIT */
/*
 * segw.c - the segment writer.
 *
 * A segment is preallocated (posix_fallocate, so a full disk is an error at
 * allocation, never a SIGBUS) and mapped shared: framing a record is a
 * memcpy into the page cache, which hands it to the kernel before the
 * recording call returns, so a killed process loses nothing it recorded.
 * Zero-filled preallocation is safe because a zero header means "no more
 * data".  Sealing writes the SEAL record and trims the file to its data.
 *
 * A batched segment (an import's) is not mapped: records are framed into
 * the writer's own memory and written by pwrite a batch at a time, which
 * costs the kernel a copy where the mapping costs a page fault for every
 * fresh page of the file.
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The largest SEAL payload: a 4-pair map of small ints and three u64. */
#define SEAL_MAX 40

void envlog_seg_name_format(char out[40], uint32_t segment, uint64_t first_seq)
{
    snprintf(out, 40, "%08" PRIu32 "-%016" PRIu64 ".log", segment, first_seq);
}

uint64_t envlog_segw_size_for(uint64_t rotation, size_t n)
{
    /* HEADER (< 128 bytes) + the record + SEAL, rounded up to blocks. */
    uint64_t need = 128 + envlog_framed_size(128, n) + 64;
    need = (need + ENVLOG_BLOCK - 1) / ENVLOG_BLOCK * ENVLOG_BLOCK;
    return need > rotation ? need : rotation;
}

static envlog_err prealloc(envlog_segw *w, uint64_t upto)
{
    if (upto <= w->alloc_len)
        return ENVLOG_OK;
    uint64_t to = w->alloc_len + ENVLOG_PREALLOC_STEP;
    if (to < upto)
        to = (upto + ENVLOG_BLOCK - 1) / ENVLOG_BLOCK * ENVLOG_BLOCK;
    /* Whole blocks, so preallocation never ends mid-block. */
    if (to > w->map_len)
        to = w->map_len;
    const envlog_io *io = envlog_io_get();
    int rc = io->fallocate(w->fd, (off_t)w->alloc_len, (off_t)(to - w->alloc_len));
    if (rc)
        return envlog__fail_errno(rc, "preallocating %s", w->name);
    /* At sync=close the disk writes what is done while recording goes on,
     * so the fdatasync at rotation and at the end finds little left: the
     * whole pages before pos (batched: before what is written), at each
     * preallocation step.  Those pages are never written again, so they
     * are unmapped first: writeback of a page still mapped writable
     * write-protects it and flushes the TLB page by page (on a VM, an
     * interrupt to every CPU each time), one munmap flushes once for the
     * whole range. */
    uint64_t page = envlog_page_size();
    uint64_t done = (w->stage ? w->written : w->pos) / page * page;
    if (w->sync == ENVLOG_SYNC_CLOSE && io->writeback && done > w->wb_len) {
        if (w->map && done > w->unmapped &&
            !io->munmap(w->map + w->unmapped, (size_t)(done - w->unmapped)))
            w->unmapped = done;
        (void)io->writeback(w->fd, (off_t)w->wb_len, (off_t)(done - w->wb_len));
        w->wb_len = done;
    }
#ifdef MADV_POPULATE_WRITE
    /* The step's pages made writable in one call, not a fault for each
     * on the first write to it (a hint: errors ignored). */
    uint64_t from = w->alloc_len / page * page;
    if (w->map && to > from)
        (void)madvise(w->map + from, (size_t)(to - from), MADV_POPULATE_WRITE);
#endif
    w->alloc_len = to;
    return ENVLOG_OK;
}

/* Batched: writes what the stage holds past `written`. */
static envlog_err flush_batch(envlog_segw *w)
{
    if (w->failed)
        return envlog__fail(ENVLOG_IO,
                            "segment %s lost a batch of records to a failed write or sync",
                            w->name);
    if (!w->stage || w->pos == w->written)
        return ENVLOG_OK;
    envlog_err e = envlog_pwrite_all(w->fd, w->stage + (w->written - w->stage_off),
                                     (size_t)(w->pos - w->written), w->written, w->name);
    if (e) {
        w->failed = true;
        return e;
    }
    w->written = w->pos;
    return ENVLOG_OK;
}

static uint8_t *stage_map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Batched: room in the stage for `need` bytes at pos, the batch before it
 * written first when it has none.  Bytes before `written` are not kept, so
 * the stage starts again at pos's block. */
static envlog_err stage_room(envlog_segw *w, uint64_t need)
{
    if (!w->stage || w->pos + need <= w->stage_off + w->stage_cap)
        return ENVLOG_OK;
    envlog_err e = flush_batch(w);
    if (e)
        return e;
    w->stage_off = w->pos / ENVLOG_BLOCK * ENVLOG_BLOCK;
    uint64_t want = w->pos - w->stage_off + need;
    if (want > w->stage_cap) { /* a record larger than a batch */
        size_t cap = (size_t)((want + ENVLOG_BLOCK - 1) / ENVLOG_BLOCK * ENVLOG_BLOCK);
        uint8_t *p = stage_map(cap);
        if (!p)
            return envlog__fail(ENVLOG_NOMEM, "framing a record of %llu bytes into %s",
                                (unsigned long long)need, w->name);
        munmap(w->stage, w->stage_cap);
        w->stage = p;
        w->stage_cap = cap;
    }
    return ENVLOG_OK;
}

/* Frames `n` bytes at pos: into the mapping, or into the stage (whose
 * offset is a multiple of a block, so the blocks fall as in the file). */
static void frame_put(envlog_segw *w, const uint8_t *p, size_t n, uint64_t *chain)
{
    if (!w->stage) {
        envlog_frame_write(w->map, &w->pos, w->seed, p, n, chain);
        return;
    }
    uint64_t at = w->pos - w->stage_off;
    envlog_frame_write(w->stage, &at, w->seed, p, n, chain);
    w->pos = w->stage_off + at;
}

static envlog_err write_framing(envlog_segw *w, const envlog_schema *s,
                                const void *rec)
{
    uint8_t tmp[256];
    envlog_buf b = {tmp, 0, sizeof tmp};
    envlog_err e = envlog_struct_encode(&b, s, rec, ENVLOG_LEVEL_BASIC);
    if (e)
        return e;
    if (b.p != tmp) {
        envlog_buf_free(&b);
        return envlog__fail(ENVLOG_INVALID_ARG, "framing record too large");
    }
    uint64_t need = w->pos + envlog_framed_size(w->pos, b.len);
    if (need > w->map_len)
        return envlog__fail(ENVLOG_INVALID_ARG, "segment full");
    if ((e = prealloc(w, need)) || (e = stage_room(w, need - w->pos)))
        return e;
    frame_put(w, b.p, b.len, NULL);
    return ENVLOG_OK;
}

envlog_err envlog_segw_create(envlog_segw *w, int dirfd, const envlog_id128 *id,
                              uint32_t segment, uint64_t first_seq,
                              uint64_t prev_chain, uint64_t size,
                              const char *content, envlog_sync sync, bool batched)
{
    const envlog_io *io = envlog_io_get();
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->segment = segment;
    w->first_seq = first_seq;
    w->last_seq = first_seq ? first_seq - 1 : 0;
    w->chain = prev_chain;
    w->seed = envlog_seg_seed(id, segment);
    w->map_len = size;
    w->sync = sync;
    envlog_seg_name_format(w->name, segment, first_seq);
    w->fd = io->openat(dirfd, w->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (w->fd < 0)
        return envlog__fail_errno(errno, "creating segment %s", w->name);
    envlog_err e = prealloc(w, ENVLOG_BLOCK < size ? ENVLOG_BLOCK : size);
    if (e)
        goto fail;
    /* The HEADER goes in with one write of a few dozen bytes, before the
     * file is mapped: a process killed here leaves it whole or not at all,
     * so a segment with a torn HEADER is never one envlog wrote (envlog(5):
     * a torn tail needs a good HEADER before it). */
    envlog_seg_header h = {ENVLOG_KIND_HEADER, ENVLOG_MAGIC, ENVLOG_LOG_VERSION,
                           *id, segment, first_seq, prev_chain, content};
    uint8_t hb[256], framed[256 + 2 * ENVLOG_FRAG_HDR] = {0};
    envlog_buf b = {hb, 0, sizeof hb};
    if ((e = envlog_struct_encode(&b, &envlog_seg_header_schema, &h, ENVLOG_LEVEL_BASIC)))
        goto fail;
    if (b.p != hb) {
        envlog_buf_free(&b);
        e = envlog__fail(ENVLOG_INVALID_ARG, "segment header too large");
        goto fail;
    }
    envlog_frame_write(framed, &w->pos, w->seed, b.p, b.len, NULL);
    ssize_t wr = io->pwrite(w->fd, framed, (size_t)w->pos, 0);
    if (wr != (ssize_t)w->pos) {
        e = envlog__fail_errno(wr < 0 ? errno : ENOSPC, "writing the header of %s", w->name);
        goto fail;
    }
    if (batched) {
        w->stage_cap = ENVLOG_SEGW_BATCH;
        if (!(w->stage = stage_map(w->stage_cap))) {
            e = envlog__fail(ENVLOG_NOMEM, "a batch for segment %s", w->name);
            goto fail;
        }
        w->written = w->pos;
    } else {
        w->map = io->mmap((size_t)w->map_len, PROT_READ | PROT_WRITE, w->fd);
        if (w->map == MAP_FAILED) {
            w->map = NULL;
            e = envlog__fail_errno(errno, "mapping segment %s", w->name);
            goto fail;
        }
    }
    if (sync != ENVLOG_SYNC_NONE) {
        if ((e = envlog_segw_sync(w)) || (e = envlog_dir_sync(dirfd, w->name)))
            goto fail;
    }
    return ENVLOG_OK;
fail:
    envlog_segw_abandon(w);
    io->unlinkat(dirfd, w->name, 0);
    return e;
}

bool envlog_segw_fits(const envlog_segw *w, size_t n)
{
    uint64_t end = w->pos + envlog_framed_size(w->pos, n);
    return end + envlog_framed_size(end, SEAL_MAX) <= w->map_len;
}

envlog_err envlog_segw_append(envlog_segw *w, const uint8_t *p, size_t n,
                              uint64_t seq)
{
    if (w->failed)
        return flush_batch(w);
    uint64_t end = w->pos + envlog_framed_size(w->pos, n);
    /* Room for the SEAL is taken now, so sealing never needs the disk to
     * have space left. */
    envlog_err e = prealloc(w, end + envlog_framed_size(end, SEAL_MAX));
    if (e || (e = stage_room(w, end - w->pos)))
        return e;
    uint64_t pos0 = w->pos, chain0 = w->chain;
    frame_put(w, p, n, &w->chain);
    if (w->sync == ENVLOG_SYNC_RECORD && (e = envlog_segw_sync(w))) {
        if (w->stage) { /* written, or lost with its batch: given up either way */
            w->failed = true;
            return e;
        }
        /* The call fails, so the record must not stay behind: the next
         * record takes its seq, and a reader would see that seq twice. */
        memset(w->map + pos0, 0, (size_t)(w->pos - pos0));
        w->pos = pos0;
        w->chain = chain0;
        return e;
    }
    w->count++;
    w->last_seq = seq;
    return ENVLOG_OK;
}

envlog_err envlog_segw_sync(envlog_segw *w)
{
    envlog_err e = flush_batch(w);
    if (e)
        return e;
    if (w->fd >= 0 && envlog_io_get()->fsync(w->fd))
        return envlog__fail_errno(errno, "syncing segment %s", w->name);
    return ENVLOG_OK;
}

envlog_err envlog_segw_seal(envlog_segw *w)
{
    const envlog_io *io = envlog_io_get();
    if (w->fd < 0)
        return ENVLOG_OK;
    envlog_seg_seal s = {ENVLOG_KIND_SEAL, w->count, w->last_seq, w->chain};
    envlog_err e = write_framing(w, &envlog_seg_seal_schema, &s);
    if (!e)
        e = flush_batch(w);
    if (!e && w->sync != ENVLOG_SYNC_NONE)
        e = envlog_segw_sync(w);
    /* Trim the zero preallocation; the data before pos stays as written. */
    if (!e && io->ftruncate(w->fd, (off_t)w->pos))
        e = envlog__fail_errno(errno, "trimming segment %s", w->name);
    envlog_segw_abandon(w);
    return e;
}

void envlog_segw_unmap(envlog_segw *w, int (*unmap)(void *, size_t))
{
    if (w->map && w->unmapped < w->map_len)
        unmap(w->map + w->unmapped, (size_t)(w->map_len - w->unmapped));
    if (w->stage)
        unmap(w->stage, w->stage_cap);
    w->map = NULL;
    w->unmapped = 0;
    w->stage = NULL;
}

void envlog_segw_abandon(envlog_segw *w)
{
    const envlog_io *io = envlog_io_get();
    envlog_segw_unmap(w, io->munmap);
    if (w->fd >= 0)
        io->close(w->fd);
    w->fd = -1;
}
