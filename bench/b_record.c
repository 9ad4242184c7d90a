/* SPDX-License-Identifier: MIT */
/*
 * b_record.c - recording: envlog at each sync policy against SQLite.
 *
 * Each timed run is a whole recording process's life: open (or create) the
 * store, record N records, close it (envlog seals and, at the default
 * policy, syncs; SQLite checkpoints).  Building each record's struct is in
 * the loop for both sides, and so is encoding: envlog encodes inside the
 * recording call, the SQLite recorder calls envlog_event_encode itself.
 *
 * Pairs compared: envlog's default (sync=close) and sync=none against a
 * commit per record and against one batched transaction; sync=record, which
 * survives power loss, against SQLite with synchronous=FULL, which does too.
 *
 * The limits run in the same alternation, on the same number of bytes: the
 * records' log bytes stored into fresh pages of a preallocated, mapped file
 * (what sync=none cannot avoid), and the same with the disk started on
 * each finished MiB and one fdatasync at the end (what sync=close cannot
 * avoid: the page cache and the disk working side by side), so a busy
 * machine slows a limit and envlog alike and the share stays meaningful.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct rec_ctx {
    bool sql;
    envlog_sync sync;
    bench_sql_mode mode;
    uint64_t n;          /* records per timed run */
    bench_compile *bc;   /* NULL: tune records */
    double payload;      /* mean CBOR payload bytes per record */
    int limit;           /* 1: the page cache bound, 2: and a sync */
    bool encode_only;    /* the records built and encoded, nothing stored */
} rec_ctx;

/* The bytes envlog's log takes for a record of `payload` bytes: the
 * payload and a 7-byte header per fragment of a 32 KiB block. */
static size_t log_bytes(double payload)
{
    size_t n = (size_t)(payload + 0.5);
    return n + 7 * (1 + n / (32768 - 7));
}

/* The limit runs: `n` records' log bytes copied into a new file as
 * envlog's writer would (1 MiB preallocation steps, a shared mapping; for
 * the sync=close bound, each finished step unmapped and its writeback
 * started), then, for that bound, one fdatasync. */
static void run_limit(const rec_ctx *c, uint64_t n, const char *dir, bench_run *out)
{
    static uint8_t src[(1u << 20) + 4096];
    char path[4300];
    size_t per = log_bytes(c->payload), step = 1u << 20;
    size_t len = per * n, map_len = (len + step - 1) / step * step, alloc = 0, unmapped = 0;
    if (per > sizeof src)
        bench_die("a %zu-byte record is over the limit runs' buffer", per);
    memset(src, 0x5a, per);
    if (mkdir(dir, 0700))
        bench_die("creating %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/limit.log", dir);
    uint64_t t0 = bench_now_ns();
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        bench_die("creating %s: %s", path, strerror(errno));
    uint8_t *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        bench_die("mapping %s: %s", path, strerror(errno));
    for (size_t at = 0; at < len; at += per) {
        while (at + per > alloc) {
            int rc = posix_fallocate(fd, (off_t)alloc, (off_t)step);
            if (rc)
                bench_die("preallocating %s: %s", path, strerror(rc));
            /* As envlog's writer: the disk starts on each finished step,
             * unmapped first (it is never written again). */
            if (c->limit == 2 && alloc) {
                size_t done = at / 4096 * 4096;
                munmap(m + unmapped, done - unmapped);
                unmapped = done;
                sync_file_range(fd, (off_t)(alloc - step), (off_t)step, SYNC_FILE_RANGE_WRITE);
            }
            alloc += step;
        }
        memcpy(m + at, src, per);
    }
    if (c->limit == 2 && fdatasync(fd))
        bench_die("syncing %s: %s", path, strerror(errno));
    munmap(m + unmapped, map_len - unmapped);
    close(fd);
    uint64_t t1 = bench_now_ns();
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, (double)n * c->payload,
                       (double)len};
}

/* What recording does before it stores anything: each record's struct
 * built as the recording runs build it and encoded as the session encodes
 * it, into one buffer; no file, no session. */
static void run_encode(const rec_ctx *c, uint64_t n, bench_run *out)
{
    envlog_buf b = {0};
    bench_tune bt;
    if (!c->bc)
        bench_tune_init(&bt);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        if (c->bc)
            bench_compile_fill(c->bc, i);
        else
            bench_tune_fill(&bt, i);
        bench_encode(&b, c->bc ? ENVLOG_KIND_COMPILE : ENVLOG_KIND_TUNE,
                     c->bc ? (const void *)&c->bc->c : &bt.t, i + 1);
    }
    uint64_t t1 = bench_now_ns();
    envlog_buf_free(&b);
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, (double)n * c->payload, 0};
}

