/* SPDX-License-Identifier: MIT */
/*
 * b_bundle.c - bundles: export and import time and file size, against a
 * SQLite file holding the same entries.
 *
 * The data is built once per size (untimed): N tune records recorded and
 * compacted into an environment, and the same entries in a SQLite cache
 * (see bench_entries_db).  A SQLite bundle, as the system envlog replaces
 * ships one, is a single SQLite file with the entries table.
 *
 *  - export, envlog: envlog_bundle_export with its defaults (entries only,
 *    bundle format 2 at zstd level 3), opening and closing the environment
 *    included, and in bundle format 1 (the snapshot file at zstd level 19,
 *    what envlog wrote before format 2: envlog bundle export --format 1);
 *    SQLite: ATTACH a new file, create the table, INSERT ... SELECT every
 *    entry, DETACH: the bundle file, complete and closed.
 *  - import, envlog: the bundle file read and envlog_bundle_import_x into a
 *    new, empty environment (every entry checked and recorded as IMPORTED
 *    in an import session, synced at its end), with the defaults (on two
 *    CPUs or more the snapshot decoded from the columns on a thread of its
 *    own while the calling thread records what is decoded), on the
 *    calling thread alone (threads = 1), and with the decoded records
 *    read on a third thread (threads = 3, the default on 4 CPUs or
 *    more); SQLite: INSERT OR IGNORE ... SELECT from the
 *    attached bundle into a new, empty cache (WAL, synchronous=NORMAL).
 *  - size: envlog's bundle file against the SQLite bundle file, and against
 *    that file compressed with zstd -19, which a user could ship instead.
 *    The limit is the entries' own record bytes compressed with zstd -19 as
 *    one stream: what a bundle of these records holds without a layout of
 *    its own (bundle format 2's columns go under it).
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#define SQLITE_ZSTD_LEVEL 19 /* what the SQLite file is shipped at */

typedef enum bd_side {
    BD_EXPORT_ENVLOG,
    BD_EXPORT_SQLITE,
    BD_EXPORT_F1,     /* envlog in bundle format 1 */
    BD_IMPORT_ENVLOG,
    BD_IMPORT_SQLITE,
    BD_IMPORT_ALONE,  /* envlog, on the calling thread alone */
    BD_IMPORT_THREE,  /* envlog, the records read on a third thread too */
    BD_SIDES
} bd_side;

typedef struct bd_ctx {
    bd_side side;
    const char *env, *db;
    const char *bundle, *sql_bundle; /* what the export runs leave */
    const char *f1_bundle;
    uint64_t entries;
} bd_ctx;

static void sql_do(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
        bench_die("sqlite: %s: %s", sql, err ? err : "?");
}

static sqlite3 *sql_open(const char *path, int flags)
{
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK)
        bench_die("sqlite: opening %s: %s", path, sqlite3_errmsg(db));
    return db;
}

static void attach(sqlite3 *db, const char *path, const char *as)
{
    char *sql = sqlite3_mprintf("ATTACH %Q AS %s", path, as);
    if (!sql)
        bench_die("sqlite: out of memory");
    sql_do(db, sql);
    sqlite3_free(sql);
}

static int64_t sql_count(sqlite3 *db, const char *table)
{
    sqlite3_stmt *q;
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW)
        bench_die("sqlite: %s: %s", sql, sqlite3_errmsg(db));
    int64_t n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return n;
}

static void *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st))
        bench_die("reading %s: %s", path, strerror(errno));
    void *p = malloc((size_t)st.st_size + 1);
    if (!p || fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        bench_die("reading %s: %s", path, strerror(errno));
    fclose(f);
    *len = (size_t)st.st_size;
    return p;
}

static const char *const create_entries =
    "CREATE TABLE %s(namespace TEXT, key TEXT, value BLOB, origin INTEGER, "
    "PRIMARY KEY(namespace, key))";

