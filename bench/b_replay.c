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
 *    far as the fold needs: what a runtime does when it starts, with the
 *    default envlog_replay_opts.threads (on fewer than 4 CPUs, the folding
 *    thread alone); "envlog fold, 2 threads" reads the sessions ahead on
 *    a second thread, as the default does on larger machines;
 *  - SQLite scan: a SELECT over all rows that only touches the bytes, the
 *    least any SQLite-backed store does to load its records;
 *  - SQLite scan+decode: also decoding each value with the same decoder;
 *  - SQLite scan+fold: also folding each into the same state with the same
 *    fold, which is what replay over a SQLite store would be;
 *  - the limit: reading every segment file into memory and hashing it with
 *    XXH3, the least a reader that checks what it reads can do;
 *  - fresh memory: taking memory as the state takes it (whole huge pages,
 *    written in order, envlog_malloc_big) and letting it go, 160 bytes for
 *    each record: what any fold pays for the state it builds, which on a
 *    virtual machine whose host backs a guest's fresh pages on first touch
 *    can cost more than reading the records.
 *
 * All run in the same alternation.  Then, once each in a child process, the
 * peak resident memory of the fold and of SQLite's scan+fold, per standing
 * entry (the child's peak less that of a child that folds nothing), and a
 * second limit for the fold: read+xxh3 plus fresh memory for the bytes per
 * standing entry the fold's state took, the least a fold that checks what
 * it reads and builds a state of that size can do on this machine.  At 10M
 * records only envlog's sides and the limit run: SQLite's would take the
 * better part of an hour.
 */
#include "bench.h"
#include "replay_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

typedef enum read_side {
    SIDE_READER,
    SIDE_FOLD,
    SIDE_FOLD1,
    SIDE_SCAN,
    SIDE_SCAN_DECODE,
    SIDE_SCAN_FOLD,
    SIDE_LIMIT,
    SIDE_FRESH,
    N_SIDES
} read_side;

static const char *const side_names[N_SIDES] = {
    "envlog reader", "envlog fold", "envlog fold, 2 threads", "sqlite scan", "sqlite scan+decode",
    "sqlite scan+fold", "limit: read+xxh3", "limit: fresh memory",
};

/* Bytes of fresh memory the fresh-memory side takes per record. */
#define FRESH_PER_RECORD 160

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

static volatile uint8_t fresh_sink;

/* Takes `bytes` of fresh memory as the state takes it and lets it go. */
static void fresh_touch(size_t bytes)
{
    uint8_t *p = envlog_malloc_big(bytes, true);
    if (!p)
        bench_die("out of memory taking %zu bytes", bytes);
    fresh_sink += p[bytes - 1];
    envlog_free(p);
}

/* envlog's replay: open the environment and fold it.  The payload bytes
 * are those of every record folded (the same count the reader gives). */
static uint64_t envlog_fold(const read_ctx *c, int threads)
{
    envlog_env *env;
    envlog_state *st;
    envlog_state_stats ss;
    envlog_replay_opts o = {.threads = threads};
    bench_check(envlog_env_open(c->env, ENVLOG_OPEN_READONLY, &env), "opening an environment");
    bench_check(envlog_state_open(env, &o, &st), "folding an environment");
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
    case SIDE_FOLD: n = envlog_fold(c, 0); break;
    case SIDE_FOLD1: n = envlog_fold(c, 2); break;
    case SIDE_SCAN: n = bench_sql_scan(c->db, BENCH_SCAN_BYTES, &bytes); break;
    case SIDE_SCAN_DECODE: n = bench_sql_scan(c->db, BENCH_SCAN_DECODE, &bytes); break;
    case SIDE_SCAN_FOLD: n = bench_sql_scan(c->db, BENCH_SCAN_FOLD, &bytes); break;
    case SIDE_LIMIT: bytes = (double)read_and_hash(c->env, &buf, &acc); break;
    case SIDE_FRESH:
        bytes = (double)(c->records * FRESH_PER_RECORD);
        fresh_touch((size_t)bytes);
        break;
    case N_SIDES: break;
    }
    uint64_t t1 = bench_now_ns();
    /* envlog's sides count each session's own record too. */
    if (c->side == SIDE_READER || c->side == SIDE_FOLD || c->side == SIDE_FOLD1)
        want += c->sessions;
    if (c->side != SIDE_LIMIT && c->side != SIDE_FRESH)
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
    /* The SQLite side's name without its "sqlite ", or nothing without one. */
    const char *vs = sq ? sq->name + 7 : "", *bar = sq ? " | " : "";
    bench_row r = bench_row_make(section, "ev/s", BENCH_RATE, ev, sq, "%s%s%s", label, bar, vs);
    bench_row_limit(&r, lim_ev, "read+xxh3");
    bench_emit(&r);
    r = bench_row_make(section, "MB/s", BENCH_MBPS, ev, sq, "%s%s%s", label, bar, vs);
    bench_row_limit(&r, lim_mb, "read+xxh3");
    bench_emit(&r);
}

