/* SPDX-License-Identifier: MIT */
/*
 * check_replay.c - the replay suite: the total order, each fold rule alone
 * and mixed (against a model written here, not the fold's own code), the
 * live state a process sees at once, miss explanations, damage during
 * replay, --until against a physically truncated history, the canonical
 * dump, and allocation and read faults.
 *
 * Environments are built by recording through the public API in the
 * runner's temporary root.  Where a test depends on which of two sessions
 * recorded first, it lets the clock move between them (rp_settle()), since
 * the total order is by time.
 */
#include "replay_int.h"
#include "suites.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NS_A "autotune/rt/1.0/sm_90"
#define NS_B "autotune/rt/1.0/sm_80"
#define NS_V "autotune/rt/2.0/sm_90"
#define KNS_A "nvrtc/12.4/sm_90"
#define KNS_B "nvrtc/12.4/sm_80"

static const char *const SET_A[] = {"a", "b", "c"};
static const char *const SET_B[] = {"a", "b", "d"};

/* ---------------------------------------------------------------- helpers */

static void rp_settle(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

static void rp_nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

typedef struct rp_renv {
    char *dir;
    envlog_env *env;
} rp_renv;

static rp_renv rp_renv_new(const char *tag)
{
    rp_renv r;
    r.dir = tu_mkdtemp(tag);
    r.env = tu_env(r.dir);
    return r;
}

static void rp_renv_free(rp_renv *r)
{
    envlog_env_close(r->env);
    free(r->dir);
    r->env = NULL;
    r->dir = NULL;
}

static envlog_session *rp_sbegin(envlog_env *env, const char *label, uint64_t seg)
{
    envlog_session_opts o = tu_opts(label, seg);
    o.sync = ENVLOG_SYNC_NONE;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    return s;
}

static uint64_t rp_csum(const char *const *set)
{
    return envlog_tune_checksum(set, 3);
}

static envlog_stamp rp_rtune_full(envlog_session *s, const char *ns, const char *key,
                               const char *const *set, int64_t winner, bool stored,
                               bool imported)
{
    envlog_trial tr[3];
    for (uint32_t i = 0; i < 3; i++)
        tr[i] = (envlog_trial){.name = set[i], .index = i, .samples = 5,
                               .min_ns = 100 + i, .median_ns = 110 + i,
                               .mean_ns = 111 + i, .max_ns = 130 + i,
                               .stddev_ns = 1};
    envlog_tune t = {.ns = ns, .key = key, .checksum = rp_csum(set),
                     .candidates = set, .n_candidates = 3, .trials = tr,
                     .n_trials = 3, .policy = "test", .winner = winner,
                     .margin = 0.25, .within_noise = false, .wall_ns = 1000,
                     .stored = stored, .imported = imported};
    envlog_stamp st;
    ck_assert_ok(envlog_record_tune(s, &t, &st));
    return st;
}

static envlog_stamp rp_rtune(envlog_session *s, const char *ns, const char *key,
                          int64_t winner)
{
    return rp_rtune_full(s, ns, key, SET_A, winner, true, false);
}

static envlog_hash128 rp_kkey(uint8_t id)
{
    envlog_hash128 h;
    for (int i = 0; i < 16; i++)
        h.b[i] = (uint8_t)(id * 17 + i);
    return h;
}

static envlog_stamp rp_rcompile(envlog_session *s, const char *ns, uint8_t key,
                             envlog_outcome outcome, bool imported, uint8_t fill,
                             size_t size)
{
    uint8_t bin[256];
    ck_assert_uint_le(size, sizeof bin);
    for (size_t i = 0; i < size; i++)
        bin[i] = (uint8_t)(fill + i);
    char name[32];
    snprintf(name, sizeof name, "kernel_%u", key);
    envlog_compile c = {.ns = ns, .name = name, .kernel_key = rp_kkey(key),
                        .options = "-O3", .compiler_version = "12.4", .arch = "sm_90",
                        .outcome = outcome, .duration_ns = 10,
                        .binary_hash = envlog_hash128_bytes(bin, size),
                        .binary_size = size, .binary = {size ? bin : NULL, size},
                        .imported = imported};
    envlog_stamp st;
    ck_assert_ok(envlog_record_compile(s, &c, &st));
    return st;
}

static envlog_stamp rp_rforget(envlog_session *s, envlog_table table, const char *ns,
                            const char *key, uint64_t checksum)
{
    envlog_forget f = {table, ns, key, checksum, "test"};
    envlog_stamp st;
    ck_assert_ok(envlog_record_forget(s, &f, &st));
    return st;
}

static envlog_stamp rp_rforget_kernel(envlog_session *s, const char *ns, uint8_t key)
{
    char hex[33];
    envlog_hash128 k = rp_kkey(key);
    envlog_id_format(&k, hex);
    return rp_rforget(s, ENVLOG_TABLE_KERNEL, ns, hex, 0);
}

static void rp_end(envlog_session *s)
{
    ck_assert_ok(envlog_session_end(s));
}

static envlog_state *rp_sopen(envlog_env *env, const envlog_replay_opts *o)
{
    envlog_state *st;
    ck_assert_ok(envlog_state_open(env, o, &st));
    ck_assert_ptr_nonnull(st);
    return st;
}

static bool rp_stamp_eq(const envlog_stamp *a, const envlog_stamp *b)
{
    return !memcmp(a->session.b, b->session.b, 16) && a->seq == b->seq &&
           a->offset_ns == b->offset_ns;
}

#define rp_assert_stamp(got, want)                                             \
    do {                                                                       \
        envlog_stamp g_ = (got), w_ = (want);                                  \
        ck_assert_msg(rp_stamp_eq(&g_, &w_), "%s: stamp seq %llu, want seq %llu", \
                      #got, (unsigned long long)g_.seq,                        \
                      (unsigned long long)w_.seq);                             \
    } while (0)

/* The winner of (ns, key, SET_A), asserting it stands. */
static envlog_tune_entry rp_winner(envlog_state *st, const char *ns, const char *key)
{
    envlog_tune_entry e;
    ck_assert_ok(envlog_state_winner(st, ns, key, rp_csum(SET_A), &e));
    return e;
}

static void rp_no_winner(envlog_state *st, const char *ns, const char *key,
                      uint64_t checksum)
{
    envlog_tune_entry e;
    ck_assert_err(envlog_state_winner(st, ns, key, checksum, &e), ENVLOG_NOT_FOUND);
}

static envlog_kernel_entry rp_kernel(envlog_state *st, const char *ns, uint8_t key)
{
    envlog_kernel_entry e;
    envlog_hash128 k = rp_kkey(key);
    ck_assert_ok(envlog_state_kernel(st, ns, &k, &e));
    return e;
}

static void rp_no_kernel(envlog_state *st, const char *ns, uint8_t key)
{
    envlog_kernel_entry e;
    envlog_hash128 k = rp_kkey(key);
    ck_assert_err(envlog_state_kernel(st, ns, &k, &e), ENVLOG_NOT_FOUND);
}

static int rp_mem_write(void *ctx, const char *text, size_t len)
{
    return fwrite(text, 1, len, ctx) == len ? 0 : -1;
}

/* The canonical dump as one string (caller frees). */
static char *rp_dump_of(envlog_state *st)
{
    char *p = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&p, &n);
    ck_assert_ptr_nonnull(f);
    ck_assert_ok(envlog_state_dump(st, rp_mem_write, f));
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

static char *rp_dump_env(envlog_env *env, const envlog_replay_opts *o)
{
    envlog_state *st = rp_sopen(env, o);
    char *d = rp_dump_of(st);
    envlog_state_close(st);
    return d;
}

static envlog_state_stats rp_stats(envlog_state *st)
{
    envlog_state_stats s;
    envlog_state_stats_get(st, &s);
    return s;
}

/* Sorted names in a directory (no dot entries); caller frees each and v. */
static size_t rp_list_dir(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "opendir %s: %s", dir, strerror(errno));
    char **v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        v = realloc(v, (n + 1) * sizeof *v);
        ck_assert_ptr_nonnull(v);
        v[n++] = strdup(de->d_name);
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) {
            char *t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    *out = v;
    return n;
}

