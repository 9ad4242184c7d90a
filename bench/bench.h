/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what the files of envlog-bench share.
 *
 * envlog-bench measures envlog side by side with the store a user would pick
 * instead (SQLite) and with the machine's own limits, in one run.  The
 * harness runs every variant of a measurement in turn, repetition after
 * repetition (rotating which goes first), so a noisy neighbour or a warming
 * disk cache hits envlog and the baseline alike; each row reports the median
 * and the spread of its repetitions.  Nothing here asserts a timing.
 *
 * A section is one function in the table in bench_main.c; a later section (replay
 * fold, cold open and lookup, bundles) is one more file and one more line.
 */
#ifndef ENVLOG_BENCH_H
#define ENVLOG_BENCH_H

#include "core_int.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- options */

typedef struct bench_opts {
    bool quick;       /* smaller sizes: the whole run in under a minute */
    bool json;        /* one JSON object per row instead of the table */
    bool selftest;    /* tiny sizes, checks only, rows not printed */
    int reps;         /* timed repetitions of each measurement */
    const char *only; /* run only sections whose name contains this */
    char root[4096];  /* the run's private temporary directory */
} bench_opts;

extern bench_opts bench_o;
/* Where rows go: stdout, or /dev/null while self-testing (the formatting
 * still runs). */
extern FILE *bench_out;

/* Sizes pick one of three values by mode. */
#define BENCH_SIZE(full_, quick_, self_)                                        \
    (bench_o.selftest ? (self_) : bench_o.quick ? (quick_) : (full_))