static void run_rec(void *vctx, double scale, bench_run *out)
{
    rec_ctx *c = vctx;
    char dir[4200], path[4300];
    uint64_t n = (uint64_t)((double)c->n * scale);
    if (n < 1)
        n = 1;
    if (c->encode_only) {
        run_encode(c, n, out);
        return;
    }
    bench_fresh_dir(dir, sizeof dir, c->sql ? "sql" : "env");
    uint64_t t0, t1, disk;
    if (c->limit) {
        run_limit(c, n, dir, out);
        bench_rmtree(dir);
        return;
    }
    if (c->sql) {
        if (mkdir(dir, 0700))
            bench_die("creating %s: %s", dir, strerror(errno));
        snprintf(path, sizeof path, "%s/records.db", dir);
        t0 = bench_now_ns();
        bench_sql_record(path, c->mode, n, c->bc, 0);
        t1 = bench_now_ns();
        disk = bench_sql_du(path);
    } else {
        t0 = bench_now_ns();
        bench_envlog_record(dir, c->sync, n, c->bc, 0);
        t1 = bench_now_ns();
        disk = bench_du(dir);
    }
    bench_rmtree(dir);
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, (double)n * c->payload,
                       (double)disk};
}

enum { V_NONE, V_CLOSE, V_RECORD, V_COMMIT, V_BATCH, V_FULL, V_LIM_NONE,
       V_LIM_CLOSE, V_ENCODE, V_COUNT };

static const char *const vname[V_COUNT] = {
    "sync=none", "sync=close", "sync=record", "sqlite commit/rec",
    "sqlite one txn", "sqlite FULL commit/rec", "limit: pagecache",
    "limit: pagecache+disk", "encoding alone",
};

typedef struct pair {
    int e, s;
    const char *label;
} pair;

/* The pairs every recording section prints, in order of interest. */
static const pair pairs[] = {
    {V_CLOSE, V_COMMIT, "close | commit per record"},
    {V_CLOSE, V_BATCH, "close | one transaction"},
    {V_NONE, V_COMMIT, "none | commit per record"},
    {V_NONE, V_BATCH, "none | one transaction"},
    {V_RECORD, V_FULL, "record | FULL commit per record"},
};

/* The fastest a policy could record, in records per second: sync=none is
 * bound by handing its bytes to the page cache through a mapping, sync=close
 * by that and the disk writing them (the syncs at rotation and close wait
 * for it), both measured alongside; sync=record by one fdatasync per record
 * (the limits section's latency). */
static double rate_limit(int e, const bench_variant *v, const char **by)
{
    switch (e) {
    case V_NONE:
        *by = "pagecache";
        return bench_variant_stat(&v[V_LIM_NONE], BENCH_RATE).median;
    case V_CLOSE:
        *by = "pagecache+disk";
        return bench_variant_stat(&v[V_LIM_CLOSE], BENCH_RATE).median;
    default:
        *by = "fdatasync";
        return bench_lim.fsync_s > 0 ? 1.0 / bench_lim.fsync_s : 0;
    }
}

/* Where a recording's time goes: building and encoding the records (no
 * I/O), for tune records against copying their bytes a record at a time
 * (the limits section's memcpy, measured on tune records: no encoder
 * writes them faster); and the rest of each policy's time (its runs less
 * the encoding runs made beside them), against its limit, which stores
 * bytes made beforehand. */
static void split_rows(const char *section, const char *what, const bench_variant *v,
                       double payload, bool tune)
{
    bench_row r = bench_row_make(section, "ns/rec", BENCH_NS_PER, &v[V_ENCODE], NULL,
                                 "%s encoding alone", what);
    if (tune && bench_lim.memcpy_Bps > 0)
        bench_row_limit(&r, 1e9 * payload / bench_lim.memcpy_Bps, "memcpy");
    bench_emit(&r);
    for (int e = V_NONE; e <= V_CLOSE; e++) {
        bench_variant rest = {.name = "less encoding"};
        const bench_variant *p = &v[e], *enc = &v[V_ENCODE];
        for (int i = 0; i < p->n_runs && i < enc->n_runs; i++) {
            const bench_run *a = &p->runs[i], *b = &enc->runs[i];
            double per = a->secs / a->items - b->secs / b->items;
            rest.runs[rest.n_runs++] = (bench_run){per > 0 ? per * a->items : 0, a->items,
                                                   a->bytes, 0};
        }
        const char *by;
        double lim = rate_limit(e, v, &by);
        r = bench_row_make(section, "ns/rec", BENCH_NS_PER, &rest, NULL,
                           "%s %s less encoding", what, e == V_NONE ? "none" : "close");
        bench_row_limit(&r, lim > 0 ? 1e9 / lim : 0, by);
        bench_emit(&r);
    }
}

/* Runs the variants and prints the rows of one record kind (`tune`: tune
 * records, which also get rows in ns/rec and the memcpy bound). */
