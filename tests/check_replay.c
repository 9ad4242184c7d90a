/* SPDX-License-Identifier: MIT */
/*
 * check_replay.c - the replay suite: each fold rule alone and mixed
 * (against a model written here, not the fold's own code), the live state a
 * process sees at once, miss explanations, and the callback convention of
 * the walks (the code a callback stops with is what the walk returns) and
 * who may record imported values.  check_replay_history.c adds
 * the total order, --until against a physically truncated history, damage
 * during replay, and allocation and read faults.
 *
 * Environments are built by recording through the public API in the
 * runner's temporary root.  Where a test depends on which of two sessions
 * recorded first, it lets the clock move between them (rp_settle()), since
 * the total order is by time.
 */
#include "check_replay.h"
#include "table.h"
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- fold rules alone */

START_TEST(test_first_local_stands)
{
    rp_renv r = rp_renv_new("first");
    envlog_session *s1 = rp_sbegin(r.env, "one", 0);
    envlog_stamp a = rp_rtune(s1, NS_A, "k", 0);
    envlog_stamp a2 = rp_rtune(s1, NS_A, "k", 2); /* same session, later */
    rp_settle();
    envlog_session *s2 = rp_sbegin(r.env, "two", 0);
    envlog_stamp b = rp_rtune(s2, NS_A, "k", 1);
    rp_end(s1);
    rp_end(s2);
    envlog_state *st = rp_sopen(r.env, NULL);
    envlog_tune_entry e = rp_winner(st, NS_A, "k");
    ck_assert_int_eq(e.winner_index, 0);
    ck_assert_str_eq(e.winner, "a");
    ck_assert_str_eq(e.ns, NS_A);
    ck_assert_str_eq(e.key, "k");
    ck_assert_uint_eq(e.checksum, rp_csum(SET_A));
    ck_assert_uint_eq(e.n_candidates, 3);
    ck_assert_str_eq(e.candidates[2], "c");
    ck_assert_int_eq(e.origin, ENVLOG_LOCAL);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_FIRST_LOCAL);
    rp_assert_stamp(e.stamp, a);
    ck_assert(!rp_stamp_eq(&e.stamp, &a2) && !rp_stamp_eq(&e.stamp, &b));
    envlog_state_stats ss = rp_stats(st);
    ck_assert_uint_eq(ss.tunes, 1);
    ck_assert_uint_eq(ss.kernels, 0);
    ck_assert_uint_eq(ss.sessions, 2);
    ck_assert_uint_eq(ss.damaged, 0);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_local_replaces_imported)
{
    rp_renv r = rp_renv_new("overimp");
    envlog_session *imp = rp_sbegin(r.env, "import", 0);
    envlog_stamp i1 = rp_rtune_full(imp, NS_A, "k", SET_A, 2, true, true);
    rp_end(imp);
    rp_settle();
    envlog_session *s = rp_sbegin(r.env, "local", 0);
    envlog_stamp l1 = rp_rtune(s, NS_A, "k", 1);
    envlog_stamp l2 = rp_rtune(s, NS_A, "k", 0); /* a later local: kept out */
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    envlog_tune_entry e = rp_winner(st, NS_A, "k");
    ck_assert_int_eq(e.winner_index, 1);
    ck_assert_int_eq(e.origin, ENVLOG_LOCAL);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_LOCAL_OVER_IMPORTED);
    rp_assert_stamp(e.stamp, l1);
    ck_assert(!rp_stamp_eq(&e.stamp, &i1) && !rp_stamp_eq(&e.stamp, &l2));
    ck_assert_uint_eq(rp_stats(st).tunes, 1);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_imported_never_replaces)
{
    rp_renv r = rp_renv_new("impnever");
    envlog_session *s = rp_sbegin(r.env, "mixed", 0);
    /* over a local value */
    envlog_stamp l = rp_rtune(s, NS_A, "local-first", 0);
    rp_rtune_full(s, NS_A, "local-first", SET_A, 2, true, true);
    /* over an imported value */
    envlog_stamp i1 = rp_rtune_full(s, NS_A, "imp-first", SET_A, 1, true, true);
    rp_rtune_full(s, NS_A, "imp-first", SET_A, 2, true, true);
    /* alone */
    envlog_stamp i3 = rp_rtune_full(s, NS_B, "imp-only", SET_A, 2, true, true);
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    envlog_tune_entry e = rp_winner(st, NS_A, "local-first");
    ck_assert_int_eq(e.winner_index, 0);
    ck_assert_int_eq(e.origin, ENVLOG_LOCAL);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_FIRST_LOCAL);
    rp_assert_stamp(e.stamp, l);
    e = rp_winner(st, NS_A, "imp-first");
    ck_assert_int_eq(e.winner_index, 1);
    ck_assert_int_eq(e.origin, ENVLOG_IMPORTED);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_IMPORTED);
    rp_assert_stamp(e.stamp, i1);
    e = rp_winner(st, NS_B, "imp-only");
    ck_assert_int_eq(e.winner_index, 2);
    ck_assert_int_eq(e.origin, ENVLOG_IMPORTED);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_IMPORTED);
    rp_assert_stamp(e.stamp, i3);
    ck_assert_uint_eq(rp_stats(st).tunes, 3);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_forget_removes_one)
{
    rp_renv r = rp_renv_new("forget");
    envlog_session *s = rp_sbegin(r.env, "tuner", 0);
    rp_rtune(s, NS_A, "k", 0);
    envlog_stamp b = rp_rtune_full(s, NS_A, "k", SET_B, 1, true, false);
    envlog_stamp c = rp_rtune(s, NS_B, "k", 2);
    envlog_stamp d = rp_rtune(s, NS_A, "k2", 1);
    rp_end(s);
    rp_settle();
    envlog_session *f = rp_sbegin(r.env, "forget", 0);
    rp_rforget(f, ENVLOG_TABLE_TUNE, NS_A, "k", rp_csum(SET_A));
    /* Forgetting what does not stand changes nothing. */
    rp_rforget(f, ENVLOG_TABLE_TUNE, NS_A, "k", 12345);
    rp_rforget(f, ENVLOG_TABLE_TUNE, NS_V, "k", rp_csum(SET_A));
    rp_rforget(f, ENVLOG_TABLE_TUNE, NS_A, "nothing", rp_csum(SET_A));
    rp_end(f);
    envlog_state *st = rp_sopen(r.env, NULL);
    rp_no_winner(st, NS_A, "k", rp_csum(SET_A));
    envlog_tune_entry e;
    ck_assert_ok(envlog_state_winner(st, NS_A, "k", rp_csum(SET_B), &e));
    rp_assert_stamp(e.stamp, b);
    e = rp_winner(st, NS_B, "k");
    rp_assert_stamp(e.stamp, c);
    e = rp_winner(st, NS_A, "k2");
    rp_assert_stamp(e.stamp, d);
    ck_assert_uint_eq(rp_stats(st).tunes, 3);
    envlog_state_close(st);

    /* After a forget the key is free: the next local value is a first one,
     * and an imported value may stand again. */
    rp_settle();
    s = rp_sbegin(r.env, "again", 0);
    envlog_stamp a3 = rp_rtune(s, NS_A, "k", 2);
    rp_rforget(s, ENVLOG_TABLE_TUNE, NS_A, "k2", rp_csum(SET_A));
    envlog_stamp i2 = rp_rtune_full(s, NS_A, "k2", SET_A, 0, true, true);
    rp_end(s);
    st = rp_sopen(r.env, NULL);
    e = rp_winner(st, NS_A, "k");
    ck_assert_int_eq(e.winner_index, 2);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_FIRST_LOCAL);
    rp_assert_stamp(e.stamp, a3);
    e = rp_winner(st, NS_A, "k2");
    ck_assert_int_eq(e.origin, ENVLOG_IMPORTED);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_IMPORTED);
    rp_assert_stamp(e.stamp, i2);
    ck_assert_uint_eq(rp_stats(st).tunes, 4);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_not_stored_makes_no_entry)
{
    rp_renv r = rp_renv_new("notstored");
    envlog_session *s = rp_sbegin(r.env, "tuner", 0);
    envlog_stamp kept = rp_rtune(s, NS_A, "other", 0); /* puts the session on disk */
    rp_rtune_full(s, NS_A, "unmeasured", SET_A, 1, false, false);
    /* A not-stored pick after an entry changes nothing... */
    envlog_stamp first = rp_rtune(s, NS_A, "k", 0);
    rp_rtune_full(s, NS_A, "k", SET_A, 2, false, false);
    /* ...and one before a stored value does not make it a later one. */
    rp_rtune_full(s, NS_A, "late", SET_A, 2, false, false);
    envlog_stamp late = rp_rtune(s, NS_A, "late", 1);
    rp_rtune_full(s, NS_A, "late-imp", SET_A, 2, false, true);
    rp_end(s);
    /* A session that only ever picked without measuring leaves nothing. */
    envlog_session *o = rp_sbegin(r.env, "observer", 0);
    rp_rtune_full(o, NS_A, "observed-only", SET_A, 1, false, false);
    rp_end(o);

    envlog_state *st = rp_sopen(r.env, NULL);
    rp_no_winner(st, NS_A, "unmeasured", rp_csum(SET_A));
    rp_no_winner(st, NS_A, "observed-only", rp_csum(SET_A));
    rp_no_winner(st, NS_A, "late-imp", rp_csum(SET_A));
    envlog_tune_entry e = rp_winner(st, NS_A, "k");
    ck_assert_int_eq(e.winner_index, 0);
    rp_assert_stamp(e.stamp, first);
    e = rp_winner(st, NS_A, "late");
    ck_assert_int_eq(e.winner_index, 1);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_FIRST_LOCAL);
    rp_assert_stamp(e.stamp, late);
    e = rp_winner(st, NS_A, "other");
    rp_assert_stamp(e.stamp, kept);
    ck_assert_uint_eq(rp_stats(st).tunes, 3);
    ck_assert_uint_eq(rp_stats(st).sessions, 1);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_kernel_rules)
{
    rp_renv r = rp_renv_new("kernels");
    envlog_session *s = rp_sbegin(r.env, "compiler", 0);
    /* first local stands */
    envlog_stamp k1 = rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 0x10, 40);
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 0x20, 41);
    /* local over imported */
    rp_rcompile(s, KNS_A, 2, ENVLOG_COMPILED, true, 0x30, 42);
    envlog_stamp k2 = rp_rcompile(s, KNS_A, 2, ENVLOG_COMPILED, false, 0x40, 43);
    /* imported never replaces */
    rp_rcompile(s, KNS_A, 3, ENVLOG_COMPILED, false, 0x50, 44);
    rp_rcompile(s, KNS_A, 3, ENVLOG_COMPILED, true, 0x60, 45);
    envlog_stamp k4 = rp_rcompile(s, KNS_A, 4, ENVLOG_COMPILED, true, 0x70, 46);
    rp_rcompile(s, KNS_A, 4, ENVLOG_COMPILED, true, 0x80, 47);
    /* loads, failures and compiles without a binary make no entry */
    rp_rcompile(s, KNS_A, 5, ENVLOG_LOADED, false, 0, 0);
    rp_rcompile(s, KNS_A, 6, ENVLOG_FAILED, false, 0, 0);
    rp_rcompile(s, KNS_A, 7, ENVLOG_COMPILED, false, 0, 0);
    /* same key in another namespace; forget removes only the one named */
    envlog_stamp k8 = rp_rcompile(s, KNS_B, 1, ENVLOG_COMPILED, false, 0x90, 48);
    rp_rcompile(s, KNS_A, 9, ENVLOG_COMPILED, false, 0xa0, 49);
    rp_rforget_kernel(s, KNS_A, 9);
    rp_rforget_kernel(s, KNS_B, 9); /* nothing there */
    envlog_stamp k9b = rp_rcompile(s, KNS_A, 9, ENVLOG_COMPILED, false, 0xb0, 50);
    rp_rforget_kernel(s, KNS_A, 3);
    rp_end(s);

    envlog_state *st = rp_sopen(r.env, NULL);
    envlog_kernel_entry e = rp_kernel(st, KNS_A, 1);
    ck_assert_uint_eq(e.binary.size, 40);
    ck_assert_uint_eq(((const uint8_t *)e.binary.data)[0], 0x10);
    ck_assert_uint_eq(((const uint8_t *)e.binary.data)[39], 0x10 + 39);
    ck_assert_str_eq(e.name, "kernel_1");
    ck_assert_str_eq(e.ns, KNS_A);
    ck_assert_str_eq(e.arch, "sm_90");
    ck_assert_int_eq(e.origin, ENVLOG_LOCAL);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_FIRST_LOCAL);
    rp_assert_stamp(e.stamp, k1);
    e = rp_kernel(st, KNS_A, 2);
    ck_assert_uint_eq(e.binary.size, 43);
    ck_assert_int_eq(e.origin, ENVLOG_LOCAL);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_LOCAL_OVER_IMPORTED);
    rp_assert_stamp(e.stamp, k2);
    rp_no_kernel(st, KNS_A, 3); /* forgotten */
    e = rp_kernel(st, KNS_A, 4);
    ck_assert_uint_eq(e.binary.size, 46);
    ck_assert_int_eq(e.origin, ENVLOG_IMPORTED);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_IMPORTED);
    rp_assert_stamp(e.stamp, k4);
    rp_no_kernel(st, KNS_A, 5);
    rp_no_kernel(st, KNS_A, 6);
    rp_no_kernel(st, KNS_A, 7);
    e = rp_kernel(st, KNS_B, 1);
    ck_assert_uint_eq(e.binary.size, 48);
    rp_assert_stamp(e.stamp, k8);
    e = rp_kernel(st, KNS_A, 9);
    ck_assert_uint_eq(e.binary.size, 50);
    ck_assert_int_eq(e.rule, ENVLOG_RULE_FIRST_LOCAL);
    rp_assert_stamp(e.stamp, k9b);
    ck_assert_uint_eq(rp_stats(st).kernels, 5);
    ck_assert_uint_eq(rp_stats(st).tunes, 0);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* Entries of one tune set share its candidate names; two sets that give
 * the same checksum (a caller's own, or a collision) keep their own. */
START_TEST(test_candidates_shared_by_set)
{
    static const char *const one[] = {"a1", "a2", "a3"};
    static const char *const two[] = {"b1", "b2", "b3"};
    rp_renv r = rp_renv_new("cands");
    envlog_session *s = rp_sbegin(r.env, "sets", 0);
    for (int i = 0; i < 6; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        envlog_tune t = {.ns = NS_A, .key = key, .checksum = 42,
                         .candidates = i % 2 ? two : one, .n_candidates = 3,
                         .policy = "test", .winner = i % 3, .stored = true};
        ck_assert_ok(envlog_record_tune(s, &t, NULL));
    }
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    for (int i = 0; i < 6; i++) {
        char key[16];
        envlog_tune_entry te;
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_ok(envlog_state_winner(st, NS_A, key, 42, &te));
        ck_assert_str_eq(te.winner, (i % 2 ? two : one)[i % 3]);
        ck_assert_str_eq(te.candidates[2], (i % 2 ? two : one)[2]);
    }
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_tables_apart)
{
    /* A tune key that spells a kernel key in hex is another entry. */
    rp_renv r = rp_renv_new("tables");
    envlog_session *s = rp_sbegin(r.env, "both", 0);
    char hex[33];
    envlog_hash128 k = rp_kkey(1);
    envlog_id_format(&k, hex);
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 1, 10);
    rp_rtune(s, KNS_A, hex, 0);
    rp_rforget(s, ENVLOG_TABLE_TUNE, KNS_A, hex, rp_csum(SET_A));
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    rp_kernel(st, KNS_A, 1);
    rp_no_winner(st, KNS_A, hex, rp_csum(SET_A));
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_user_records_dump)
{
    rp_renv r = rp_renv_new("user");
    static const uint8_t b1[] = {0xa1, 0x01, 0x02};
    static const uint8_t b2[] = {0x63, 'x', 'y', 'z'};
    static const uint8_t b3[] = {0x80};
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    envlog_stamp u1, u2, u3;
    ck_assert_ok(envlog_record_user(s, "rt.config", b1, sizeof b1, ENVLOG_CHANGED, &u1));
    rp_settle();
    envlog_session *s2 = rp_sbegin(r.env, "two", 0);
    ck_assert_ok(envlog_record_user(s2, "rt.note", b2, sizeof b2, ENVLOG_CHANGED, &u2));
    rp_settle();
    /* OBSERVED, but written since the session is on disk */
    ck_assert_ok(envlog_record_user(s, "rt.seen", b3, sizeof b3, ENVLOG_OBSERVED, &u3));
    rp_end(s);
    rp_end(s2);
    envlog_state *st = rp_sopen(r.env, NULL);
    ck_assert_uint_eq(rp_stats(st).user_records, 3);
    ck_assert_uint_eq(rp_stats(st).tunes + rp_stats(st).kernels, 0);
    char *d = rp_dump_of(st);
    char h1[33], h2[33], want[1024];
    envlog_id_format(&u1.session, h1);
    envlog_id_format(&u2.session, h2);
    snprintf(want, sizeof want,
             "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"user\",\"kind\":\"rt.config\",\"body_cbor\":\"a10102\","
             "\"set_by\":{\"session\":\"%s\",\"seq\":%llu}}\n"
             "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"user\",\"kind\":\"rt.note\",\"body_cbor\":\"6378797a\","
             "\"set_by\":{\"session\":\"%s\",\"seq\":%llu}}\n"
             "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"user\",\"kind\":\"rt.seen\",\"body_cbor\":\"80\","
             "\"set_by\":{\"session\":\"%s\",\"seq\":%llu}}\n",
             h1, (unsigned long long)u1.seq, h2, (unsigned long long)u2.seq, h1,
             (unsigned long long)u3.seq);
    ck_assert_str_eq(d, want);
    free(d);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* The dump: entries in (table, namespace, key, checksum) order, each with
 * the stamp that set it, then user records. */
START_TEST(test_dump_canonical)
{
    rp_renv r = rp_renv_new("dump");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    envlog_stamp t3 = rp_rtune(s, NS_B, "zz", 1);
    envlog_stamp t2 = rp_rtune_full(s, NS_A, "b", SET_B, 0, true, true);
    envlog_stamp t1 = rp_rtune(s, NS_A, "b", 2);
    envlog_stamp t0 = rp_rtune(s, NS_A, "a", 0);
    envlog_stamp k0 = rp_rcompile(s, KNS_A, 3, ENVLOG_COMPILED, false, 5, 8);
    static const uint8_t body[] = {0x01};
    ck_assert_ok(envlog_record_user(s, "u", body, 1, ENVLOG_CHANGED, NULL));
    rp_end(s);
    char *d = rp_dump_env(r.env, NULL);
    char *again = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(d, again);
    free(again);
    /* The lines in order; NS_B sorts before NS_A ("sm_80" < "sm_90"). */
    char *line = d, *next;
    size_t n = 0;
    const char *keys[7] = {0};
    uint64_t seqs[7] = {0};
    while (line && *line && n < 7) {
        next = strchr(line, '\n');
        ck_assert_ptr_nonnull(next);
        *next = 0;
        char *sq = strstr(line, "\"seq\":");
        ck_assert_ptr_nonnull(sq);
        seqs[n] = strtoull(sq + 6, NULL, 10);
        keys[n++] = line;
        line = next + 1;
    }
    ck_assert_uint_eq(n, 6);
    ck_assert_ptr_nonnull(strstr(keys[0], "\"namespace\":\"" NS_B "\",\"key\":\"zz\""));
    ck_assert_uint_eq(seqs[0], t3.seq);
    ck_assert_ptr_nonnull(strstr(keys[1], "\"namespace\":\"" NS_A "\",\"key\":\"a\""));
    ck_assert_uint_eq(seqs[1], t0.seq);
    /* the two checksums of "b", the smaller first */
    bool a_first = rp_csum(SET_A) < rp_csum(SET_B);
    ck_assert_uint_eq(seqs[2], a_first ? t1.seq : t2.seq);
    ck_assert_uint_eq(seqs[3], a_first ? t2.seq : t1.seq);
    ck_assert_ptr_nonnull(strstr(keys[2], "\"key\":\"b\""));
    ck_assert_ptr_nonnull(strstr(keys[3], "\"key\":\"b\""));
    ck_assert_ptr_nonnull(strstr(a_first ? keys[3] : keys[2], "\"origin\":\"imported\""));
    ck_assert_ptr_nonnull(strstr(keys[4], "\"table\":\"kernel\""));
    ck_assert_uint_eq(seqs[4], k0.seq);
    ck_assert_ptr_nonnull(strstr(keys[5], "\"table\":\"user\""));
    free(d);
    rp_renv_free(&r);
}
END_TEST

/* --------------------------------------------------------- mixed, a model */

typedef struct model_entry {
    bool live;
    int table;
    const char *ns;
    char key[40];
    uint64_t checksum;
    envlog_origin origin;
    envlog_rule rule;
    envlog_stamp stamp;
    int64_t winner;
    size_t binary_size;
} model_entry;

typedef struct model {
    model_entry v[256];
    size_t n;
} model;

static model_entry *model_find(model *m, int table, const char *ns, const char *key,
                               uint64_t checksum)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].table == table && !strcmp(m->v[i].ns, ns) &&
            !strcmp(m->v[i].key, key) && m->v[i].checksum == checksum)
            return &m->v[i];
    ck_assert_uint_lt(m->n, 256);
    model_entry *e = &m->v[m->n++];
    memset(e, 0, sizeof *e);
    e->table = table;
    e->ns = ns;
    snprintf(e->key, sizeof e->key, "%s", key);
    e->checksum = checksum;
    return e;
}

