/* SPDX-License-Identifier: MIT */
/*
 * check_upkeep.c - an environment that maintains itself (envlog(5), CONFIG
 * and MAINTENANCE): the config file applied whole or not at all, automatic
 * compaction at session end in a detached process (this test process is
 * its subreaper, so it knows whether one started and waits for it), a full
 * disk under it, retention, forget by namespace prefix and the size bound,
 * each with an exact expected state and a dry run that changes no file.
 */
#include "check_replay.h"
#include "suites.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

/* ----------------------------------------------------------- helpers */

/* Every file under `dir` with a hash of its bytes, for "nothing changed". */
static char *tree_print(const char *dir)
{
    char *list = tu_listing(dir);
    envlog_buf out = {0};
    for (char *p = list, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        char line[4200];
        size_t n = strlen(p);
        if (n && p[n - 1] == '/') {
            snprintf(line, sizeof line, "%s\n", p);
        } else {
            /* "name size" */
            char *sp = strrchr(p, ' ');
            if (sp)
                *sp = 0;
            size_t sz;
            uint8_t *b = tu_read(tu_path(dir, p), &sz);
            snprintf(line, sizeof line, "%s %zu %016llx\n", p, sz,
                     (unsigned long long)XXH3_64bits(b, sz));
            free(b);
        }
        ck_assert_ok(envlog_buf_append(&out, line, strlen(line)));
    }
    free(list);
    ck_assert_ok(envlog_buf_append(&out, "", 1));
    return (char *)out.p;
}

static envlog_err nospace_write(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    (void)text;
    (void)len;
    return ENVLOG_NOSPACE;
}

static envlog_err buf_write(void *ctx, const char *text, size_t len)
{
    return envlog_buf_append(ctx, text, len);
}

/* Writes the config text `t` into the environment. */
static void put_config(const char *dir, const char *t)
{
    tu_write(tu_path(dir, "config"), t, strlen(t));
}

/* The processes adopted since the last call (automatic compactors), waited
 * for; each one's exit status in *status (the last). */
static int reap_compactors(int *status)
{
    int n = 0, st;
    for (pid_t c; (c = waitpid(-1, &st, 0)) > 0 || errno == EINTR;)
        if (c > 0) {
            n++;
            if (status)
                *status = st;
        }
    return n;
}

