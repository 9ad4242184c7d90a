/* SPDX-License-Identifier: MIT */
/*
 * check_session.c - the session recorder and the environment directory:
 * effect gating (an observing session leaves no byte), the pending budget,
 * levels, spans, sync policies, rotation, input checks, fault injection
 * (every I/O call and every allocation failed in turn, SQLite-style), and
 * many processes and threads recording at once, forks included.
 */
#include "suites.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The key of a decoded tune record, or the label of a mark, or NULL. */
static char *record_name(const tu_rec *r)
{
    envlog_arena a = {0};
    envlog_record rec;
    char *out = NULL;
    if (envlog_event_decode(r->payload, r->size, &rec, &a) == ENVLOG_OK) {
        const char *n = rec.kind == ENVLOG_KIND_TUNE ? rec.u.tune.key
                        : rec.kind == ENVLOG_KIND_MARK ? rec.u.mark.label
                        : rec.kind == ENVLOG_KIND_USER ? rec.u.user.kind
                        : rec.kind == ENVLOG_KIND_SPAN ? rec.u.span.name
                        : rec.kind == ENVLOG_KIND_SESSION ? "session"
                                                          : NULL;
        out = n ? strdup(n) : NULL;
    }
    envlog_arena_free(&a);
    return out;
}

/* Decodes r into *rec with its own arena (freed by the caller). */
static void decode(const tu_rec *r, envlog_record *rec, envlog_arena *a)
{
    ck_assert_ok(envlog_event_decode(r->payload, r->size, rec, a));
}

/* The only session of the environment at `dir`. */
static envlog_id128 only_session(envlog_env *env)
{
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_eq(n, 1);
    envlog_id128 id = in[0].id;
    envlog_sessions_free(in, n);
    return id;
}

/* ------------------------------------------------------------ environment */