/* The storage rules, as the seeds state them. */
static void model_set(model_entry *e, bool imported, const envlog_stamp *st,
                      int64_t winner, size_t size)
{
    if (e->live && !(e->origin == ENVLOG_IMPORTED && !imported))
        return;
    e->rule = !e->live ? (imported ? ENVLOG_RULE_IMPORTED : ENVLOG_RULE_FIRST_LOCAL)
                       : ENVLOG_RULE_LOCAL_OVER_IMPORTED;
    e->live = true;
    e->origin = imported ? ENVLOG_IMPORTED : ENVLOG_LOCAL;
    e->stamp = *st;
    e->winner = winner;
    e->binary_size = size;
}

static const char *const M_NS[] = {NS_A, NS_B};
static const char *const M_KNS[] = {KNS_A, KNS_B};

static unsigned lcg(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return (*x >> 16) & 0x7fff;
}

typedef struct model_ctx {
    model *m;
} model_ctx;

/* Feeds the model one record. */
static void model_apply(model *m, const envlog_record *rec)
{
    if (rec->kind == ENVLOG_KIND_TUNE) {
        const envlog_tune *t = &rec->u.tune;
        if (!t->stored)
            return;
        const char *ns = !strcmp(t->ns, NS_A) ? NS_A : NS_B;
        model_set(model_find(m, 0, ns, t->key, t->checksum), t->imported, &rec->stamp,
                  t->winner, 0);
    } else if (rec->kind == ENVLOG_KIND_COMPILE) {
        const envlog_compile *c = &rec->u.compile;
        if (c->outcome != ENVLOG_COMPILED || !c->binary.size)
            return;
        char hex[33];
        envlog_id_format(&c->kernel_key, hex);
        const char *ns = !strcmp(c->ns, KNS_A) ? KNS_A : KNS_B;
        model_set(model_find(m, 1, ns, hex, 0), c->imported, &rec->stamp, -1,
                  c->binary.size);
    } else if (rec->kind == ENVLOG_KIND_FORGET) {
        const envlog_forget *f = &rec->u.forget;
        int table = f->table == ENVLOG_TABLE_TUNE ? 0 : 1;
        const char *ns = table ? (!strcmp(f->ns, KNS_A) ? KNS_A : KNS_B)
                               : (!strcmp(f->ns, NS_A) ? NS_A : NS_B);
        model_find(m, table, ns, f->key, f->checksum)->live = false;
    }
}