static void adopt_orphans(void)
{
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

/* A session that records one tune (its own key) and ends. */
static envlog_stamp one_session(envlog_env *env, const char *key, int auto_compact)
{
    envlog_session_opts o = tu_opts("upkeep", 0);
    o.sync = ENVLOG_SYNC_NONE;
    o.auto_compact = auto_compact;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    envlog_stamp st = rp_rtune(s, NS_A, key, 1);
    ck_assert_ok(envlog_session_end(s));
    return st;
}

static size_t count_sessions(const char *dir)
{
    char **v;
    size_t n = rp_list_dir(tu_path(dir, "sessions"), &v);
    rp_free_names(v, n);
    return n;
}

/* ------------------------------------------------------------- config */

typedef struct bad_case {
    const char *text;
    const char *says; /* a piece of the message */
} bad_case;

START_TEST(test_config_parse)
{
    envlog_config c, d;
    envlog_config_defaults(&d);
    ck_assert_ok(envlog_config_parse("", 0, &c));
    ck_assert_mem_eq(&c, &d, sizeof c);
    const char *t = "# settings\n\n  compact_sessions = 8   # fewer\nmax_size=10GiB\n"
                    "history_age = 30d\r\nauto_compact = off\nevidence = all\n"
                    "compact_bytes = 1M\nhistory_sessions = 0\n";
    ck_assert_ok(envlog_config_parse(t, strlen(t), &c));
    ck_assert_uint_eq(c.compact_sessions, 8);
    ck_assert_uint_eq(c.max_size, (uint64_t)10 << 30);
    ck_assert_uint_eq(c.history_age_ns, 30ull * 86400 * 1000000000ull);
    ck_assert(!c.auto_compact);
    ck_assert_int_eq(c.evidence, ENVLOG_EVIDENCE_ALL);
    ck_assert_uint_eq(c.compact_bytes, 1u << 20);
    ck_assert_uint_eq(c.history_sessions, 0);
    static const bad_case bad[] = {
        {"bogus = 1\n", "line 1: unknown setting 'bogus'"},
        {"max_siz = 1\n", "did you mean max_size?"},
        {"compact_sessions = many\n", "compact_sessions takes a whole number"},
        {"compact_sessions = 0\n", "compact_sessions is at least 1"},
        {"compact_sessions = -3\n", "compact_sessions takes a whole number"},
        {"compact_bytes = 100\n", "compact_bytes is at least 32768"},
        {"max_size = 5 parsecs\n", "max_size takes a size"},
        {"max_size = 99999999999999999999999\n", "max_size takes a size"},
        {"max_size = 20000000000TiB\n", "max_size takes a size"},
        {"history_age = -1\n", "history_age takes an age"},
        {"history_age = 3 fortnights\n", "history_age takes an age"},
        {"evidence = some\n", "evidence takes none, winners or all"},
        {"auto_compact = maybe\n", "auto_compact takes on or off"},
        {"compact_sessions = 4\ncompact_sessions = 5\n", "line 2: compact_sessions is given twice"},
        {"compact_sessions 4\n", "line 1: not 'key = value'"},
        {"compact_sessions = 4\n\n# fine so far\nhistory_sessions =\n", "line 4: history_sessions"},
        {"max_size = 1G\xff\n", "not UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        envlog_config_defaults(&c);
        c.compact_sessions = 77; /* what a half-applied file would have changed */
        envlog_config before = c;
        envlog_err e = envlog_config_parse(bad[i].text, strlen(bad[i].text), &c);
        ck_assert_msg(e == ENVLOG_BAD_DATA, "'%s': %s", bad[i].text, envlog_strerror(e));
        ck_assert_msg(strstr(envlog_errmsg(), bad[i].says), "'%s' says '%s'", bad[i].text,
                      envlog_errmsg());
        ck_assert_mem_eq(&c, &before, sizeof c);
    }
    /* A NUL inside, and a file over 64 KiB. */
    ck_assert_int_eq(envlog_config_parse("a\0b = 1", 7, &c), ENVLOG_BAD_DATA);
    size_t big = 70000;
    char *p = malloc(big);
    memset(p, '#', big);
    ck_assert_int_eq(envlog_config_parse(p, big, &c), ENVLOG_TOO_BIG);
    free(p);
}
END_TEST

START_TEST(test_config_file)
{
    rp_renv r = rp_renv_bare("config");
    envlog_config c, d;
    envlog_config_defaults(&d);
    ck_assert_ok(envlog_config_read(r.env, &c)); /* no file: the defaults */
    ck_assert_mem_eq(&c, &d, sizeof c);
    /* Every setting changed, written, read back, printed and parsed. */
    c.auto_compact = false;
    c.compact_sessions = 5;
    c.compact_bytes = 3u << 20;
    c.evidence = ENVLOG_EVIDENCE_NONE;
    c.history_sessions = 12;
    c.history_age_ns = 7200ull * 1000000000ull;
    c.max_size = (uint64_t)5 << 30;
    ck_assert_ok(envlog_config_write(r.env, &c));
    envlog_config back;
    ck_assert_ok(envlog_config_read(r.env, &back));
    ck_assert_mem_eq(&back, &c, sizeof c);
    envlog_buf text = {0};
    ck_assert_ok(envlog_config_text(&c, buf_write, &text));
    ck_assert_ok(envlog_config_parse((const char *)text.p, text.len, &back));
    ck_assert_mem_eq(&back, &c, sizeof c);
    envlog_buf_free(&text);
    /* The writer's code is what the call returns (issue 17, item 3). */
    ck_assert_int_eq(envlog_config_text(&c, nospace_write, NULL), ENVLOG_NOSPACE);
    /* A set that fails changes nothing. */
    envlog_config before = c;
    ck_assert_int_eq(envlog_config_set(&c, "max_size", "lots"), ENVLOG_BAD_DATA);
    ck_assert_int_eq(envlog_config_set(&c, "nope", "1"), ENVLOG_BAD_DATA);
    ck_assert_mem_eq(&c, &before, sizeof c);
    ck_assert_ok(envlog_config_set(&c, "max_size", "512K"));
    ck_assert_uint_eq(c.max_size, 512u << 10);
    /* A file with a bad line applies not at all: read gives the defaults
     * and an error, upkeep says why, and no temporary file is left. */
    put_config(r.dir, "compact_sessions = 2\nauto_compact = off\nhistory_age = soon\n");
    ck_assert_int_eq(envlog_config_read(r.env, &c), ENVLOG_BAD_DATA);
    ck_assert_mem_eq(&c, &d, sizeof c);
    envlog_upkeep u;
    ck_assert_ok(envlog_upkeep_get(r.env, &u));
    ck_assert(!u.config_ok);
    ck_assert_msg(strstr(u.config_error, "line 3: history_age"), "%s", u.config_error);
    ck_assert(u.config.auto_compact); /* the defaults, not the file's "off" */
    /* envlog_compact() refuses to run on a config that does not apply. */
    ck_assert_int_eq(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL), ENVLOG_BAD_DATA);
    char *list = tu_listing(r.dir);
    ck_assert_msg(!strstr(list, ".tmp"), "%s", list);
    free(list);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------ automatic compaction */

START_TEST(test_auto_compact_threshold)
{
    adopt_orphans();
    rp_renv r = rp_renv_bare("auto");
    put_config(r.dir, "compact_sessions = 3\n");
    one_session(r.env, "a", 0);
    one_session(r.env, "b", 0);
    ck_assert_int_eq(reap_compactors(NULL), 0); /* 2 of 3: nothing started */
    envlog_upkeep u;
    ck_assert_ok(envlog_upkeep_get(r.env, &u));
    ck_assert_uint_eq(u.pending_sessions, 2);
    ck_assert(!u.due);
    ck_assert_uint_eq(u.last_compaction_unix_ns, 0);
    one_session(r.env, "c", 0);
    char *want = rp_dump_env(r.env, NULL);
    int st = -1;
    ck_assert_int_eq(reap_compactors(&st), 1);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_ok(envlog_upkeep_get(r.env, &u));
    ck_assert_msg(!strcmp(u.last_reason,
                          "automatic: 3 sessions and ") ||
                      !strncmp(u.last_reason, "automatic: 3 sessions and ", 26),
                  "reason '%s'", u.last_reason);
    ck_assert_uint_gt(u.last_compaction_unix_ns, 0);
    ck_assert_uint_eq(u.pending_sessions, 0);
    char *got = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    /* Sessions are kept one compaction more: three more end, the second
     * automatic compaction retires the first three. */
    for (int i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "d%d", i);
        one_session(r.env, k, 0);
    }
    ck_assert_int_eq(reap_compactors(NULL), 1);
    ck_assert_uint_eq(count_sessions(r.dir), 3);
    envlog_state *s = rp_sopen(r.env, NULL);
    ck_assert_uint_eq(rp_stats(s).tunes, 6);
    envlog_state_close(s);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_auto_compact_switches)
{
    adopt_orphans();
    rp_renv r = rp_renv_bare("auto-off");
    put_config(r.dir, "compact_sessions = 1\nauto_compact = off\n");
    one_session(r.env, "a", 0);
    ck_assert_int_eq(reap_compactors(NULL), 0); /* off */
    one_session(r.env, "b", 1);
    ck_assert_int_eq(reap_compactors(NULL), 1); /* the session asks */
    put_config(r.dir, "compact_sessions = 1\n");
    one_session(r.env, "c", -1);
    ck_assert_int_eq(reap_compactors(NULL), 0); /* the session declines */
    /* A session that wrote nothing does not look. */
    envlog_session_opts o = tu_opts("quiet", 0);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(r.env, &o, &s));
    ck_assert_ok(envlog_record_mark(s, "observed only", NULL));
    ck_assert_ok(envlog_session_end(s));
    ck_assert_int_eq(reap_compactors(NULL), 0);
    /* A compaction already running: the session end leaves it be. */
    int lk = open(tu_path(r.dir, "LOCK"), O_RDWR | O_CREAT, 0600);
    ck_assert_int_ge(lk, 0);
    ck_assert_int_eq(flock(lk, LOCK_EX), 0);
    one_session(r.env, "d", 0);
    ck_assert_int_eq(reap_compactors(NULL), 0);
    close(lk);
    /* A config that does not apply compacts nothing. */
    put_config(r.dir, "compact_sessions = 1\nhistory_age = whenever\n");
    one_session(r.env, "e", 0);
    ck_assert_int_eq(reap_compactors(NULL), 0);
    put_config(r.dir, "compact_sessions = 1\n");
    one_session(r.env, "f", 0);
    ck_assert_int_eq(reap_compactors(NULL), 1);
    envlog_state *st = rp_sopen(r.env, NULL);
    ck_assert_uint_eq(rp_stats(st).tunes, 6);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* A full disk under the automatic compaction, at every one of its calls:
 * the environment stays as it was, the session that set it off is whole,
 * and the next session end finishes the job. */
START_TEST(test_auto_compact_full_disk)
{
    adopt_orphans();
    rp_renv r = rp_renv_bare("auto-nospace");
    put_config(r.dir, "compact_sessions = 2\n");
    one_session(r.env, "a", -1);
    envlog_env_close(r.env);
    r.env = NULL;
    int n;
    bool done = false;
    tu_fault_share(); /* the compactor's calls count where this process sees */
    for (n = 1; n < 2000 && !done; n++) {
        char *copy = tu_mkdtemp("nospace-copy");
        tu_rmrf(copy);
        tu_copytree(r.dir, copy);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            envlog_env *e;
            if (envlog_env_open(copy, 0, &e))
                _exit(3);
            envlog_session_opts o = tu_opts("trigger", 0);
            envlog_session *s;
            if (envlog_session_begin(e, &o, &s))
                _exit(4);
            if (tu_record_tune(s, "b", 0, 0, NULL))
                _exit(5);
            /* This process's calls neither count nor fail: the
             * compactor's do, from its first. */
            tu_fault_spare(getpid());
            tu_fault_arm(TU_ANY, n, ENOSPC);
            _exit(envlog_session_end(s) ? 6 : 0);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "session: %d", st);
        ck_assert_int_eq(reap_compactors(NULL), 1);
        bool fired = tu_fault_disarm();
        envlog_env *e = tu_env(copy);
        envlog_upkeep u;
        ck_assert_ok(envlog_upkeep_get(e, &u));
        envlog_state *s = rp_sopen(e, NULL);
        ck_assert_uint_eq(rp_stats(s).tunes, 2); /* both sessions' tunes */
        rp_winner(s, NS_A, "a");
        envlog_state_close(s);
        if (!fired) {
            done = true; /* it ran out of calls to fail */
            ck_assert_msg(!strncmp(u.last_reason, "automatic: ", 11), "'%s'", u.last_reason);
        } else if (!u.last_compaction_unix_ns) {
            /* Nothing was put in place and nothing left behind. */
            ck_assert(!tu_exists(tu_path(copy, "snapshot/current")));
            char *list = tu_listing(copy);
            ck_assert_msg(!strstr(list, ".tmp") && !strstr(list, ".removing"),
                          "after call %d: %s", n, list);
            free(list);
            ck_assert_uint_eq(count_sessions(copy), 2);
            /* The next session end does it. */
            one_session(e, "c", 0);
            ck_assert_int_eq(reap_compactors(NULL), 1);
            ck_assert_ok(envlog_upkeep_get(e, &u));
            ck_assert_msg(!strncmp(u.last_reason, "automatic: ", 11), "after call %d: '%s'",
                          n, u.last_reason);
            s = rp_sopen(e, NULL);
            ck_assert_uint_eq(rp_stats(s).tunes, 3);
            envlog_state_close(s);
        }
        envlog_env_close(e);
        tu_rmrf(copy);
        free(copy);
    }
    ck_assert(done);
    ck_assert_int_gt(n, 10);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------ retention */

typedef struct heard {
    envlog_removal v[64];
    size_t n;
} heard;

static void hear(void *ctx, const envlog_removal *m)
{
    heard *h = ctx;
    if (h->n < 64)
        h->v[h->n++] = *m;
}

/* Six sessions: each sets its own key, tunes a shared key (the first one
 * stands, the others are history) and marks. */
static envlog_stamp six_sessions(envlog_env *env, envlog_stamp shared[6], envlog_stamp marks[6])
{
    envlog_stamp first = {0};
    for (int i = 0; i < 6; i++) {
        envlog_session *s = rp_sbegin(env, "ret", 0);
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        envlog_stamp st = rp_rtune(s, NS_A, k, i % 3);
        if (!i)
            first = st;
        shared[i] = rp_rtune(s, NS_A, "shared", i % 3);
        ck_assert_ok(envlog_record_mark(s, "m", &marks[i]));
        rp_end(s);
        rp_settle();
    }
    return first;
}

START_TEST(test_retention_sessions)
{
    rp_renv r = rp_renv_bare("retention");
    put_config(r.dir, "auto_compact = off\n");
    envlog_stamp shared[6], marks[6];
    six_sessions(r.env, shared, marks);
    char *want = rp_dump_env(r.env, NULL);
    envlog_compact_opts o;
    envlog_config c;
    envlog_config_defaults(&c);
    c.evidence = ENVLOG_EVIDENCE_ALL;
    c.history_sessions = 2;
    envlog_compact_opts_from(&o, &c);
    heard h = {0};
    o.on_removal = hear;
    o.ctx = &h;
    /* A dry run first: it says the same and changes no file. */
    o.dry_run = true;
    char *before = tree_print(r.dir);
    envlog_compact_report dry;
    ck_assert_ok(envlog_compact_x(r.env, &o, &dry));
    char *after = tree_print(r.dir);
    ck_assert_str_eq(before, after);
    free(after);
    ck_assert_uint_eq(dry.history_dropped, 7);
    size_t dry_heard = h.n;
    h.n = 0;
    o.dry_run = false;
    envlog_compact_report rep;
    ck_assert_ok(envlog_compact_x(r.env, &o, &rep));
    ck_assert_uint_eq(dry_heard, h.n);
    /* Gone: the shared tunes of sessions 1-3 (session 0's stands) and the
     * marks of sessions 0-3; the newest two keep everything, every session
     * keeps its session record (each set an entry). */
    ck_assert_uint_eq(rep.history_dropped, 7);
    ck_assert_uint_eq(h.n, 7);
    for (size_t i = 0; i < h.n; i++) {
        bool known = false;
        for (int k = 0; k < 4 && !known; k++)
            known = (k >= 1 && rp_stamp_eq(&h.v[i].stamp, &shared[k]) &&
                     h.v[i].record_kind == ENVLOG_KIND_TUNE) ||
                    (rp_stamp_eq(&h.v[i].stamp, &marks[k]) &&
                     h.v[i].record_kind == ENVLOG_KIND_MARK);
        ck_assert_msg(known, "removal %zu is not one the policy names", i);
        ck_assert_int_eq(h.v[i].kind, ENVLOG_REMOVED_HISTORY);
    }
    ck_assert_uint_eq(rep.snapshot_bytes, dry.snapshot_bytes);
    ck_assert_uint_eq(rep.entries, 7);
    /* The state is whole, and what the retention keeps reads back. */
    char *got = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(got, want);
    free(got);
    rp_placed_list l = rp_order_of(r.env, NULL);
    size_t tunes = 0, sessions = 0, ms = 0;
    for (size_t i = 0; i < l.n; i++) {
        tunes += l.v[i].kind == ENVLOG_KIND_TUNE;
        sessions += l.v[i].kind == ENVLOG_KIND_SESSION;
        ms += l.v[i].kind == ENVLOG_KIND_MARK;
    }
    rp_placed_free(&l);
    ck_assert_uint_eq(tunes, 6 + 1 + 2); /* six keys, the shared one, 4 and 5's */
    ck_assert_uint_eq(sessions, 6);
    ck_assert_uint_eq(ms, 2);
    envlog_env_close(r.env);
    r.env = NULL;
    free(before);
    free(want);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_retention_age)
{
    rp_renv r = rp_renv_bare("retention-age");
    put_config(r.dir, "auto_compact = off\nevidence = all\nhistory_age = 2s\n"
                      "history_sessions = 0\n");
    for (int i = 0; i < 3; i++) {
        envlog_session *s = rp_sbegin(r.env, "old", 0);
        ck_assert_ok(envlog_record_mark(s, "old", NULL));
        rp_rtune(s, NS_A, "x", 1); /* the first stands; the rest are history */
        rp_end(s);
    }
    usleep(2200000);
    envlog_stamp young[2];
    for (int i = 0; i < 2; i++) {
        envlog_session *s = rp_sbegin(r.env, "young", 0);
        ck_assert_ok(envlog_record_mark(s, "young", &young[i]));
        rp_rtune(s, NS_A, i ? "y1" : "y0", 0);
        rp_end(s);
    }
    envlog_compact_report rep;
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_ALL, &rep));
    /* Old: three marks, the second and third tunes, and the session
     * records of the two old sessions that set nothing. */
    ck_assert_uint_eq(rep.history_dropped, 3 + 2 + 2);
    rp_placed_list l = rp_order_of(r.env, NULL);
    size_t marks = 0;
    for (size_t i = 0; i < l.n; i++)
        marks += l.v[i].kind == ENVLOG_KIND_MARK;
    rp_placed_free(&l);
    ck_assert_uint_eq(marks, 2);
    envlog_state *st = rp_sopen(r.env, NULL);
    rp_winner(st, NS_A, "x");
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* ---------------------------------------------------- forget by prefix */