static void record_rows(const char *section, const char *what, rec_ctx *ctx,
                        bool tune)
{
    bench_variant v[V_COUNT];
    for (int i = 0; i < V_COUNT; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = vname[i];
        v[i].fn = run_rec;
        v[i].ctx = &ctx[i];
    }
    bench_alternate(v, V_COUNT);
    double payload = ctx[V_CLOSE].payload;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const pair *p = &pairs[i];
        const char *by;
        double lim = rate_limit(p->e, v, &by);
        bench_row r = bench_row_make(section, "rec/s", BENCH_RATE, &v[p->e], &v[p->s],
                                     "%s %s", what, p->label);
        bench_row_limit(&r, lim, by);
        bench_emit(&r);
        if (tune) {
            r = bench_row_make(section, "ns/rec", BENCH_NS_PER, &v[p->e], &v[p->s],
                               "%s %s", what, p->label);
            bench_row_limit(&r, lim > 0 ? 1e9 / lim : 0, by);
            bench_emit(&r);
        }
    }
    for (int e = V_NONE; e <= V_CLOSE; e++) {
        const char *by;
        double lim = rate_limit(e, v, &by) * payload / 1e6;
        bench_row r = bench_row_make(section, "MB/s", BENCH_MBPS, &v[e], &v[V_BATCH],
                                     "%s payload, %s | one transaction", what,
                                     e == V_NONE ? "none" : "close");
        bench_row_limit(&r, lim, by);
        bench_emit(&r);
    }
    split_rows(section, what, v, payload, tune);
    bench_row r = bench_row_make(section, "B/rec", BENCH_DISK_PER, &v[V_CLOSE],
                                 &v[V_COMMIT], "%s on disk | commit per record", what);
    bench_row_limit(&r, payload, "payload");
    bench_emit(&r);
    r = bench_row_make(section, "B/rec", BENCH_DISK_PER, &v[V_CLOSE], &v[V_BATCH],
                       "%s on disk | one transaction", what);
    bench_row_limit(&r, payload, "payload");
    bench_emit(&r);
}

/* Records per timed run: envlog's fast policies get `bulk`, SQLite's
 * batch `batch`, the variants that sync every record `synced`, and SQLite's
 * commit per record `commits`. */
static void sizes(rec_ctx *ctx, uint64_t bulk, uint64_t batch, uint64_t synced,
                  uint64_t commits)
{
    ctx[V_NONE] = (rec_ctx){.sync = ENVLOG_SYNC_NONE, .n = bulk};
    ctx[V_CLOSE] = (rec_ctx){.sync = ENVLOG_SYNC_CLOSE, .n = bulk};
    ctx[V_RECORD] = (rec_ctx){.sync = ENVLOG_SYNC_RECORD, .n = synced};
    ctx[V_COMMIT] = (rec_ctx){.sql = true, .mode = BENCH_SQL_COMMIT, .n = commits};
    ctx[V_BATCH] = (rec_ctx){.sql = true, .mode = BENCH_SQL_BATCH, .n = batch};
    ctx[V_FULL] = (rec_ctx){.sql = true, .mode = BENCH_SQL_COMMIT_FULL, .n = synced};
    ctx[V_LIM_NONE] = (rec_ctx){.n = bulk, .limit = 1};
    ctx[V_LIM_CLOSE] = ctx[V_LIM_NONE];
    ctx[V_LIM_CLOSE].limit = 2;
    ctx[V_ENCODE] = (rec_ctx){.n = bulk, .encode_only = true};
}

void bench_section_record_tune(void)
{
    rec_ctx ctx[V_COUNT];
    uint64_t bulk = BENCH_SIZE(500000, 40000, 200);
    sizes(ctx, bulk, BENCH_SIZE(200000, 15000, 200), BENCH_SIZE(1000, 50, 5),
          BENCH_SIZE(20000, 1500, 20));
    double payload = bench_tune_payload_size(bulk / 2);
    for (int i = 0; i < V_COUNT; i++)
        ctx[i].payload = payload;
    char what[32];
    snprintf(what, sizeof what, "tune %.0fB", payload);
    record_rows("record-tune", what, ctx, true);
}

/* How many records of `size` bytes make `budget` bytes, within [lo, hi]. */
static uint64_t count_for(uint64_t budget, size_t size, uint64_t lo, uint64_t hi)
{
    uint64_t n = budget / size;
    return n < lo ? lo : n > hi ? hi : n;
}

void bench_section_record_compile(void)
{
    static const size_t bin[] = {4096, 65536, 1u << 20};
    static const char *const label[] = {"compile 4K", "compile 64K", "compile 1M"};
    uint64_t budget = BENCH_SIZE(64u << 20, 6u << 20, 64u << 10);
    uint64_t commit_budget = BENCH_SIZE(32u << 20, 3u << 20, 32u << 10);
    uint64_t sync_budget = BENCH_SIZE(8u << 20, 512u << 10, 16u << 10);
    uint64_t sync_max = BENCH_SIZE(500, 50, 4);
    for (int k = 0; k < 3; k++) {
        bench_compile bc;
        rec_ctx ctx[V_COUNT];
        uint64_t bulk = count_for(budget, bin[k], 8, UINT64_MAX);
        bench_compile_init(&bc, bin[k]);
        sizes(ctx, bulk, bulk, count_for(sync_budget, bin[k], 3, sync_max),
              count_for(commit_budget, bin[k], 4, UINT64_MAX));
        double payload = bench_compile_payload_size(bin[k], bulk / 2);
        for (int i = 0; i < V_COUNT; i++) {
            ctx[i].bc = &bc;
            ctx[i].payload = payload;
        }
        record_rows("record-compile", label[k], ctx, false);
        bench_compile_free(&bc);
    }
}