START_TEST(test_env_open)
{
    char *dir = tu_mkdtemp("env");
    envlog_env *env = (envlog_env *)1;
    const char *p = tu_path(dir, "missing");
    ck_assert_err(envlog_env_open(p, 0, &env), ENVLOG_NOT_FOUND);
    ck_assert_ptr_null(env);
    ck_assert_err(envlog_env_open(p, ENVLOG_OPEN_READONLY, &env), ENVLOG_NOT_FOUND);
    ck_assert(!tu_exists(p));
    /* CREATE makes the directories (0700), the marker and sessions/. */
    const char *deep = tu_path(dir, "a/b/c");
    ck_assert_ok(envlog_env_open(deep, ENVLOG_OPEN_CREATE, &env));
    ck_assert_str_eq(envlog_env_path(env), deep);
    envlog_env_close(env);
    struct stat st;
    ck_assert_int_eq(stat(deep, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    size_t n;
    char *marker = (char *)tu_read(tu_path(deep, "FORMAT"), &n);
    marker[n] = 0;
    ck_assert_str_eq(marker, "envlog environment format 2\n");
    free(marker);
    ck_assert(tu_exists(tu_path(deep, "sessions")));
    ck_assert_ok(envlog_env_open(deep, 0, &env));
    envlog_env_close(env);
    envlog_env_close(NULL);

    /* A directory with other things in it is not taken over. */
    const char *other = tu_path(dir, "other");
    ck_assert_int_eq(mkdir(other, 0700), 0);
    tu_write(tu_path(other, "notes.txt"), "hi", 2);
    ck_assert_err(envlog_env_open(other, ENVLOG_OPEN_CREATE, &env), ENVLOG_FORMAT);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "not an envlog environment"));
    ck_assert(!tu_exists(tu_path(other, "FORMAT")));
    ck_assert(!tu_exists(tu_path(other, "sessions")));
    /* An unknown format version is refused with a clear message. */
    const char *future = tu_path(dir, "future");
    ck_assert_int_eq(mkdir(future, 0700), 0);
    tu_write(tu_path(future, "FORMAT"), "envlog environment format 3\n", 28);
    ck_assert_err(envlog_env_open(future, 0, &env), ENVLOG_FORMAT);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "format 3"));
    ck_assert_err(envlog_env_open(future, ENVLOG_OPEN_CREATE, &env), ENVLOG_FORMAT);
    tu_write(tu_path(future, "FORMAT"), "something else\n", 15);
    ck_assert_err(envlog_env_open(future, 0, &env), ENVLOG_FORMAT);
    tu_write(tu_path(future, "FORMAT"), "", 0);
    ck_assert_err(envlog_env_open(future, 0, &env), ENVLOG_FORMAT);
    /* FORMAT is read in one call with no stat: what is not a regular file
     * of a few bytes is still named for what it is, and a FIFO does not
     * make the open wait for a writer. */
    char fut[4200], fmt[4300];
    snprintf(fut, sizeof fut, "%s", future);
    snprintf(fmt, sizeof fmt, "%s/FORMAT", fut);
    char *big = calloc(1, 5000);
    memcpy(big, "envlog environment format 2\n", 28);
    tu_write(fmt, big, 5000);
    free(big);
    ck_assert_err(envlog_env_open(fut, ENVLOG_OPEN_READONLY, &env), ENVLOG_FORMAT);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "over 4096"));
    ck_assert_int_eq(unlink(fmt), 0);
    ck_assert_int_eq(mkfifo(fmt, 0600), 0);
    ck_assert_err(envlog_env_open(fut, ENVLOG_OPEN_READONLY, &env), ENVLOG_FORMAT);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "a FIFO, not a regular file"));
    ck_assert_int_eq(unlink(fmt), 0);
    ck_assert_int_eq(mkdir(fmt, 0700), 0);
    ck_assert_err(envlog_env_open(fut, ENVLOG_OPEN_READONLY, &env), ENVLOG_FORMAT);
    ck_assert_msg(strstr(envlog_errmsg(), "a directory, not a regular file"), "%s", envlog_errmsg());
    ck_assert_int_eq(rmdir(fmt), 0);
    /* A file is not an environment. */
    ck_assert_int_ne(envlog_env_open(tu_path(other, "notes.txt"), 0, &env), ENVLOG_OK);
    ck_assert_err(envlog_env_open("", 0, &env), ENVLOG_INVALID_ARG);

    /* Read-only: nothing is created, no session can begin. */
    const char *ro = tu_path(dir, "ro");
    ck_assert_int_eq(mkdir(ro, 0700), 0);
    tu_write(tu_path(ro, "FORMAT"), "envlog environment format 1\n", 28);
    ck_assert_ok(envlog_env_open(ro, ENVLOG_OPEN_READONLY, &env));
    ck_assert(!tu_exists(tu_path(ro, "sessions")));
    envlog_session_info *in;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_eq(n, 0);
    envlog_sessions_free(in, n);
    envlog_session *s = (envlog_session *)1;
    ck_assert_err(envlog_session_begin(env, NULL, &s), ENVLOG_WRONG_STATE);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(envlog_env_format(env), 1);
    envlog_env_close(env);

    /* A format 1 environment reads as it is, and becomes format 2 only when
     * something of format 2 is first written there (envlog(5), FORMAT
     * VERSIONS): a session that changes nothing leaves it as it was. */
    ck_assert_ok(envlog_env_open(ro, 0, &env));
    ck_assert_int_eq(envlog_env_format(env), 1);
    ck_assert_ok(envlog_session_begin(env, NULL, &s));
    ck_assert_ok(envlog_record_mark(s, "only observed", NULL));
    ck_assert_ok(envlog_session_end(s));
    char *m1 = (char *)tu_read(tu_path(ro, "FORMAT"), &n);
    ck_assert_mem_eq(m1, "envlog environment format 1\n", 28);
    free(m1);
    ck_assert_ok(envlog_session_begin(env, NULL, &s));
    envlog_forget fg = {.table = ENVLOG_TABLE_TUNE, .ns = "n", .key = "k", .reason = "r"};
    ck_assert_ok(envlog_record_forget(s, &fg, NULL));
    ck_assert_ok(envlog_session_end(s));
    ck_assert_int_eq(envlog_env_format(env), 2);
    envlog_env_close(env);
    char *m2 = (char *)tu_read(tu_path(ro, "FORMAT"), &n);
    ck_assert_uint_eq(n, 28);
    ck_assert_mem_eq(m2, "envlog environment format 2\n", 28);
    free(m2);
    ck_assert_ok(envlog_env_open(ro, ENVLOG_OPEN_READONLY, &env));
    ck_assert_int_eq(envlog_env_format(env), 2);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_env_default_path)
{
    char buf[4096];
    setenv("ENVLOG_DIR", "/x/env", 1);
    ck_assert_ok(envlog_env_default_path(buf, sizeof buf));
    ck_assert_str_eq(buf, "/x/env");
    unsetenv("ENVLOG_DIR");
    setenv("XDG_CACHE_HOME", "/c", 1);
    ck_assert_ok(envlog_env_default_path(buf, sizeof buf));
    ck_assert_str_eq(buf, "/c/envlog/default");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/h", 1);
    ck_assert_ok(envlog_env_default_path(buf, sizeof buf));
    ck_assert_str_eq(buf, "/h/.cache/envlog/default");
    ck_assert_err(envlog_env_default_path(buf, 5), ENVLOG_TOO_BIG);
    unsetenv("HOME");
    ck_assert_err(envlog_env_default_path(buf, sizeof buf), ENVLOG_NOT_FOUND);
    /* NULL opens the default. */
    char *dir = tu_mkdtemp("defenv");
    setenv("ENVLOG_DIR", dir, 1);
    envlog_env *env;
    ck_assert_ok(envlog_env_open(NULL, ENVLOG_OPEN_CREATE, &env));
    ck_assert_str_eq(envlog_env_path(env), dir);
    envlog_env_close(env);
    ck_assert(tu_exists(tu_path(dir, "FORMAT")));
    unsetenv("ENVLOG_DIR");
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* ---------------------------------------------------------------- effects */

START_TEST(test_observe_only_leaves_nothing)
{
    char *dir = tu_mkdtemp("gate");
    envlog_env *env = tu_env(dir);
    char *before = tu_listing(dir);
    for (int level = ENVLOG_LEVEL_OFF; level <= ENVLOG_LEVEL_FULL; level++) {
        envlog_session_opts o = tu_opts("observer", 0);
        o.level = (envlog_level)level;
        o.sync = ENVLOG_SYNC_RECORD;
        envlog_session *s;
        ck_assert_ok(envlog_session_begin(env, &o, &s));
        envlog_stamp st;
        ck_assert_ok(envlog_record_mark(s, "warm start", &st));
        ck_assert_uint_eq(st.seq, 1);
        envlog_span sp;
        ck_assert_ok(envlog_span_open(s, "lookup", &sp));
        ck_assert_ok(envlog_span_close(&sp, NULL, 0, NULL));
        tu_sample t;
        tu_sample_make(&t, ENVLOG_KIND_TUNE, TU_TYPICAL);
        t.u.tune.stored = false; /* an unmeasured pick */
        ck_assert_ok(envlog_record_tune(s, &t.u.tune, NULL));
        tu_sample c;
        tu_sample_make(&c, ENVLOG_KIND_COMPILE, TU_TYPICAL);
        c.u.compile.outcome = ENVLOG_LOADED; /* a cache hit */
        ck_assert_ok(envlog_record_compile(s, &c.u.compile, NULL));
        c.u.compile.outcome = ENVLOG_FAILED;
        ck_assert_ok(envlog_record_compile(s, &c.u.compile, NULL));
        c.u.compile.outcome = ENVLOG_COMPILED; /* compiled, no binary kept */
        c.u.compile.binary = (envlog_bytes){NULL, 0};
        ck_assert_ok(envlog_record_compile(s, &c.u.compile, NULL));
        ck_assert_ok(envlog_record_user(s, "probe", "\xa0", 1, ENVLOG_OBSERVED, &st));
        ck_assert_uint_eq(st.seq, 7);
        ck_assert_ok(envlog_session_flush(s));
        envlog_session_stats ss;
        envlog_session_stats_get(s, &ss);
        ck_assert(!ss.on_disk);
        ck_assert_uint_eq(ss.written, 0);
        ck_assert_uint_eq(ss.accepted, 7);
        ck_assert_uint_eq(ss.held, level == ENVLOG_LEVEL_OFF ? 0 : 7);
        ck_assert_uint_eq(ss.segments, 0);
        ck_assert_ok(envlog_session_end(s));
        char *after = tu_listing(dir);
        ck_assert_str_eq(after, before);
        free(after);
    }
    /* At OFF even CHANGED records leave nothing, and stamps still count. */
    envlog_session_opts o = tu_opts("off", 0);
    o.level = ENVLOG_LEVEL_OFF;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    envlog_stamp st;
    for (unsigned i = 0; i < 5; i++) {
        ck_assert_ok(tu_record_tune(s, "off", i, 0, &st));
        ck_assert_uint_eq(st.seq, i + 1);
    }
    ck_assert_ok(envlog_session_end(s));
    char *after = tu_listing(dir);
    ck_assert_str_eq(after, before);
    free(after);
    /* The listing can tell: one CHANGED record makes a directory. */
    o = tu_opts("changer", 0);
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    ck_assert_ok(tu_record_tune(s, "on", 1, 0, NULL));
    ck_assert_ok(envlog_session_end(s));
    after = tu_listing(dir);
    ck_assert_str_ne(after, before);
    free(after);
    free(before);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_first_change_flushes_held)
{
    /* The first CHANGED record writes the session record, the held records
     * in order, then itself. */
    char *dir = tu_mkdtemp("held");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("held é", 0);
    o.runtime = "rt";
    o.runtime_version = "9.1";
    o.process_mode = "compile-only";
    const char *devs[] = {"sm_90/H100", "sm_80/A100"};
    o.devices = devs;
    o.n_devices = 2;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    uint64_t t0 = envlog_clock_unix_ns();
    envlog_stamp st;
    ck_assert_ok(envlog_record_mark(s, "m1", &st));
    ck_assert_uint_eq(st.seq, 1);
    ck_assert_ok(envlog_record_mark(s, "m2", NULL));
    char *listing = tu_listing(dir);
    ck_assert_ptr_null(strstr(listing, ".log"));
    free(listing);
    ck_assert_ok(tu_record_tune(s, "first", 0, 0, &st));
    ck_assert_uint_eq(st.seq, 3);
    ck_assert_ok(envlog_record_mark(s, "m3", NULL));
    envlog_session_stats ss;
    envlog_session_stats_get(s, &ss);
    ck_assert(ss.on_disk);
    ck_assert_uint_eq(ss.held, 0);
    ck_assert_uint_eq(ss.written, 5);
    ck_assert_uint_eq(ss.segments, 1);
    envlog_id128 id = envlog_session_id(s);
    ck_assert(!memcmp(st.session.b, id.b, 16));
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n, 5);
    const char *names[] = {"session", "m1", "m2", "first-0", "m3"};
    for (size_t i = 0; i < 5; i++) {
        ck_assert_uint_eq(rb.recs[i].seq, i);
        char *nm = record_name(&rb.recs[i]);
        ck_assert_str_eq(nm, names[i]);
        free(nm);
    }
    ck_assert_int_eq(rb.recs[3].effect, ENVLOG_CHANGED);
    ck_assert_int_eq(rb.recs[1].effect, ENVLOG_OBSERVED);
    /* The session record says who recorded it. */
    envlog_arena a = {0};
    envlog_record rec;
    decode(&rb.recs[0], &rec, &a);
    const envlog_session_rec *sr = &rec.u.session;
    ck_assert(!memcmp(sr->id.b, id.b, 16));
    ck_assert_str_eq(sr->label, "held é");
    ck_assert_str_eq(sr->runtime, "rt");
    ck_assert_str_eq(sr->runtime_version, "9.1");
    ck_assert_str_eq(sr->process_mode, "compile-only");
    ck_assert_str_eq(sr->envlog_version, ENVLOG_VERSION_STRING);
    ck_assert_uint_eq(sr->n_devices, 2);
    ck_assert_str_eq(sr->devices[1], "sm_80/A100");
    ck_assert_uint_eq(sr->pid, (uint64_t)getpid());
    ck_assert_int_eq(sr->level, ENVLOG_LEVEL_BASIC);
    ck_assert_uint_eq(sr->dropped, 0);
    ck_assert_ptr_nonnull(sr->host);
    ck_assert_ptr_nonnull(sr->os);
    ck_assert_uint_le(sr->start_unix_ns, t0);
    ck_assert_uint_ge(sr->start_unix_ns + 60000000000ull, t0);
    envlog_arena_free(&a);
    /* The listing's summary. */
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(in[0].label, "held é");
    ck_assert_str_eq(in[0].runtime, "rt");
    ck_assert_uint_eq(in[0].records, 5);
    ck_assert_uint_eq(in[0].last_seq, 4);
    ck_assert_uint_eq(in[0].segments, 1);
    ck_assert_int_eq(in[0].state, ENVLOG_STATE_SEALED);
    ck_assert_uint_eq(in[0].start_unix_ns, sr->start_unix_ns);
    char hex[33];
    envlog_id_format(&id, hex);
    ck_assert_str_eq(in[0].id_hex, hex);
    ck_assert_uint_eq(in[0].bytes, (uint64_t)tu_size(tu_path(tu_path(tu_path(dir, "sessions"),
                                   hex), "00000000-0000000000000000.log")));
    envlog_sessions_free(in, n);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_pending_budget)
{
    /* Held records beyond the budget go oldest first; the session record
     * counts them, and the reader sees no gap for them. */
    char *dir = tu_mkdtemp("budget");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("budget", 0);
    o.pending_budget = 4096;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    size_t sizes[201];
    for (unsigned i = 1; i <= 200; i++) {
        char label[80];
        snprintf(label, sizeof label, "mark-%u %.*s", i, (int)(i % 40), "padpadpadpadpadpadpadpadpadpadpadpadpadpad");
        envlog_stamp st;
        ck_assert_ok(envlog_record_mark(s, label, &st));
        ck_assert_uint_eq(st.seq, i);
    }
    envlog_session_stats ss;
    envlog_session_stats_get(s, &ss);
    ck_assert_uint_gt(ss.dropped, 100);
    uint64_t dropped = ss.dropped, held = ss.held;
    ck_assert_uint_eq(dropped + held, 200);
    ck_assert_ok(tu_record_tune(s, "change", 1, 0, NULL));
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));

    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    ck_assert_uint_eq(rb.n, 1 + held + 1);
    envlog_arena a = {0};
    envlog_record rec;
    decode(&rb.recs[0], &rec, &a);
    ck_assert_uint_eq(rec.u.session.dropped, dropped);
    envlog_arena_free(&a);
    /* The held ones are the newest marks, in order, right after the drop;
     * they fit the budget, and one more (the newest dropped) would not. */
    size_t sum = 0;
    for (size_t i = 1; i <= held; i++) {
        ck_assert_uint_eq(rb.recs[i].seq, 200 - held + i);
        char *nm = record_name(&rb.recs[i]);
        char want[16];
        snprintf(want, sizeof want, "mark-%llu ", (unsigned long long)rb.recs[i].seq);
        ck_assert_msg(!strncmp(nm, want, strlen(want)), "%s", nm);
        free(nm);
        sum += rb.recs[i].size;
        sizes[i] = rb.recs[i].size;
    }
    ck_assert_uint_le(sum, 4096);
    /* The newest dropped mark was about as big as the oldest kept one (the
     * labels differ by at most 40 bytes): it could not have fitted. */
    ck_assert_uint_gt(sum + sizes[1], 4096 - 40);
    ck_assert_uint_eq(rb.recs[held + 1].seq, 201);
    ck_assert_int_eq(rb.recs[held + 1].kind, ENVLOG_KIND_TUNE);
    tu_readback_free(&rb);

    /* A record bigger than the whole budget cannot be held: it is dropped
     * and counted, and the reader sees the drop as no gap. */
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    ck_assert_ok(envlog_record_mark(s, "small-1", NULL));
    char *big = malloc(5000);
    memset(big, 'b', 4999);
    big[4999] = 0;
    ck_assert_ok(envlog_record_mark(s, big, NULL));
    free(big);
    ck_assert_ok(envlog_record_mark(s, "small-3", NULL));
    envlog_session_stats_get(s, &ss);
    ck_assert_uint_ge(ss.dropped, 1);
    ck_assert_uint_eq(ss.dropped + ss.held, 3);
    ck_assert_ok(tu_record_tune(s, "change", 4, 0, NULL));
    id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    decode(&rb.recs[0], &rec, &a);
    ck_assert_uint_eq(rec.u.session.dropped, ss.dropped);
    envlog_arena_free(&a);
    ck_assert_uint_eq(rb.n, 1 + ss.held + 1);
    for (size_t i = 1; i < rb.n; i++) {
        char *nm = record_name(&rb.recs[i]);
        ck_assert_msg(strlen(nm) < 100, "the oversized record was kept");
        free(nm);
    }
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_levels)
{
    /* FULL keeps sources, IR and samples; BASIC leaves them out. */
    char *dir = tu_mkdtemp("levels");
    envlog_env *env = tu_env(dir);
    for (int level = ENVLOG_LEVEL_BASIC; level <= ENVLOG_LEVEL_FULL; level++) {
        envlog_session_opts o = tu_opts("lv", 0);
        o.level = (envlog_level)level;
        envlog_session *s;
        ck_assert_ok(envlog_session_begin(env, &o, &s));
        tu_sample c, t;
        tu_sample_make(&c, ENVLOG_KIND_COMPILE, TU_UNICODE);
        tu_sample_make(&t, ENVLOG_KIND_TUNE, TU_UNICODE);
        /* These samples say imported, which only an import's path records
         * (the public calls refuse the flag). */
        ck_assert_ok(envlog_record_imported(s, ENVLOG_KIND_COMPILE, &c.u.compile, NULL));
        ck_assert_ok(envlog_record_imported(s, ENVLOG_KIND_TUNE, &t.u.tune, NULL));
        envlog_id128 id = envlog_session_id(s);
        ck_assert_ok(envlog_session_end(s));
        tu_readback rb;
        ck_assert_ok(tu_read_session(env, &id, &rb));
        ck_assert_uint_eq(rb.n, 3);
        envlog_arena a = {0};
        envlog_record rec;
        decode(&rb.recs[0], &rec, &a);
        ck_assert_int_eq(rec.u.session.level, level);
        envlog_arena_reset(&a);
        decode(&rb.recs[1], &rec, &a);
        tu_sample_check(ENVLOG_KIND_COMPILE, &c.u.compile, &rec.u.compile,
                        level == ENVLOG_LEVEL_FULL);
        envlog_arena_reset(&a);
        decode(&rb.recs[2], &rec, &a);
        tu_sample_check(ENVLOG_KIND_TUNE, &t.u.tune, &rec.u.tune, level == ENVLOG_LEVEL_FULL);
        envlog_arena_free(&a);
        tu_readback_free(&rb);
    }
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_every_kind_recorded)
{
    /* Each recording call stores what it was given. */
    char *dir = tu_mkdtemp("kinds");
    envlog_env *env = tu_env(dir);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, NULL, &s));
    tu_sample t, c, im, f, u;
    tu_sample_make(&t, ENVLOG_KIND_TUNE, TU_TYPICAL);
    tu_sample_make(&c, ENVLOG_KIND_COMPILE, TU_TYPICAL);
    tu_sample_make(&im, ENVLOG_KIND_IMPORT, TU_UNICODE);
    tu_sample_make(&f, ENVLOG_KIND_FORGET, TU_UNICODE);
    tu_sample_make(&u, ENVLOG_KIND_USER, TU_UNICODE);
    envlog_stamp st[6];
    ck_assert_ok(envlog_record_tune(s, &t.u.tune, &st[0]));
    c.u.compile.tune = st[0];
    ck_assert_ok(envlog_record_compile(s, &c.u.compile, &st[1]));
    ck_assert_ok(envlog_record_import(s, &im.u.import, &st[2]));
    ck_assert_ok(envlog_record_forget(s, &f.u.forget, &st[3]));
    ck_assert_ok(envlog_record_user(s, u.u.user.kind, u.u.user.body.data, u.u.user.body.size,
                                    ENVLOG_CHANGED, &st[4]));
    ck_assert_ok(envlog_record_mark(s, "ünï", &st[5]));
    for (int i = 1; i < 6; i++) {
        ck_assert_uint_eq(st[i].seq, st[i - 1].seq + 1);
        ck_assert_uint_ge(st[i].offset_ns, st[i - 1].offset_ns);
    }
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n, 7);
    const void *want[] = {&t.u.tune, &c.u.compile, &im.u.import, &f.u.forget, &u.u.user};
    const envlog_kind kinds[] = {ENVLOG_KIND_TUNE, ENVLOG_KIND_COMPILE, ENVLOG_KIND_IMPORT,
                                 ENVLOG_KIND_FORGET, ENVLOG_KIND_USER, ENVLOG_KIND_MARK};
    const envlog_effect effs[] = {ENVLOG_CHANGED, ENVLOG_CHANGED, ENVLOG_CHANGED,
                                  ENVLOG_CHANGED, ENVLOG_CHANGED, ENVLOG_OBSERVED};
    for (int i = 0; i < 6; i++) {
        envlog_arena a = {0};
        envlog_record rec;
        decode(&rb.recs[i + 1], &rec, &a);
        ck_assert_int_eq(rec.kind, kinds[i]);
        ck_assert_int_eq(rec.effect, effs[i]);
        ck_assert_uint_eq(rec.stamp.seq, st[i].seq);
        ck_assert_uint_eq(rec.stamp.offset_ns, st[i].offset_ns);
        if (i < 5)
            tu_sample_check(kinds[i], want[i], &rec.u, false);
        else {
            ck_assert_str_eq(rec.u.mark.label, "ünï");
            ck_assert_uint_gt(rec.u.mark.wall_unix_ns, 0);
        }
        envlog_arena_free(&a);
    }
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_spans)
{
    char *dir = tu_mkdtemp("spans");
    envlog_env *env = tu_env(dir);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, NULL, &s));
    envlog_span outer, inner, inner2;
    ck_assert_ok(envlog_span_open(s, "outer", &outer));
    ck_assert_ok(envlog_span_open(s, "inner", &inner));
    envlog_attr at[] = {{"shape", "1024x1024"}, {"dtype", "f16 ✓"}};
    envlog_stamp si, si2, so;
    ck_assert_ok(envlog_span_close(&inner, at, 2, &si));
    ck_assert_ok(envlog_span_open(s, "inner2", &inner2));
    ck_assert_ok(envlog_span_close(&inner2, NULL, 0, &si2));
    ck_assert_ok(tu_record_tune(s, "inside", 0, 0, NULL));
    ck_assert_ok(envlog_span_close(&outer, NULL, 0, &so));
    /* Closing twice, or a span never opened, is refused. */
    ck_assert_err(envlog_span_close(&outer, NULL, 0, NULL), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_span_close(NULL, NULL, 0, NULL), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_span_open(s, NULL, &outer), ENVLOG_INVALID_ARG);
    envlog_span bad;
    ck_assert_ok(envlog_span_open(s, "bad", &bad));
    envlog_attr nul[] = {{"k", NULL}};
    ck_assert_err(envlog_span_close(&bad, nul, 1, NULL), ENVLOG_INVALID_ARG);
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    /* Spans are stamped when they open (envlog(5), SPANS): outer, inner and
     * inner2 were held, in seq order, until the tune (CHANGED) wrote them,
     * outer as its opening (still open), which its close then follows with
     * a record of its own; bad never closed, and is written as opened. */
    ck_assert_uint_eq(rb.n, 7);
    envlog_arena a = {0};
    envlog_record r1, r2, r3, ro, rt, rbad;
    envlog_arena a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0};
    decode(&rb.recs[1], &ro, &a4);
    decode(&rb.recs[2], &r1, &a);
    decode(&rb.recs[3], &r2, &a2);
    decode(&rb.recs[4], &rt, &a5);
    decode(&rb.recs[5], &r3, &a3);
    decode(&rb.recs[6], &rbad, &a6);
    for (size_t i = 1; i < rb.n; i++)
        ck_assert_uint_eq(rb.recs[i].seq, i);
    ck_assert_str_eq(ro.u.span.name, "outer");
    ck_assert(ro.u.span.open);
    ck_assert_uint_eq(ro.stamp.offset_ns, ro.u.span.open_ns);
    ck_assert_uint_eq(ro.u.span.duration_ns, 0);
    ck_assert_str_eq(r1.u.span.name, "inner");
    ck_assert_str_eq(r2.u.span.name, "inner2");
    ck_assert_int_eq(rt.kind, ENVLOG_KIND_TUNE);
    ck_assert_str_eq(r3.u.span.name, "outer");
    ck_assert(!r1.u.span.open && !r2.u.span.open && !r3.u.span.open);
    ck_assert_uint_eq(r3.u.span.id, ro.u.span.id);
    ck_assert_uint_eq(r3.u.span.open_ns, ro.u.span.open_ns);
    ck_assert_str_eq(rbad.u.span.name, "bad");
    ck_assert(rbad.u.span.open);
    /* A span held whole keeps its opening's stamp: its seq and open time. */
    ck_assert_uint_eq(r1.stamp.seq, si.seq);
    ck_assert_uint_eq(r1.stamp.offset_ns, r1.u.span.open_ns);
    ck_assert_uint_eq(r2.stamp.seq, si2.seq);
    ck_assert_uint_eq(r3.stamp.seq, so.seq);
    ck_assert_uint_ge(r3.stamp.offset_ns, rt.stamp.offset_ns);
    ck_assert_uint_eq(r3.u.span.parent, 0);
    ck_assert_uint_eq(r1.u.span.parent, r3.u.span.id);
    ck_assert_uint_eq(r2.u.span.parent, r3.u.span.id);
    ck_assert_uint_ne(r1.u.span.id, r2.u.span.id);
    ck_assert_uint_ne(r1.u.span.id, r3.u.span.id);
    ck_assert_uint_le(r3.u.span.open_ns, r1.u.span.open_ns);
    ck_assert_uint_le(r1.u.span.open_ns + r1.u.span.duration_ns, r2.u.span.open_ns);
    ck_assert_uint_ge(r3.u.span.open_ns + r3.u.span.duration_ns,
                      r2.u.span.open_ns + r2.u.span.duration_ns);
    ck_assert_uint_eq(r1.u.span.n_attrs, 2);
    ck_assert_str_eq(r1.u.span.attrs[1].value, "f16 ✓");
    ck_assert_uint_eq(r2.u.span.n_attrs, 0);
    /* Each span names the thread that opened it. */
    ck_assert(r1.u.span.has_thread && r2.u.span.has_thread && r3.u.span.has_thread);
    ck_assert_uint_eq(r1.u.span.thread, envlog_thread_id());
    ck_assert_uint_eq(r3.u.span.thread, envlog_thread_id());
    envlog_arena_free(&a);
    envlog_arena_free(&a2);
    envlog_arena_free(&a3);
    envlog_arena_free(&a4);
    envlog_arena_free(&a5);
    envlog_arena_free(&a6);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* The kinds and names of a session's records in file order, "kind:name"
 * (span openings as "open:name"), comma-separated. */