static void rp_free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static char *rp_session_dir(const char *envdir, const envlog_id128 *id)
{
    char hex[33], *p;
    envlog_id_format(id, hex);
    ck_assert_int_ge(asprintf(&p, "%s/sessions/%s", envdir, hex), 0);
    return p;
}

/* The file of segment `seg` of session `id`. */
static char *rp_segment_file(const char *envdir, const envlog_id128 *id, uint32_t seg)
{
    char *dir = rp_session_dir(envdir, id), **names, *found = NULL, prefix[16];
    size_t n = rp_list_dir(dir, &names);
    snprintf(prefix, sizeof prefix, "%08u-", seg);
    for (size_t i = 0; i < n; i++)
        if (!strncmp(names[i], prefix, strlen(prefix)) && strstr(names[i], ".log") &&
            !strstr(names[i], ".broken"))
            ck_assert_int_ge(asprintf(&found, "%s/%s", dir, names[i]), 0);
    ck_assert_msg(found != NULL, "no segment %u in %s", seg, dir);
    rp_free_names(names, n);
    free(dir);
    return found;
}

/* One record as the total order gave it. */
typedef struct rp_placed {
    envlog_id128 id;
    uint64_t seq, unix_ns;
    envlog_kind kind;
    uint32_t segment;
    uint64_t file_offset, file_end;
    uint8_t *payload; /* a copy */
    size_t size;
} rp_placed;

typedef struct rp_placed_list {
    rp_placed *v;
    size_t n;
} rp_placed_list;

static int rp_collect(void *ctx, const envlog_replay_rec *r)
{
    rp_placed_list *l = ctx;
    l->v = realloc(l->v, (l->n + 1) * sizeof *l->v);
    ck_assert_ptr_nonnull(l->v);
    rp_placed *p = &l->v[l->n++];
    p->id = r->rec->stamp.session;
    p->seq = r->rec->stamp.seq;
    p->unix_ns = r->unix_ns;
    p->kind = r->rec->kind;
    p->segment = r->rec->segment;
    p->file_offset = r->rec->file_offset;
    p->file_end = r->rec->file_end;
    p->size = r->rec->payload.size;
    p->payload = malloc(p->size ? p->size : 1);
    memcpy(p->payload, r->rec->payload.data, p->size);
    return 0;
}