/* The records as the total order gives them. */
static envlog_err model_visit(void *ctx, const envlog_replay_rec *r)
{
    model_apply(((model_ctx *)ctx)->m, r->rec);
    return ENVLOG_OK;
}

/* The records as the process recorded them (the session hook is called
 * under the session's lock, in the order the live state sees them). */
static void model_hook(void *ctx, const envlog_record *rec, uint64_t unix_ns)
{
    (void)unix_ns;
    model_apply(((model_ctx *)ctx)->m, rec);
}

static void check_against_model(envlog_state *st, model *m)
{
    size_t live = 0;
    for (size_t i = 0; i < m->n; i++) {
        model_entry *e = &m->v[i];
        if (e->table == 0) {
            envlog_tune_entry t;
            envlog_err err = envlog_state_winner(st, e->ns, e->key, e->checksum, &t);
            if (!e->live) {
                ck_assert_err(err, ENVLOG_NOT_FOUND);
                continue;
            }
            ck_assert_ok(err);
            rp_assert_stamp(t.stamp, e->stamp);
            ck_assert_int_eq(t.origin, e->origin);
            ck_assert_int_eq(t.rule, e->rule);
            ck_assert_int_eq(t.winner_index, e->winner);
        } else {
            envlog_kernel_entry k;
            envlog_hash128 h;
            ck_assert_ok(envlog_id_parse(e->key, &h));
            envlog_err err = envlog_state_kernel(st, e->ns, &h, &k);
            if (!e->live) {
                ck_assert_err(err, ENVLOG_NOT_FOUND);
                continue;
            }
            ck_assert_ok(err);
            rp_assert_stamp(k.stamp, e->stamp);
            ck_assert_int_eq(k.origin, e->origin);
            ck_assert_int_eq(k.rule, e->rule);
            ck_assert_uint_eq(k.binary.size, e->binary_size);
        }
        live++;
    }
    envlog_state_stats ss = rp_stats(st);
    ck_assert_uint_eq(ss.tunes + ss.kernels, live);
}

