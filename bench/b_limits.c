/* SPDX-License-Identifier: MIT */
/*
 * b_limits.c - the machine's own limits, on the same data envlog writes.
 *
 * memcpy and XXH3 run over the encoded tune records one record at a time
 * (the unit envlog frames and checksums), zstd level 3 over all of them (as
 * a bundle would be compressed), fdatasync and sequential writes in the
 * benchmark's directory, on the disk being measured, and stores into fresh
 * pages of a mapped file, which is how envlog's writer hands records to the
 * kernel.  The other sections divide by these to give
 * envlog's share of what the machine can do.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

typedef struct lim_data {
    uint8_t *src, *dst, *z;
    size_t *off;    /* n + 1 offsets: record i is [off[i], off[i+1]) */
    size_t n, total, zcap, zlen;
    size_t zn;          /* records in the last compressed frame */
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    volatile uint64_t sink;
    /* disk */
    int fd;
    uint64_t fd_off;
    int syncs;          /* fdatasyncs per run */
    size_t disk_bytes;  /* sequential bytes per run */
    char dir[4200];
} lim_data;

static void lim_build(lim_data *d, size_t want)
{
    envlog_buf b = {0};
    bench_tune bt;
    size_t cap = 1024;
    memset(d, 0, sizeof *d);
    d->off = envlog_malloc(cap * sizeof *d->off);
    d->src = envlog_malloc(want + 4096);
    bench_tune_init(&bt);
    if (!d->off || !d->src)
        bench_die("out of memory for the limits data");
    d->off[0] = 0;
    while (d->total < want) {
        bench_tune_fill(&bt, d->n);
        size_t len = bench_encode(&b, ENVLOG_KIND_TUNE, &bt.t, d->n + 1);
        if (d->total + len > want)
            break;
        memcpy(d->src + d->total, b.p, len);
        d->total += len;
        if (d->n + 2 > cap) {
            cap *= 2;
            size_t *p = envlog_realloc(d->off, cap * sizeof *p);
            if (!p)
                bench_die("out of memory for the limits data");
            d->off = p;
        }
        d->off[++d->n] = d->total;
    }
    envlog_buf_free(&b);
    d->zcap = ZSTD_compressBound(d->total);
    d->dst = envlog_malloc(d->total);
    d->z = envlog_malloc(d->zcap);
    d->cctx = ZSTD_createCCtx();
    d->dctx = ZSTD_createDCtx();
    if (!d->dst || !d->z || !d->cctx || !d->dctx)
        bench_die("out of memory for the limits data");
    memset(d->dst, 1, d->total); /* fault the pages in before timing */
}

static void lim_free(lim_data *d)
{
    envlog_free(d->src);
    envlog_free(d->dst);
    envlog_free(d->z);
    envlog_free(d->off);
    ZSTD_freeCCtx(d->cctx);
    ZSTD_freeDCtx(d->dctx);
}

/* How many records a run of `scale` covers. */
static size_t recs_for(const lim_data *d, double scale)
{
    size_t n = (size_t)(d->n * scale);
    return n ? n : 1;
}

static void run_memcpy(void *ctx, double scale, bench_run *out)
{
    lim_data *d = ctx;
    size_t n = recs_for(d, scale);
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++)
        memcpy(d->dst + d->off[i], d->src + d->off[i], d->off[i + 1] - d->off[i]);
    uint64_t t1 = bench_now_ns();
    d->sink += d->dst[d->off[n] - 1];
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, (double)d->off[n], 0};
}

static void run_xxh3(void *ctx, double scale, bench_run *out)
{
    lim_data *d = ctx;
    size_t n = recs_for(d, scale);
    uint64_t acc = 0;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++)
        acc ^= XXH3_64bits_withSeed(d->src + d->off[i], d->off[i + 1] - d->off[i], i);
    uint64_t t1 = bench_now_ns();
    d->sink += acc;
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, (double)d->off[n], 0};
}