static void file_order(envlog_env *env, const envlog_id128 *id, char *out, size_t size)
{
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, id, &rb));
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 1; i < rb.n; i++) {
        ck_assert_uint_gt(rb.recs[i].seq, rb.recs[i - 1].seq);
        envlog_arena a = {0};
        envlog_record r;
        decode(&rb.recs[i], &r, &a);
        const char *kind = r.kind == ENVLOG_KIND_SPAN && r.u.span.open ? "open"
                                                                        : envlog_kind_name(r.kind);
        const char *name = r.kind == ENVLOG_KIND_SPAN   ? r.u.span.name
                           : r.kind == ENVLOG_KIND_MARK ? r.u.mark.label
                           : r.kind == ENVLOG_KIND_TUNE ? "tune"
                                                        : "?";
        used += (size_t)snprintf(out + used, size - used, "%s%s:%s", i > 1 ? "," : "",
                                 kind, name);
        envlog_arena_free(&a);
        ck_assert_uint_lt(used, size);
    }
    tu_readback_free(&rb);
}

static envlog_err kinds_in_order(void *ctx, const envlog_replay_rec *r)
{
    char *out = ctx;
    size_t n = strlen(out);
    snprintf(out + n, 256 - n, "%s%s", n ? "," : "",
             r->rec->kind == ENVLOG_KIND_SPAN ? "span"
             : r->rec->kind == ENVLOG_KIND_MARK ? "mark"
             : r->rec->kind == ENVLOG_KIND_SESSION ? "session" : "other");
    return ENVLOG_OK;
}