START_TEST(test_mixed_against_model)
{
    rp_renv r = rp_renv_new("mixed");
    envlog_state *live;
    ck_assert_ok(envlog_env_state(r.env, &live));
    model seen = {0};
    model_ctx sc = {&seen};
    envlog_session *s[3];
    s[0] = rp_sbegin(r.env, "s0", 32768);
    s[1] = rp_sbegin(r.env, "s1", 0);
    s[2] = rp_sbegin(r.env, "s2", 0);
    for (int i = 0; i < 3; i++) {
        envlog_session_set_hook(s[i], model_hook, &sc);
        rp_rtune(s[i], NS_A, "warm", i); /* every session goes to disk */
    }
    unsigned seed = 20240601u + (unsigned)_i;
    const char *keys[] = {"k0", "k1", "k2"};
    for (int op = 0; op < 400; op++) {
        envlog_session *x = s[lcg(&seed) % 3];
        unsigned what = lcg(&seed) % 100;
        const char *ns = M_NS[lcg(&seed) % 2];
        const char *key = keys[lcg(&seed) % 3];
        const char *const *set = lcg(&seed) % 2 ? SET_A : SET_B;
        int64_t w = lcg(&seed) % 3;
        uint8_t kk = (uint8_t)(lcg(&seed) % 3);
        const char *kns = M_KNS[lcg(&seed) % 2];
        if (what < 35)
            rp_rtune_full(x, ns, key, set, w, true, false);
        else if (what < 50)
            rp_rtune_full(x, ns, key, set, w, true, true);
        else if (what < 58)
            rp_rtune_full(x, ns, key, set, w, false, lcg(&seed) % 2);
        else if (what < 68)
            rp_rforget(x, ENVLOG_TABLE_TUNE, ns, key, envlog_tune_checksum(set, 3));
        else if (what < 80)
            rp_rcompile(x, kns, kk, ENVLOG_COMPILED, false, (uint8_t)op, 1 + op % 200);
        else if (what < 88)
            rp_rcompile(x, kns, kk, ENVLOG_COMPILED, true, (uint8_t)op, 1 + op % 200);
        else if (what < 92)
            rp_rcompile(x, kns, kk, what % 2 ? ENVLOG_LOADED : ENVLOG_FAILED, false, 0, 0);
        else
            rp_rforget_kernel(x, kns, kk);
        rp_nap_us(20); /* so recording order and time order agree */
    }
    /* The live state follows the order the process recorded in; a fold,
     * the total order by time.  Each is checked against the model fed in
     * its own order, so a session whose clock origin was read late cannot
     * make the test fail; with the naps above, the two agree. */
    check_against_model(live, &seen);
    model m = {0};
    model_ctx mc = {&m};
    ck_assert_ok(envlog_replay_each(r.env, NULL, model_visit, &mc));
    for (int i = 0; i < 3; i++)
        rp_end(s[i]);
    envlog_state *st = rp_sopen(r.env, NULL);
    check_against_model(st, &m);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------- live state */

START_TEST(test_live_sees_own_records)
{
    rp_renv r = rp_renv_new("live");
    envlog_state *st;
    ck_assert_ok(envlog_env_state(r.env, &st));
    ck_assert_uint_eq(rp_stats(st).tunes, 0);
    envlog_state *again;
    ck_assert_ok(envlog_env_state(r.env, &again));
    ck_assert_ptr_eq(st, again); /* one state per handle */

    envlog_session *s = rp_sbegin(r.env, "live", 0);
    envlog_stamp t = rp_rtune(s, NS_A, "k", 1);
    envlog_tune_entry e = rp_winner(st, NS_A, "k");
    ck_assert_int_eq(e.winner_index, 1);
    ck_assert_str_eq(e.winner, "b");
    rp_assert_stamp(e.stamp, t);
    rp_rtune(s, NS_A, "k", 2);
    rp_assert_stamp(rp_winner(st, NS_A, "k").stamp, t);

    envlog_stamp k = rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 3, 16);
    envlog_kernel_entry ke = rp_kernel(st, KNS_A, 1);
    rp_assert_stamp(ke.stamp, k);
    ck_assert_uint_eq(ke.binary.size, 16);

    rp_rtune_full(s, NS_A, "unstored", SET_A, 0, false, false);
    rp_no_winner(st, NS_A, "unstored", rp_csum(SET_A));

    rp_rtune_full(s, NS_B, "imp", SET_A, 0, true, true);
    ck_assert_int_eq(rp_winner(st, NS_B, "imp").origin, ENVLOG_IMPORTED);
    envlog_stamp l = rp_rtune(s, NS_B, "imp", 2);
    e = rp_winner(st, NS_B, "imp");
    ck_assert_int_eq(e.rule, ENVLOG_RULE_LOCAL_OVER_IMPORTED);
    rp_assert_stamp(e.stamp, l);

    rp_rforget(s, ENVLOG_TABLE_TUNE, NS_A, "k", rp_csum(SET_A));
    rp_no_winner(st, NS_A, "k", rp_csum(SET_A));
    rp_rforget_kernel(s, KNS_A, 1);
    rp_no_kernel(st, KNS_A, 1);

    static const uint8_t body[] = {0xf5};
    ck_assert_ok(envlog_record_user(s, "rt.flag", body, 1, ENVLOG_CHANGED, NULL));
    ck_assert_uint_eq(rp_stats(st).user_records, 1);
    rp_end(s);

    /* The live state and a fresh fold of the same logs agree. */
    char *a = rp_dump_of(st), *b = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    rp_renv_free(&r);
}
END_TEST