static rp_placed_list rp_order_of(envlog_env *env, const envlog_replay_opts *o)
{
    rp_placed_list l = {0};
    ck_assert_ok(envlog_replay_each(env, o, rp_collect, &l));
    return l;
}

static void rp_placed_free(rp_placed_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].payload);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Damage reports collected through on_damage. */
typedef struct rp_dmg_list {
    envlog_damage d[32];
    bool torn[32];
    size_t n;
} rp_dmg_list;

static void rp_on_dmg(void *ctx, const envlog_damage *d, bool torn)
{
    rp_dmg_list *l = ctx;
    if (l->n < 32) {
        l->d[l->n] = *d;
        l->torn[l->n] = torn;
    }
    l->n++;
}

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
    envlog_stamp a = rp_rtune(s, NS_A, "k", 0);
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
    (void)a;

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
    envlog_stamp k3 = rp_rcompile(s, KNS_A, 3, ENVLOG_COMPILED, false, 0x50, 44);
    rp_rcompile(s, KNS_A, 3, ENVLOG_COMPILED, true, 0x60, 45);
    envlog_stamp k4 = rp_rcompile(s, KNS_A, 4, ENVLOG_COMPILED, true, 0x70, 46);
    rp_rcompile(s, KNS_A, 4, ENVLOG_COMPILED, true, 0x80, 47);
    /* loads, failures and compiles without a binary make no entry */
    rp_rcompile(s, KNS_A, 5, ENVLOG_LOADED, false, 0, 0);
    rp_rcompile(s, KNS_A, 6, ENVLOG_FAILED, false, 0, 0);
    rp_rcompile(s, KNS_A, 7, ENVLOG_COMPILED, false, 0, 0);
    /* same key in another namespace; forget removes only the one named */
    envlog_stamp k8 = rp_rcompile(s, KNS_B, 1, ENVLOG_COMPILED, false, 0x90, 48);
    envlog_stamp k9 = rp_rcompile(s, KNS_A, 9, ENVLOG_COMPILED, false, 0xa0, 49);
    rp_rforget_kernel(s, KNS_A, 9);
    rp_rforget_kernel(s, KNS_B, 9); /* nothing there */
    envlog_stamp k9b = rp_rcompile(s, KNS_A, 9, ENVLOG_COMPILED, false, 0xb0, 50);
    rp_rforget_kernel(s, KNS_A, 3);
    rp_end(s);
    (void)k9;

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
    (void)k3;
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
             "{\"table\":\"user\",\"kind\":\"rt.config\",\"body_cbor\":\"a10102\","
             "\"set_by\":{\"session\":\"%s\",\"seq\":%llu}}\n"
             "{\"table\":\"user\",\"kind\":\"rt.note\",\"body_cbor\":\"6378797a\","
             "\"set_by\":{\"session\":\"%s\",\"seq\":%llu}}\n"
             "{\"table\":\"user\",\"kind\":\"rt.seen\",\"body_cbor\":\"80\","
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