static void run_bundle(void *vctx, double scale, bench_run *out)
{
    bd_ctx *c = vctx;
    char target[4400], sql[512];
    uint64_t t0 = 0, t1 = 0, size = 0;
    (void)scale; /* a bundle is of the whole cache, warm-up included */
    switch (c->side) {
    case BD_EXPORT_ENVLOG:
    case BD_EXPORT_F1: {
        envlog_env *env;
        bool f1 = c->side == BD_EXPORT_F1;
        envlog_bundle_opts o = {.name = "envlog-bench", .format = f1 ? 1 : 0};
        envlog_bundle_info *info;
        t0 = bench_now_ns();
        bench_check(envlog_env_open(c->env, ENVLOG_OPEN_READONLY, &env),
                    "opening the environment");
        bench_check(envlog_bundle_export(env, &o, f1 ? c->f1_bundle : c->bundle, &info),
                    "exporting a bundle");
        envlog_env_close(env);
        t1 = bench_now_ns();
        bench_expect(info->tunes == c->entries, "the bundle holds %" PRIu64 " of %" PRIu64,
                     info->tunes, c->entries);
        size = info->compressed_size;
        envlog_bundle_info_free(info);
        break;
    }
    case BD_EXPORT_SQLITE: {
        bench_sql_remove(c->sql_bundle);
        t0 = bench_now_ns();
        sqlite3 *db = sql_open(c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        attach(db, c->sql_bundle, "b");
        snprintf(sql, sizeof sql, create_entries, "b.entries");
        sql_do(db, sql);
        sql_do(db, "INSERT INTO b.entries SELECT * FROM entries");
        sql_do(db, "DETACH b");
        sqlite3_close(db);
        t1 = bench_now_ns();
        size = bench_sql_du(c->sql_bundle);
        break;
    }
    case BD_IMPORT_ENVLOG:
    case BD_IMPORT_ALONE:
    case BD_IMPORT_THREE: {
        envlog_env *env;
        envlog_import_report rep;
        envlog_import_opts io = {.threads = c->side == BD_IMPORT_ALONE   ? 1
                                            : c->side == BD_IMPORT_THREE ? 3
                                                                         : 0};
        bench_fresh_dir(target, sizeof target, "import");
        bench_check(envlog_env_open(target, ENVLOG_OPEN_CREATE, &env), "creating an environment");
        envlog_env_close(env);
        t0 = bench_now_ns();
        bench_check(envlog_env_open(target, 0, &env), "opening the environment");
        /* The file read whole, as envlog_bundle_import() reads it. */
        size_t len;
        void *data = read_whole(c->bundle, &len);
        bench_check(envlog_bundle_import_x(env, data, len, &io, &rep), "importing a bundle");
        free(data);
        envlog_env_close(env);
        t1 = bench_now_ns();
        bench_expect(rep.taken == c->entries && !rep.rejected,
                     "import took %" PRIu64 " and rejected %" PRIu64 " of %" PRIu64, rep.taken,
                     rep.rejected, c->entries);
        size = bench_du(target);
        bench_rmtree(target);
        break;
    }
    case BD_IMPORT_SQLITE: {
        bench_fresh_dir(target, sizeof target, "import.db");
        sqlite3 *db = sql_open(target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        sql_do(db, "PRAGMA journal_mode=WAL");
        snprintf(sql, sizeof sql, create_entries, "entries");
        sql_do(db, sql);
        sqlite3_close(db);
        t0 = bench_now_ns();
        db = sql_open(target, SQLITE_OPEN_READWRITE);
        sql_do(db, "PRAGMA synchronous=NORMAL");
        attach(db, c->sql_bundle, "b");
        sql_do(db, "BEGIN; INSERT OR IGNORE INTO entries SELECT namespace, key, value, 1 "
                   "FROM b.entries; COMMIT; DETACH b");
        int64_t n = sql_count(db, "entries");
        sqlite3_close(db);
        t1 = bench_now_ns();
        bench_expect((uint64_t)n == c->entries, "sqlite imported %" PRId64 " of %" PRIu64, n,
                     c->entries);
        size = bench_sql_du(target);
        bench_sql_remove(target);
        break;
    }
    case BD_SIDES: break;
    }
    *out = (bench_run){(double)(t1 - t0) / 1e9, (double)c->entries, 0, (double)size};
}

/* zstd -19 over a buffer: the compressed size. */
static size_t zstd_size(const void *p, size_t n)
{
    size_t cap = ZSTD_compressBound(n);
    void *z = envlog_malloc(cap ? cap : 1);
    if (!z)
        bench_die("out of memory compressing %zu bytes", n);
    size_t zn = ZSTD_compress(z, cap, p, n, SQLITE_ZSTD_LEVEL);
    envlog_free(z);
    if (ZSTD_isError(zn))
        bench_die("zstd: %s", ZSTD_getErrorName(zn));
    return zn;
}

/* The entries' value bytes, concatenated, and the SQLite bundle file. */
static void size_limits(const char *db, const char *sql_bundle, double *values_z,
                        double *file_z)
{
    envlog_buf b = {0};
    sqlite3 *h = sql_open(db, SQLITE_OPEN_READONLY);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(h, "SELECT value FROM entries ORDER BY rowid", -1, &q, NULL))
        bench_die("sqlite: %s", sqlite3_errmsg(h));
    while (sqlite3_step(q) == SQLITE_ROW)
        bench_check(envlog_buf_append(&b, sqlite3_column_blob(q, 0),
                                      (size_t)sqlite3_column_bytes(q, 0)),
                    "collecting values");
    sqlite3_finalize(q);
    sqlite3_close(h);
    *values_z = (double)zstd_size(b.p, b.len);
    FILE *f = fopen(sql_bundle, "rb");
    if (!f)
        bench_die("opening %s: %s", sql_bundle, strerror(errno));
    b.len = 0;
    uint8_t chunk[65536];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0)
        bench_check(envlog_buf_append(&b, chunk, r), "reading the SQLite bundle");
    fclose(f);
    *file_z = (double)zstd_size(b.p, b.len);
    envlog_buf_free(&b);
}