/* The live state and a fresh fold of the log agree after every kind of
 * record, the time of the last change included (the live state takes each
 * record as the session built it, at its session's start plus its offset). */
static void live_agrees(envlog_env *env, envlog_state *live, const char *after)
{
    envlog_state *fresh = rp_sopen(env, NULL);
    char *a = rp_dump_of(live), *b = rp_dump_of(fresh);
    ck_assert_msg(!strcmp(a, b), "after %s: live\n%s\nfresh\n%s", after, a, b);
    envlog_state_stats x = rp_stats(live), y = rp_stats(fresh);
    ck_assert_msg(x.tunes == y.tunes && x.kernels == y.kernels &&
                      x.user_records == y.user_records && x.sessions == y.sessions,
                  "after %s: counts differ (sessions %llu live, %llu in the log)", after,
                  (unsigned long long)x.sessions, (unsigned long long)y.sessions);
    ck_assert_msg(x.last_change_unix_ns == y.last_change_unix_ns,
                  "after %s: last change at %llu live, %llu in the log", after,
                  (unsigned long long)x.last_change_unix_ns,
                  (unsigned long long)y.last_change_unix_ns);
    free(a);
    free(b);
    envlog_state_close(fresh);
}

START_TEST(test_live_equals_fold_after_every_kind)
{
    rp_renv r = rp_renv_new("liveeach");
    envlog_state *live;
    ck_assert_ok(envlog_env_state(r.env, &live));
    envlog_session *s = rp_sbegin(r.env, "each", 0);
    ck_assert_ok(envlog_record_mark(s, "start", NULL));
    live_agrees(r.env, live, "a mark");
    rp_rtune_full(s, NS_A, "unstored", SET_A, 1, false, false);
    live_agrees(r.env, live, "an unstored tune");
    rp_settle();
    rp_rtune(s, NS_A, "k", 1);
    live_agrees(r.env, live, "a tune (the session reaches the disk)");
    rp_settle();
    rp_rtune_full(s, NS_B, "imp", SET_A, 0, true, true);
    live_agrees(r.env, live, "an imported tune");
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 3, 64);
    live_agrees(r.env, live, "a compile");
    rp_rcompile(s, KNS_A, 2, ENVLOG_FAILED, false, 0, 0);
    live_agrees(r.env, live, "a failed compile");
    envlog_span sp;
    ck_assert_ok(envlog_span_open(s, "phase", &sp));
    rp_rtune(s, NS_A, "in-span", 2);
    ck_assert_ok(envlog_span_close(&sp, NULL, 0, NULL));
    live_agrees(r.env, live, "a span around a tune");
    static const uint8_t empty_map[] = {0xa0};
    envlog_import im = {.bundle = "b", .manifest = {empty_map, 1}, .taken = 1};
    ck_assert_ok(envlog_record_import(s, &im, NULL));
    live_agrees(r.env, live, "an import");
    rp_settle();
    rp_rforget(s, ENVLOG_TABLE_TUNE, NS_A, "k", rp_csum(SET_A));
    live_agrees(r.env, live, "a forget");
    rp_rforget_kernel(s, KNS_A, 1);
    live_agrees(r.env, live, "a kernel forget");
    static const uint8_t body[] = {0xf5};
    ck_assert_ok(envlog_record_user(s, "rt.flag", body, 1, ENVLOG_CHANGED, NULL));
    live_agrees(r.env, live, "a user record");
    rp_end(s);
    live_agrees(r.env, live, "the session's end");
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_live_folds_history_first)
{
    rp_renv r = rp_renv_new("livehist");
    envlog_session *s = rp_sbegin(r.env, "before", 0);
    envlog_stamp t = rp_rtune(s, NS_A, "old", 0);
    rp_end(s);
    /* A second handle on the same directory, as another process would have. */
    envlog_env *env2 = tu_env(r.dir);
    envlog_session *s2 = rp_sbegin(env2, "other", 0);
    envlog_stamp t2 = rp_rtune(s2, NS_A, "other", 0);
    envlog_state *st;
    ck_assert_ok(envlog_env_state(r.env, &st));
    rp_assert_stamp(rp_winner(st, NS_A, "old").stamp, t);
    /* another live writer's records, on disk before the fold, are seen */
    rp_assert_stamp(rp_winner(st, NS_A, "other").stamp, t2);
    envlog_session *s3 = rp_sbegin(r.env, "after", 0);
    rp_rtune(s3, NS_A, "old", 2); /* the first value stands */
    envlog_stamp t3 = rp_rtune(s3, NS_A, "new", 1);
    rp_assert_stamp(rp_winner(st, NS_A, "old").stamp, t);
    rp_assert_stamp(rp_winner(st, NS_A, "new").stamp, t3);
    rp_end(s3);
    rp_end(s2);
    envlog_env_close(env2);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_live_level_off)
{
    /* At level OFF nothing is written, but the caches still work. */
    rp_renv r = rp_renv_new("liveoff");
    envlog_state *st;
    ck_assert_ok(envlog_env_state(r.env, &st));
    envlog_session_opts o = tu_opts("off", 0);
    o.level = ENVLOG_LEVEL_OFF;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(r.env, &o, &s));
    envlog_stamp t = rp_rtune(s, NS_A, "k", 2);
    rp_assert_stamp(rp_winner(st, NS_A, "k").stamp, t);
    rp_rcompile(s, KNS_A, 4, ENVLOG_COMPILED, false, 1, 8);
    rp_kernel(st, KNS_A, 4);
    rp_end(s);
    envlog_state *disk = rp_sopen(r.env, NULL);
    rp_no_winner(disk, NS_A, "k", rp_csum(SET_A));
    envlog_state_close(disk);
    rp_renv_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- explain */