static void run_zstd_c(void *ctx, double scale, bench_run *out)
{
    lim_data *d = ctx;
    size_t n = recs_for(d, scale);
    uint64_t t0 = bench_now_ns();
    size_t z = ZSTD_compressCCtx(d->cctx, d->z, d->zcap, d->src, d->off[n], 3);
    uint64_t t1 = bench_now_ns();
    if (ZSTD_isError(z))
        bench_die("zstd: %s", ZSTD_getErrorName(z));
    d->zlen = z;
    d->zn = n;
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, (double)d->off[n], (double)z};
}

static void run_zstd_d(void *ctx, double scale, bench_run *out)
{
    lim_data *d = ctx;
    (void)scale;
    uint64_t t0 = bench_now_ns();
    size_t want = d->off[d->zn];
    size_t r = ZSTD_decompressDCtx(d->dctx, d->dst, d->total, d->z, d->zlen);
    uint64_t t1 = bench_now_ns();
    if (ZSTD_isError(r) || r != want || memcmp(d->dst, d->src, want))
        bench_die("zstd: decompressing %zu of %zu bytes: %s", r, want,
                  ZSTD_isError(r) ? ZSTD_getErrorName(r) : "wrong bytes");
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)d->zn, (double)want, 0};
}

static void run_fsync(void *ctx, double scale, bench_run *out)
{
    lim_data *d = ctx;
    int k = (int)(d->syncs * scale);
    if (k < 1)
        k = 1;
    size_t len = d->off[1];
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < k; i++) {
        if (pwrite(d->fd, d->src, len, (off_t)d->fd_off) != (ssize_t)len ||
            fdatasync(d->fd))
            bench_die("write and fdatasync in %s: %s", d->dir, strerror(errno));
        d->fd_off += len;
    }
    uint64_t t1 = bench_now_ns();
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)k, (double)(k * len), 0};
}

static void run_disk(void *ctx, double scale, bench_run *out)
{
    lim_data *d = ctx;
    char path[4300];
    size_t want = (size_t)(d->disk_bytes * scale), chunk = 1u << 20, done = 0;
    if (chunk > d->total)
        chunk = d->total;
    snprintf(path, sizeof path, "%s/seq.dat", d->dir);
    unlink(path);
    uint64_t t0 = bench_now_ns();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        bench_die("creating %s: %s", path, strerror(errno));
    while (done < want) {
        if (pwrite(fd, d->src, chunk, (off_t)done) != (ssize_t)chunk)
            bench_die("writing %s: %s", path, strerror(errno));
        done += chunk;
    }
    if (fdatasync(fd))
        bench_die("syncing %s: %s", path, strerror(errno));
    close(fd);
    uint64_t t1 = bench_now_ns();
    unlink(path);
    *out = (bench_run){(double)(t1 - t0) / 1e9, 1, (double)done, 0};
}

/* What envlog's writer does, without envlog: preallocate a file in 1 MiB
 * steps, map it shared, make each step's pages writable in one call
 * (MADV_POPULATE_WRITE) and copy the records in.  Every fresh page costs
 * the kernel a zeroed page and the file system's page_mkwrite; taken a page
 * fault at a time, on a virtual machine, that dominates the copy. */
static void run_mmap(void *ctx, double scale, bench_run *out)
{
    lim_data *d = ctx;
    char path[4300];
    size_t n = recs_for(d, scale), len = d->off[n], step = 1u << 20;
    size_t map_len = (len + step - 1) / step * step;
    snprintf(path, sizeof path, "%s/map.dat", d->dir);
    unlink(path);
    uint64_t t0 = bench_now_ns();
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        bench_die("creating %s: %s", path, strerror(errno));
    uint8_t *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        bench_die("mapping %s: %s", path, strerror(errno));
    size_t alloc = 0;
    for (size_t i = 0; i < n; i++) {
        while (d->off[i + 1] > alloc) {
            int rc = posix_fallocate(fd, (off_t)alloc, (off_t)step);
            if (rc)
                bench_die("preallocating %s: %s", path, strerror(rc));
#ifdef MADV_POPULATE_WRITE
            /* each step's pages made writable in one call, as the segment
             * writer does: the store's limit, not the page faults' */
            (void)madvise(m + alloc, step, MADV_POPULATE_WRITE);
#endif
            alloc += step;
        }
        memcpy(m + d->off[i], d->src + d->off[i], d->off[i + 1] - d->off[i]);
    }
    munmap(m, map_len);
    close(fd);
    uint64_t t1 = bench_now_ns();
    unlink(path);
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, (double)len, 0};
}

