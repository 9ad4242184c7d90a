/* SPDX-License-Identifier: MIT */
/*
 * b_lookup.c - cold open plus first lookup, at 1k, 100k and 1M entries.
 *
 * What a runtime pays at start before its first cache hit.  The data is
 * built once per size (untimed): N tune records recorded and compacted, so
 * envlog's environment is one snapshot, and a SQLite file holding the same
 * entries in entries(namespace, key, value, origin, PRIMARY KEY(namespace,
 * key)), the value being the very bytes of the snapshot's ENTRY record and
 * the key the tune key and its tune-set checksum.  The SQLite file uses the
 * rollback journal, which opens faster than WAL (no -wal or -shm to open).
 *
 * One timed operation is a process's first lookup from nothing:
 *  - envlog: envlog_env_open (read-only), envlog_state_open (maps the
 *    snapshot, checks its header, manifest and index), envlog_state_winner;
 *  - SQLite: sqlite3_open_v2 (read-only), prepare, bind, step on the primary
 *    key, then decoding the value as far as envlog's fold reads it, so both
 *    sides end holding the winner's name;
 *  - the limit: open the snapshot file, read the 4 KiB page an entry is in,
 *    close: one open and one read, what any file-backed lookup pays;
 *  - envlog's system calls alone (a row of their own): the calls envlog's
 *    open and first lookup make (an strace of it lists them), on the same
 *    files with the same sizes, and nothing between them: what a lookup
 *    made of these calls costs before any of its own work.  Each call is
 *    there for a reason envlog(5) gives: FORMAT read (an environment of
 *    another format is refused), the shared lock held while the snapshot
 *    is opened and the sessions listed (no compaction in between), the
 *    snapshot's size, head and tail (its MANIFEST and where its INDEX
 *    lies), two reads of the INDEX and one of the ENTRY.
 * Each is followed (untimed) by closing everything.  Keys are drawn at
 * random, a different one each operation, from a warm page cache.
 */
#include "bench.h"
#include "replay_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef enum lk_side { LK_ENVLOG, LK_SQLITE, LK_LIMIT, LK_CALLS, LK_SIDES } lk_side;

typedef struct lk_ctx {
    lk_side side;
    const char *env, *db, *snap;
    uint64_t entries;
    uint64_t ops;        /* lookups per timed run */
    uint64_t draw;       /* the key generator's state, moved on every run */
    off_t snap_size;
} lk_ctx;