START_TEST(test_explain_checksum)
{
    rp_renv r = rp_renv_new("explcs");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    envlog_stamp t = rp_rtune(s, NS_A, "k", 0);
    rp_rtune(s, NS_A, "unrelated", 0);
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    rp_no_winner(st, NS_A, "k", rp_csum(SET_B));
    envlog_near *nv;
    size_t n;
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_TUNE, NS_A, "k", rp_csum(SET_B),
                                      SET_B, 3, &nv, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(nv[0].table, ENVLOG_TABLE_TUNE);
    ck_assert_str_eq(nv[0].ns, NS_A);
    ck_assert_str_eq(nv[0].key, "k");
    ck_assert_uint_eq(nv[0].checksum, rp_csum(SET_A));
    rp_assert_stamp(nv[0].stamp, t);
    ck_assert_msg(strstr(nv[0].differs, "tune-set checksum") != NULL, "%s", nv[0].differs);
    ck_assert_msg(strstr(nv[0].differs, "candidate c only here") != NULL, "%s",
                  nv[0].differs);
    ck_assert_msg(strstr(nv[0].differs, "candidate d only asked") != NULL, "%s",
                  nv[0].differs);
    ck_assert_msg(!strstr(nv[0].differs, "namespace"), "%s", nv[0].differs);
    envlog_near_free(nv);

    /* A hit is not a near miss; another key is not near. */
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_TUNE, NS_A, "k", rp_csum(SET_A),
                                      NULL, 0, &nv, &n));
    ck_assert_uint_eq(n, 0);
    envlog_near_free(nv);
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_TUNE, NS_A, "nope", rp_csum(SET_A),
                                      NULL, 0, &nv, &n));
    ck_assert_uint_eq(n, 0);
    envlog_near_free(nv);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_explain_namespace)
{
    rp_renv r = rp_renv_new("explns");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    rp_rtune(s, NS_A, "k", 0);
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    envlog_near *nv;
    size_t n;
    /* another device */
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_TUNE, NS_B, "k", rp_csum(SET_A),
                                      SET_A, 3, &nv, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(nv[0].ns, NS_A);
    ck_assert_str_eq(nv[0].differs, "namespace component 4: sm_90 here, sm_80 asked");
    envlog_near_free(nv);
    /* another runtime version */
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_TUNE, NS_V, "k", rp_csum(SET_A),
                                      NULL, 0, &nv, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(nv[0].differs, "namespace component 3: 1.0 here, 2.0 asked");
    envlog_near_free(nv);
    /* both, and a namespace with more components */
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_TUNE, "autotune/rt/2.0/sm_80/x",
                                      "k", rp_csum(SET_B), NULL, 0, &nv, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(strstr(nv[0].differs, "component 3: 1.0 here, 2.0 asked") &&
                      strstr(nv[0].differs, "component 4: sm_90 here, sm_80 asked") &&
                      strstr(nv[0].differs, "component 5:  here, x asked") &&
                      strstr(nv[0].differs, "tune-set checksum"),
                  "%s", nv[0].differs);
    envlog_near_free(nv);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_explain_kernel)
{
    rp_renv r = rp_renv_new("explk");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 1, 8);
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    envlog_near *nv;
    size_t n;
    char hex[33];
    envlog_hash128 k = rp_kkey(1);
    envlog_id_format(&k, hex);
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_KERNEL, KNS_B, hex, 0, NULL, 0,
                                      &nv, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(nv[0].table, ENVLOG_TABLE_KERNEL);
    ck_assert_str_eq(nv[0].differs, "namespace component 3: sm_90 here, sm_80 asked");
    envlog_near_free(nv);
    /* by name: the same kernel under another key */
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_KERNEL, KNS_A, "kernel_1", 0,
                                      NULL, 0, &nv, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(strstr(nv[0].differs, hex) != NULL, "%s", nv[0].differs);
    envlog_near_free(nv);
    /* the tune table knows nothing of it */
    ck_assert_ok(envlog_state_explain(st, ENVLOG_TABLE_TUNE, KNS_B, hex, 0, NULL, 0,
                                      &nv, &n));
    ck_assert_uint_eq(n, 0);
    envlog_near_free(nv);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ suite */


/* Issue 15, item 10: a tune's trials ranked by cost with their percent of
 * the winner's, the runner-up named, and why each stopped sampling, read
 * from the adaptive policy's recorded parameters. */
START_TEST(test_why_ranks_trials_and_says_why_each_stopped)
{
    static const char *const names[] = {"best", "slow", "noisy", "broken", "second"};
    envlog_trial tr[] = {
        {.name = "best", .index = 0, .samples = 7, .median_ns = 100, .stddev_ns = 1},
        {.name = "slow", .index = 1, .samples = 5, .median_ns = 500, .stddev_ns = 1},
        {.name = "noisy", .index = 2, .samples = 50, .median_ns = 150, .stddev_ns = 40},
        {.name = "broken", .index = 3, .error = "launch failed"},
        {.name = "second", .index = 4, .samples = 6, .median_ns = 125, .stddev_ns = 0.5},
    };
    envlog_param params[] = {{"min_samples", 5}, {"max_samples", 50}, {"drop_factor", 2},
                             {"rel_tol", 0.01}};
    envlog_tune t = {.ns = NS_A, .key = "k", .candidates = names, .n_candidates = 5,
                     .trials = tr, .n_trials = 5, .params = params, .n_params = 4,
                     .winner = 0};
    envlog_rank rk[5];
    int64_t ru;
    ck_assert_ok(envlog_tune_rank(&t, rk, &ru));
    size_t order[] = {0, 4, 2, 1, 3};
    envlog_stop stops[] = {ENVLOG_STOP_CONVERGED, ENVLOG_STOP_CONVERGED,
                           ENVLOG_STOP_SAMPLE_LIMIT, ENVLOG_STOP_DROPPED, ENVLOG_STOP_ERROR};
    for (size_t i = 0; i < 5; i++) {
        ck_assert_uint_eq(rk[i].trial, order[i]);
        ck_assert_int_eq(rk[i].stop, stops[i]);
    }
    ck_assert_int_eq(ru, 4);
    ck_assert(rk[0].percent == 100 && rk[1].percent == 125 && rk[3].percent == 500);
    ck_assert(rk[4].percent == 0 && rk[4].cost_ns == 0);
    ck_assert_str_eq(envlog_stop_name(rk[2].stop), "sample-limit");

    /* The policy's own score when it recorded one; and a policy that
     * records no stopping rule is not guessed at. */
    t.winner_ns = 50;
    ck_assert_ok(envlog_tune_rank(&t, rk, NULL));
    ck_assert(rk[0].percent == 200);
    t.n_params = 0;
    ck_assert_ok(envlog_tune_rank(&t, rk, &ru));
    ck_assert_int_eq(rk[0].stop, ENVLOG_STOP_UNKNOWN);
    ck_assert_int_eq(rk[4].stop, ENVLOG_STOP_ERROR);
    ck_assert_int_eq(envlog_tune_rank(NULL, rk, &ru), ENVLOG_INVALID_ARG);
}
END_TEST