START_TEST(test_span_stamped_when_it_opens)
{
    /* envlog(5), SPANS: a span's seq orders it before the records made while
     * it is open; held records keep that order; what cannot wait (a CHANGED
     * record, the budget) writes the opening first, and the close then
     * follows as a record of its own. */
    char *dir = tu_mkdtemp("span-open");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("span-open", 0);
    o.pending_budget = 4096;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    envlog_span a, b, c, d;
    envlog_stamp sa, sm, sb;
    /* Before the disk: A and a mark inside it, held; A closes first. */
    ck_assert_ok(envlog_span_open(s, "A", &a));
    ck_assert_ok(envlog_record_mark(s, "in-A", &sm));
    ck_assert_ok(envlog_span_close(&a, NULL, 0, &sa));
    ck_assert_uint_lt(sa.seq, sm.seq);
    ck_assert_uint_le(sa.offset_ns, sm.offset_ns);
    ck_assert_ok(tu_record_tune(s, "t", 0, 0, NULL)); /* to the disk */
    /* On the disk: B and a mark inside it wait for B. */
    envlog_session_stats st0, st1;
    envlog_session_stats_get(s, &st0);
    ck_assert_ok(envlog_span_open(s, "B", &b));
    ck_assert_ok(envlog_record_mark(s, "in-B", &sm));
    envlog_session_stats_get(s, &st1);
    ck_assert_uint_eq(st1.written, st0.written);
    ck_assert_uint_eq(st1.held, 2);
    ck_assert_ok(envlog_span_close(&b, NULL, 0, &sb));
    ck_assert_uint_lt(sb.seq, sm.seq);
    envlog_session_stats_get(s, &st1);
    ck_assert_uint_eq(st1.written, st0.written + 2);
    ck_assert_uint_eq(st1.held, 0);
    /* C: more than the budget recorded inside it writes its opening; its
     * close is a record of its own, stamped at the close. */
    ck_assert_ok(envlog_span_open(s, "C", &c));
    char label[600];
    memset(label, 'm', sizeof label - 1);
    label[sizeof label - 1] = '\0';
    for (int i = 0; i < 10; i++)
        ck_assert_ok(envlog_record_mark(s, label, NULL));
    envlog_session_stats_get(s, &st1);
    ck_assert_uint_eq(st1.held, 0);
    ck_assert_ok(envlog_span_close(&c, NULL, 0, NULL));
    /* D stays open to the end: its opening and the mark after it are
     * written when the session ends. */
    ck_assert_ok(envlog_span_open(s, "D", &d));
    ck_assert_ok(envlog_record_mark(s, "in-D", NULL));
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    char got[16384];
    file_order(env, &id, got, sizeof got);
    char want[16384];
    size_t n = (size_t)snprintf(want, sizeof want,
                                "span:A,mark:in-A,tune:tune,span:B,mark:in-B,open:C");
    for (int i = 0; i < 10; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, ",mark:%s", label);
    snprintf(want + n, sizeof want - n, ",span:C,open:D,mark:in-D");
    ck_assert_str_eq(got, want);
    /* Readers in the total order see each span before its contents. */
    char order[256] = "";
    envlog_replay_opts ro = {0};
    ck_assert_ok(envlog_replay_each(env, &ro, kinds_in_order, order));
    ck_assert_ptr_nonnull(strstr(order, "session,span,mark,other,span,mark,span,mark"));
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_span_dropped_with_its_opening)
{
    /* Before the disk the oldest held records go first over budget: an
     * open span's opening is one of them, so the span goes too, and the
     * dropped seqs stay one run after the session record. */
    char *dir = tu_mkdtemp("span-drop");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("span-drop", 0);
    o.pending_budget = 2048;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    envlog_span a;
    ck_assert_ok(envlog_span_open(s, "early", &a));
    char label[300];
    memset(label, 'x', sizeof label - 1);
    label[sizeof label - 1] = '\0';
    for (int i = 0; i < 20; i++)
        ck_assert_ok(envlog_record_mark(s, label, NULL));
    envlog_stamp sa;
    ck_assert_ok(envlog_span_close(&a, NULL, 0, &sa));
    ck_assert_uint_eq(sa.seq, 1);
    ck_assert_ok(tu_record_tune(s, "t", 0, 0, NULL));
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    envlog_arena ar = {0};
    envlog_record sr;
    decode(&rb.recs[0], &sr, &ar);
    ck_assert_uint_gt(sr.u.session.dropped, 1);
    ck_assert_uint_eq(rb.recs[1].seq, sr.u.session.dropped + 1);
    for (size_t i = 1; i < rb.n; i++)
        ck_assert_int_ne(rb.recs[i].kind, ENVLOG_KIND_SPAN);
    envlog_arena_free(&ar);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_invalid_input)
{
    char *dir = tu_mkdtemp("inval");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o;
    envlog_session *s = NULL;
    o = tu_opts("x", 0);
    o.level = (envlog_level)3;
    ck_assert_err(envlog_session_begin(env, &o, &s), ENVLOG_INVALID_ARG);
    o = tu_opts("x", 0);
    o.sync = (envlog_sync)3;
    ck_assert_err(envlog_session_begin(env, &o, &s), ENVLOG_INVALID_ARG);
    o = tu_opts("x", 40000);
    ck_assert_err(envlog_session_begin(env, &o, &s), ENVLOG_INVALID_ARG);
    o = tu_opts("x", 2ull << 30);
    ck_assert_err(envlog_session_begin(env, &o, &s), ENVLOG_INVALID_ARG);
    o = tu_opts("x", 0);
    o.n_devices = 1;
    ck_assert_err(envlog_session_begin(env, &o, &s), ENVLOG_INVALID_ARG);
    const char *nulldev[] = {NULL};
    o.devices = nulldev;
    ck_assert_err(envlog_session_begin(env, &o, &s), ENVLOG_INVALID_ARG);
    o = tu_opts("\xc0\xaf", 0);
    ck_assert_err(envlog_session_begin(env, &o, &s), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_session_begin(NULL, NULL, &s), ENVLOG_INVALID_ARG);
    envlog_session_end(NULL);

    ck_assert_ok(envlog_session_begin(env, NULL, &s));
    envlog_stamp st;
    ck_assert_ok(tu_record_tune(s, "ok", 1, 0, &st));
    ck_assert_uint_eq(st.seq, 1);
    const char *cands[] = {"a", "b"};
    envlog_trial tr = {.name = "a", .index = 2};
    envlog_tune t = {.ns = "n", .key = "k", .candidates = cands, .n_candidates = 2,
                     .winner = 0, .stored = true};
    envlog_tune bad = t;
    bad.ns = NULL;
    ck_assert_err(envlog_record_tune(s, &bad, NULL), ENVLOG_INVALID_ARG);
    bad = t;
    bad.key = NULL;
    ck_assert_err(envlog_record_tune(s, &bad, NULL), ENVLOG_INVALID_ARG);
    bad = t;
    bad.winner = 2;
    ck_assert_err(envlog_record_tune(s, &bad, NULL), ENVLOG_INVALID_ARG);
    bad.winner = -2;
    ck_assert_err(envlog_record_tune(s, &bad, NULL), ENVLOG_INVALID_ARG);
    bad = t;
    bad.winner = -1; /* stored without a winner */
    ck_assert_err(envlog_record_tune(s, &bad, NULL), ENVLOG_INVALID_ARG);
    bad = t;
    bad.trials = &tr;
    bad.n_trials = 1;
    ck_assert_err(envlog_record_tune(s, &bad, NULL), ENVLOG_INVALID_ARG);
    bad = t;
    bad.key = "\xed\xa0\x80";
    ck_assert_err(envlog_record_tune(s, &bad, NULL), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_tune(s, NULL, NULL), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_tune(NULL, &t, NULL), ENVLOG_INVALID_ARG);
    envlog_compile c = {.ns = "n"};
    ck_assert_err(envlog_record_compile(s, &c, NULL), ENVLOG_INVALID_ARG);
    c.name = "k";
    c.binary = (envlog_bytes){NULL, 5};
    ck_assert_err(envlog_record_compile(s, &c, NULL), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_mark(s, NULL, NULL), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_mark(s, "\xff", NULL), ENVLOG_INVALID_ARG);
    envlog_import im = {0};
    ck_assert_err(envlog_record_import(s, &im, NULL), ENVLOG_INVALID_ARG);
    envlog_forget f = {.ns = "n"};
    ck_assert_err(envlog_record_forget(s, &f, NULL), ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_user(s, "", "\x01", 1, ENVLOG_OBSERVED, NULL),
                  ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_user(s, "k", NULL, 0, ENVLOG_OBSERVED, NULL),
                  ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_user(s, "k", "\x01\x02", 2, ENVLOG_OBSERVED, NULL),
                  ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_user(s, "k", "\x82\x01", 2, ENVLOG_OBSERVED, NULL),
                  ENVLOG_INVALID_ARG);
    ck_assert_err(envlog_record_user(s, "k", "\x01", 1, (envlog_effect)2, NULL),
                  ENVLOG_INVALID_ARG);
    /* None of that took a seq. */
    ck_assert_ok(envlog_record_user(s, "k", "\x01", 1, ENVLOG_CHANGED, &st));
    ck_assert_uint_eq(st.seq, 2);
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n, 3);
    ck_assert_uint_eq(rb.n_corrupt, 0);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_rotation)
{
    char *dir = tu_mkdtemp("rot");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("rot", ENVLOG_BLOCK);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    envlog_stamp st[300];
    for (unsigned i = 0; i < 300; i++)
        ck_assert_ok(tu_record_tune(s, "rot", i, 500, &st[i]));
    envlog_session_stats ss;
    envlog_session_stats_get(s, &ss);
    ck_assert_uint_ge(ss.segments, 5);
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n, 301);
    ck_assert_int_eq(rb.state, ENVLOG_STATE_SEALED);
    /* Every file is a whole number of bytes up to its SEAL, none past the
     * rotation size, and named for its first record. */
    char hex[33];
    envlog_id_format(&id, hex);
    char sdir[4096];
    snprintf(sdir, sizeof sdir, "%s/sessions/%s", dir, hex);
    uint32_t seg = 0;
    for (size_t i = 0; i < rb.n; i++) {
        if (i == 0 || rb.recs[i].segment != rb.recs[i - 1].segment) {
            ck_assert_uint_eq(rb.recs[i].segment, seg);
            char name[40];
            envlog_seg_name_format(name, seg, rb.recs[i].seq);
            ck_assert_msg(tu_exists(tu_path(sdir, name)), "%s missing", name);
            ck_assert_int_le(tu_size(tu_path(sdir, name)), ENVLOG_BLOCK);
            seg++;
        }
    }
    ck_assert_uint_eq(seg, ss.segments);
    char *listing = tu_listing(sdir);
    size_t files = 0;
    for (char *p = listing; (p = strstr(p, ".log")); p++)
        files++;
    ck_assert_uint_eq(files, seg);
    free(listing);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_sync_policies)
{
    /* Every policy reads back the same; they differ in how often they sync
     * (counted through the I/O table, which fails nothing here). */
    char *dir = tu_mkdtemp("sync");
    envlog_env *env = tu_env(dir);
    long syncs[3];
    for (int pol = ENVLOG_SYNC_NONE; pol <= ENVLOG_SYNC_RECORD; pol++) {
        envlog_session_opts o = tu_opts("sync", 2 * ENVLOG_BLOCK);
        o.sync = (envlog_sync)pol;
        tu_fault_arm(TU_ANY, 0, 0);
        envlog_session *s;
        ck_assert_ok(envlog_session_begin(env, &o, &s));
        for (unsigned i = 0; i < 100; i++)
            ck_assert_ok(tu_record_tune(s, "sync", i, 800, NULL));
        envlog_id128 id = envlog_session_id(s);
        envlog_session_stats ss;
        envlog_session_stats_get(s, &ss);
        ck_assert_uint_ge(ss.segments, 2);
        ck_assert_ok(envlog_session_end(s));
        syncs[pol] = tu_fault_calls(TU_FSYNC);
        tu_fault_disarm();
        tu_readback rb;
        ck_assert_ok(tu_read_session(env, &id, &rb));
        ck_assert_uint_eq(rb.n, 101);
        ck_assert_int_eq(rb.state, ENVLOG_STATE_SEALED);
        tu_readback_free(&rb);
    }
    ck_assert_int_eq(syncs[ENVLOG_SYNC_NONE], 0);
    ck_assert_int_ge(syncs[ENVLOG_SYNC_CLOSE], 4);
    ck_assert_int_lt(syncs[ENVLOG_SYNC_CLOSE], 40);
    ck_assert_int_ge(syncs[ENVLOG_SYNC_RECORD], 100 + syncs[ENVLOG_SYNC_CLOSE] - 2);
    /* flush syncs the segment and the directory. */
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, NULL, &s));
    ck_assert_ok(tu_record_tune(s, "f", 1, 0, NULL));
    tu_fault_arm(TU_ANY, 0, 0);
    ck_assert_ok(envlog_session_flush(s));
    ck_assert_int_eq(tu_fault_calls(TU_FSYNC), 2);
    tu_fault_disarm();
    ck_assert_ok(envlog_session_end(s));
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_warm_path_allocates_nothing)
{
    /* Once warm, recording allocates nothing per record, across rotations
     * too (DESIGN: "allocates nothing per record on its hot path"). */
    char *dir = tu_mkdtemp("warm");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("warm", 2 * ENVLOG_BLOCK);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    for (unsigned i = 0; i < 10; i++)
        ck_assert_ok(tu_record_tune(s, "warm", i, 300, NULL));
    envlog_alloc_fail_after(1);
    envlog_err e = ENVLOG_OK;
    for (unsigned i = 10; i < 400 && !e; i++) {
        /* tu_record_tune's own buffer comes from malloc, not envlog's. */
        e = tu_record_tune(s, "warm", i, 300, NULL);
        if (!e && i % 10 == 0)
            e = envlog_record_mark(s, "warm mark", NULL);
    }
    long made = envlog_alloc_fail_reset();
    ck_assert_ok(e);
    ck_assert_int_eq(made, 0);
    envlog_session_stats ss;
    envlog_session_stats_get(s, &ss);
    ck_assert_uint_ge(ss.segments, 3);
    ck_assert_ok(envlog_session_end(s));
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* ---------------------------------------------------- fault injection */

/* What a faulty run managed to record: the name of each record by seq. */
typedef struct outcome {
    bool have_session;
    envlog_id128 id;
    char *names[256];
    uint64_t max_seq;
    int fails;
} outcome;

static bool clean_io_error(envlog_err e, int err)
{
    return e == envlog__errno_code(err) && strcmp(envlog_errmsg(), "no error detail");
}

/* Opens `dir`, records a mix of held and written records across three
 * segments, flushes and ends.  Every call either works or fails cleanly
 * with the code the injected errno stands for. */
static void faulty_run(const char *dir, envlog_sync sync, int err, outcome *out,
                       bool alloc)
{
    memset(out, 0, sizeof *out);
    envlog_env *env;
    envlog_err e = envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env);
#define CLEAN(e)                                                                 \
    ck_assert_msg(alloc ? (e) == ENVLOG_NOMEM : clean_io_error((e), err),        \
                  "line %d: %s (%s)", __LINE__, envlog_strerror(e), envlog_errmsg())
    if (e) {
        CLEAN(e);
        return;
    }
    envlog_session_opts o = tu_opts("faulty", 2 * ENVLOG_BLOCK);
    o.sync = sync;
    envlog_session *s;
    e = envlog_session_begin(env, &o, &s);
    if (e) {
        CLEAN(e);
        envlog_env_close(env);
        return;
    }
    for (unsigned i = 0; i < 90; i++) {
        envlog_stamp st;
        char name[64];
        if (i < 3 || i % 9 == 4) {
            snprintf(name, sizeof name, "mark-%u", i);
            e = envlog_record_mark(s, name, &st);
        } else {
            snprintf(name, sizeof name, "t-%u", i);
            e = tu_record_tune(s, "t", i, 1400, &st);
        }
        if (e) {
            CLEAN(e);
            out->fails++;
            continue;
        }
        ck_assert_uint_lt(st.seq, 256);
        ck_assert_ptr_null(out->names[st.seq]);
        out->names[st.seq] = strdup(name);
        out->max_seq = st.seq;
        out->id = st.session;
        out->have_session = true;
    }
    e = envlog_session_flush(s);
    if (e)
        CLEAN(e);
    e = envlog_session_end(s);
    if (e)
        CLEAN(e);
    envlog_env_close(env);
#undef CLEAN
}