static uint64_t next_draw(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ULL;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void sql_ok(sqlite3 *db, int rc, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
        bench_die("sqlite: %s: %s", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

/* The key SQLite keeps a tune entry under. */
static void sql_key(char *out, size_t size, const char *key, uint64_t checksum)
{
    snprintf(out, size, "%s#%016" PRIx64, key, checksum);
}

void bench_entries_db(envlog_env *env, const char *path, uint64_t *count)
{
    envlog_snap *snap;
    envlog_snap_item it;
    envlog_record rec;
    sqlite3 *db;
    sqlite3_stmt *ins;
    envlog_err e;
    char key[256];
    bench_check(envlog_snap_map(env, &snap), "mapping the snapshot");
    bench_expect(snap != NULL, "the environment has no snapshot");
    sql_ok(NULL, sqlite3_open(path, &db), "open");
    sql_ok(db, sqlite3_exec(db, "PRAGMA journal_mode=DELETE; CREATE TABLE entries("
                                "namespace TEXT, key TEXT, value BLOB, origin INTEGER, "
                                "PRIMARY KEY(namespace, key)); BEGIN",
                            NULL, NULL, NULL),
           "create");
    sql_ok(db, sqlite3_prepare_v2(db, "INSERT INTO entries VALUES(?1, ?2, ?3, ?4)", -1, &ins,
                                  NULL),
           "prepare insert");
    *count = 0;
    envlog_snap_rewind(snap);
    while ((e = envlog_snap_next(snap, &it, &rec)) == ENVLOG_OK) {
        if (it.kind != ENVLOG_KIND_ENTRY)
            continue;
        const char *ns;
        if (it.table == ENVLOG_TABLE_TUNE) {
            ns = rec.u.tune.ns;
            sql_key(key, sizeof key, rec.u.tune.key, rec.u.tune.checksum);
        } else if (it.table == ENVLOG_TABLE_KERNEL) {
            ns = rec.u.compile.ns;
            envlog_id_format(&rec.u.compile.kernel_key, key);
        } else {
            continue;
        }
        sqlite3_bind_text(ins, 1, ns, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(ins, 2, key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob64(ins, 3, it.record.data, it.record.size, SQLITE_TRANSIENT);
        sqlite3_bind_int(ins, 4, it.origin);
        sql_ok(db, sqlite3_step(ins), "insert");
        sqlite3_reset(ins);
        (*count)++;
    }
    if (e != ENVLOG_END)
        bench_check(e, "reading the snapshot");
    sqlite3_finalize(ins);
    sql_ok(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
    sql_ok(db, sqlite3_close(db), "close");
    envlog_snap_unmap(snap);
}

void bench_cache_make(bench_cache *c, const char *tag, uint64_t n)
{
    envlog_env *env;
    envlog_compact_report rep;
    uint64_t rows;
    bench_new_dir(c->dir, sizeof c->dir, tag);
    snprintf(c->env, sizeof c->env, "%s/env", c->dir);
    snprintf(c->db, sizeof c->db, "%s/cache.db", c->dir);
    bench_envlog_record(c->env, ENVLOG_SYNC_NONE, n, NULL, 0);
    bench_check(envlog_env_open(c->env, 0, &env), "opening the environment");
    bench_check(envlog_compact(env, ENVLOG_EVIDENCE_NONE, &rep), "compacting");
    bench_expect(rep.entries == n && rep.sessions_removed + rep.sessions_kept == 1,
                 "compaction kept %" PRIu64 " entries of %" PRIu64, rep.entries, n);
    bench_entries_db(env, c->db, &rows);
    envlog_env_close(env);
    bench_expect(rows == n, "the SQLite file holds %" PRIu64 " entries of %" PRIu64, rows, n);
}

/* The winner of `rec`'s tune, "?" when it has none. */
static const char *rec_winner(const envlog_record *rec)
{
    const envlog_tune *t = &rec->u.tune;
    return t->winner >= 0 && (size_t)t->winner < t->n_candidates ? t->candidates[t->winner]
                                                                 : "?";
}

uint64_t bench_first_lookup(const char *path, const bench_tune *bt, const char *want)
{
    envlog_env *env;
    envlog_state *st;
    envlog_tune_entry te;
    uint64_t t0 = bench_now_ns();
    bench_check(envlog_env_open(path, ENVLOG_OPEN_READONLY, &env), "opening the environment");
    bench_check(envlog_state_open(env, NULL, &st), "opening the state");
    bench_check(envlog_state_winner(st, bt->t.ns, bt->t.key, bt->t.checksum, &te),
                "looking a key up");
    uint64_t ns = bench_now_ns() - t0;
    bench_expect(!want || !strcmp(te.winner, want), "envlog: %s won %s, not %s", bt->t.key,
                 te.winner, want);
    envlog_state_close(st);
    envlog_env_close(env);
    return ns;
}

uint64_t bench_first_select(const char *db_path, const bench_tune *bt, const char *want)
{
    sqlite3 *db;
    sqlite3_stmt *sel;
    char key[256];
    envlog_record rec;
    envlog_arena arena = {0};
    sql_key(key, sizeof key, bt->t.key, bt->t.checksum);
    uint64_t t0 = bench_now_ns();
    sql_ok(NULL, sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), "open");
    sql_ok(db, sqlite3_prepare_v2(db, "SELECT value, origin FROM entries "
                                      "WHERE namespace = ?1 AND key = ?2",
                                  -1, &sel, NULL),
           "prepare select");
    sqlite3_bind_text(sel, 1, bt->t.ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(sel, 2, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(sel);
    bench_expect(rc == SQLITE_ROW, "sqlite: no entry for %s", key);
    bench_check(envlog_event_decode_fold(sqlite3_column_blob(sel, 0),
                                         (size_t)sqlite3_column_bytes(sel, 0), &rec, &arena),
                "decoding an entry");
    const char *got = rec_winner(&rec);
    uint64_t ns = bench_now_ns() - t0;
    bench_expect(!want || !strcmp(got, want), "sqlite: %s won %s, not %s", key, got, want);
    sqlite3_finalize(sel);
    sqlite3_close(db);
    envlog_arena_free(&arena);
    return ns;
}

/* envlog's system calls for an open and a first lookup (see the top),
 * reading at `pick`'s place in the snapshot of `size` bytes; returns the
 * nanoseconds they took. */
static uint64_t lookup_calls(const char *env, off_t size, uint64_t pick)
{
    static uint8_t buf[32768];
    uint64_t t0 = bench_now_ns();
    int d = open(env, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    int f = openat(d, "FORMAT", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0 || f < 0)
        bench_die("opening %s: %s", env, strerror(errno));
    (void)!pread(f, buf, 4097, 0);
    close(f);
    int s = openat(d, "sessions", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY);
    (void)flock(d, LOCK_SH);
    /* (envlog opens it with openat2 where the kernel has it, the same
     * path walk kept beneath the directory) */
    int c = openat(d, "snapshot/current", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (s < 0 || c < 0 || fstat(c, &st))
        bench_die("opening %s's snapshot: %s", env, strerror(errno));
    (void)!pread(c, buf, 4096, 0);
    (void)!pread(c, buf, 2 * ENVLOG_SEAL_TAIL, size - 2 * ENVLOG_SEAL_TAIL);
    while (syscall(SYS_getdents64, s, buf, sizeof buf) > 0)
        ;
    (void)flock(d, LOCK_UN);
    off_t at = (off_t)(pick % (uint64_t)(size / 4096)) * 4096;
    (void)!pread(c, buf, 512, at / 3);
    (void)!pread(c, buf, 2048, at / 3 + 4096);
    (void)!pread(c, buf, 1024, at);
    uint64_t ns = bench_now_ns() - t0;
    close(c);
    close(s);
    close(d);
    return ns;
}

static void run_lookup(void *vctx, double scale, bench_run *out)
{
    lk_ctx *c = vctx;
    bench_tune bt;
    uint64_t ops = (uint64_t)((double)c->ops * scale);
    double secs = 0;
    if (!ops)
        ops = 1;
    bench_tune_init(&bt);
    for (uint64_t i = 0; i < ops; i++) {
        uint64_t pick = next_draw(&c->draw) % c->entries;
        bench_tune_fill(&bt, pick);
        const char *want = bt.t.candidates[bt.t.winner];
        if (c->side == LK_ENVLOG) {
            secs += (double)bench_first_lookup(c->env, &bt, want) / 1e9;
        } else if (c->side == LK_SQLITE) {
            secs += (double)bench_first_select(c->db, &bt, want) / 1e9;
        } else if (c->side == LK_CALLS) {
            secs += (double)lookup_calls(c->env, c->snap_size, pick) / 1e9;
        } else {
            static uint8_t page[4096];
            uint64_t t0 = bench_now_ns();
            int fd = open(c->snap, O_RDONLY);
            if (fd < 0)
                bench_die("opening %s: %s", c->snap, strerror(errno));
            off_t at = (off_t)(pick % (uint64_t)(c->snap_size / 4096 + 1)) * 4096;
            if (pread(fd, page, sizeof page, at) < 0)
                bench_die("reading %s: %s", c->snap, strerror(errno));
            secs += (double)(bench_now_ns() - t0) / 1e9;
            close(fd);
        }
    }
    *out = (bench_run){secs, (double)ops, 0, 0};
}

static void lookup_rows(uint64_t n, const char *label)
{
    bench_cache cache;
    char snap[4400];
    struct stat st;
    bench_cache_make(&cache, "lookup", n);
    snprintf(snap, sizeof snap, "%s/snapshot/current", cache.env);
    if (stat(snap, &st))
        bench_die("no snapshot at %s", snap);
    static const char *const names[LK_SIDES] = {"envlog", "sqlite", "limit", "calls"};
    lk_ctx ctx[LK_SIDES];
    bench_variant v[LK_SIDES];
    for (int i = 0; i < LK_SIDES; i++) {
        ctx[i] = (lk_ctx){(lk_side)i, cache.env, cache.db, snap, n, BENCH_SIZE(400, 200, 4),
                          0x5eed + (uint64_t)i, st.st_size};
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = names[i];
        v[i].fn = run_lookup;
        v[i].ctx = &ctx[i];
    }
    bench_alternate(v, LK_SIDES);
    bench_row r = bench_row_make("lookup", "us", BENCH_US_PER, &v[LK_ENVLOG], &v[LK_SQLITE],
                                 "cold open + first lookup, %s entries", label);
    double limit = bench_variant_stat(&v[LK_LIMIT], BENCH_US_PER).median;
    bench_row_limit(&r, limit, "open+pread");
    bench_emit(&r);
    bench_row calls = bench_row_make("lookup", "us", BENCH_US_PER, &v[LK_CALLS], NULL,
                                     "its system calls alone, %s entries", label);
    bench_row_limit(&calls, limit, "open+pread");
    bench_emit(&calls);
    bench_rmtree(cache.dir);
}

void bench_section_lookup(void)
{
    lookup_rows(BENCH_SIZE(1000, 1000, 100), "1k");
    lookup_rows(BENCH_SIZE(100000, 100000, 1000), "100k");
    if (!bench_o.quick && !bench_o.selftest)
        lookup_rows(1000000, "1M");
}