/* The peak resident memory of one run of `side` in a child process, in
 * bytes over that of a child that runs nothing (`side` N_SIDES). */
static double peak_rss(const read_ctx *c, read_side side)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (!pid) {
        read_ctx k = *c;
        k.side = side;
        bench_run r;
        if (side != N_SIDES)
            run_read(&k, 1, &r);
        _exit(0);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        bench_die("a child measuring memory failed");
    return (double)ru.ru_maxrss * 1024;
}

/* A row of bytes per standing entry from one measurement of each side;
 * returns the fold's. */
static double rss_row(const char *label, const read_ctx *c, bool with_sqlite)
{
    double base = peak_rss(c, N_SIDES);
    bench_variant ev = {.name = "envlog fold", .n_runs = 1}, sq = {.name = "sqlite scan+fold",
                                                                    .n_runs = 1};
    double e = peak_rss(c, SIDE_FOLD) - base;
    ev.runs[0] = (bench_run){1, (double)c->records, 0, e > 0 ? e : 0};
    if (with_sqlite) {
        double q = peak_rss(c, SIDE_SCAN_FOLD) - base;
        sq.runs[0] = (bench_run){1, (double)c->records, 0, q > 0 ? q : 0};
    }
    bench_row r = bench_row_make("replay", "B/entry", BENCH_DISK_PER, &ev,
                                 with_sqlite ? &sq : NULL, "%s, peak resident memory", label);
    bench_emit(&r);
    return e > 0 ? e / (double)c->records : 0;
}