/* Feeds the model from the records as the total order gives them. */
static int model_visit(void *ctx, const envlog_replay_rec *r)
{
    model *m = ((model_ctx *)ctx)->m;
    const envlog_record *rec = r->rec;
    if (rec->kind == ENVLOG_KIND_TUNE) {
        const envlog_tune *t = &rec->u.tune;
        if (!t->stored)
            return 0;
        const char *ns = !strcmp(t->ns, NS_A) ? NS_A : NS_B;
        model_set(model_find(m, 0, ns, t->key, t->checksum), t->imported, &rec->stamp,
                  t->winner, 0);
    } else if (rec->kind == ENVLOG_KIND_COMPILE) {
        const envlog_compile *c = &rec->u.compile;
        if (c->outcome != ENVLOG_COMPILED || !c->binary.size)
            return 0;
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
    return 0;
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
    envlog_session *s[3];
    s[0] = rp_sbegin(r.env, "s0", 32768);
    s[1] = rp_sbegin(r.env, "s1", 0);
    s[2] = rp_sbegin(r.env, "s2", 0);
    for (int i = 0; i < 3; i++)
        rp_rtune(s[i], NS_A, "warm", i); /* every session goes to disk */
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
        rp_nap_us(20); /* the live fold goes by recording order, replay by time */
    }
    model m = {0};
    model_ctx mc = {&m};
    ck_assert_ok(envlog_replay_each(r.env, NULL, model_visit, &mc));
    check_against_model(live, &m); /* what the process saw as it recorded */
    for (int i = 0; i < 3; i++)
        rp_end(s[i]);
    envlog_state *st = rp_sopen(r.env, NULL);
    check_against_model(st, &m);
    char *a = rp_dump_of(st), *b = rp_dump_of(live);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
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

    envlog_stamp i = rp_rtune_full(s, NS_B, "imp", SET_A, 0, true, true);
    ck_assert_int_eq(rp_winner(st, NS_B, "imp").origin, ENVLOG_IMPORTED);
    envlog_stamp l = rp_rtune(s, NS_B, "imp", 2);
    e = rp_winner(st, NS_B, "imp");
    ck_assert_int_eq(e.rule, ENVLOG_RULE_LOCAL_OVER_IMPORTED);
    rp_assert_stamp(e.stamp, l);
    (void)i;

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

/* ------------------------------------------------------------ total order */

static int placed_cmp(const void *a, const void *b)
{
    const rp_placed *x = a, *y = b;
    return envlog_order_cmp(x->unix_ns, &x->id, x->seq, y->unix_ns, &y->id, y->seq);
}

START_TEST(test_order_cmp)
{
    envlog_id128 lo = {{0}}, hi = {{0}};
    hi.b[15] = 1;
    ck_assert_int_lt(envlog_order_cmp(1, &hi, 9, 2, &lo, 0), 0); /* time first */
    ck_assert_int_gt(envlog_order_cmp(2, &lo, 0, 1, &hi, 9), 0);
    ck_assert_int_lt(envlog_order_cmp(5, &lo, 9, 5, &hi, 0), 0); /* then id */
    ck_assert_int_lt(envlog_order_cmp(5, &lo, 1, 5, &lo, 2), 0); /* then seq */
    ck_assert_int_eq(envlog_order_cmp(5, &lo, 1, 5, &lo, 1), 0);
}
END_TEST

/* Three sessions recording in turn: replay gives each record once, in
 * (session start + offset, session id, seq) order, computed here from the
 * sessions read one by one. */
START_TEST(test_total_order)
{
    rp_renv r = rp_renv_new("order");
    envlog_session *s[3];
    for (int i = 0; i < 3; i++) {
        char label[8];
        snprintf(label, sizeof label, "s%d", i);
        s[i] = rp_sbegin(r.env, label, 32768);
    }
    for (int i = 0; i < 60; i++) {
        envlog_session *x = s[(i * 7 + i / 5) % 3];
        if (i % 4 == 0)
            ck_assert_ok(envlog_record_mark(x, "m", NULL));
        else
            ck_assert_ok(tu_record_tune(x, "k", (unsigned)i, i % 9 ? 10 : 9000, NULL));
    }
    for (int i = 0; i < 3; i++)
        rp_end(s[i]);
    rp_placed_list got = rp_order_of(r.env, NULL);

    /* Independently: every session read whole, its records rp_placed at start
     * + offset, then sorted. */
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(r.env, &in, &n));
    ck_assert_uint_eq(n, 3);
    rp_placed_list want = {0};
    for (size_t i = 0; i < n; i++) {
        envlog_reader *rd;
        ck_assert_ok(envlog_reader_open(r.env, &in[i].id, &rd));
        const envlog_record *rec;
        envlog_err e;
        while ((e = envlog_reader_next(rd, &rec)) == ENVLOG_OK) {
            want.v = realloc(want.v, (want.n + 1) * sizeof *want.v);
            rp_placed *p = &want.v[want.n++];
            memset(p, 0, sizeof *p);
            p->id = in[i].id;
            p->seq = rec->stamp.seq;
            p->unix_ns = in[i].start_unix_ns + rec->stamp.offset_ns;
        }
        ck_assert_err(e, ENVLOG_END);
        envlog_reader_close(rd);
    }
    envlog_sessions_free(in, n);
    qsort(want.v, want.n, sizeof *want.v, placed_cmp);
    ck_assert_uint_eq(got.n, want.n);
    ck_assert_uint_eq(got.n, 63); /* 60 and three session records */
    for (size_t i = 0; i < got.n; i++) {
        ck_assert_msg(!memcmp(got.v[i].id.b, want.v[i].id.b, 16) &&
                          got.v[i].seq == want.v[i].seq &&
                          got.v[i].unix_ns == want.v[i].unix_ns,
                      "record %zu out of order", i);
        if (i)
            ck_assert_int_lt(placed_cmp(&got.v[i - 1], &got.v[i]), 0);
    }
    rp_placed_free(&got);
    rp_placed_free(&want);
    rp_renv_free(&r);
}
END_TEST

/* The sessions copied into a fresh environment in other orders (so the
 * directory lists them otherwise) fold to the same bytes. */