/* After a faulty run: exactly the records whose call succeeded are there,
 * in seq order without gaps, and nothing is reported damaged. */
static void check_outcome(const char *dir, outcome *out)
{
    envlog_env *env;
    envlog_err e = envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env);
    if (!out->have_session) {
        if (!e) {
            envlog_session_info *in;
            size_t n;
            ck_assert_ok(envlog_sessions_list(env, &in, &n));
            /* Held records that never reached the disk leave nothing. */
            ck_assert_uint_eq(n, 0);
            envlog_sessions_free(in, n);
            envlog_env_close(env);
        }
        return;
    }
    ck_assert_ok(e);
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_le(n, 1);
    bool on_disk = n == 1;
    envlog_sessions_free(in, n);
    if (on_disk) {
        tu_readback rb;
        ck_assert_ok(tu_read_session(env, &out->id, &rb));
        ck_assert_msg(rb.n_corrupt == 0 && rb.n_truncated == 0,
                      "damage after a failed call: %s", rb.first_damage.reason);
        ck_assert_uint_eq(rb.n, out->max_seq + 1);
        for (size_t i = 1; i < rb.n; i++) {
            ck_assert_uint_eq(rb.recs[i].seq, i);
            char *nm = record_name(&rb.recs[i]);
            const char *want = out->names[i];
            ck_assert_msg(nm && want && !strcmp(nm, want), "seq %zu: %s, want %s", i, nm,
                          want ? want : "(not accepted)");
            free(nm);
        }
        ck_assert(rb.state == ENVLOG_STATE_SEALED || rb.state == ENVLOG_STATE_UNSEALED);
        tu_readback_free(&rb);
    } else {
        /* Only held records were accepted and the session never changed
         * anything: then none of its calls after them succeeded either. */
        for (uint64_t i = 1; i <= out->max_seq; i++)
            ck_assert_msg(!out->names[i] || !strncmp(out->names[i], "mark-", 5),
                          "a tune was accepted but the session is not on disk");
    }
    envlog_env_close(env);
    for (size_t i = 0; i < 256; i++)
        free(out->names[i]);
}

