/* SPDX-License-Identifier: MIT */
/*
 * b_replay.c - reading and folding everything back: envlog's reader and its
 * replay against a SQLite scan.
 *
 * The same records are written once (untimed) into an environment of
 * several sessions and into one SQLite table.  Each timed run is a process
 * starting cold on a warm page cache:
 *
 *  - envlog reader: lists the sessions and reads every one through
 *    envlog_reader_next, which checks each fragment's checksum, the segment
 *    chain and seq order, and decodes every record in full;
 *  - envlog fold: envlog_env_open plus envlog_state_open, which merges all
 *    sessions into the total order and folds them into the cache state (a
 *    winner per tune key, a binary per kernel), decoding records only as
 *    far as the fold needs: what a runtime does when it starts;
 *  - SQLite scan: a SELECT over all rows that only touches the bytes, the
 *    least any SQLite-backed store does to load its records;
 *  - SQLite scan+decode: also decoding each value with the same decoder;
 *  - SQLite scan+fold: also folding each into the same state with the same
 *    fold, which is what replay over a SQLite store would be;
 *  - the limit: reading every segment file into memory and hashing it with
 *    XXH3, the least a reader that checks what it reads can do.
 *
 * All run in the same alternation.
 */
#include "bench.h"
#include "replay_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

typedef enum read_side {
    SIDE_READER,
    SIDE_FOLD,
    SIDE_SCAN,
    SIDE_SCAN_DECODE,
    SIDE_SCAN_FOLD,
    SIDE_LIMIT,
    N_SIDES
} read_side;

static const char *const side_names[N_SIDES] = {
    "envlog reader", "envlog fold", "sqlite scan", "sqlite scan+decode",
    "sqlite scan+fold", "limit: read+xxh3",
};

typedef struct read_ctx {
    read_side side;
    const char *env, *db;
    uint64_t records; /* event records written */
    uint64_t sessions;
    bool compile;     /* compile records: entries are kernels */
} read_ctx;

/* Reads every segment file of the directory tree at `path` into `buf` and
 * hashes it in 32 KiB blocks; returns the bytes read. */
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

/* envlog's replay: open the environment and fold it.  The payload bytes
 * are those of every record folded (the same count the reader gives). */
static uint64_t envlog_fold(const read_ctx *c)
{
    envlog_env *env;
    envlog_state *st;
    envlog_state_stats ss;
    bench_check(envlog_env_open(c->env, ENVLOG_OPEN_READONLY, &env), "opening an environment");
    bench_check(envlog_state_open(env, NULL, &st), "folding an environment");
    envlog_state_stats_get(st, &ss);
    bench_expect((c->compile ? ss.kernels : ss.tunes) == c->records && ss.damaged == 0,
                 "the fold holds %" PRIu64 " tunes and %" PRIu64 " kernels of %" PRIu64,
                 ss.tunes, ss.kernels, c->records);
    envlog_state_close(st);
    envlog_env_close(env);
    return ss.records;
}

static void run_read(void *vctx, double scale, bench_run *out)
{
    read_ctx *c = vctx;
    static envlog_buf buf;
    double bytes = 0;
    uint64_t n = 0, acc = 0, want = c->records;
    (void)scale; /* the data set is fixed; a warm-up reads it all */
    uint64_t t0 = bench_now_ns();
    switch (c->side) {
    case SIDE_READER: n = bench_envlog_read(c->env, &bytes); break;
    case SIDE_FOLD: n = envlog_fold(c); break;
    case SIDE_SCAN: n = bench_sql_scan(c->db, BENCH_SCAN_BYTES, &bytes); break;
    case SIDE_SCAN_DECODE: n = bench_sql_scan(c->db, BENCH_SCAN_DECODE, &bytes); break;
    case SIDE_SCAN_FOLD: n = bench_sql_scan(c->db, BENCH_SCAN_FOLD, &bytes); break;
    case SIDE_LIMIT: bytes = (double)read_and_hash(c->env, &buf, &acc); break;
    case N_SIDES: break;
    }
    uint64_t t1 = bench_now_ns();
    /* envlog's sides count each session's own record too. */
    if (c->side == SIDE_READER || c->side == SIDE_FOLD)
        want += c->sessions;
    if (c->side != SIDE_LIMIT)
        bench_expect(n == want, "%s handed out %" PRIu64 " records of %" PRIu64,
                     side_names[c->side], n, want);
    /* The limit's items are the records its bytes hold; the hash goes
     * into its unused disk field so it is not optimised away. */
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)(n ? n : want), bytes,
                       (double)(acc & 1)};
}