/* Prints "envlog-bench: error: ..." and exits with status 2. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Dies with envlog_errmsg() when `e` is not ENVLOG_OK. */
void bench_check(envlog_err e, const char *what);
/* A self-test or consistency check: dies with `what` when `ok` is false. */
void bench_expect(bool ok, const char *what, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ clock */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* ------------------------------------------------------------ statistics */

typedef struct bench_stat {
    int n;
    double median, min, max, q1, q3;
} bench_stat;

/* Order statistics of `n` values (the array is sorted in place). */
bench_stat bench_stat_of(double *v, int n);

/* --------------------------------------------------------------- running */

/* What one timed run of a variant reports. */
typedef struct bench_run {
    double secs;    /* the timed part */
    double items;   /* records, events or operations done */
    double bytes;   /* payload bytes handled */
    double disk;    /* bytes on disk afterwards; 0 when it does not apply */
} bench_run;

#define BENCH_REPS_MAX 64

/* One variant: `fn` does one run of `scale` (1 for a timed run, smaller for
 * the warm-up) and fills *out. */
typedef struct bench_variant {
    const char *name;
    void (*fn)(void *ctx, double scale, bench_run *out);
    void *ctx;
    bench_run runs[BENCH_REPS_MAX]; /* filled by bench_alternate */
    int n_runs;
} bench_variant;

/* Warms every variant up once (at scale 0.1), then runs them
 * `bench_o.reps` times each, alternating: repetition r starts with variant
 * r mod n. */
void bench_alternate(bench_variant *v, size_t n);

/* What a row is computed from, per run. */
typedef enum bench_metric {
    BENCH_RATE,      /* items / secs */
    BENCH_NS_PER,    /* secs * 1e9 / items */
    BENCH_MBPS,      /* bytes / secs / 1e6 */
    BENCH_DISK_PER,  /* disk / items */
    BENCH_US_PER,    /* secs * 1e6 / items */
    BENCH_SECS_MS    /* secs * 1e3 */
} bench_metric;

/* The statistics of `m` over a variant's runs. */
bench_stat bench_variant_stat(const bench_variant *v, bench_metric m);

/* ------------------------------------------------------------------ rows */

typedef struct bench_row {
    const char *section;
    char metric[96];
    const char *unit;
    bool higher_better;
    bool has_envlog, has_sqlite, has_limit;
    bench_stat envlog, sqlite;
    double limit;           /* in the row's unit */
    const char *limit_by;   /* what the limit is: "memcpy", "fdatasync", ... */
    bool has_limit_stat;    /* a limits row: the limit's own repetitions */
    bench_stat limit_stat;
    const char *baseline;   /* what the sqlite column holds when it is not
                               SQLite ("redis-cli"), NULL for SQLite */
} bench_row;

/* A row from two variants (either may be NULL) and metric `m`. */
bench_row bench_row_make(const char *section, const char *unit, bench_metric m,
                         const bench_variant *envlog, const bench_variant *sqlite,
                         const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void bench_row_limit(bench_row *r, double limit, const char *by);
/* A row of the limits section: `v`'s measurement is the limit. */
bench_row bench_row_of_limit(const char *unit, bench_metric m, const bench_variant *v,
                             const char *by, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Prints a row: a table line, or one JSON object with --json. */
void bench_emit(const bench_row *r);
/* Prints the table header (once, before the first row). */
void bench_table_begin(void);
/* Rows emitted so far. */
int bench_rows_emitted(void);

/* ------------------------------------------------------------ the limits */

/* Set by the limits section; zero when it did not run.  The recording and
 * reading sections also measure their own limits alongside envlog, on the
 * same bytes; these serve the rest (sync=record, scaling). */
typedef struct bench_limits {
    double memcpy_Bps;     /* bytes per second */
    double xxh3_Bps;       /* XXH3-64 over record-sized pieces */
    double zstd_Bps;       /* zstd level 3 compression */
    double fsync_s;        /* one small write + fdatasync, median seconds */
    double disk_Bps;       /* sequential write + fdatasync */
    double mmap_Bps;       /* record-sized stores into fresh pages of a
                              preallocated, mapped file (no sync) */
} bench_limits;

extern bench_limits bench_lim;

/* The fastest a checked read can go: copy from the page cache and hash
 * every byte once. */
double bench_read_limit_Bps(void);

/* ---------------------------------------------------------------- files */

/* A fresh, empty directory under the run's root: "<root>/<tag>-<n>". */
void bench_fresh_dir(char *out, size_t size, const char *tag);
/* bench_fresh_dir(), created. */
void bench_new_dir(char *out, size_t size, const char *tag);
/* Removes a directory tree. */
void bench_rmtree(const char *path);
/* Bytes in the regular files under `path` (their st_size). */
uint64_t bench_du(const char *path);

/* ------------------------------------------------------------ test data */

/* A tune record of realistic shape: 8 candidates with Triton-style config
 * names, each trial measured (samples, five timing statistics from float
 * CUDA event times), a median-adaptive policy with two parameters. */
typedef struct bench_tune {
    envlog_tune t;
    envlog_trial trials[8];
    envlog_param params[2];
    char key[48];
} bench_tune;

void bench_tune_init(bench_tune *bt);
/* Makes record `i` (its key and timings differ from every other). */
void bench_tune_fill(bench_tune *bt, uint64_t i);

/* A compile record carrying a stored binary of a given size. */
typedef struct bench_compile {
    envlog_compile c;
    char name[48];
    uint8_t *binary;
    size_t size;
} bench_compile;

void bench_compile_init(bench_compile *bc, size_t binary_size);
void bench_compile_fill(bench_compile *bc, uint64_t i);
void bench_compile_free(bench_compile *bc);

/* The CBOR payload of a record as envlog writes it, at seq `seq`. */
size_t bench_encode(envlog_buf *b, envlog_kind kind, const void *body, uint64_t seq);
/* The mean payload size of the first records of a kind (their seq near
 * `seq`): what the MB/s rows count. */
double bench_tune_payload_size(uint64_t seq);
double bench_compile_payload_size(size_t binary_size, uint64_t seq);

/* Records `n` tune records (or compiles, when `bc` is not NULL) into a new
 * session of the environment at `path`, which is created.  Returns the
 * session's log bytes. */
uint64_t bench_envlog_record(const char *path, envlog_sync sync, uint64_t n,
                             bench_compile *bc, uint64_t first);
/* Reads every session of the environment at `path` back, decoding each
 * record; returns the number of event records and adds payload bytes. */
uint64_t bench_envlog_read(const char *path, double *payload_bytes);

/* ---------------------------------------------------------------- SQLite */

typedef enum bench_sql_mode {
    BENCH_SQL_COMMIT,      /* one transaction per record, synchronous=NORMAL */
    BENCH_SQL_BATCH,       /* all records in one transaction */
    BENCH_SQL_COMMIT_FULL  /* one per record, synchronous=FULL (durable) */
} bench_sql_mode;

/* Inserts `n` records (tunes, or compiles when `bc` is not NULL), encoded
 * with envlog_event_encode, into records(session, seq, value) of a new
 * database `path`; the timed work includes opening and closing. */
void bench_sql_record(const char *path, bench_sql_mode mode, uint64_t n,
                      bench_compile *bc, uint64_t first);
typedef enum bench_scan_mode {
    BENCH_SCAN_BYTES,  /* touch each row's bytes */
    BENCH_SCAN_DECODE, /* and decode each value as envlog's reader does */
    BENCH_SCAN_FOLD    /* and fold it into a state as envlog's replay does */
} bench_scan_mode;

/* Scans every row of records.  Returns the rows and adds payload bytes. */
uint64_t bench_sql_scan(const char *path, bench_scan_mode mode, double *payload_bytes);
/* A cache of `n` tune entries, as a runtime starts with: the records of
 * one session compacted into <dir>/env (a snapshot, no sessions) and the
 * same entries in the SQLite file <dir>/cache.db (bench_entries_db). */
typedef struct bench_cache {
    char dir[4200], env[4300], db[4300];
} bench_cache;

void bench_cache_make(bench_cache *c, const char *tag, uint64_t n);

/* Writes the standing entries of `env`'s snapshot into a new SQLite file
 * `path` as entries(namespace, key, value, origin, PRIMARY KEY(namespace,
 * key)): value is the snapshot ENTRY's record, key a tune key with its
 * checksum ("key#<16 hex digits>") or a kernel key in hex.  Sets *count. */
void bench_entries_db(envlog_env *env, const char *path, uint64_t *count);
/* A runtime's start, timed (ns): a fresh read-only open of the environment
 * at `path` and the lookup of `bt`'s key; or of the SQLite file of
 * bench_entries_db() and an indexed select of it, decoded.  A key that is
 * not there stops the run, and so does a winner other than `want` (NULL:
 * any). */
uint64_t bench_first_lookup(const char *path, const bench_tune *bt, const char *want);
uint64_t bench_first_select(const char *db_path, const bench_tune *bt, const char *want);
/* The database's files' bytes (main file plus any WAL left). */
uint64_t bench_sql_du(const char *path);
/* Removes a database and its -wal, -shm and -journal files. */
void bench_sql_remove(const char *path);

/* --------------------------------------------------------------- sections */

void bench_section_limits(void);
void bench_section_record_tune(void);
void bench_section_record_compile(void);
void bench_section_replay(void);
void bench_section_lookup(void);
void bench_section_upkeep(void);
void bench_section_bundle(void);
void bench_section_scale(void);
void bench_section_remote(void);

/* Checks of the harness itself (statistics, formatting). */
void bench_selftest_harness(void);

#endif /* ENVLOG_BENCH_H */