double bench_read_limit_Bps(void)
{
    if (bench_lim.memcpy_Bps <= 0 || bench_lim.xxh3_Bps <= 0)
        return 0;
    return 1.0 / (1.0 / bench_lim.memcpy_Bps + 1.0 / bench_lim.xxh3_Bps);
}

void bench_section_limits(void)
{
    lim_data d;
    lim_build(&d, BENCH_SIZE(128u << 20, 16u << 20, 256u << 10));
    d.syncs = BENCH_SIZE(100, 20, 3);
    d.disk_bytes = BENCH_SIZE(256u << 20, 32u << 20, 1u << 20);
    bench_fresh_dir(d.dir, sizeof d.dir, "limits");
    if (mkdir(d.dir, 0700))
        bench_die("creating %s: %s", d.dir, strerror(errno));
    char fpath[4300];
    snprintf(fpath, sizeof fpath, "%s/sync.dat", d.dir);
    d.fd = open(fpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (d.fd < 0)
        bench_die("creating %s: %s", fpath, strerror(errno));

    double rec = (double)d.total / (double)d.n;
    bench_variant v[] = {
        {.name = "memcpy", .fn = run_memcpy, .ctx = &d},
        {.name = "xxh3", .fn = run_xxh3, .ctx = &d},
        {.name = "zstd-c", .fn = run_zstd_c, .ctx = &d},
        {.name = "zstd-d", .fn = run_zstd_d, .ctx = &d},
        {.name = "fsync", .fn = run_fsync, .ctx = &d},
        {.name = "disk", .fn = run_disk, .ctx = &d},
        {.name = "mmap", .fn = run_mmap, .ctx = &d},
    };
    bench_alternate(v, sizeof v / sizeof v[0]);
    bench_row r;
    r = bench_row_of_limit("MB/s", BENCH_MBPS, &v[0], "memcpy",
                           "memcpy, one tune record (%.0f B) at a time", rec);
    bench_emit(&r);
    bench_lim.memcpy_Bps = r.limit * 1e6;
    r = bench_row_of_limit("MB/s", BENCH_MBPS, &v[1], "xxh3",
                           "XXH3-64, one tune record at a time");
    bench_emit(&r);
    bench_lim.xxh3_Bps = r.limit * 1e6;
    r = bench_row_of_limit("MB/s", BENCH_MBPS, &v[2], "zstd-3",
                           "zstd -3 compress, %.0f MiB of tune records",
                           (double)d.total / (1 << 20));
    bench_emit(&r);
    bench_lim.zstd_Bps = r.limit * 1e6;
    r = bench_row_of_limit("B/rec", BENCH_DISK_PER, &v[2], "zstd-3",
                           "zstd -3 compressed size per tune record");
    bench_emit(&r);
    r = bench_row_of_limit("MB/s", BENCH_MBPS, &v[3], "zstd-d",
                           "zstd decompress");
    bench_emit(&r);
    r = bench_row_of_limit("us", BENCH_US_PER, &v[4], "fdatasync",
                           "write %.0f B + fdatasync (latency)", rec);
    bench_emit(&r);
    bench_lim.fsync_s = r.limit / 1e6;
    r = bench_row_of_limit("MB/s", BENCH_MBPS, &v[5], "disk",
                           "sequential write + fdatasync, %zu MiB",
                           d.disk_bytes >> 20);
    bench_emit(&r);
    bench_lim.disk_Bps = r.limit * 1e6;
    r = bench_row_of_limit("MB/s", BENCH_MBPS, &v[6], "pagecache",
                           "mmap stores into a new preallocated file");
    bench_emit(&r);
    bench_lim.mmap_Bps = r.limit * 1e6;
    close(d.fd);
    bench_rmtree(d.dir);
    lim_free(&d);
}