START_TEST(test_ns_under)
{
    ck_assert(envlog_ns_under("a/b", "a/b"));
    ck_assert(envlog_ns_under("a/b/c", "a/b"));
    ck_assert(envlog_ns_under("a/b/c/d", "a"));
    ck_assert(!envlog_ns_under("a/bc", "a/b"));
    ck_assert(!envlog_ns_under("a", "a/b"));
    ck_assert(!envlog_ns_under("nvrtc/12.40/sm_90", "nvrtc/12.4"));
    ck_assert(!envlog_ns_under(NULL, "a"));
    ck_assert(!envlog_ns_under("a", NULL));
    ck_assert_ptr_null(envlog_ns_prefix_problem("nvrtc/12.4"));
    ck_assert_ptr_nonnull(envlog_ns_prefix_problem(""));
    ck_assert_ptr_nonnull(envlog_ns_prefix_problem(NULL));
    ck_assert_ptr_nonnull(envlog_ns_prefix_problem("/a"));
    ck_assert_ptr_nonnull(envlog_ns_prefix_problem("a/"));
    ck_assert_ptr_nonnull(envlog_ns_prefix_problem("a//b"));
}
END_TEST

static envlog_stamp forget_under(envlog_session *s, const char *prefix)
{
    envlog_forget f = {ENVLOG_TABLE_TUNE, NULL, NULL, 0, "retired", prefix};
    envlog_stamp st;
    ck_assert_ok(envlog_record_forget(s, &f, &st));
    return st;
}