/* Fails the n-th call of `which` for n = 1, 2, ... until a run goes by
 * without reaching it. */
static void fault_loop(tu_call which, int err, envlog_sync sync)
{
    char *root = tu_mkdtemp("fault");
    long n;
    for (n = 1; n < 100000; n++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%ld", root, n);
        outcome out;
        tu_fault_arm(which, n, err);
        faulty_run(dir, sync, err, &out, false);
        bool fired = tu_fault_disarm();
        check_outcome(dir, &out);
        tu_rmrf(dir);
        if (!fired) {
            ck_assert_int_eq(out.fails, 0);
            ck_assert_uint_eq(out.max_seq, 90);
            break;
        }
    }
    ck_assert_int_lt(n, 100000);
    tu_rmrf(root);
    free(root);
}

static const struct {
    tu_call call;
    int err;
} faults[] = {
    {TU_ANY, EIO},     {TU_OPENAT, EIO},   {TU_MKDIRAT, EIO},    {TU_FALLOCATE, ENOSPC},
    {TU_FALLOCATE, EIO}, {TU_MMAP, ENOMEM}, {TU_FSYNC, EIO},      {TU_FTRUNCATE, EIO},
    {TU_FLOCK, EIO},   {TU_PWRITE, ENOSPC}, {TU_RENAMEAT, EIO},  {TU_FSTAT, EIO},
    {TU_PREAD, EIO},   {TU_FSTATAT, EIO},   {TU_OPENDIR, EIO},   {TU_READDIR, EIO},
};
#define N_FAULTS (sizeof faults / sizeof *faults)

START_TEST(test_fault_each_call)
{
    int i = _i / 2;
    envlog_sync sync = _i % 2 ? ENVLOG_SYNC_RECORD : ENVLOG_SYNC_CLOSE;
    fault_loop(faults[i].call, faults[i].err, sync);
}
END_TEST

/* At sync=close the writer starts writeback of each finished MiB: a hint,
 * after unmapping the pages written.  Both are made (several times over
 * 3 MiB), and when either fails (the first call or the second), nothing
 * else does: every record is recorded and reads back. */
START_TEST(test_writeback_hint)
{
    static const tu_call calls_of[] = {TU_WRITEBACK, TU_MUNMAP};
    for (size_t c = 0; c < 2 * sizeof calls_of / sizeof *calls_of; c++) {
        tu_call which = calls_of[c / 2];
        char *root = tu_mkdtemp("wb");
        envlog_env *env = tu_env(root);
        envlog_session_opts o = tu_opts("wb", 0);
        o.sync = ENVLOG_SYNC_CLOSE;
        envlog_session *s;
        ck_assert_ok(envlog_session_begin(env, &o, &s));
        envlog_id128 id = envlog_session_id(s);
        tu_fault_arm(which, 1 + (long)(c % 2), EIO);
        for (unsigned i = 0; i < 1500; i++)
            ck_assert_ok(tu_record_tune(s, "wb", i, 2000, NULL));
        long calls = tu_fault_calls(which);
        ck_assert_ok(envlog_session_end(s));
        tu_fault_disarm();
        ck_assert_msg(calls >= 2, "%s: %ld calls", tu_call_names[which], calls);
        tu_readback rb;
        ck_assert_ok(tu_read_session(env, &id, &rb));
        ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
        ck_assert_uint_eq(rb.n, 1501);
        tu_readback_free(&rb);
        envlog_env_close(env);
        tu_rmrf(root);
        free(root);
    }
}
END_TEST

START_TEST(test_nospace_names_file)
{
    /* A full disk at any preallocation (a new segment's, or a growing one's
     * every 1 MiB): ENVLOG_NOSPACE, with the segment's name in the message,
     * and nothing recorded before is lost. */
    char *root = tu_mkdtemp("nospc");
    const struct {
        uint64_t segsize;
        unsigned records;
    } cfg[] = {{2 * ENVLOG_BLOCK, 60}, {0, 1200}};
    for (int c = 0; c < 2; c++) {
        long n;
        for (n = 1; n < 1000; n++) {
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/%d-%ld", root, c, n);
            envlog_env *env = tu_env(dir);
            envlog_session_opts o = tu_opts("full", cfg[c].segsize);
            envlog_session *s;
            ck_assert_ok(envlog_session_begin(env, &o, &s));
            tu_fault_arm(TU_FALLOCATE, n, ENOSPC);
            unsigned ok = 0, failed = 0;
            for (unsigned i = 0; i < cfg[c].records; i++) {
                envlog_err e = tu_record_tune(s, "full", i, 2000, NULL);
                if (e) {
                    ck_assert_err(e, ENVLOG_NOSPACE);
                    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), ".log"));
                    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "No space left on device"));
                    failed++;
                } else {
                    ok++;
                }
            }
            bool fired = tu_fault_disarm();
            envlog_id128 id = envlog_session_id(s);
            ck_assert_ok(envlog_session_end(s));
            if (!fired) {
                envlog_env_close(env);
                tu_rmrf(dir);
                ck_assert_uint_eq(failed, 0);
                break;
            }
            ck_assert_uint_eq(failed, 1);
            tu_readback rb;
            ck_assert_ok(tu_read_session(env, &id, &rb));
            ck_assert_uint_eq(rb.n, ok + 1);
            ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
            tu_readback_free(&rb);
            envlog_env_close(env);
            tu_rmrf(dir);
        }
        ck_assert_int_gt(n, 2);
    }
    tu_rmrf(root);
    free(root);
}
END_TEST

START_TEST(test_alloc_fail_recording)
{
    /* Allocation n and all after it fail, for n = 1, 2, ...: every call
     * works or says ENVLOG_NOMEM, and what was accepted is on disk. */
    char *root = tu_mkdtemp("nomem");
    long n;
    for (n = 1; n < 100000; n++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%ld", root, n);
        outcome out;
        envlog_alloc_fail_after(n);
        faulty_run(dir, ENVLOG_SYNC_CLOSE, 0, &out, true);
        long made = envlog_alloc_fail_reset();
        check_outcome(dir, &out);
        tu_rmrf(dir);
        if (made < n) {
            ck_assert_int_eq(out.fails, 0);
            break;
        }
    }
    ck_assert_int_gt(n, 5);
    ck_assert_int_lt(n, 100000);
    tu_rmrf(root);
    free(root);
}
END_TEST

START_TEST(test_alloc_fail_reading)
{
    /* The reader and the listing under failing allocation: a clean
     * ENVLOG_NOMEM, never damage that is not there. */
    char *dir = tu_mkdtemp("rnomem");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("rnomem", 2 * ENVLOG_BLOCK);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    for (unsigned i = 0; i < 80; i++)
        ck_assert_ok(tu_record_tune(s, "r", i, (i * 911) % 5000, NULL));
    tu_sample big;
    tu_sample_make(&big, ENVLOG_KIND_COMPILE, TU_TYPICAL);
    uint8_t *bin = calloc(1, 100000);
    big.u.compile.binary = (envlog_bytes){bin, 100000};
    ck_assert_ok(envlog_record_compile(s, &big.u.compile, NULL));
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    free(bin);
    long n;
    for (n = 1; n < 100000; n++) {
        envlog_alloc_fail_after(n);
        envlog_reader *r;
        envlog_err e = envlog_reader_open(env, &id, &r);
        size_t got = 0;
        if (!e) {
            const envlog_record *rec;
            while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK) {
                ck_assert_uint_eq(rec->stamp.seq, got);
                got++;
            }
            envlog_reader_close(r);
        }
        long made = envlog_alloc_fail_reset();
        if (made < n) {
            ck_assert_err(e, ENVLOG_END);
            ck_assert_uint_eq(got, 82);
            break;
        }
        ck_assert_msg(e == ENVLOG_NOMEM, "allocation %ld failed: %s (%s)", n,
                      envlog_strerror(e), envlog_errmsg());
    }
    ck_assert_int_gt(n, 3);
    for (n = 1; n < 100000; n++) {
        envlog_session_info *in;
        size_t k;
        envlog_alloc_fail_after(n);
        envlog_err e = envlog_sessions_list(env, &in, &k);
        long made = envlog_alloc_fail_reset();
        if (!e) {
            ck_assert_uint_eq(k, 1);
            ck_assert_int_eq(in[0].state, ENVLOG_STATE_SEALED);
            ck_assert_uint_eq(in[0].records, 82);
            envlog_sessions_free(in, k);
            if (made < n)
                break;
        } else {
            ck_assert_err(e, ENVLOG_NOMEM);
        }
    }
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* --------------------------------------------------- processes, threads */