static void read_rows(const char *what, uint64_t sessions, uint64_t per, size_t binary,
                      bool with_sqlite)
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
        if (with_sqlite)
            bench_sql_record(db, BENCH_SQL_BATCH, per, binary ? &bc : NULL, s * per);
    }
    if (binary)
        bench_compile_free(&bc);
    read_ctx ctx[N_SIDES];
    bench_variant v[N_SIDES];
    size_t nv = 0;
    read_side order[N_SIDES];
    for (int i = 0; i < N_SIDES; i++) {
        bool sql = i == SIDE_SCAN || i == SIDE_SCAN_DECODE || i == SIDE_SCAN_FOLD;
        ctx[i] = (read_ctx){(read_side)i, env, db, sessions * per, sessions, binary != 0};
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = side_names[i];
        v[i].fn = run_read;
        v[i].ctx = &ctx[i];
        if (!sql || with_sqlite)
            order[nv++] = (read_side)i;
    }
    /* The sides that run, alternating. */
    bench_variant run[N_SIDES];
    for (size_t i = 0; i < nv; i++)
        run[i] = v[order[i]];
    bench_alternate(run, nv);
    for (size_t i = 0; i < nv; i++)
        v[order[i]] = run[i];
    /* The limit reads the files' bytes; in payload terms it goes as fast,
     * times the payload's share of them. */
    double lim_ev = bench_variant_stat(&v[SIDE_LIMIT], BENCH_RATE).median;
    double payload_share = v[SIDE_READER].runs[0].bytes / v[SIDE_LIMIT].runs[0].bytes;
    double lim_mb = bench_variant_stat(&v[SIDE_LIMIT], BENCH_MBPS).median * payload_share;
    /* The folds count the same payload bytes as the reader. */
    for (int i = 0; i < v[SIDE_FOLD].n_runs; i++)
        v[SIDE_FOLD].runs[i].bytes = v[SIDE_READER].runs[0].bytes;
    for (int i = 0; i < v[SIDE_FOLD1].n_runs; i++)
        v[SIDE_FOLD1].runs[i].bytes = v[SIDE_READER].runs[0].bytes;
    const bench_variant *scan = with_sqlite ? &v[SIDE_SCAN] : NULL;
    snprintf(label, sizeof label, "%s, %" PRIu64 "x%" PRIu64 " read", what, sessions, per);
    rows_vs("replay", label, &v[SIDE_READER], scan, lim_ev, lim_mb);
    if (with_sqlite)
        rows_vs("replay", label, &v[SIDE_READER], &v[SIDE_SCAN_DECODE], lim_ev, lim_mb);
    snprintf(label, sizeof label, "%s, %" PRIu64 "x%" PRIu64 " fold", what, sessions, per);
    rows_vs("replay", label, &v[SIDE_FOLD], scan, lim_ev, lim_mb);
    if (with_sqlite)
        rows_vs("replay", label, &v[SIDE_FOLD], &v[SIDE_SCAN_FOLD], lim_ev, lim_mb);
    snprintf(label, sizeof label, "%s, %" PRIu64 "x%" PRIu64 " fold 2 threads", what, sessions,
             per);
    rows_vs("replay", label, &v[SIDE_FOLD1], scan, lim_ev, lim_mb);
    snprintf(label, sizeof label, "%s, %" PRIu64 "x%" PRIu64, what, sessions, per);
    double per_entry = rss_row(label, &ctx[SIDE_FOLD], with_sqlite);
    /* The fold against the least a fold that builds a state of its size
     * can do here: each record read and hashed, and its share of the
     * state's bytes taken fresh. */
    double fresh_Bps = bench_variant_stat(&v[SIDE_FRESH], BENCH_MBPS).median * 1e6;
    if (fresh_Bps > 0 && lim_ev > 0) {
        double floor_ev = 1.0 / (1.0 / lim_ev + per_entry / fresh_Bps);
        bench_row r = bench_row_make("replay", "ev/s", BENCH_RATE, &v[SIDE_FOLD], NULL,
                                     "%s, %" PRIu64 "x%" PRIu64 " fold, state memory counted",
                                     what, sessions, per);
        bench_row_limit(&r, floor_ev, "+fresh");
        bench_emit(&r);
        r = bench_row_make("replay", "MB/s", BENCH_MBPS, &v[SIDE_FRESH], NULL,
                           "%s, fresh memory, first touch", what);
        bench_emit(&r);
    }
    bench_rmtree(dir);
}

void bench_section_replay(void)
{
    /* 1M tune records across 8 sessions (40k in a quick run), 10M in a full
     * one; compiles with 64 KiB binaries. */
    read_rows("tune", BENCH_SIZE(8, 8, 2), BENCH_SIZE(125000, 5000, 50), 0, true);
    if (!bench_o.quick && !bench_o.selftest) {
        int reps = bench_o.reps;
        bench_o.reps = reps < 3 ? reps : 3;
        read_rows("tune", 8, 1250000, 0, false);
        bench_o.reps = reps;
    }
    read_rows("compile 64K", BENCH_SIZE(4, 2, 2), BENCH_SIZE(512, 64, 2), 65536, true);
}