START_TEST(test_forget_under)
{
    rp_renv r = rp_renv_bare("forget-under");
    put_config(r.dir, "auto_compact = off\n");
    envlog_session *s = rp_sbegin(r.env, "set", 0);
    rp_rtune(s, "a/b", "t", 0);
    rp_rtune(s, "a/b/c", "t", 1);
    rp_rtune(s, "a/bc", "t", 2);
    rp_rtune(s, "x", "t", 0);
    rp_rcompile(s, "a/b/k", 1, ENVLOG_COMPILED, false, 1, 64);
    rp_rcompile(s, "a/bk", 2, ENVLOG_COMPILED, false, 2, 64);
    rp_end(s);
    rp_settle();
    /* Refused: bad prefixes, and a prefix with a namespace or key. */
    s = rp_sbegin(r.env, "forget", 0);
    static const char *const bad[] = {"", "/a", "a/", "a//b"};
    for (size_t i = 0; i < 4; i++) {
        envlog_forget f = {ENVLOG_TABLE_TUNE, NULL, NULL, 0, NULL, bad[i]};
        ck_assert_int_eq(envlog_record_forget(s, &f, NULL), ENVLOG_INVALID_ARG);
    }
    envlog_forget mixed = {ENVLOG_TABLE_TUNE, "a/b", "t", 0, NULL, "a/b"};
    ck_assert_int_eq(envlog_record_forget(s, &mixed, NULL), ENVLOG_INVALID_ARG);
    ck_assert_ptr_nonnull(envlog_record_problem(ENVLOG_KIND_FORGET, ENVLOG_CHANGED, &mixed, -1));
    forget_under(s, "a/b");
    rp_end(s);
    rp_settle();
    envlog_state *st = rp_sopen(r.env, NULL);
    rp_no_winner(st, "a/b", "t", rp_csum(SET_A));
    rp_no_winner(st, "a/b/c", "t", rp_csum(SET_A));
    rp_no_kernel(st, "a/b/k", 1);
    rp_winner(st, "a/bc", "t");
    rp_winner(st, "x", "t");
    rp_kernel(st, "a/bk", 2);
    ck_assert_uint_eq(rp_stats(st).tunes, 2);
    ck_assert_uint_eq(rp_stats(st).kernels, 1);
    envlog_state_close(st);
    /* A later value under the prefix stands as if there had been none. */
    s = rp_sbegin(r.env, "again", 0);
    envlog_stamp again = rp_rtune(s, "a/b/c", "t", 2);
    rp_end(s);
    st = rp_sopen(r.env, NULL);
    envlog_tune_entry e = rp_winner(st, "a/b/c", "t");
    ck_assert_int_eq(e.rule, ENVLOG_RULE_FIRST_LOCAL);
    ck_assert_int_eq(e.winner_index, 2);
    rp_assert_stamp(e.stamp, again);
    envlog_state_close(st);
    /* Compaction keeps it all, rules included; a prefix forget after it
     * reaches into the snapshot, through a lookup and a full fold. */
    char *want = rp_dump_env(r.env, NULL);
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL));
    char *got = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    rp_settle();
    s = rp_sbegin(r.env, "forget-a", 0);
    forget_under(s, "a");
    rp_end(s);
    envlog_env *ro;
    ck_assert_ok(envlog_env_open(r.dir, ENVLOG_OPEN_READONLY, &ro));
    envlog_state *lazy;
    ck_assert_ok(envlog_env_state(ro, &lazy));
    rp_no_winner(lazy, "a/bc", "t", rp_csum(SET_A));
    rp_no_kernel(lazy, "a/bk", 2);
    rp_winner(lazy, "x", "t");
    envlog_env_close(ro);
    st = rp_sopen(r.env, NULL);
    ck_assert_uint_eq(rp_stats(st).tunes, 1);
    ck_assert_uint_eq(rp_stats(st).kernels, 0);
    envlog_state_close(st);
    want = rp_dump_env(r.env, NULL);
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_NONE, NULL));
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_NONE, NULL));
    got = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    /* The tombstones stay in the snapshot: they explain the absences. */
    rp_placed_list l = rp_order_of(r.env, NULL);
    size_t forgets = 0;
    for (size_t i = 0; i < l.n; i++)
        forgets += l.v[i].kind == ENVLOG_KIND_FORGET;
    rp_placed_free(&l);
    ck_assert_uint_eq(forgets, 2);
    rp_renv_free(&r);
}
END_TEST