START_TEST(test_listing_order_irrelevant)
{
    rp_renv r = rp_renv_new("listing");
    envlog_session *s[4];
    for (int i = 0; i < 4; i++)
        s[i] = rp_sbegin(r.env, "s", 0);
    for (int i = 0; i < 24; i++) {
        /* the same keys from every session: which stands depends on order */
        envlog_session *x = s[(i * 3) % 4];
        rp_rtune_full(x, i % 2 ? NS_A : NS_B, i % 3 ? "k1" : "k2", SET_A, i % 3,
                   true, i % 5 == 0);
        if (i % 7 == 3)
            rp_rforget(x, ENVLOG_TABLE_TUNE, NS_A, "k1", rp_csum(SET_A));
        static const uint8_t body[] = {0x00};
        ck_assert_ok(envlog_record_user(x, "u", body, 1, ENVLOG_OBSERVED, NULL));
        rp_nap_us(50);
    }
    for (int i = 0; i < 4; i++)
        rp_end(s[i]);
    char *ref = rp_dump_env(r.env, NULL);
    char *sdir = strdup(tu_path(r.dir, "sessions")), **names;
    size_t n = rp_list_dir(sdir, &names);
    ck_assert_uint_eq(n, 4);
    static const int perms[][4] = {{3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}};
    for (size_t p = 0; p < 3; p++) {
        char *copy = tu_mkdtemp("listing-copy");
        envlog_env *e2 = tu_env(copy);
        for (int i = 0; i < 4; i++) {
            char *a, *b;
            ck_assert_int_ge(asprintf(&a, "%s/%s", sdir, names[perms[p][i]]), 0);
            ck_assert_int_ge(asprintf(&b, "%s/sessions/%s", copy, names[perms[p][i]]), 0);
            tu_copytree(a, b);
            free(a);
            free(b);
        }
        char *d = rp_dump_env(e2, NULL);
        ck_assert_str_eq(d, ref);
        free(d);
        envlog_env_close(e2);
        free(copy);
    }
    rp_free_names(names, n);
    free(sdir);
    free(ref);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ until */

/* A copy of `src` holding only the first `k` records of `order`: sessions
 * without any are left out, the others cut just after their last kept
 * record (later segments removed): the history as it was then. */
static char *truncated_copy(const char *src, const rp_placed_list *order, size_t k)
{
    char *dst = tu_mkdtemp("until-copy");
    tu_copytree(src, dst);
    char *sdir = strdup(tu_path(dst, "sessions")), **names;
    size_t n = rp_list_dir(sdir, &names);
    for (size_t i = 0; i < n; i++) {
        envlog_id128 id;
        ck_assert_ok(envlog_id_parse(names[i], &id));
        const rp_placed *last = NULL;
        for (size_t j = 0; j < k; j++)
            if (!memcmp(order->v[j].id.b, id.b, 16))
                last = &order->v[j];
        char *dir = rp_session_dir(dst, &id);
        if (!last) {
            tu_rmrf(dir);
            free(dir);
            continue;
        }
        char **segs;
        size_t ns = rp_list_dir(dir, &segs);
        for (size_t j = 0; j < ns; j++) {
            unsigned seg = (unsigned)strtoul(segs[j], NULL, 10);
            char *f;
            ck_assert_int_ge(asprintf(&f, "%s/%s", dir, segs[j]), 0);
            if (seg > last->segment)
                ck_assert_int_eq(unlink(f), 0);
            else if (seg == last->segment)
                tu_truncate(f, (off_t)last->file_end);
            free(f);
        }
        rp_free_names(segs, ns);
        free(dir);
    }
    rp_free_names(names, n);
    free(sdir);
    return dst;
}

static rp_renv until_env(void)
{
    rp_renv r = rp_renv_new("until");
    envlog_session *a = rp_sbegin(r.env, "a", 32768);
    envlog_session *b = rp_sbegin(r.env, "b", 0);
    for (int i = 0; i < 16; i++) {
        envlog_session *x = i % 3 ? a : b;
        switch (i % 5) {
        case 0: rp_rtune_full(x, NS_A, "k", SET_A, i % 3, true, i % 2); break;
        case 1: rp_rcompile(x, KNS_A, (uint8_t)(i % 2), ENVLOG_COMPILED, false, 1, 10); break;
        case 2: rp_rforget(x, ENVLOG_TABLE_TUNE, NS_A, "k", rp_csum(SET_A)); break;
        case 3: ck_assert_ok(tu_record_tune(x, "p", (unsigned)i, 12000, NULL)); break;
        default: {
            static const uint8_t body[] = {0x18, 0x2a};
            ck_assert_ok(envlog_record_user(x, "u", body, 2, ENVLOG_CHANGED, NULL));
        }
        }
        rp_nap_us(200);
    }
    rp_end(a);
    rp_end(b);
    return r;
}

START_TEST(test_until_stamp)
{
    rp_renv r = until_env();
    rp_placed_list all = rp_order_of(r.env, NULL);
    ck_assert_uint_ge(all.n, 18);
    for (size_t k = 1; k <= all.n; k++) {
        envlog_replay_opts o = {0};
        o.until_stamp = true;
        o.until_session = all.v[k - 1].id;
        o.until_seq = all.v[k - 1].seq;
        rp_placed_list part = rp_order_of(r.env, &o);
        ck_assert_uint_eq(part.n, k);
        rp_placed_free(&part);
        char *got = rp_dump_env(r.env, &o);
        char *copy = truncated_copy(r.dir, &all, k);
        envlog_env *e2 = tu_env(copy);
        char *want = rp_dump_env(e2, NULL);
        ck_assert_msg(!strcmp(got, want), "until record %zu:\n%s\nwant:\n%s", k, got, want);
        free(got);
        free(want);
        envlog_env_close(e2);
        tu_rmrf(copy);
        free(copy);
    }
    /* a stamp that is not in the history */
    envlog_replay_opts o = {0};
    o.until_stamp = true;
    o.until_session = all.v[0].id;
    o.until_seq = 9999;
    envlog_state *st;
    ck_assert_err(envlog_state_open(r.env, &o, &st), ENVLOG_NOT_FOUND);
    ck_assert_ptr_null(st);
    rp_placed_free(&all);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_until_time)
{
    rp_renv r = until_env();
    rp_placed_list all = rp_order_of(r.env, NULL);
    /* before anything: nothing */
    envlog_replay_opts o = {0};
    o.until_time = true;
    o.until_unix_ns = all.v[0].unix_ns - 1;
    char *d = rp_dump_env(r.env, &o);
    ck_assert_str_eq(d, "");
    free(d);
    for (size_t k = 1; k <= all.n; k++) {
        o.until_unix_ns = all.v[k - 1].unix_ns;
        size_t upto = k;
        while (upto < all.n && all.v[upto].unix_ns <= o.until_unix_ns)
            upto++;
        char *got = rp_dump_env(r.env, &o);
        char *copy = truncated_copy(r.dir, &all, upto);
        envlog_env *e2 = tu_env(copy);
        char *want = rp_dump_env(e2, NULL);
        ck_assert_msg(!strcmp(got, want), "until time of record %zu:\n%s\nwant:\n%s", k,
                      got, want);
        free(got);
        free(want);
        envlog_env_close(e2);
        tu_rmrf(copy);
        free(copy);
    }
    /* far in the future: everything */
    o.until_unix_ns = UINT64_MAX;
    char *a = rp_dump_env(r.env, &o), *b = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    rp_placed_free(&all);
    rp_renv_free(&r);
}
END_TEST

/* ----------------------------------------------------------------- damage */

/* Three sessions; the middle one spans several 32 KiB segments.  Returns
 * the big session's id and its records in order. */
typedef struct damage_env {
    rp_renv r;
    envlog_id128 big, other[2];
    rp_placed_list recs; /* the big session's records */
} damage_env;

static damage_env damage_env_new(void)
{
    damage_env d;
    d.r = rp_renv_new("damage");
    envlog_session *a = rp_sbegin(d.r.env, "a", 0);
    rp_rtune(a, NS_A, "a-key", 0);
    d.other[0] = envlog_session_id(a);
    rp_end(a);
    rp_settle();
    envlog_session *b = rp_sbegin(d.r.env, "big", 32768);
    for (unsigned i = 0; i < 24; i++)
        ck_assert_ok(tu_record_tune(b, "big", i, 4000, NULL));
    d.big = envlog_session_id(b);
    rp_end(b);
    rp_settle();
    envlog_session *c = rp_sbegin(d.r.env, "c", 0);
    rp_rtune(c, NS_A, "c-key", 1);
    rp_rcompile(c, KNS_A, 1, ENVLOG_COMPILED, false, 1, 32);
    d.other[1] = envlog_session_id(c);
    rp_end(c);
    rp_placed_list all = rp_order_of(d.r.env, NULL);
    d.recs = (rp_placed_list){0};
    for (size_t i = 0; i < all.n; i++)
        if (!memcmp(all.v[i].id.b, d.big.b, 16)) {
            d.recs.v = realloc(d.recs.v, (d.recs.n + 1) * sizeof *d.recs.v);
            d.recs.v[d.recs.n] = all.v[i];
            d.recs.v[d.recs.n++].payload = NULL;
        }
    rp_placed_free(&all);
    ck_assert_uint_eq(d.recs.n, 25);
    ck_assert_uint_ge(d.recs.v[d.recs.n - 1].segment, 2);
    return d;
}

static void damage_env_free(damage_env *d)
{
    free(d->recs.v);
    rp_renv_free(&d->r);
}

static bool has_big(envlog_state *st, unsigned i)
{
    char key[32];
    snprintf(key, sizeof key, "big-%u", i);
    static const char *const c3[] = {"a", "b", "c"};
    envlog_tune_entry e;
    return envlog_state_winner(st, "autotune/test/1/dev", key,
                               envlog_tune_checksum(c3, 3), &e) == ENVLOG_OK;
}

static void others_whole(envlog_state *st)
{
    rp_winner(st, NS_A, "a-key");
    rp_winner(st, NS_A, "c-key");
    rp_kernel(st, KNS_A, 1);
}

START_TEST(test_damage_torn_tail)
{
    damage_env d = damage_env_new();
    const rp_placed *last = &d.recs.v[d.recs.n - 1];
    char *seg = rp_segment_file(d.r.dir, &d.big, last->segment);
    tu_truncate(seg, (off_t)(last->file_offset + (last->file_end - last->file_offset) / 2));
    rp_dmg_list dl = {0};
    envlog_replay_opts o = {.on_damage = rp_on_dmg, .ctx = &dl};
    envlog_state *st = rp_sopen(d.r.env, &o);
    ck_assert_uint_eq(dl.n, 1);
    ck_assert(dl.torn[0]);
    ck_assert(!memcmp(dl.d[0].session.b, d.big.b, 16));
    ck_assert_uint_eq(dl.d[0].segment, last->segment);
    ck_assert_uint_eq(dl.d[0].offset, last->file_offset);
    ck_assert_uint_eq(dl.d[0].bytes, (last->file_end - last->file_offset) / 2);
    ck_assert_uint_eq(rp_stats(st).damaged, 1);
    /* the cut record (big-23) is lost; everything before it is used */
    for (unsigned i = 0; i < 23; i++)
        ck_assert_msg(has_big(st, i), "big-%u lost", i);
    ck_assert(!has_big(st, 23));
    others_whole(st);
    envlog_state_close(st);
    /* replay_each: the same records, damage reported, no error */
    dl.n = 0;
    rp_placed_list l = rp_order_of(d.r.env, &o);
    ck_assert_uint_eq(dl.n, 1);
    ck_assert_uint_eq(l.n, 2 + 24 + 3);
    rp_placed_free(&l);
    free(seg);
    damage_env_free(&d);
}
END_TEST

START_TEST(test_damage_corrupt_segment)
{
    damage_env d = damage_env_new();
    /* a record in the middle of segment 1 */
    const rp_placed *mid = NULL;
    size_t n1 = 0, k = 0;
    for (size_t i = 0; i < d.recs.n; i++)
        n1 += d.recs.v[i].segment == 1;
    ck_assert_uint_ge(n1, 3);
    for (size_t i = 0; i < d.recs.n; i++)
        if (d.recs.v[i].segment == 1 && k++ == n1 / 2)
            mid = &d.recs.v[i];
    char *seg = rp_segment_file(d.r.dir, &d.big, 1);
    size_t len;
    uint8_t *p = tu_read(seg, &len);
    p[mid->file_offset + (mid->file_end - mid->file_offset) / 2] ^= 0x20;
    tu_write(seg, p, len);
    free(p);
    rp_dmg_list dl = {0};
    envlog_replay_opts o = {.on_damage = rp_on_dmg, .ctx = &dl};
    envlog_state *st = rp_sopen(d.r.env, &o);
    ck_assert_uint_ge(dl.n, 1);
    ck_assert(!dl.torn[0]);
    ck_assert(!memcmp(dl.d[0].session.b, d.big.b, 16));
    ck_assert_uint_eq(dl.d[0].segment, 1);
    ck_assert_uint_eq(dl.d[0].offset, mid->file_offset);
    ck_assert_uint_gt(dl.d[0].bytes, 0);
    for (size_t i = 0; i < dl.n && i < 32; i++)
        ck_assert(!memcmp(dl.d[i].session.b, d.big.b, 16));
    ck_assert_uint_eq(rp_stats(st).damaged, dl.n);
    /* Records before the damage are used, and so are those in the segment
     * after it: reading resumes. */
    unsigned mid_i = (unsigned)(mid->seq - 1);
    for (unsigned i = 0; i < mid_i; i++)
        ck_assert_msg(has_big(st, i), "big-%u lost", i);
    ck_assert(!has_big(st, mid_i));
    for (size_t i = 0; i < d.recs.n; i++)
        if (d.recs.v[i].segment >= 2)
            ck_assert_msg(has_big(st, (unsigned)(d.recs.v[i].seq - 1)), "big-%llu lost",
                          (unsigned long long)d.recs.v[i].seq - 1);
    others_whole(st);
    envlog_state_close(st);
    free(seg);
    damage_env_free(&d);
}
END_TEST

START_TEST(test_damage_missing_segment)
{
    damage_env d = damage_env_new();
    char *seg = rp_segment_file(d.r.dir, &d.big, 1);
    ck_assert_int_eq(unlink(seg), 0);
    rp_dmg_list dl = {0};
    envlog_replay_opts o = {.on_damage = rp_on_dmg, .ctx = &dl};
    envlog_state *st = rp_sopen(d.r.env, &o);
    ck_assert_uint_ge(dl.n, 1);
    ck_assert(!memcmp(dl.d[0].session.b, d.big.b, 16));
    ck_assert_uint_eq(dl.d[0].segment, 2);
    ck_assert_uint_eq(dl.d[0].offset, 0);
    for (size_t i = 0; i < d.recs.n; i++) {
        unsigned k = (unsigned)(d.recs.v[i].seq - 1);
        if (!d.recs.v[i].seq)
            continue;
        ck_assert_msg(has_big(st, k) == (d.recs.v[i].segment != 1), "big-%u", k);
    }
    others_whole(st);
    envlog_state_close(st);
    free(seg);
    damage_env_free(&d);
}
END_TEST

START_TEST(test_damage_unreadable_session)
{
    /* A session directory that is a symbolic link is refused, reported,
     * and the others fold. */
    damage_env d = damage_env_new();
    char *dir = rp_session_dir(d.r.dir, &d.big), *moved;
    ck_assert_int_ge(asprintf(&moved, "%s/elsewhere", d.r.dir), 0);
    ck_assert_int_eq(rename(dir, moved), 0);
    ck_assert_int_eq(symlink(moved, dir), 0);
    rp_dmg_list dl = {0};
    envlog_replay_opts o = {.on_damage = rp_on_dmg, .ctx = &dl};
    envlog_state *st = rp_sopen(d.r.env, &o);
    ck_assert_uint_eq(dl.n, 1);
    ck_assert(!memcmp(dl.d[0].session.b, d.big.b, 16));
    ck_assert(!has_big(st, 0));
    others_whole(st);
    envlog_state_close(st);
    free(dir);
    free(moved);
    damage_env_free(&d);
}
END_TEST

/* ----------------------------------------------------------------- faults */

START_TEST(test_state_open_alloc_faults)
{
    rp_renv r = rp_renv_new("allocfault");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    rp_rtune(s, NS_A, "k", 0);
    rp_rtune_full(s, NS_A, "i", SET_A, 0, true, true);
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 1, 64);
    static const uint8_t body[] = {0x01};
    ck_assert_ok(envlog_record_user(s, "u", body, 1, ENVLOG_CHANGED, NULL));
    rp_rforget(s, ENVLOG_TABLE_TUNE, NS_A, "i", rp_csum(SET_A));
    rp_end(s);
    char *ref = rp_dump_env(r.env, NULL);
    long n;
    for (n = 1; n < 100000; n++) {
        envlog_state *st = (envlog_state *)&n; /* must be reset on failure */
        envlog_alloc_fail_after(n);
        envlog_err e = envlog_state_open(r.env, NULL, &st);
        long made = envlog_alloc_fail_reset();
        if (e == ENVLOG_OK) {
            ck_assert_msg(made < n, "succeeded though allocation %ld failed", n);
            char *d = rp_dump_of(st);
            ck_assert_str_eq(d, ref);
            free(d);
            envlog_state_close(st);
            break;
        }
        ck_assert_err(e, ENVLOG_NOMEM);
        ck_assert_ptr_null(st);
    }
    ck_assert_int_gt(n, 1);
    ck_assert_int_lt(n, 100000);
    free(ref);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_state_open_read_faults)
{
    rp_renv r = rp_renv_new("readfault");
    for (int k = 0; k < 2; k++) {
        envlog_session *s = rp_sbegin(r.env, "one", 32768);
        for (unsigned i = 0; i < 8; i++)
            ck_assert_ok(tu_record_tune(s, k ? "x" : "y", i, 6000, NULL));
        rp_end(s);
    }
    char *ref = rp_dump_env(r.env, NULL);
    static const tu_call calls[] = {TU_PREAD, TU_OPENAT, TU_FSTAT};
    for (size_t c = 0; c < 3; c++) {
        long n;
        for (n = 1; n < 10000; n++) {
            envlog_state *st = NULL;
            tu_fault_arm(calls[c], n, EIO);
            envlog_err e = envlog_state_open(r.env, NULL, &st);
            bool fired = tu_fault_disarm();
            if (!fired) {
                ck_assert_ok(e);
                char *d = rp_dump_of(st);
                ck_assert_str_eq(d, ref);
                free(d);
                envlog_state_close(st);
                break;
            }
            /* A failed call is an error, never a quietly smaller state
             * (a call that only sizes the progress bar may fail quietly). */
            if (e == ENVLOG_OK) {
                char *d = rp_dump_of(st);
                ck_assert_msg(!strcmp(d, ref), "%s call %ld: a smaller state",
                              tu_call_names[calls[c]], n);
                free(d);
                envlog_state_close(st);
                continue;
            }
            ck_assert_msg(e == ENVLOG_IO, "%s call %ld: got %s", tu_call_names[calls[c]], n,
                          envlog_strerror(e));
            ck_assert_ptr_null(st);
        }
        ck_assert_int_gt(n, 1);
    }
    free(ref);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ suite */

Suite *suite_replay(void)
{
    Suite *s = suite_create("replay");
    TCase *t = tcase_create("fold");
    tcase_add_test(t, test_first_local_stands);
    tcase_add_test(t, test_local_replaces_imported);
    tcase_add_test(t, test_imported_never_replaces);
    tcase_add_test(t, test_forget_removes_one);
    tcase_add_test(t, test_not_stored_makes_no_entry);
    tcase_add_test(t, test_kernel_rules);
    tcase_add_test(t, test_tables_apart);
    tcase_add_test(t, test_user_records_dump);
    tcase_add_test(t, test_dump_canonical);
    tcase_add_loop_test(t, test_mixed_against_model, 0, 3);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);

    t = tcase_create("live");
    tcase_add_test(t, test_live_sees_own_records);
    tcase_add_test(t, test_live_folds_history_first);
    tcase_add_test(t, test_live_level_off);
    suite_add_tcase(s, t);

    t = tcase_create("explain");
    tcase_add_test(t, test_explain_checksum);
    tcase_add_test(t, test_explain_namespace);
    tcase_add_test(t, test_explain_kernel);
    suite_add_tcase(s, t);

    t = tcase_create("order");
    tcase_add_test(t, test_order_cmp);
    tcase_add_test(t, test_total_order);
    tcase_add_test(t, test_listing_order_irrelevant);
    tcase_add_test(t, test_until_stamp);
    tcase_add_test(t, test_until_time);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);

    t = tcase_create("damage");
    tcase_add_test(t, test_damage_torn_tail);
    tcase_add_test(t, test_damage_corrupt_segment);
    tcase_add_test(t, test_damage_missing_segment);
    tcase_add_test(t, test_damage_unreadable_session);
    suite_add_tcase(s, t);

    t = tcase_create("faults");
    tcase_add_test(t, test_state_open_alloc_faults);
    tcase_add_test(t, test_state_open_read_faults);
    tcase_set_timeout(t, 120);
    suite_add_tcase(s, t);
    return s;
}
