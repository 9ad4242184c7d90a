/* SPDX-License-Identifier: MIT */
/*
 * b_sqlite.c - the baseline: the same records kept in SQLite.
 *
 * The system whose semantics envlog keeps stored its records in SQLite, so
 * that is what a user would pick instead.  The table holds exactly the CBOR
 * bytes envlog writes (encoded with envlog_event_encode, inside the timed
 * loop, as a SQLite-backed recorder would have to), keyed by (session, seq),
 * in WAL mode with synchronous=NORMAL: like envlog's default, durable
 * against a killed process and synced at checkpoints rather than per record.
 */
#include "bench.h"
#include "replay_int.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void sql_check(sqlite3 *db, int rc, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
        bench_die("sqlite: %s: %s", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

static void sql_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
        bench_die("sqlite: %s: %s", sql, err ? err : "?");
}

void bench_sql_record(const char *path, bench_sql_mode mode, uint64_t n,
                      bench_compile *bc, uint64_t first)
{
    sqlite3 *db;
    sqlite3_stmt *ins;
    envlog_buf b = {0};
    bench_tune bt;
    uint8_t session[16];
    for (int i = 0; i < 16; i++)
        session[i] = (uint8_t)(0x5a ^ i * 37);
    sql_check(NULL, sqlite3_open(path, &db), "open");
    sql_exec(db, "PRAGMA journal_mode=WAL");
    sql_exec(db, mode == BENCH_SQL_COMMIT_FULL ? "PRAGMA synchronous=FULL"
                                               : "PRAGMA synchronous=NORMAL");
    sql_exec(db, "CREATE TABLE IF NOT EXISTS records(session BLOB, seq INTEGER, "
                 "value BLOB, PRIMARY KEY(session, seq))");
    sql_check(db, sqlite3_prepare_v2(db, "INSERT INTO records VALUES(?1, ?2, ?3)",
                                     -1, &ins, NULL),
              "prepare insert");
    if (mode == BENCH_SQL_BATCH)
        sql_exec(db, "BEGIN");
    if (!bc)
        bench_tune_init(&bt);
    for (uint64_t i = first; i < first + n; i++) {
        if (bc) {
            bench_compile_fill(bc, i);
            bench_encode(&b, ENVLOG_KIND_COMPILE, &bc->c, i + 1);
        } else {
            bench_tune_fill(&bt, i);
            bench_encode(&b, ENVLOG_KIND_TUNE, &bt.t, i + 1);
        }
        sqlite3_bind_blob(ins, 1, session, 16, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 2, (sqlite3_int64)(i + 1));
        sqlite3_bind_blob64(ins, 3, b.p, b.len, SQLITE_STATIC);
        sql_check(db, sqlite3_step(ins), "insert");
        sqlite3_reset(ins);
    }
    if (mode == BENCH_SQL_BATCH)
        sql_exec(db, "COMMIT");
    sqlite3_finalize(ins);
    sql_check(db, sqlite3_close(db), "close");
    envlog_buf_free(&b);
}

uint64_t bench_sql_scan(const char *path, bench_scan_mode mode, double *payload_bytes)
{
    sqlite3 *db;
    sqlite3_stmt *sel;
    uint64_t rows = 0;
    envlog_record rec;
    envlog_arena arena = {0};
    envlog_state *st = NULL;
    if (mode == BENCH_SCAN_FOLD) {
        bench_check(envlog_state_new(&st), "a state");
        envlog_state_wrlock(st);
    }
    sql_check(NULL, sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), "open");
    sql_check(db, sqlite3_prepare_v2(db, "SELECT session, seq, value FROM records",
                                     -1, &sel, NULL),
              "prepare select");
    int rc;
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        const void *sid = sqlite3_column_blob(sel, 0);
        sqlite3_int64 seq = sqlite3_column_int64(sel, 1);
        const uint8_t *v = sqlite3_column_blob(sel, 2);
        int len = sqlite3_column_bytes(sel, 2);
        if (!sid || !v || seq < 0)
            bench_die("sqlite: a row without its values");
        if (mode == BENCH_SCAN_DECODE) {
            envlog_arena_reset(&arena);
            bench_check(envlog_event_decode(v, (size_t)len, &rec, &arena),
                        "decoding a row");
        } else if (mode == BENCH_SCAN_FOLD) {
            envlog_arena_reset(&arena);
            bench_check(envlog_event_decode_fold(v, (size_t)len, &rec, &arena),
                        "decoding a row");
            bench_check(envlog_state_fold(st, &rec, rec.stamp.offset_ns), "folding a row");
        }
        *payload_bytes += len;
        rows++;
    }
    sql_check(db, rc, "select");
    sqlite3_finalize(sel);
    sql_check(db, sqlite3_close(db), "close");
    envlog_arena_free(&arena);
    if (st) {
        envlog_state_unlock(st);
        envlog_state_close(st);
    }
    return rows;
}

static const char *const db_sfx[] = {"", "-wal", "-shm", "-journal"};

void bench_sql_remove(const char *path)
{
    for (size_t i = 0; i < sizeof db_sfx / sizeof db_sfx[0]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", path, db_sfx[i]);
        remove(p);
    }
}

uint64_t bench_sql_du(const char *path)
{
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof db_sfx / sizeof db_sfx[0]; i++) {
        char p[4200];
        struct stat st;
        snprintf(p, sizeof p, "%s%s", path, db_sfx[i]);
        if (!stat(p, &st))
            total += (uint64_t)st.st_size;
    }
    return total;
}