/* ----------------------------------------------------------- size bound */

typedef struct sized {
    envlog_stamp stamp;
    uint64_t unix_ns, bytes;
    int table;
} sized;

typedef struct sizes {
    sized v[64];
    size_t n;
    uint64_t total;
} sizes;

/* The weights envlog(5) gives: an entry is its record and 96 bytes, a
 * record of history its payload and 64, the head 8 KiB and 48 bytes a
 * session. */
static envlog_err take_size(void *ctx, const envlog_state_item *it)
{
    sizes *z = ctx;
    uint64_t b = it->payload.size + 96;
    z->total += b;
    if (it->table != ENVLOG_TABLE_USER && z->n < 64)
        z->v[z->n++] = (sized){it->stamp, it->unix_ns, b, it->table};
    return ENVLOG_OK;
}

static int by_time(const void *a, const void *b)
{
    const sized *x = a, *y = b;
    return x->unix_ns < y->unix_ns ? -1 : x->unix_ns > y->unix_ns;
}

START_TEST(test_size_bound)
{
    rp_renv r = rp_renv_bare("max-size");
    put_config(r.dir, "auto_compact = off\n");
    envlog_stamp tune_st[10], kern_st[10];
    for (int i = 0; i < 10; i++) {
        envlog_session *s = rp_sbegin(r.env, "grow", 0);
        char k[16];
        snprintf(k, sizeof k, "t%d", i);
        tune_st[i] = rp_rtune(s, NS_A, k, i % 3);
        kern_st[i] = rp_rcompile(s, KNS_A, (uint8_t)(10 + i), ENVLOG_COMPILED, false,
                                 (uint8_t)i, 200);
        rp_end(s);
        rp_settle();
    }
    /* What each entry weighs, and which go by the documented rule. */
    envlog_state *st;
    ck_assert_ok(envlog_state_open_on(r.env, NULL, NULL, &st));
    sizes z = {0};
    ck_assert_ok(envlog_state_items(st, take_size, &z));
    envlog_state_close(st);
    ck_assert_uint_eq(z.n, 20);
    qsort(z.v, z.n, sizeof z.v[0], by_time);
    uint64_t fixed = 8192 + 48 * 10;
    rp_placed_list l = rp_order_of(r.env, NULL);
    for (size_t i = 0; i < l.n; i++)
        if (l.v[i].kind == ENVLOG_KIND_SESSION)
            fixed += l.v[i].size + 64;
    rp_placed_free(&l);
    /* The snapshot may take half: room for the head and half the entries. */
    uint64_t max_size = 2 * (fixed + z.total / 2);
    uint64_t left = z.total;
    size_t k = 0;
    while (left + fixed > max_size / 2)
        left -= z.v[k++].bytes;
    ck_assert_uint_gt(k, 5);
    ck_assert_uint_lt(k, 15);
    envlog_compact_opts o;
    envlog_config c;
    envlog_config_defaults(&c);
    c.max_size = max_size;
    envlog_compact_opts_from(&o, &c);
    heard h = {0};
    o.on_removal = hear;
    o.ctx = &h;
    o.dry_run = true;
    char *before = tree_print(r.dir);
    envlog_compact_report dry;
    ck_assert_ok(envlog_compact_x(r.env, &o, &dry));
    char *after = tree_print(r.dir);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    ck_assert_uint_eq(dry.evicted, k);
    heard dry_h = h;
    h.n = 0;
    o.dry_run = false;
    envlog_compact_report rep;
    ck_assert_ok(envlog_compact_x(r.env, &o, &rep));
    ck_assert_uint_eq(rep.evicted, k);
    ck_assert_uint_eq(rep.entries, 20 - k);
    ck_assert_uint_eq(rep.history_dropped, dry.history_dropped);
    ck_assert_uint_eq(rep.snapshot_bytes, dry.snapshot_bytes);
    /* The evictions first, oldest first, then the history that went with
     * them: the session records of sessions no entry is left of. */
    ck_assert_uint_eq(h.n, dry_h.n);
    ck_assert_uint_eq(h.n, k + rep.history_dropped);
    for (size_t i = 0; i < h.n; i++) {
        ck_assert_int_eq(h.v[i].kind, dry_h.v[i].kind);
        rp_assert_stamp(h.v[i].stamp, dry_h.v[i].stamp);
        ck_assert_int_eq(h.v[i].kind, i < k ? ENVLOG_REMOVED_EVICTED : ENVLOG_REMOVED_HISTORY);
        if (i < k)
            rp_assert_stamp(h.v[i].stamp, z.v[i].stamp);
        else
            ck_assert_int_eq(h.v[i].record_kind, ENVLOG_KIND_SESSION);
    }
    ck_assert_uint_le(rep.snapshot_bytes, max_size / 2);
    /* Exactly the oldest k are gone; the rest stand as they did. */
    st = rp_sopen(r.env, NULL);
    ck_assert_uint_eq(rp_stats(st).tunes + rp_stats(st).kernels, 20 - k);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "t%d", i);
        bool tune_gone = false, kernel_gone = false;
        for (size_t j = 0; j < k; j++) {
            tune_gone |= rp_stamp_eq(&z.v[j].stamp, &tune_st[i]);
            kernel_gone |= rp_stamp_eq(&z.v[j].stamp, &kern_st[i]);
        }
        if (tune_gone)
            rp_no_winner(st, NS_A, key, rp_csum(SET_A));
        else
            rp_winner(st, NS_A, key);
        if (kernel_gone)
            rp_no_kernel(st, KNS_A, (uint8_t)(10 + i));
        else
            rp_kernel(st, KNS_A, (uint8_t)(10 + i));
    }
    envlog_state_close(st);
    /* Each eviction is a forget of an "evict" session, with its reason. */
    l = rp_order_of(r.env, NULL);
    size_t forgets = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (l.v[i].kind != ENVLOG_KIND_FORGET)
            continue;
        envlog_record rec;
        envlog_arena a = {0};
        ck_assert_ok(envlog_event_decode(l.v[i].payload, l.v[i].size, &rec, &a));
        ck_assert_msg(!strncmp(rec.u.forget.reason, "evicted: ", 9), "%s", rec.u.forget.reason);
        envlog_arena_free(&a);
        forgets++;
    }
    rp_placed_free(&l);
    ck_assert_uint_eq(forgets, k);
    /* Under the bound now: another compaction evicts nothing more. */
    ck_assert_ok(envlog_compact_x(r.env, &o, &rep));
    ck_assert_uint_eq(rep.evicted, 0);
    rp_renv_free(&r);
}
END_TEST