#define PROCS 8
#define PER_PROC 200

START_TEST(test_processes)
{
    /* Eight processes record into one environment at once: eight sessions,
     * each whole, each with only its own records. */
    char *dir = tu_mkdtemp("procs");
    envlog_env *env = tu_env(dir);
    int gate[2];
    ck_assert_int_eq(pipe(gate), 0);
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0) {
            close(gate[1]);
            char c;
            (void)!read(gate[0], &c, 1); /* all start together */
            envlog_env *e2;
            envlog_session *s;
            char label[32], prefix[32];
            snprintf(label, sizeof label, "proc-%d", p);
            snprintf(prefix, sizeof prefix, "p%d", p);
            envlog_session_opts o = tu_opts(label, 2 * ENVLOG_BLOCK);
            /* No automatic compaction at their ends: one would remove the
             * sessions while the test reads them back (slow under ASan). */
            o.auto_compact = -1;
            if (envlog_env_open(dir, ENVLOG_OPEN_CREATE, &e2) ||
                envlog_session_begin(e2, &o, &s))
                _exit(10);
            for (unsigned i = 0; i < PER_PROC; i++) {
                envlog_err e = i % 4 == 1 ? envlog_record_mark(s, prefix, NULL)
                                          : tu_record_tune(s, prefix, i, 200, NULL);
                if (e)
                    _exit(11);
            }
            if (envlog_session_end(s))
                _exit(12);
            envlog_env_close(e2);
            _exit(0);
        }
    }
    close(gate[0]);
    close(gate[1]);
    for (int p = 0; p < PROCS; p++) {
        int st;
        ck_assert_int_eq(waitpid(pids[p], &st, 0), pids[p]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", p, st);
    }
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_eq(n, PROCS);
    bool seen[PROCS] = {0};
    for (size_t i = 0; i < n; i++) {
        int p = -1;
        ck_assert_int_eq(sscanf(in[i].label, "proc-%d", &p), 1);
        ck_assert(p >= 0 && p < PROCS && !seen[p]);
        seen[p] = true;
        ck_assert_int_eq(in[i].state, ENVLOG_STATE_SEALED);
        ck_assert_uint_eq(in[i].records, PER_PROC + 1);
        tu_readback rb;
        ck_assert_ok(tu_read_session(env, &in[i].id, &rb));
        ck_assert_uint_eq(rb.n, PER_PROC + 1);
        ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "p%d", p);
        for (size_t k = 0; k < rb.n; k++) {
            ck_assert_uint_eq(rb.recs[k].seq, k);
            if (k == 0)
                continue;
            char *nm = record_name(&rb.recs[k]);
            char want[80];
            if ((k - 1) % 4 == 1)
                snprintf(want, sizeof want, "%s", prefix);
            else
                snprintf(want, sizeof want, "%s-%zu", prefix, k - 1);
            ck_assert_msg(!strcmp(nm, want), "session of %s: seq %zu is %s", in[i].label, k, nm);
            free(nm);
        }
        tu_readback_free(&rb);
    }
    envlog_sessions_free(in, n);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

#define THREADS 8
#define PER_THREAD 400

typedef struct worker {
    envlog_session *s;
    int t;
    envlog_stamp st[PER_THREAD];
    envlog_err err;
    uint64_t outer_id, inner_parent;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "t%d", w->t);
    envlog_span outer, inner;
    if ((w->err = envlog_span_open(w->s, prefix, &outer)))
        return NULL;
    w->outer_id = outer.id_;
    if ((w->err = envlog_span_open(w->s, "inner", &inner)))
        return NULL;
    w->inner_parent = inner.parent_;
    for (unsigned i = 0; i < PER_THREAD && !w->err; i++) {
        if (i % 5 == 2)
            w->err = envlog_record_mark(w->s, prefix, &w->st[i]);
        else
            w->err = tu_record_tune(w->s, prefix, i, (i * 37) % 400, &w->st[i]);
    }
    if (!w->err)
        w->err = envlog_span_close(&inner, NULL, 0, NULL);
    if (!w->err)
        w->err = envlog_span_close(&outer, NULL, 0, NULL);
    return NULL;
}

START_TEST(test_threads)
{
    /* Eight threads into one session: seq is the order of acceptance,
     * without gaps; every stamp handed out names its record; spans nest
     * per thread. */
    char *dir = tu_mkdtemp("threads");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("threads", 4 * ENVLOG_BLOCK);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    static worker w[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker){.s = s, .t = t};
        ck_assert_int_eq(pthread_create(&th[t], NULL, work, &w[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        ck_assert_ok(w[t].err);
        ck_assert_uint_eq(w[t].inner_parent, w[t].outer_id);
    }
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    /* Each span is written twice: its opening, before the tunes (CHANGED)
     * recorded inside it, and its close after them (envlog(5), SPANS). */
    size_t total = 1 + THREADS * (PER_THREAD + 4);
    ck_assert_uint_eq(rb.n, total);
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    ck_assert_int_eq(rb.state, ENVLOG_STATE_SEALED);
    for (size_t k = 0; k < rb.n; k++)
        ck_assert_uint_eq(rb.recs[k].seq, k);
    for (int t = 0; t < THREADS; t++) {
        for (unsigned i = 0; i < PER_THREAD; i++) {
            uint64_t seq = w[t].st[i].seq;
            ck_assert(!memcmp(w[t].st[i].session.b, id.b, 16));
            if (i)
                ck_assert_uint_gt(seq, w[t].st[i - 1].seq);
            ck_assert_uint_lt(seq, rb.n);
            char *nm = record_name(&rb.recs[seq]);
            char want[32];
            if (i % 5 == 2)
                snprintf(want, sizeof want, "t%d", t);
            else
                snprintf(want, sizeof want, "t%d-%u", t, i);
            ck_assert_msg(!strcmp(nm, want), "seq %llu: %s, want %s",
                          (unsigned long long)seq, nm, want);
            free(nm);
            /* The offset handed out is the one stored. */
            envlog_arena a = {0};
            envlog_record rec;
            decode(&rb.recs[seq], &rec, &a);
            ck_assert_uint_eq(rec.stamp.offset_ns, w[t].st[i].offset_ns);
            envlog_arena_free(&a);
        }
    }
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* Every record name of session `id`, joined by ",". */
static char *names_of(envlog_env *env, const envlog_id128 *id, uint64_t *pid)
{
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, id, &rb));
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    size_t cap = 16, len = 0;
    char *out = calloc(1, cap);
    for (size_t i = 0; i < rb.n; i++) {
        ck_assert_uint_eq(rb.recs[i].seq, i);
        if (i == 0) {
            envlog_arena a = {0};
            envlog_record rec;
            decode(&rb.recs[0], &rec, &a);
            *pid = rec.u.session.pid;
            envlog_arena_free(&a);
            continue;
        }
        char *nm = record_name(&rb.recs[i]);
        size_t need = len + strlen(nm) + 2;
        if (need > cap) {
            cap = need * 2;
            out = realloc(out, cap);
        }
        len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", nm);
        free(nm);
    }
    tu_readback_free(&rb);
    return out;
}

/* Where this process maps a segment file of the environment at `real`
 * (/proc/self/maps): false when it maps none. */
static bool seg_mapping(const char *real, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        const char *path = strchr(line, '/');
        found = path && !strncmp(path, real, strlen(real)) && strstr(path, ".log\n") &&
                sscanf(line, "%" SCNxPTR "-%" SCNxPTR, lo, hi) == 2;
    }
    fclose(f);
    return found;
}