static envlog_err count_compacted(void *ctx, const envlog_replay_rec *r)
{
    size_t *n = ctx;
    n[r->compacted]++;
    return ENVLOG_OK;
}

/* Issue 15, item 10: a reader can tell a record compacted into the
 * snapshot from one in a session's log, and what that compaction kept. */
START_TEST(test_replay_says_which_records_were_compacted)
{
    rp_renv r = rp_renv_new("compacted");
    envlog_compaction cp;
    ck_assert_ok(envlog_compaction_get(r.env, &cp));
    ck_assert(!cp.present);
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    rp_rtune(s, NS_A, "k", 0);
    rp_end(s);
    envlog_compact_report rep;
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_NONE, &rep));
    s = rp_sbegin(r.env, "two", 0);
    rp_rtune(s, NS_A, "k2", 0);
    rp_end(s);
    size_t n[2] = {0, 0};
    ck_assert_ok(envlog_replay_each(r.env, NULL, count_compacted, n));
    ck_assert_uint_gt(n[0], 0);
    ck_assert_uint_gt(n[1], 0);
    ck_assert_ok(envlog_compaction_get(r.env, &cp));
    ck_assert(cp.present);
    ck_assert_int_eq(cp.evidence, ENVLOG_EVIDENCE_NONE);
    ck_assert_uint_eq(cp.entries, 1);
    ck_assert_uint_eq(cp.sessions, 1);
    ck_assert_uint_gt(cp.last_unix_ns, 0);
    ck_assert_uint_ge(cp.created_unix_ns, cp.last_unix_ns);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------ callbacks */

/* A callback that goes on until its `stop_at`-th call, then returns `code`
 * with a detail of its own. */
typedef struct stop_cb {
    size_t calls, stop_at;
    envlog_err code;
} stop_cb;

static envlog_err stop_cb_next(stop_cb *c)
{
    if (++c->calls != c->stop_at)
        return ENVLOG_OK;
    envlog__fail(c->code, "the callback's own detail");
    return c->code;
}

/* A walk over `obj` with a stop_cb: the walks below, each through the
 * callback of its kind. */
typedef envlog_err (*walk_fn)(void *obj, stop_cb *c);

static envlog_err stop_record(void *ctx, const envlog_replay_rec *r)
{
    (void)r;
    return stop_cb_next(ctx);
}

static envlog_err stop_entry(void *ctx, const envlog_entry *e)
{
    (void)e;
    return stop_cb_next(ctx);
}

static envlog_err stop_write(void *ctx, const char *text, size_t len)
{
    (void)text;
    (void)len;
    return stop_cb_next(ctx);
}

static envlog_err walk_replay(void *env, stop_cb *c)
{
    return envlog_replay_each(env, NULL, stop_record, c);
}

static envlog_err walk_state(void *st, stop_cb *c)
{
    return envlog_state_each(st, stop_entry, c);
}

static envlog_err walk_dump(void *st, stop_cb *c)
{
    return envlog_state_dump(st, stop_write, c);
}

/* Issue 17, item 3: the code a callback stops a walk with is what the walk
 * returns, unchanged and at once (the callback is not called again), and
 * the walk leaves the error detail to the callback (envlog_errmsg() says
 * what the callback said).  Checked at the first call, the last and one
 * between, for each code below: the stop code, errors, the code a stop was
 * turned into before (ENVLOG_WRONG_STATE), and one that is no error
 * elsewhere (ENVLOG_END).  Returns how many calls a whole walk makes. */
static size_t check_stops(walk_fn walk, void *obj)
{
    static const envlog_err codes[] = {ENVLOG_STOPPED, ENVLOG_NOSPACE, ENVLOG_BUSY,
                                       ENVLOG_WRONG_STATE, ENVLOG_END};
    stop_cb all = {0, 0, ENVLOG_OK};
    ck_assert_ok(walk(obj, &all));
    size_t at[3] = {1, (all.calls + 1) / 2, all.calls};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
            stop_cb c = {0, at[k], codes[i]};
            ck_assert_int_eq(walk(obj, &c), codes[i]);
            ck_assert_uint_eq(c.calls, at[k]);
            ck_assert_str_eq(envlog_errmsg(), "the callback's own detail");
        }
    return all.calls;
}

/* Three tunes and a compile in one session. */
static rp_renv callback_env(void)
{
    rp_renv r = rp_renv_new("callbacks");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    rp_rtune(s, NS_A, "k1", 0);
    rp_rtune(s, NS_A, "k2", 1);
    rp_rtune(s, NS_A, "k3", 2);
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 1, 16);
    rp_end(s);
    return r;
}

START_TEST(test_replay_each_returns_the_callbacks_code)
{
    rp_renv r = callback_env();
    ck_assert_uint_ge(check_stops(walk_replay, r.env), 5); /* the session's and 4 */
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_state_each_returns_the_callbacks_code)
{
    rp_renv r = callback_env();
    envlog_state *st = rp_sopen(r.env, NULL), *live;
    ck_assert_uint_eq(check_stops(walk_state, st), 4);
    /* The live state walks the same way. */
    ck_assert_ok(envlog_env_state(r.env, &live));
    ck_assert_uint_eq(check_stops(walk_state, live), 4);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* The writer of a dump stops it with its own code. */
START_TEST(test_state_dump_returns_the_writers_code)
{
    rp_renv r = callback_env();
    envlog_state *st = rp_sopen(r.env, NULL);
    ck_assert_uint_gt(check_stops(walk_dump, st), 4);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* Issue 17, item 3: only a bundle import writes imported records; the
 * public recording calls refuse the flag, so a caller cannot pass its own
 * values off as a bundle's (an imported value yields to the next local
 * one). */
START_TEST(test_imported_refused_from_callers)
{
    rp_renv r = rp_renv_new("forged");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    envlog_tune t = {.ns = NS_A, .key = "k", .checksum = rp_csum(SET_A),
                     .candidates = SET_A, .n_candidates = 3, .winner = 0,
                     .stored = true, .imported = true};
    envlog_session_stats before, after;
    envlog_session_stats_get(s, &before);
    ck_assert_int_eq(envlog_record_tune(s, &t, NULL), ENVLOG_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "imported"));
    uint8_t bin[4] = {1, 2, 3, 4};
    envlog_compile c = {.ns = KNS_A, .name = "kernel", .kernel_key = rp_kkey(1),
                        .arch = "sm_90", .outcome = ENVLOG_COMPILED,
                        .binary_hash = envlog_hash128_bytes(bin, 4), .binary_size = 4,
                        .binary = {bin, 4}, .imported = true};
    ck_assert_int_eq(envlog_record_compile(s, &c, NULL), ENVLOG_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "imported"));
    envlog_session_stats_get(s, &after);
    ck_assert_uint_eq(after.accepted, before.accepted);
    /* The import's own path writes them. */
    ck_assert_ok(envlog_record_imported(s, ENVLOG_KIND_TUNE, &t, NULL));
    ck_assert_ok(envlog_record_imported(s, ENVLOG_KIND_COMPILE, &c, NULL));
    ck_assert_int_eq(envlog_record_imported(s, ENVLOG_KIND_MARK, &t, NULL),
                     ENVLOG_INVALID_ARG);
    /* And the same structs without the flag are local values. */
    t.imported = c.imported = false;
    t.key = "k2";
    c.kernel_key = rp_kkey(2);
    ck_assert_ok(envlog_record_tune(s, &t, NULL));
    ck_assert_ok(envlog_record_compile(s, &c, NULL));
    rp_end(s);
    envlog_state *st = rp_sopen(r.env, NULL);
    ck_assert_int_eq(rp_winner(st, NS_A, "k").origin, ENVLOG_IMPORTED);
    ck_assert_int_eq(rp_kernel(st, KNS_A, 1).origin, ENVLOG_IMPORTED);
    ck_assert_int_eq(rp_winner(st, NS_A, "k2").origin, ENVLOG_LOCAL);
    ck_assert_int_eq(rp_kernel(st, KNS_A, 2).origin, ENVLOG_LOCAL);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* A table made room for at once holds what it was told of without moving,
 * finds every key, refuses nothing for a count beyond any memory, and is
 * left as it was when the room cannot be had. */