/* With room for the entries but not for the history, the history of the
 * oldest sessions goes first, and nothing is evicted. */
START_TEST(test_size_bound_history_first)
{
    rp_renv r = rp_renv_bare("max-size-history");
    put_config(r.dir, "auto_compact = off\nevidence = all\nhistory_sessions = 0\n");
    envlog_stamp marks[8];
    for (int i = 0; i < 8; i++) {
        envlog_session *s = rp_sbegin(r.env, "hist", 0);
        rp_rtune(s, NS_A, "one", 1);
        uint8_t pad[2000];
        memset(pad, 'p', sizeof pad);
        char label[2100];
        snprintf(label, sizeof label, "%.*s", 2000, (const char *)pad);
        ck_assert_ok(envlog_record_mark(s, label, &marks[i]));
        rp_end(s);
        rp_settle();
    }
    envlog_compact_report full;
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_ALL, &full));
    /* Room for the entry and about half the marks. */
    char set[64];
    snprintf(set, sizeof set, "max_size = %llu\n",
             (unsigned long long)(2 * (full.snapshot_bytes - 4 * 2000)));
    envlog_config c;
    envlog_config_defaults(&c);
    ck_assert_ok(envlog_config_parse(set, strlen(set), &c));
    c.evidence = ENVLOG_EVIDENCE_ALL;
    c.history_sessions = 0;
    envlog_compact_opts o;
    envlog_compact_opts_from(&o, &c);
    envlog_compact_report rep;
    ck_assert_ok(envlog_compact_x(r.env, &o, &rep));
    ck_assert_uint_eq(rep.evicted, 0);
    ck_assert_uint_gt(rep.history_dropped, 0);
    ck_assert_uint_le(rep.snapshot_bytes, c.max_size / 2);
    /* What is left of the marks is the newest ones. */
    rp_placed_list l = rp_order_of(r.env, NULL);
    int oldest_kept = -1, n_marks = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (l.v[i].kind != ENVLOG_KIND_MARK)
            continue;
        n_marks++;
        for (int k = 0; k < 8; k++)
            if (!memcmp(l.v[i].id.b, marks[k].session.b, 16) &&
                (oldest_kept < 0 || k < oldest_kept))
                oldest_kept = k;
    }
    rp_placed_free(&l);
    ck_assert_int_gt(n_marks, 0);
    ck_assert_int_lt(n_marks, 8);
    ck_assert_int_eq(oldest_kept, 8 - n_marks);
    envlog_state *st = rp_sopen(r.env, NULL);
    rp_winner(st, NS_A, "one");
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

Suite *suite_upkeep(void)
{
    Suite *s = suite_create("upkeep");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_config_parse);
    tcase_add_test(tc, test_config_file);
    suite_add_tcase(s, tc);
    tc = tcase_create("automatic");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_auto_compact_threshold);
    tcase_add_test(tc, test_auto_compact_switches);
    tcase_add_test(tc, test_auto_compact_full_disk);
    suite_add_tcase(s, tc);
    tc = tcase_create("retention");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_retention_sessions);
    tcase_add_test(tc, test_retention_age);
    suite_add_tcase(s, tc);
    tc = tcase_create("forget");
    tcase_add_test(tc, test_ns_under);
    tcase_add_test(tc, test_forget_under);
    suite_add_tcase(s, tc);
    tc = tcase_create("size");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_size_bound);
    tcase_add_test(tc, test_size_bound_history_first);
    suite_add_tcase(s, tc);
    return s;
}
