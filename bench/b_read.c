/* SPDX-License-Identifier: MIT */
/*
 * b_read.c - reading everything back: envlog's reader against a SQLite scan.
 *
 * The same records are written once (untimed) into an environment of
 * several sessions and into one SQLite table.  envlog's side lists the
 * sessions directory and reads every session through envlog_reader_next,
 * which checks each fragment's checksum, the segment chain and seq order,
 * and decodes every record into its struct.  SQLite's side is a SELECT over
 * all rows, first touching only the bytes (what the issue asks), then also
 * decoding each value with the same decoder, which is what a SQLite-backed
 * replay would have to do.  Both read from a warm page cache.  The limit
 * runs in the same alternation: reading every segment file of the
 * environment into memory and hashing it with XXH3, the least a reader that
 * checks what it reads can do.
 */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

typedef struct read_ctx {
    int side;             /* 0 envlog, 1 sqlite scan, 2 sqlite scan + decode,
                             3 the limit */
    const char *env, *db;
    uint64_t expect;      /* event records (envlog counts session records) */
} read_ctx;

/* Reads every file of the directory tree at `path` into `buf` and hashes
 * it in 32 KiB blocks; returns the bytes read. */
static uint64_t read_and_hash(const char *path, envlog_buf *buf, uint64_t *acc)
{
    DIR *d = opendir(path);
    uint64_t total = 0;
    struct dirent *de;
    if (!d)
        bench_die("cannot list %s", path);
    while ((de = readdir(d))) {
        char p[4400];
        struct stat st;
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        if (lstat(p, &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            total += read_and_hash(p, buf, acc);
            continue;
        }
        if (!S_ISREG(st.st_mode) || !strstr(de->d_name, ".log"))
            continue;
        int fd = open(p, O_RDONLY);
        if (fd < 0)
            bench_die("opening %s: %s", p, strerror(errno));
        buf->len = 0;
        bench_check(envlog_buf_reserve(buf, (size_t)st.st_size + 1), "a read buffer");
        ssize_t r = pread(fd, buf->p, (size_t)st.st_size, 0);
        close(fd);
        if (r != st.st_size)
            bench_die("reading %s: short", p);
        for (off_t at = 0; at < st.st_size; at += 32768) {
            size_t len = st.st_size - at < 32768 ? (size_t)(st.st_size - at) : 32768;
            *acc ^= XXH3_64bits_withSeed(buf->p + at, len, (uint64_t)at);
        }
        total += (uint64_t)st.st_size;
    }
    closedir(d);
    return total;
}

static void run_read(void *vctx, double scale, bench_run *out)
{
    read_ctx *c = vctx;
    double bytes = 0;
    uint64_t n;
    (void)scale; /* the data set is fixed; a warm-up reads it all */
    if (c->side == 3) {
        static envlog_buf buf;
        uint64_t acc = 0;
        uint64_t t0 = bench_now_ns();
        double file = (double)read_and_hash(c->env, &buf, &acc);
        uint64_t t1 = bench_now_ns();
        /* The payload's share of the file bytes, as envlog's runs count it. */
        *out = (bench_run){(double)(t1 - t0) / 1e9, (double)c->expect, file, (double)acc};
        return;
    }
    uint64_t t0 = bench_now_ns();
    if (c->side == 0)
        n = bench_envlog_read(c->env, &bytes);
    else
        n = bench_sql_scan(c->db, c->side == 2, &bytes);
    uint64_t t1 = bench_now_ns();
    bench_expect(n == c->expect, "%s read %" PRIu64 " records of %" PRIu64,
                 c->side ? "sqlite" : "envlog", n, c->expect);
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)n, bytes, 0};
}

static void read_rows(const char *what, uint64_t sessions, uint64_t per,
                      size_t binary)
{
    char dir[4200], env[4300], db[4300];
    bench_compile bc;
    bench_fresh_dir(dir, sizeof dir, "read");
    if (mkdir(dir, 0700))
        bench_die("creating %s: %s", dir, strerror(errno));
    snprintf(env, sizeof env, "%s/env", dir);
    snprintf(db, sizeof db, "%s/records.db", dir);
    if (binary)
        bench_compile_init(&bc, binary);
    for (uint64_t s = 0; s < sessions; s++) {
        bench_envlog_record(env, ENVLOG_SYNC_CLOSE, per, binary ? &bc : NULL, s * per);
        bench_sql_record(db, BENCH_SQL_BATCH, per, binary ? &bc : NULL, s * per);
    }
    if (binary)
        bench_compile_free(&bc);
    read_ctx ctx[4] = {
        {0, env, db, sessions * (per + 1)},
        {1, env, db, sessions * per},
        {2, env, db, sessions * per},
        {3, env, db, sessions * (per + 1)},
    };
    bench_variant v[4];
    static const char *const names[] = {"envlog", "sqlite scan", "sqlite scan+decode",
                                        "limit: read+xxh3"};
    for (int i = 0; i < 4; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = names[i];
        v[i].fn = run_read;
        v[i].ctx = &ctx[i];
    }
    bench_alternate(v, 4);
    /* The limit reads the files' bytes; in payload terms it goes as fast,
     * times the payload's share of them. */
    double lim_ev = bench_variant_stat(&v[3], BENCH_RATE).median;
    double payload_share = v[0].runs[0].bytes / v[3].runs[0].bytes;
    double lim_mb = bench_variant_stat(&v[3], BENCH_MBPS).median * payload_share;
    for (int s = 1; s <= 2; s++) {
        const char *vs = s == 1 ? "scan" : "scan+decode";
        bench_row r = bench_row_make("read", "ev/s", BENCH_RATE, &v[0], &v[s],
                                     "%s, %" PRIu64 "x%" PRIu64 " | %s", what,
                                     sessions, per, vs);
        bench_row_limit(&r, lim_ev, "read+xxh3");
        bench_emit(&r);
        r = bench_row_make("read", "MB/s", BENCH_MBPS, &v[0], &v[s],
                           "%s, %" PRIu64 "x%" PRIu64 " | %s", what, sessions, per, vs);
        bench_row_limit(&r, lim_mb, "read+xxh3");
        bench_emit(&r);
    }
    bench_rmtree(dir);
}

void bench_section_read(void)
{
    read_rows("tune", BENCH_SIZE(8, 2, 2), BENCH_SIZE(250000, 20000, 50), 0);
    read_rows("compile 64K", BENCH_SIZE(4, 2, 2), BENCH_SIZE(512, 64, 2), 65536);
}