START_TEST(test_table_expect)
{
    envlog_entry_table t;
    ck_assert_ok(envlog_table_init(&t));
    enum { N = 3000 };
    static envlog_entry_x e[N];
    static char keys[N][16];
    /* "ns" as the state interns it: its length before it. */
    static char ns_kept[8];
    uint32_t ns_len = 2;
    memcpy(ns_kept, &ns_len, sizeof ns_len);
    memcpy(ns_kept + sizeof ns_len, "ns", 3);
    const char *ns = ns_kept + sizeof ns_len;
    ck_assert_ok(envlog_table_expect(&t, N));
    size_t slots = t.n_slots;
    ck_assert_uint_ge(slots, 2 * N);
    ck_assert_uint_eq(slots & (slots - 1), 0);
    envlog_table_slot *v = t.slots;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        envlog_key_ref k = {.table = ENVLOG_TABLE_TUNE, .ns = {"ns", 2},
                            .key = {keys[i], strlen(keys[i])}, .checksum = 7};
        envlog_key_ref_hash(&k);
        e[i] = (envlog_entry_x){.ns = ns, .key = keys[i],
                                .key_len = (uint32_t)strlen(keys[i]), .k.checksum = 7,
                                .table = ENVLOG_TABLE_TUNE, .live = true};
        ck_assert_ok(envlog_table_install(&t, &e[i], k.hash, NULL, false));
    }
    ck_assert_ptr_eq(t.slots, v); /* never moved */
    ck_assert_uint_eq(t.n_slots, slots);
    ck_assert_uint_eq(t.n_tunes, N);
    for (int i = 0; i < N; i++) {
        envlog_key_ref k = {.table = ENVLOG_TABLE_TUNE, .ns = {"ns", 2},
                            .key = {keys[i], strlen(keys[i])}, .checksum = 7};
        envlog_key_ref_hash(&k);
        ck_assert_ptr_eq(envlog_table_find(&t, &k), &e[i]);
    }
    /* Room it has, and a count no memory holds: nothing changes. */
    ck_assert_ok(envlog_table_expect(&t, 1));
    ck_assert_ok(envlog_table_expect(&t, SIZE_MAX / 2));
    ck_assert_uint_eq(t.n_slots, slots);
    /* No memory for more: refused, the table as it was. */
    envlog_alloc_fail_after(1);
    ck_assert_int_eq(envlog_table_expect(&t, 4 * N), ENVLOG_NOMEM);
    envlog_alloc_fail_reset();
    ck_assert_ptr_eq(t.slots, v);
    ck_assert_uint_eq(t.n_slots, slots);
    ck_assert_ok(envlog_table_expect(&t, 4 * N));
    ck_assert_uint_ge(t.n_slots, 2 * 5 * N);
    for (int i = 0; i < N; i++) {
        envlog_key_ref k = {.table = ENVLOG_TABLE_TUNE, .ns = {"ns", 2},
                            .key = {keys[i], strlen(keys[i])}, .checksum = 7};
        envlog_key_ref_hash(&k);
        ck_assert_ptr_eq(envlog_table_find(&t, &k), &e[i]);
    }
    envlog_table_free(&t);
}
END_TEST

/* An entry keeps its namespace and its record's session interned, each
 * kept once: namespaces that begin alike stay apart, and entries from
 * more sessions than the first set holds keep their own stamps. */
START_TEST(test_interned_names_and_sessions)
{
    rp_renv r = rp_renv_new("interned");
    static const char *const ns[] = {"a", "ab", "abc", "ab/c"};
    enum { SESSIONS = 80 };
    envlog_stamp want[SESSIONS][4];
    for (int i = 0; i < SESSIONS; i++) {
        char label[16];
        snprintf(label, sizeof label, "s%d", i);
        envlog_session *s = rp_sbegin(r.env, label, 0);
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        for (int j = 0; j < 4; j++)
            want[i][j] = rp_rtune(s, ns[j], key, (i + j) % 3);
        rp_end(s);
    }
    envlog_state *st = rp_sopen(r.env, NULL);
    for (int i = 0; i < SESSIONS; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        for (int j = 0; j < 4; j++) {
            envlog_tune_entry e = rp_winner(st, ns[j], key);
            ck_assert_str_eq(e.ns, ns[j]);
            ck_assert_int_eq(e.winner_index, (i + j) % 3);
            rp_assert_stamp(e.stamp, want[i][j]);
        }
        envlog_tune_entry none;
        ck_assert_err(envlog_state_winner(st, "", key, rp_csum(SET_A), &none), ENVLOG_NOT_FOUND);
        ck_assert_err(envlog_state_winner(st, "abcd", key, rp_csum(SET_A), &none),
                      ENVLOG_NOT_FOUND);
    }
    ck_assert_uint_eq(rp_stats(st).tunes, 4 * SESSIONS);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

Suite *suite_replay(void)
{
    Suite *s = suite_create("replay");
    TCase *t = tcase_create("fold");
    tcase_add_test(t, test_table_expect);
    tcase_add_test(t, test_interned_names_and_sessions);
    tcase_add_test(t, test_first_local_stands);
    tcase_add_test(t, test_local_replaces_imported);
    tcase_add_test(t, test_imported_never_replaces);
    tcase_add_test(t, test_forget_removes_one);
    tcase_add_test(t, test_not_stored_makes_no_entry);
    tcase_add_test(t, test_kernel_rules);
    tcase_add_test(t, test_tables_apart);
    tcase_add_test(t, test_candidates_shared_by_set);
    tcase_add_test(t, test_user_records_dump);
    tcase_add_test(t, test_dump_canonical);
    tcase_add_loop_test(t, test_mixed_against_model, 0, 3);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);

    t = tcase_create("live");
    tcase_add_test(t, test_live_sees_own_records);
    tcase_add_test(t, test_live_folds_history_first);
    tcase_add_test(t, test_live_equals_fold_after_every_kind);
    tcase_add_test(t, test_live_level_off);
    suite_add_tcase(s, t);

    t = tcase_create("explain");
    tcase_add_test(t, test_explain_checksum);
    tcase_add_test(t, test_explain_namespace);
    tcase_add_test(t, test_explain_kernel);
    tcase_add_test(t, test_why_ranks_trials_and_says_why_each_stopped);
    tcase_add_test(t, test_replay_says_which_records_were_compacted);
    suite_add_tcase(s, t);

    t = tcase_create("callbacks");
    tcase_add_test(t, test_replay_each_returns_the_callbacks_code);
    tcase_add_test(t, test_state_each_returns_the_callbacks_code);
    tcase_add_test(t, test_state_dump_returns_the_writers_code);
    tcase_add_test(t, test_imported_refused_from_callers);
    suite_add_tcase(s, t);

    rp_add_history_tcases(s);
    return s;
}