static void rows_vs(const char *section, const char *label, const bench_variant *ev,
                    const bench_variant *sq, double lim_ev, double lim_mb)
{
    bench_row r = bench_row_make(section, "ev/s", BENCH_RATE, ev, sq, "%s | %s", label,
                                 sq->name + 7);
    bench_row_limit(&r, lim_ev, "read+xxh3");
    bench_emit(&r);
    r = bench_row_make(section, "MB/s", BENCH_MBPS, ev, sq, "%s | %s", label, sq->name + 7);
    bench_row_limit(&r, lim_mb, "read+xxh3");
    bench_emit(&r);
}

static void read_rows(const char *what, uint64_t sessions, uint64_t per, size_t binary)
{
    char dir[4200], env[4300], db[4300], label[160];
    bench_compile bc;
    bench_new_dir(dir, sizeof dir, "replay");
    snprintf(env, sizeof env, "%s/env", dir);
    snprintf(db, sizeof db, "%s/records.db", dir);
    if (binary)
        bench_compile_init(&bc, binary);
    /* The fold is of the sessions themselves: no compaction at a session
     * end turns some of them into a snapshot behind the measurement. */
    envlog_env *e;
    envlog_config cfg;
    bench_check(envlog_env_open(env, ENVLOG_OPEN_CREATE, &e), "creating an environment");
    envlog_config_defaults(&cfg);
    bench_check(envlog_config_set(&cfg, "auto_compact", "off"), "a config setting");
    bench_check(envlog_config_write(e, &cfg), "writing the config");
    envlog_env_close(e);
    for (uint64_t s = 0; s < sessions; s++) {
        bench_envlog_record(env, ENVLOG_SYNC_CLOSE, per, binary ? &bc : NULL, s * per);
        bench_sql_record(db, BENCH_SQL_BATCH, per, binary ? &bc : NULL, s * per);
    }
    if (binary)
        bench_compile_free(&bc);
    read_ctx ctx[N_SIDES];
    bench_variant v[N_SIDES];
    for (int i = 0; i < N_SIDES; i++) {
        ctx[i] = (read_ctx){(read_side)i, env, db, sessions * per, sessions, binary != 0};
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = side_names[i];
        v[i].fn = run_read;
        v[i].ctx = &ctx[i];
    }
    bench_alternate(v, N_SIDES);
    /* The limit reads the files' bytes; in payload terms it goes as fast,
     * times the payload's share of them. */
    double lim_ev = bench_variant_stat(&v[SIDE_LIMIT], BENCH_RATE).median;
    double payload_share = v[SIDE_READER].runs[0].bytes / v[SIDE_LIMIT].runs[0].bytes;
    double lim_mb = bench_variant_stat(&v[SIDE_LIMIT], BENCH_MBPS).median * payload_share;
    /* The fold counts the same payload bytes as the reader. */
    for (int i = 0; i < v[SIDE_FOLD].n_runs; i++)
        v[SIDE_FOLD].runs[i].bytes = v[SIDE_READER].runs[0].bytes;
    snprintf(label, sizeof label, "%s, %" PRIu64 "x%" PRIu64 " read", what, sessions, per);
    rows_vs("replay", label, &v[SIDE_READER], &v[SIDE_SCAN], lim_ev, lim_mb);
    rows_vs("replay", label, &v[SIDE_READER], &v[SIDE_SCAN_DECODE], lim_ev, lim_mb);
    snprintf(label, sizeof label, "%s, %" PRIu64 "x%" PRIu64 " fold", what, sessions, per);
    rows_vs("replay", label, &v[SIDE_FOLD], &v[SIDE_SCAN], lim_ev, lim_mb);
    rows_vs("replay", label, &v[SIDE_FOLD], &v[SIDE_SCAN_FOLD], lim_ev, lim_mb);
    bench_rmtree(dir);
}

void bench_section_replay(void)
{
    read_rows("tune", BENCH_SIZE(8, 2, 2), BENCH_SIZE(250000, 20000, 50), 0);
    read_rows("compile 64K", BENCH_SIZE(4, 2, 2), BENCH_SIZE(512, 64, 2), 65536);
}