static void bundle_rows(uint64_t n, const char *label)
{
    bench_cache cache;
    char bundle[4400], sql_bundle[4400], f1_bundle[4400];
    bench_cache_make(&cache, "bundle", n);
    snprintf(f1_bundle, sizeof f1_bundle, "%s/cache-f1.envlog-bundle", cache.dir);
    snprintf(bundle, sizeof bundle, "%s/cache.envlog-bundle", cache.dir);
    snprintf(sql_bundle, sizeof sql_bundle, "%s/bundle.db", cache.dir);

    static const char *const names[BD_SIDES] = {"envlog export", "sqlite export",
                                                "envlog export f1", "envlog import",
                                                "sqlite import", "envlog import, one thread",
                                                "envlog import, three threads"};
    bd_ctx ctx[BD_SIDES];
    bench_variant v[BD_SIDES];
    for (int i = 0; i < BD_SIDES; i++) {
        ctx[i] = (bd_ctx){(bd_side)i, cache.env, cache.db, bundle, sql_bundle, f1_bundle, n};
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = names[i];
        v[i].fn = run_bundle;
        v[i].ctx = &ctx[i];
    }
    /* Exports first: the imports read what they wrote. */
    bench_alternate(v, 3);
    bench_alternate(v + BD_IMPORT_ENVLOG, BD_SIDES - BD_IMPORT_ENVLOG);
    double values_z, file_z;
    size_limits(cache.db, sql_bundle, &values_z, &file_z);

    bench_row r = bench_row_make("bundle", "B/entry", BENCH_DISK_PER, &v[BD_EXPORT_ENVLOG],
                                 &v[BD_EXPORT_SQLITE], "bundle size, %s entries", label);
    bench_row_limit(&r, values_z / (double)n, "zstd-19");
    bench_emit(&r);
    bench_variant zfile;
    memset(&zfile, 0, sizeof zfile);
    zfile.name = "sqlite file + zstd";
    zfile.runs[0] = (bench_run){1, (double)n, 0, file_z};
    zfile.n_runs = 1;
    r = bench_row_make("bundle", "B/entry", BENCH_DISK_PER, &v[BD_EXPORT_ENVLOG], &zfile,
                       "bundle size, %s entries | sqlite file+zstd-19", label);
    bench_row_limit(&r, values_z / (double)n, "zstd-19");
    bench_emit(&r);
    r = bench_row_make("bundle", "ms", BENCH_SECS_MS, &v[BD_EXPORT_ENVLOG],
                       &v[BD_EXPORT_SQLITE], "export, %s entries", label);
    bench_emit(&r);
    r = bench_row_make("bundle", "B/entry", BENCH_DISK_PER, &v[BD_EXPORT_F1], &zfile,
                       "bundle format 1 size, %s entries | sqlite file+zstd-19", label);
    bench_row_limit(&r, values_z / (double)n, "zstd-19");
    bench_emit(&r);
    r = bench_row_make("bundle", "ms", BENCH_SECS_MS, &v[BD_EXPORT_F1],
                       &v[BD_EXPORT_SQLITE], "export in bundle format 1, %s entries", label);
    bench_emit(&r);
    r = bench_row_make("bundle", "ms", BENCH_SECS_MS, &v[BD_IMPORT_ENVLOG],
                       &v[BD_IMPORT_SQLITE], "import, %s entries", label);
    bench_emit(&r);
    r = bench_row_make("bundle", "ms", BENCH_SECS_MS, &v[BD_IMPORT_ALONE],
                       &v[BD_IMPORT_SQLITE], "import, one thread, %s entries", label);
    bench_emit(&r);
    r = bench_row_make("bundle", "ms", BENCH_SECS_MS, &v[BD_IMPORT_THREE],
                       &v[BD_IMPORT_SQLITE], "import, three threads, %s entries", label);
    bench_emit(&r);
    r = bench_row_make("bundle", "B/entry", BENCH_DISK_PER, &v[BD_IMPORT_ENVLOG],
                       &v[BD_IMPORT_SQLITE], "imported, on disk, %s entries", label);
    bench_emit(&r);
    bench_rmtree(cache.dir);
}

void bench_section_bundle(void)
{
    bundle_rows(BENCH_SIZE(10000, 10000, 100), "10k");
    if (!bench_o.quick && !bench_o.selftest)
        bundle_rows(100000, "100k");
}