START_TEST(test_sync_close_unmaps_written)
{
    /* At sync=close the pages a session has written are unmapped as they
     * go to writeback (a page written back while mapped writable costs a
     * TLB flush of its own): the mapping shrinks from its front, and what
     * the process maps in the hole later is its own: neither a forked
     * child nor the session's end unmaps it.  Every record reads back. */
    char *dir = tu_mkdtemp("unmapped");
    char *real = realpath(dir, NULL);
    ck_assert_ptr_nonnull(real);
    envlog_env *env = tu_env(dir);
    envlog_session *s;
    envlog_session_opts o = tu_opts("unmapped", 64u << 20);
    o.sync = ENVLOG_SYNC_CLOSE;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    ck_assert_ok(tu_record_tune(s, "t", 0, 0, NULL));
    uintptr_t lo0, hi0, lo, hi;
    ck_assert(seg_mapping(real, &lo0, &hi0));
    enum { N = 800 }; /* 800 records of over 4 KiB: past three 1 MiB steps */
    for (unsigned i = 1; i < N; i++)
        ck_assert_ok(tu_record_tune(s, "t", i, 4096, NULL));
    ck_assert(seg_mapping(real, &lo, &hi));
    ck_assert(hi == hi0);
    ck_assert_msg(lo >= lo0 + (2u << 20), "%zu bytes unmapped", (size_t)(lo - lo0));
    size_t hole = (size_t)(lo - lo0);
    uint8_t *mine = mmap((void *)lo0, hole, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ck_assert_ptr_eq(mine, (void *)lo0);
    memset(mine, 0x5a, hole);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(mine[0] == 0x5a && mine[hole - 1] == 0x5a ? 0 : 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %d", status);
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    ck_assert_uint_eq(mine[0], 0x5a);
    ck_assert_uint_eq(mine[hole - 1], 0x5a);
    munmap(mine, hole);
    ck_assert(!seg_mapping(real, &lo, &hi));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    ck_assert_uint_eq(rb.n, N + 1); /* and the SESSION record */
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(real);
    free(dir);
}
END_TEST

/* A fork by another thread while a session closes: the child never holds
 * the session directory's lock after the close (a reader would call the
 * session live).  The close's first fsync lets the other thread fork and
 * waits a moment before going on. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool armed, closing;
    envlog_io io;
} close_race = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, {0}};

static int race_fsync(int fd)
{
    pthread_mutex_lock(&close_race.mu);
    bool first = close_race.armed && !close_race.closing;
    if (first) {
        close_race.closing = true;
        pthread_cond_broadcast(&close_race.cv);
    }
    pthread_mutex_unlock(&close_race.mu);
    if (first)
        usleep(100 * 1000); /* the other thread forks meanwhile, if it can */
    return envlog_io_posix()->fsync(fd);
}

static void *fork_when_closing(void *arg)
{
    pthread_mutex_lock(&close_race.mu);
    while (!close_race.closing)
        pthread_cond_wait(&close_race.cv, &close_race.mu);
    pthread_mutex_unlock(&close_race.mu);
    pid_t pid = fork();
    if (pid == 0) {
        usleep(600 * 1000); /* holds what it inherited for a while */
        _exit(0);
    }
    *(pid_t *)arg = pid;
    return NULL;
}

START_TEST(test_fork_while_closing)
{
    char *dir = tu_mkdtemp("closerace");
    envlog_env *env = tu_env(dir);
    envlog_session *s;
    envlog_session_opts o = tu_opts("closing", 0);
    o.sync = ENVLOG_SYNC_CLOSE;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    for (unsigned i = 0; i < 10; i++)
        ck_assert_ok(tu_record_tune(s, "t", i, 0, NULL));
    char hex[33], sdir[4200];
    envlog_id128 id = envlog_session_id(s);
    envlog_id_format(&id, hex);
    snprintf(sdir, sizeof sdir, "%s/sessions/%s", dir, hex);
    close_race.io = *envlog_io_posix();
    close_race.io.fsync = race_fsync;
    close_race.armed = true;
    close_race.closing = false;
    pid_t child = -1;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fork_when_closing, &child), 0);
    envlog_io_set(&close_race.io);
    ck_assert_ok(envlog_session_close(s));
    envlog_io_set(NULL);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    close_race.armed = false;
    ck_assert_int_gt(child, 0);
    /* The child is still there, and nothing holds the lock. */
    int fd = open(sdir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fd, 0);
    int locked = flock(fd, LOCK_EX | LOCK_NB);
    close(fd);
    ck_assert_int_eq(kill(child, 0), 0);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(locked == 0, "a child forked during the close holds the session's lock");
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_fork_child_session)
{
    /* A forked child's records land in a session of its own: not the
     * parent's, not with the parent's held records. */
    for (int on_disk = 0; on_disk < 2; on_disk++) {
        char *dir = tu_mkdtemp("fork");
        envlog_env *env = tu_env(dir);
        envlog_session *s;
        envlog_session_opts o = tu_opts("forked", 0);
        ck_assert_ok(envlog_session_begin(env, &o, &s));
        if (on_disk)
            ck_assert_ok(tu_record_tune(s, "parent", 0, 0, NULL));
        ck_assert_ok(envlog_record_mark(s, "parent-held", NULL));
        envlog_span sp;
        ck_assert_ok(envlog_span_open(s, "parent-span", &sp));
        envlog_id128 before = envlog_session_id(s);
        int p[2];
        pid_t pid = tu_fork_pipe(p);
        if (pid == 0) {
            /* The parent's span is not the child's to close. */
            if (envlog_span_close(&sp, NULL, 0, NULL) != ENVLOG_WRONG_STATE)
                _exit(20);
            envlog_stamp st;
            if (envlog_record_mark(s, "child-held", &st) || st.seq != 1)
                _exit(21);
            if (tu_record_tune(s, "child", 1, 0, &st) || st.seq != 2)
                _exit(22);
            envlog_id128 cid = envlog_session_id(s);
            if (!memcmp(cid.b, before.b, 16) || memcmp(st.session.b, cid.b, 16))
                _exit(23);
            if (envlog_session_end(s))
                _exit(24);
            if (write(p[1], &cid, sizeof cid) != sizeof cid)
                _exit(25);
            _exit(0);
        }
        envlog_id128 cid;
        ck_assert_int_eq(read(p[0], &cid, sizeof cid), (ssize_t)sizeof cid);
        close(p[0]);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %d", status);
        ck_assert_ok(envlog_span_close(&sp, NULL, 0, NULL));
        ck_assert_ok(tu_record_tune(s, "parent", 2, 0, NULL));
        envlog_id128 pidd = envlog_session_id(s);
        ck_assert(!memcmp(pidd.b, before.b, 16));
        ck_assert_ok(envlog_session_end(s));

        envlog_session_info *in;
        size_t n;
        ck_assert_ok(envlog_sessions_list(env, &in, &n));
        ck_assert_uint_eq(n, 2);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(in[i].state, ENVLOG_STATE_SEALED);
        envlog_sessions_free(in, n);
        uint64_t ppid_rec, cpid_rec;
        char *pn = names_of(env, &pidd, &ppid_rec);
        char *cn = names_of(env, &cid, &cpid_rec);
        ck_assert_str_eq(pn, on_disk ? "parent-0,parent-held,parent-span,parent-2"
                                     : "parent-held,parent-span,parent-2");
        ck_assert_str_eq(cn, "child-held,child-1");
        ck_assert_uint_eq(ppid_rec, (uint64_t)getpid());
        ck_assert_uint_eq(cpid_rec, (uint64_t)pid);
        free(pn);
        free(cn);
        envlog_env_close(env);
        tu_rmrf(dir);
        free(dir);
    }
}
END_TEST

START_TEST(test_lock_held_by_writer)
{
    /* The live writer holds its session's lock: a reader in another
     * process sees LIVE; once the writer is gone, it does not. */
    char *dir = tu_mkdtemp("lock");
    envlog_env *env = tu_env(dir);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, NULL, &s));
    ck_assert_ok(tu_record_tune(s, "lock", 0, 0, NULL));
    envlog_id128 id = only_session(env);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        envlog_env *e2;
        envlog_reader *r;
        if (envlog_env_open(dir, ENVLOG_OPEN_READONLY, &e2) || envlog_reader_open(e2, &id, &r))
            _exit(2);
        const envlog_record *rec;
        while (envlog_reader_next(r, &rec) == ENVLOG_OK)
            ;
        _exit(envlog_reader_state(r) == ENVLOG_STATE_LIVE ? 0 : 3);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %d", status);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_int_eq(rb.state, ENVLOG_STATE_SEALED);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* Readers look whether a session is live by holding its lock shared for an
 * instant, and a loaded machine can stretch that instant: a session
 * beginning meanwhile still begins.  A second process takes the lock of
 * every new session directory the moment it appears (inotify) and holds it
 * 2 ms, as a reader descheduled while looking would. */
START_TEST(test_begin_while_readers_look)
{
    char *dir = tu_mkdtemp("look");
    envlog_env *env = tu_env(dir);
    char sdir[4200];
    snprintf(sdir, sizeof sdir, "%s/sessions", dir);
    int in = inotify_init1(0);
    ck_assert_int_ge(in, 0);
    ck_assert_int_ge(inotify_add_watch(in, sdir, IN_CREATE | IN_ONLYDIR), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int sfd = open(sdir, O_RDONLY | O_DIRECTORY);
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
            ssize_t n = read(in, buf, sizeof buf);
            for (ssize_t at = 0; n > 0 && at < n;) {
                const struct inotify_event *ev = (const void *)(buf + at);
                at += (ssize_t)(sizeof *ev + ev->len);
                int fd = ev->len ? openat(sfd, ev->name, O_RDONLY | O_DIRECTORY) : -1;
                if (fd < 0)
                    continue;
                if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
                    struct timespec ts = {0, 2000000};
                    nanosleep(&ts, NULL);
                    flock(fd, LOCK_UN);
                }
                close(fd);
            }
        }
    }
    int failed = 0;
    char first[512] = "";
    for (int i = 0; i < 200; i++) {
        envlog_session *s = NULL;
        envlog_err e = envlog_session_begin(env, NULL, &s);
        if (!e)
            e = tu_record_tune(s, "look", (unsigned)i, 0, NULL);
        if (e && !failed++)
            snprintf(first, sizeof first, "%s", envlog_errmsg());
        envlog_session_end(s);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(in);
    ck_assert_msg(failed == 0, "%d of 200 sessions did not begin: %s", failed, first);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

Suite *suite_session(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tu_tcase(s, "env", 0);
    tcase_add_test(tc, test_env_open);
    tcase_add_test(tc, test_env_default_path);

    tc = tu_tcase(s, "recorder", 120);
    tcase_add_test(tc, test_observe_only_leaves_nothing);
    tcase_add_test(tc, test_first_change_flushes_held);
    tcase_add_test(tc, test_pending_budget);
    tcase_add_test(tc, test_levels);
    tcase_add_test(tc, test_every_kind_recorded);
    tcase_add_test(tc, test_spans);
    tcase_add_test(tc, test_span_stamped_when_it_opens);
    tcase_add_test(tc, test_span_dropped_with_its_opening);
    tcase_add_test(tc, test_invalid_input);
    tcase_add_test(tc, test_rotation);
    tcase_add_test(tc, test_sync_policies);
    tcase_add_test(tc, test_warm_path_allocates_nothing);

    tc = tu_tcase(s, "faults", 600);
    tcase_add_loop_test(tc, test_fault_each_call, 0, (int)(2 * N_FAULTS));
    tcase_add_test(tc, test_nospace_names_file);
    tcase_add_test(tc, test_writeback_hint);
    tcase_add_test(tc, test_alloc_fail_recording);
    tcase_add_test(tc, test_alloc_fail_reading);

    tc = tu_tcase(s, "concurrency", 300);
    tcase_add_test(tc, test_processes);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_fork_child_session);
    tcase_add_test(tc, test_sync_close_unmaps_written);
    tcase_add_test(tc, test_fork_while_closing);
    tcase_add_test(tc, test_lock_held_by_writer);
    tcase_add_test(tc, test_begin_while_readers_look);
    return s;
}
