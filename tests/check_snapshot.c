/* SPDX-License-Identifier: MIT */
/*
 * check_snapshot.c - the snapshot suite: compaction keeps the replayed
 * state (at every evidence level, again and again, beside a live writer,
 * with every I/O call failing in turn and with the process killed after
 * every I/O call), lookups through a snapshot's index, bundles (round trip,
 * namespace filters, import twice, local after import, stale entries,
 * import from memory) and hostile bundles that must import nothing.
 */
#include "build_int.h"
#include "replay_int.h"
#include "snap_int.h"
#include "suites.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "check_snapshot.h"

#define NS1 "autotune/rt/1.0/sm_90"
#define NS2 "autotune/rt/1.0/sm_80"
#define KNS "nvrtc/13.0/sm_90"

static const char *const CANDS[] = {"tile16", "tile32", "tile64"};

static envlog_session *begin(envlog_env *env, const char *label)
{
    envlog_session_opts o = tu_opts(label, 0);
    o.level = ENVLOG_LEVEL_FULL;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    return s;
}

static void tune(envlog_session *s, const char *ns, const char *key, int winner,
                 bool stored, bool imported)
{
    envlog_trial tr[3];
    for (int i = 0; i < 3; i++)
        tr[i] = (envlog_trial){.name = CANDS[i], .index = (uint32_t)i, .samples = 5,
                               .min_ns = 100.0 + 10 * i, .median_ns = 110.0 + 10 * i,
                               .mean_ns = 111.0 + 10 * i, .max_ns = 130.0 + 10 * i,
                               .stddev_ns = 2};
    envlog_tune t = {.ns = ns, .key = key, .checksum = envlog_tune_checksum(CANDS, 3),
                     .candidates = CANDS, .n_candidates = 3, .trials = tr, .n_trials = 3,
                     .policy = "median", .winner = winner, .margin = 0.09,
                     .wall_ns = 1000, .stored = stored};
    ck_assert_ok(imported ? envlog_record_imported(s, ENVLOG_KIND_TUNE, &t, NULL)
                          : envlog_record_tune(s, &t, NULL));
}

static void compile(envlog_session *s, const char *name, uint8_t tag)
{
    uint8_t bin[300];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (uint8_t)(i * tag + 7);
    envlog_compile c = {.ns = KNS, .name = name, .options = "-O3",
                        .compiler_version = "13.0", .arch = "sm_90",
                        .outcome = ENVLOG_COMPILED, .duration_ns = 5,
                        .binary_hash = envlog_hash128_bytes(bin, sizeof bin),
                        .binary_size = sizeof bin, .binary = {bin, sizeof bin},
                        .source = "__global__ void k() {}"};
    c.kernel_key = envlog_hash128_bytes(name, strlen(name));
    ck_assert_ok(envlog_record_compile(s, &c, NULL));
}

static void forget_tune(envlog_session *s, const char *ns, const char *key)
{
    envlog_forget f = {ENVLOG_TABLE_TUNE, ns, key, envlog_tune_checksum(CANDS, 3), "test", NULL};
    ck_assert_ok(envlog_record_forget(s, &f, NULL));
}

/* A history with every rule in it: first local stands, a later local loses,
 * an unstored pick, an import replaced by a local value, a forget, kernels
 * and a user record. */
static void populate(envlog_env *env, int round)
{
    char key[64];
    envlog_session *s = begin(env, "populate");
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "k%d-%d", round, i);
        tune(s, NS1, key, i % 3, true, false);
    }
    snprintf(key, sizeof key, "k%d-0", round);
    tune(s, NS1, key, 2, true, false); /* loses to the first */
    snprintf(key, sizeof key, "k%d-u", round);
    tune(s, NS1, key, 1, false, false); /* not stored */
    snprintf(key, sizeof key, "k%d-i", round);
    tune(s, NS2, key, 0, true, true); /* imported ... */
    tune(s, NS2, key, 1, true, false); /* ... replaced by a local value */
    snprintf(key, sizeof key, "k%d-1", round);
    forget_tune(s, NS1, key);
    snprintf(key, sizeof key, "kern%d", round);
    compile(s, key, (uint8_t)(round + 3));
    uint8_t body[] = {0xa1, 0x61, 'r', (uint8_t)round}; /* {"r": round} */
    ck_assert_ok(envlog_record_user(s, "note", body, sizeof body, ENVLOG_CHANGED, NULL));
    ck_assert_ok(envlog_session_end(s));
}

static envlog_err mem_write(void *ctx, const char *text, size_t len)
{
    return envlog_buf_append(ctx, text, len);
}

/* The canonical dump of a fresh fold of `dir`, standing on snapshot/`base`
 * (NULL: the generation readers pick). */
static char *dump_state(const char *dir, const char *base)
{
    envlog_env *env;
    ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
    envlog_state *st;
    ck_assert_ok(envlog_state_open_on(env, NULL, base, &st));
    envlog_buf b = {0};
    ck_assert_ok(envlog_state_dump(st, mem_write, &b));
    envlog_buf_append(&b, "", 1);
    envlog_state_close(st);
    envlog_env_close(env);
    return (char *)b.p;
}

static char *dump_dir(const char *dir)
{
    return dump_state(dir, NULL);
}

/* The dump of `dir` standing on snapshot/`base` (and the sessions), or NULL
 * when that generation is not there. */
static char *dump_on(const char *dir, const char *base)
{
    if (!tu_exists(tu_path(dir, tu_path("snapshot", base))))
        return NULL;
    return dump_state(dir, base);
}

/* Either generation, with the sessions kept beside it, gives `want`. */
static void generations_agree(const char *dir, const char *want, const char *when)
{
    static const char *const gens[] = {"current", "previous"};
    for (int i = 0; i < 2; i++) {
        char *got = dump_on(dir, gens[i]);
        ck_assert_msg(!got || !strcmp(want, got), "%s: snapshot/%s and the sessions give "
                      "another state", when, gens[i]);
        free(got);
    }
}

/* For the other file of the suite (check_snapshot_trust.c). */
void sn_populate(envlog_env *env, int round) { populate(env, round); }
char *sn_dump(const char *dir, const char *base) { return dump_state(dir, base); }

/* A snapshot of one session under a session of new history. */
static envlog_env *layered_env(const char *name, char **dir)
{
    *dir = tu_mkdtemp(name);
    envlog_env *env = tu_env(*dir);
    populate(env, 0);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_ALL, NULL));
    populate(env, 1);
    return env;
}

/* Session directories (and leftovers of any kind) under sessions/. */
static size_t count_sessions(const char *dir)
{
    DIR *d = opendir(tu_path(dir, "sessions"));
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* ----------------------------------------------------------- compaction */

START_TEST(test_compact_keeps_state)
{
    static const envlog_evidence levels[] = {ENVLOG_EVIDENCE_NONE, ENVLOG_EVIDENCE_WINNERS,
                                             ENVLOG_EVIDENCE_ALL};
    char *dir = tu_mkdtemp("compact");
    envlog_env *env = tu_env(dir);
    populate(env, 0);
    char *before = dump_dir(dir);
    ck_assert_ptr_nonnull(strstr(before, "\"k0-0\""));
    ck_assert_ptr_null(strstr(before, "\"k0-1\"")); /* forgotten */
    envlog_compact_report r;
    ck_assert_ok(envlog_compact(env, levels[_i], &r));
    /* The session stays until a generation kept as previous covers it: the
     * first compaction keeps an empty one. */
    ck_assert_uint_eq(r.sessions_removed, 0);
    ck_assert_uint_eq(r.sessions_kept, 1);
    ck_assert_uint_eq(count_sessions(dir), 1);
    ck_assert(tu_exists(tu_path(dir, "snapshot/current")));
    ck_assert(tu_exists(tu_path(dir, "snapshot/previous")));
    char *after = dump_dir(dir);
    ck_assert_str_eq(before, after);
    /* More history on top of the snapshot, then compact again: now the
     * first session goes (previous covers it), the second stays. */
    populate(env, 1);
    char *layered = dump_dir(dir);
    ck_assert_ptr_nonnull(strstr(layered, "\"k1-0\""));
    ck_assert_ok(envlog_compact(env, levels[_i], &r));
    ck_assert_uint_eq(r.sessions_removed, 1);
    ck_assert_uint_eq(r.sessions_kept, 1);
    ck_assert_uint_eq(count_sessions(dir), 1);
    char *again = dump_dir(dir);
    ck_assert_str_eq(layered, again);
    /* And the generation before, with the session it does not cover, is
     * the same state: losing current loses nothing. */
    ck_assert_int_eq(rename(tu_path(dir, "snapshot/current"), tu_path(dir, "cur.aside")), 0);
    char *fallback = dump_dir(dir);
    ck_assert_str_eq(layered, fallback);
    free(fallback);
    ck_assert_int_eq(rename(tu_path(dir, "cur.aside"), tu_path(dir, "snapshot/current")), 0);
    /* The live state of a handle sees the snapshot and its own records. */
    envlog_state *live;
    ck_assert_ok(envlog_env_state(env, &live));
    envlog_tune_entry te;
    ck_assert_ok(envlog_state_winner(live, NS1, "k0-2", envlog_tune_checksum(CANDS, 3), &te));
    ck_assert_str_eq(te.winner, "tile64");
    ck_assert_err(envlog_state_winner(live, NS1, "k0-1", envlog_tune_checksum(CANDS, 3), &te),
                  ENVLOG_NOT_FOUND);
    /* A miss the snapshot answered is kept; asking again, with any checksum
     * (0 included), finds that known miss and still misses. */
    for (int i = 0; i < 2; i++) {
        ck_assert_err(envlog_state_winner(live, NS1, "no-such-key", 0, &te), ENVLOG_NOT_FOUND);
        envlog_kernel_entry ke;
        envlog_hash128 kk = {{0}};
        ck_assert_err(envlog_state_kernel(live, NS1, &kk, &ke), ENVLOG_NOT_FOUND);
    }
    envlog_session *s = begin(env, "after");
    forget_tune(s, NS1, "k0-2");
    ck_assert_ok(envlog_session_end(s));
    ck_assert_err(envlog_state_winner(live, NS1, "k0-2", envlog_tune_checksum(CANDS, 3), &te),
                  ENVLOG_NOT_FOUND);
    char *forgot = dump_dir(dir);
    ck_assert_ptr_null(strstr(forgot, "\"k0-2\""));
    free(before);
    free(after);
    free(layered);
    free(again);
    free(forgot);
    envlog_env_close(env);
    free(dir);
}
END_TEST

/* A session being retired never reads as live: at the rename that retires
 * it, a reader's look (LOCK_SH|LOCK_NB, envlog(5)) succeeds, and a reader
 * of another handle finds it in a state a dead writer leaves. */
static envlog_env *retire_peer;
static int retire_seen, retire_live, retire_live_state;

static int retire_renameat(int a, const char *from, int b, const char *to)
{
    size_t n = strlen(to);
    if (n > 9 && !strcmp(to + n - 9, ".removing")) {
        retire_seen++;
        int fd = openat(a, from, O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            if (flock(fd, LOCK_SH | LOCK_NB))
                retire_live++;
            else
                flock(fd, LOCK_UN);
            close(fd);
        }
        envlog_id128 id;
        envlog_reader *r;
        if (!envlog_id_parse(from, &id) && !envlog_reader_open(retire_peer, &id, &r)) {
            const envlog_record *rec;
            while (envlog_reader_next(r, &rec) == ENVLOG_OK)
                ;
            retire_live_state += envlog_reader_state(r) == ENVLOG_STATE_LIVE;
            envlog_reader_close(r);
        }
    }
    return envlog_io_posix()->renameat(a, from, b, to);
}

START_TEST(test_retire_never_live)
{
    char *dir;
    envlog_env *env = layered_env("retire", &dir);
    ck_assert_ok(envlog_env_open(dir, 0, &retire_peer));
    static envlog_io io;
    io = *envlog_io_posix();
    io.renameat = retire_renameat;
    retire_seen = retire_live = retire_live_state = 0;
    envlog_io_set(&io);
    envlog_compact_report r;
    envlog_err e = envlog_compact(env, ENVLOG_EVIDENCE_ALL, &r);
    envlog_io_set(NULL);
    ck_assert_ok(e);
    ck_assert_uint_eq(r.sessions_removed, 1);
    ck_assert_int_eq(retire_seen, 1);
    ck_assert_int_eq(retire_live, 0);
    ck_assert_int_eq(retire_live_state, 0);
    envlog_env_close(retire_peer);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* snapshot/current of layered_env(), read whole, and the end of it. */
static envlog_snap *layered_current(const char *name, envlog_env **env, char **dir)
{
    *env = layered_env(name, dir);
    envlog_snap *snap;
    ck_assert_ok(envlog_snap_map_file(*env, "current", true, &snap));
    return snap;
}

static void layered_done(envlog_snap *snap, envlog_env *env, char *dir)
{
    envlog_snap_free(snap);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}

/* A walk for the fold reads each record's own map and skips its detail
 * (the trials, the policy); a full walk reads both; both hand out the same
 * records, checked the same way. */
START_TEST(test_fold_walk_skips_detail)
{
    char *dir;
    envlog_env *env;
    envlog_snap *snap = layered_current("foldwalk", &env, &dir);
    size_t n[2] = {0, 0}, trials[2] = {0, 0}, policies[2] = {0, 0};
    envlog_stamp last[2][64];
    for (int fold = 0; fold < 2; fold++) {
        (fold ? envlog_snap_rewind_fold : envlog_snap_rewind)(snap);
        envlog_snap_item it;
        envlog_record rec;
        envlog_err e;
        while (!(e = envlog_snap_next(snap, &it, &rec))) {
            ck_assert_uint_lt(n[fold], 64);
            last[fold][n[fold]++] = it.stamp;
            if (rec.kind == ENVLOG_KIND_TUNE) {
                trials[fold] += rec.u.tune.n_trials;
                policies[fold] += rec.u.tune.policy != NULL;
            }
        }
        ck_assert_err(e, ENVLOG_END);
    }
    ck_assert_uint_gt(n[0], 8);
    ck_assert_uint_eq(n[0], n[1]);
    for (size_t i = 0; i < n[0]; i++)
        ck_assert(last[0][i].seq == last[1][i].seq &&
                  !memcmp(last[0][i].session.b, last[1][i].session.b, 16));
    ck_assert_uint_gt(trials[0], 0);
    ck_assert_uint_gt(policies[0], 0);
    ck_assert_uint_eq(trials[1], 0);
    ck_assert_uint_eq(policies[1], 0);
    ck_assert_uint_eq(envlog_snap_bad_records(snap), 0);
    layered_done(snap, env, dir);
}
END_TEST

/* A build encodes its entries without walking their records again
 * (envlog_struct_encode_trusted): the same bytes as the checked encoder,
 * and a record that is not a map is still refused. */
START_TEST(test_trusted_item_encoding)
{
    char *dir;
    envlog_env *env;
    envlog_snap *snap = layered_current("trusted", &env, &dir);
    envlog_snap_rewind(snap);
    envlog_snap_item it;
    envlog_record rec;
    size_t n = 0;
    envlog_buf a = {0}, b = {0};
    while (!envlog_snap_next(snap, &it, &rec)) {
        ck_assert_ok(envlog_struct_encode(&a, &envlog_snap_item_schema, &it, ENVLOG_LEVEL_FULL));
        ck_assert_ok(envlog_struct_encode_trusted(&b, &envlog_snap_item_schema, &it,
                                                  ENVLOG_LEVEL_FULL));
        n++;
    }
    ck_assert_uint_gt(n, 8);
    ck_assert_uint_eq(a.len, b.len);
    ck_assert(!memcmp(a.p, b.p, a.len));
    it.record = (envlog_bytes){(const uint8_t *)"\x01", 1};
    b.len = 0;
    ck_assert_err(envlog_struct_encode_trusted(&b, &envlog_snap_item_schema, &it,
                                               ENVLOG_LEVEL_FULL),
                  ENVLOG_INVALID_ARG);
    envlog_buf_free(&a);
    envlog_buf_free(&b);
    layered_done(snap, env, dir);
}
END_TEST

/* A snapshot whose INDEX spans several blocks (pairs straddle block
 * boundaries): every key is found through it, in place, with its winner;
 * keys it does not hold miss.  Checked on the fresh state of a new handle
 * (the index read lazily) and by a full fold's dump. */
#define MANY 5000

static void many_tunes(envlog_env *env)
{
    envlog_session_opts o = tu_opts("many", 0);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    for (int i = 0; i < MANY; i++) {
        char key[32];
        snprintf(key, sizeof key, "many-%d", i);
        tune(s, NS1, key, i % 3, true, false);
    }
    ck_assert_ok(envlog_session_end(s));
}

START_TEST(test_index_in_place)
{
    char *dir = tu_mkdtemp("index");
    envlog_env *env = tu_env(dir);
    many_tunes(env);
    char *before = dump_dir(dir);
    envlog_compact_report r;
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, &r));
    ck_assert_uint_eq(r.entries, MANY);
    envlog_env_close(env);
    ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
    envlog_state *st;
    ck_assert_ok(envlog_state_open(env, NULL, &st));
    uint64_t sum = envlog_tune_checksum(CANDS, 3);
    envlog_tune_entry te;
    /* Mostly misses first: lookups then skip the unchecked search, and
     * the checked one alone answers the hits after them. */
    for (int i = 0; i < 40; i++) {
        char key[32];
        snprintf(key, sizeof key, "none-%d", i);
        ck_assert_err(envlog_state_winner(st, NS1, key, sum, &te), ENVLOG_NOT_FOUND);
    }
    for (int i = MANY - 1; i >= 0; i -= 3) {
        char key[32];
        snprintf(key, sizeof key, "many-%d", i);
        ck_assert_ok(envlog_state_winner(st, NS1, key, sum, &te));
        ck_assert_str_eq(te.winner, CANDS[i % 3]);
        ck_assert_str_eq(te.key, key);
    }
    ck_assert_err(envlog_state_winner(st, NS1, "many-x", sum, &te), ENVLOG_NOT_FOUND);
    ck_assert_err(envlog_state_winner(st, NS2, "many-1", sum, &te), ENVLOG_NOT_FOUND);
    ck_assert_err(envlog_state_winner(st, NS1, "many-1", sum + 1, &te), ENVLOG_NOT_FOUND);
    envlog_state_close(st);
    envlog_env_close(env);
    char *after = dump_dir(dir);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    free(dir);
}
END_TEST

/* A lookup's first search reads the INDEX bytes around a guess made from
 * the key's hash, then around a guess made from the pairs that read held,
 * and answers from the ENTRY it finds; only when it cannot does the checked
 * search run.  Snapshots of MANY keys (the INDEX three blocks, pairs
 * straddling their headers), the reads counted through the I/O table:
 *  - keys whose hashes spread as hashes do: every key is answered by the
 *    first search, from one INDEX read and the ENTRY's;
 *  - half the keys whose hash falls in the second quarter of the hash
 *    space left out: the first guess is hundreds of pairs off, and every
 *    key is still answered by the first search, in later rounds;
 *  - three keys in four in the lowest eighth: the rounds run out for
 *    many keys, and the checked search finds them.
 * And a snapshot of WIDE keys, past the size where the first read is a
 * short probe that places the second: every key looked up is answered by
 * the first search, in two INDEX reads most of the time.  In each, every
 * key comes back with its own winner and an absent key misses, with no
 * damage counted. */
#define WIDE 270000
typedef enum { SPREAD_EVEN, SPREAD_HOLE, SPREAD_HEAP } key_spread;

static bool spread_keeps(key_spread how, uint64_t h, int i, int kept)
{
    if (how == SPREAD_HOLE)
        return h >> 62 != 1 || i % 2 == 0;
    if (how == SPREAD_HEAP)
        return h >> 61 == 0 || kept % 4 == 0;
    return true;
}

/* Records `n` keys spread as `how` says, compacts them and looks every
 * `every`th up; the reads that took, and (*first) how many lookups the
 * first search answered, of (*asked). */
static long first_search_reads(key_spread how, int n, int every, uint64_t *first,
                               uint64_t *asked)
{
    char *dir = tu_mkdtemp("first");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("first", 0);
    envlog_session *ss;
    char (*keys)[32] = malloc((size_t)n * sizeof *keys);
    uint64_t sum = envlog_tune_checksum(CANDS, 3);
    envlog_config cfg; /* the compaction below is the one that runs */
    envlog_config_defaults(&cfg);
    cfg.auto_compact = false;
    ck_assert_ok(envlog_config_write(env, &cfg));
    ck_assert_ptr_nonnull(keys);
    ck_assert_ok(envlog_session_begin(env, &o, &ss));
    for (int i = 0, kept = 0; kept < n; i++) {
        snprintf(keys[kept], sizeof keys[kept], "first-%d", i);
        uint64_t h = envlog_entry_key_hash(ENVLOG_TABLE_TUNE, NS1, keys[kept],
                                           strlen(keys[kept]), sum);
        if (spread_keeps(how, h, i, kept))
            tune(ss, NS1, keys[kept], kept % 3, true, false), kept++;
    }
    ck_assert_ok(envlog_session_end(ss));
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL));
    envlog_env_close(env);
    envlog_snap *s;
    envlog_snap_item it;
    envlog_record rec;
    ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
    ck_assert_ok(envlog_snap_map_file(env, "current", false, &s));
    ck_assert_ptr_nonnull(s);
    *asked = 0;
    tu_fault_arm(TU_PREAD, 0, 0);
    for (int i = 0; i < n; i += every, (*asked)++) {
        envlog_err e = envlog_snap_find(s, ENVLOG_TABLE_TUNE, NS1, keys[i], NULL, sum, &it, &rec);
        ck_assert_msg(e == ENVLOG_OK, "%s: %s (%s)", keys[i], envlog_strerror(e),
                      envlog_errmsg());
        ck_assert_str_eq(rec.u.tune.key, keys[i]);
        ck_assert_str_eq(rec.u.tune.candidates[rec.u.tune.winner], CANDS[i % 3]);
    }
    long reads = tu_fault_calls(TU_PREAD);
    tu_fault_disarm();
    *first = s->first_found;
    ck_assert_err(envlog_snap_find(s, ENVLOG_TABLE_TUNE, NS1, "absent", NULL, sum, &it, &rec),
                  ENVLOG_NOT_FOUND);
    ck_assert_uint_eq(s->lookup_bad, 0);
    envlog_snap_free(s);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(keys);
    free(dir);
    return reads;
}

START_TEST(test_first_search)
{
    uint64_t first, asked;
    long even = first_search_reads(SPREAD_EVEN, MANY, 1, &first, &asked);
    ck_assert_uint_eq(first, MANY);
    /* One INDEX read and one ENTRY read a key, but for entries that cross
     * a block's end. */
    ck_assert_int_lt(even, 2 * MANY + MANY / 50);
    long hole = first_search_reads(SPREAD_HOLE, MANY, 1, &first, &asked);
    ck_assert_uint_eq(first, MANY);
    ck_assert_int_gt(hole, even + MANY / 4);
    first_search_reads(SPREAD_HEAP, MANY, 1, &first, &asked);
    ck_assert_uint_lt(first, MANY);
    /* The probe and the read it places, then the ENTRY: three reads a key
     * but for the few the probe finds (a first read of RAW_FIRST bytes
     * finds half of them here, 2.5 reads a key) and the few that take a
     * third round. */
    long wide = first_search_reads(SPREAD_EVEN, WIDE, 97, &first, &asked);
    ck_assert_uint_eq(first, asked);
    ck_assert_int_gt(4 * wide, 11 * (long)asked);
    ck_assert_int_lt(5 * wide, 16 * (long)asked);
}
END_TEST


/* INDEX pairs of the snapshot at `path` that point at the zero bytes
 * ending the block before their record's first fragment. */
static uint64_t pairs_in_zero_tails(const char *path)
{
    size_t n;
    uint8_t *raw = tu_read(path, &n);
    envlog_snap *s;
    ck_assert_ok(envlog_snap_load(raw, n, true, &s));
    uint64_t hits = 0;
    for (uint64_t i = 0; i < s->n_index; i++) {
        uint64_t off = envlog_get_be64(s->index.p + 16 * i + 8);
        hits += ENVLOG_BLOCK - off % ENVLOG_BLOCK < ENVLOG_FRAG_HDR;
    }
    envlog_snap_free(s);
    free(raw);
    return hits;
}

/* Where fewer bytes than a fragment header's are left in a block, the
 * next record starts in the next block and its INDEX pair may point at
 * the zero bytes before it: a lookup by pread finds it all the same.  Tune
 * keys of every length up to 40 are recorded, round after round, until the
 * snapshot has such pairs; then every key is looked up from a cold open. */
START_TEST(test_lookup_across_zero_tail)
{
    char *dir = tu_mkdtemp("zerotail");
    envlog_env *env = tu_env(dir);
    char key[64];
    int keys = 0;
    uint64_t tails = 0;
    for (int round = 0; round < 20 && !tails; round++) {
        envlog_session_opts o = tu_opts("zero-tail", 0);
        envlog_session *s;
        ck_assert_ok(envlog_session_begin(env, &o, &s));
        for (int i = 0; i < 500; i++, keys++) {
            snprintf(key, sizeof key, "zt-%d-%.*s", keys, keys % 41,
                     "0123456789012345678901234567890123456789");
            tune(s, NS1, key, keys % 3, true, false);
        }
        ck_assert_ok(envlog_session_end(s));
        ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL));
        tails = pairs_in_zero_tails(tu_path(dir, "snapshot/current"));
    }
    ck_assert_uint_gt(tails, 0);
    envlog_env_close(env);
    ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
    envlog_state *st;
    ck_assert_ok(envlog_state_open(env, NULL, &st));
    uint64_t sum = envlog_tune_checksum(CANDS, 3);
    envlog_tune_entry te;
    for (int i = 0; i < keys; i++) {
        snprintf(key, sizeof key, "zt-%d-%.*s", i, i % 41,
                 "0123456789012345678901234567890123456789");
        envlog_err e = envlog_state_winner(st, NS1, key, sum, &te);
        ck_assert_msg(e == ENVLOG_OK, "%s: %s (%s)", key, envlog_strerror(e), envlog_errmsg());
        ck_assert_str_eq(te.winner, CANDS[i % 3]);
    }
    envlog_state_close(st);
    envlog_env_close(env);
    free(dir);
}
END_TEST

/* A lookup by pread reads the first KiB of an entry, then the rest of its
 * fragment when the header says it is longer: tunes whose entries range
 * from a few hundred bytes to most of a block (up to 200 candidates of 40
 * bytes) answer from a cold open, each; a byte changed past the first KiB
 * of the longest makes its entry a miss with the damage counted (envlog(5)),
 * never a winner, and leaves every other entry's answer as it was. */
#define LONG_KEYS 24
static void long_cands(int i, char names[][96], const char **cands, size_t *n)
{
    *n = 1 + (size_t)i * 200 / (LONG_KEYS - 1);
    for (size_t c = 0; c < *n; c++) {
        snprintf(names[c], 96, "cand-%02d-%03zu-%.28s", i, c, "abcdefghijklmnopqrstuvwxyz0123");
        cands[c] = names[c];
    }
}

START_TEST(test_lookup_long_entries)
{
    char *dir = tu_mkdtemp("longent");
    envlog_env *env = tu_env(dir);
    static char names[201][96];
    const char *cands[201];
    size_t n;
    envlog_session *s = begin(env, "long");
    for (int i = 0; i < LONG_KEYS; i++) {
        char key[32];
        snprintf(key, sizeof key, "long-%d", i);
        long_cands(i, names, cands, &n);
        envlog_tune t = {.ns = NS1, .key = key, .checksum = envlog_tune_checksum(cands, n),
                         .candidates = cands, .n_candidates = n, .policy = "median",
                         .winner = (int)(n - 1), .margin = 0.1, .stored = true};
        ck_assert_ok(envlog_record_tune(s, &t, NULL));
    }
    ck_assert_ok(envlog_session_end(s));
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL));
    envlog_env_close(env);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) { /* a byte of the longest entry's last candidate, changed */
            char path[4096];
            snprintf(path, sizeof path, "%s", tu_path(dir, "snapshot/current"));
            size_t len;
            uint8_t *raw = tu_read(path, &len);
            long_cands(LONG_KEYS - 1, names, cands, &n);
            uint8_t *at = memmem(raw, len, cands[n - 1], strlen(cands[n - 1]));
            ck_assert_ptr_nonnull(at);
            int fd = open(path, O_WRONLY);
            ck_assert_int_ge(fd, 0);
            uint8_t b = (uint8_t)(at[3] ^ 0x20);
            ck_assert_int_eq(pwrite(fd, &b, 1, at + 3 - raw), 1);
            close(fd);
            free(raw);
        }
        for (int i = 0; i < LONG_KEYS; i++) {
            char key[32];
            envlog_state *st;
            envlog_tune_entry te;
            snprintf(key, sizeof key, "long-%d", i);
            long_cands(i, names, cands, &n);
            ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
            ck_assert_ok(envlog_state_open(env, NULL, &st));
            envlog_err e = envlog_state_winner(st, NS1, key, envlog_tune_checksum(cands, n), &te);
            if (pass && i == LONG_KEYS - 1) {
                ck_assert_msg(e == ENVLOG_NOT_FOUND, "%s: %s", key, envlog_strerror(e));
                envlog_state_stats stats;
                envlog_state_stats_get(st, &stats);
                ck_assert_uint_ge(stats.snapshot_damaged, 1);
            } else {
                ck_assert_msg(e == ENVLOG_OK, "%s: %s (%s)", key, envlog_strerror(e),
                              envlog_errmsg());
                ck_assert_str_eq(te.winner, cands[n - 1]);
            }
            envlog_state_close(st);
            envlog_env_close(env);
        }
    }
    free(dir);
}
END_TEST

/* Records kernel "big" in a session of its own: a binary of `size` bytes,
 * byte k being k * mult; returns the binary (the caller frees it). */
static uint8_t *big_kernel(envlog_env *env, size_t size, unsigned mult)
{
    envlog_session *bs = begin(env, "big");
    uint8_t *bin = malloc(size);
    ck_assert_ptr_nonnull(bin);
    for (size_t k = 0; k < size; k++)
        bin[k] = (uint8_t)(k * mult);
    envlog_compile c = {.ns = KNS, .name = "big", .outcome = ENVLOG_COMPILED,
                        .binary_hash = envlog_hash128_bytes(bin, size),
                        .binary_size = size, .binary = {bin, size}};
    c.kernel_key = envlog_hash128_bytes("big", 3);
    ck_assert_ok(envlog_record_compile(bs, &c, NULL));
    ck_assert_ok(envlog_session_end(bs));
    return bin;
}

/* A lookup reads the snapshot by pread: each pread of an open and of its
 * lookups (index pages unchecked, then index blocks checked when that
 * finds nothing, a tune's entry, a kernel's entry of four blocks, the
 * search for a key that is absent) fails in turn.  Each failure is
 * ENVLOG_IO or, where the unchecked search gives up and the checked one
 * reads again, the right answer: never damage and never a miss of a key
 * that is there; the same lookups asked again answer rightly. */
START_TEST(test_lookup_read_faults)
{
    char *dir = tu_mkdtemp("lkfault");
    envlog_env *env = tu_env(dir);
    many_tunes(env);
    size_t big = 3 * ENVLOG_BLOCK + 100;
    uint8_t *bin = big_kernel(env, big, 13);
    envlog_hash128 kkey = envlog_hash128_bytes("big", 3);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL));
    envlog_env_close(env);
    uint64_t sum = envlog_tune_checksum(CANDS, 3);
    int in_open = 0, in_lookup = 0, failed_lookup = 0;
    long n;
    for (n = 1; n < 200; n++) {
        envlog_state *st = NULL;
        envlog_tune_entry te;
        envlog_kernel_entry ke;
        envlog_err lk[3];
        ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
        tu_fault_arm(TU_PREAD, n, EIO);
        envlog_err e = envlog_state_open(env, NULL, &st);
        if (!e) {
            lk[0] = envlog_state_winner(st, NS1, "many-7", sum, &te);
            lk[1] = envlog_state_kernel(st, KNS, &kkey, &ke);
            lk[2] = envlog_state_winner(st, NS1, "absent", sum, &te);
        }
        bool hit = tu_fault_disarm();
        if (e) {
            ck_assert_msg(hit && e == ENVLOG_IO, "pread %ld: the open says %s (%s)", n,
                          envlog_strerror(e), envlog_errmsg());
            in_open++;
        } else {
            in_lookup += hit;
            for (int k = 0; k < 3; k++) {
                envlog_err right = k < 2 ? ENVLOG_OK : ENVLOG_NOT_FOUND;
                ck_assert_msg(lk[k] == right || (hit && lk[k] == ENVLOG_IO),
                              "pread %ld: lookup %d says %s (%s)", n, k,
                              envlog_strerror(lk[k]), envlog_errmsg());
                failed_lookup += lk[k] == ENVLOG_IO;
            }
            ck_assert_int_eq(envlog_state_winner(st, NS1, "absent", sum, &te),
                             ENVLOG_NOT_FOUND);
            /* Asked again, each answers. */
            ck_assert_ok(envlog_state_winner(st, NS1, "many-7", sum, &te));
            ck_assert_str_eq(te.winner, CANDS[7 % 3]);
            ck_assert_ok(envlog_state_kernel(st, KNS, &kkey, &ke));
            ck_assert_uint_eq(ke.binary.size, big);
            ck_assert_mem_eq(ke.binary.data, bin, big);
            envlog_state_close(st);
        }
        envlog_env_close(env);
        if (!hit)
            break;
    }
    ck_assert_int_lt(n, 200);
    ck_assert_int_ge(in_open, 2); /* the head, the tail */
    ck_assert_int_ge(in_lookup, 6);
    ck_assert_int_ge(failed_lookup, 2); /* the checked search's own reads */
    free(bin);
    free(dir);
}
END_TEST

/* Opening an environment, its state and looking up a key gives back all
 * it takes when closed: the bytes malloc holds are the same after 200
 * cold opens and lookups (hits, a miss, a kernel) as after the 20th.
 * (The sanitizer build runs without its leak checker; this is the check
 * for the lookup path.) */
START_TEST(test_lookup_gives_memory_back)
{
    char *dir = tu_mkdtemp("lkmem");
    envlog_env *env = tu_env(dir);
    many_tunes(env);
    free(big_kernel(env, 2 * ENVLOG_BLOCK, 3));
    envlog_hash128 kkey = envlog_hash128_bytes("big", 3);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL));
    envlog_env_close(env);
    uint64_t sum = envlog_tune_checksum(CANDS, 3);
    size_t held = 0;
    for (int round = 0; round <= 200; round++) {
        envlog_state *st;
        envlog_tune_entry te;
        envlog_kernel_entry ke;
        char key[32];
        snprintf(key, sizeof key, "many-%d", round * 17 % MANY);
        ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
        ck_assert_ok(envlog_state_open(env, NULL, &st));
        ck_assert_ok(envlog_state_winner(st, NS1, key, sum, &te));
        ck_assert_int_eq(envlog_state_winner(st, NS1, "absent", sum, &te), ENVLOG_NOT_FOUND);
        ck_assert_ok(envlog_state_kernel(st, KNS, &kkey, &ke));
        envlog_state_close(st);
        envlog_env_close(env);
        /* (the first rounds settle what the test framework keeps) */
        struct mallinfo2 mi = mallinfo2();
        if (round == 20)
            held = mi.uordblks;
        else if (round > 20)
            ck_assert_msg(mi.uordblks <= held, "round %d: malloc holds %zu bytes, %zu at round 20",
                          round, mi.uordblks, held);
    }
    free(dir);
}
END_TEST

/* Every allocation of reading a snapshot whose INDEX and one ENTRY take
 * several blocks each fails in turn, every record checked (check_all) and
 * then walked: each failure is ENVLOG_NOMEM, never damage, and nothing is
 * counted as bad. */
START_TEST(test_snapshot_alloc_faults)
{
    char *dir = tu_mkdtemp("salloc");
    envlog_env *env = tu_env(dir);
    many_tunes(env);
    size_t big = 3 * ENVLOG_BLOCK + 100;
    uint8_t *bin = big_kernel(env, big, 17);
    envlog_compact_report r;
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, &r));
    ck_assert_uint_eq(r.entries, MANY + 1);
    envlog_env_close(env);
    size_t rn;
    uint8_t *raw = tu_read(tu_path(dir, "snapshot/current"), &rn);
    ck_assert_uint_gt(rn, 5 * ENVLOG_BLOCK);
    long n;
    int failures = 0;
    uint64_t want = 0;
    for (n = 0; n < 10000; n++) {
        envlog_snap *s = NULL;
        uint64_t entries = 0;
        if (n) /* 0: the reference, nothing failing */
            envlog_alloc_fail_after(n);
        envlog_err e = envlog_snap_load(raw, rn, true, &s);
        if (!e) {
            envlog_snap_item it;
            envlog_record rec;
            envlog_snap_rewind(s);
            while ((e = envlog_snap_next(s, &it, &rec)) == ENVLOG_OK)
                entries++;
            if (e == ENVLOG_END)
                e = ENVLOG_OK;
        }
        long made = envlog_alloc_fail_reset();
        if (e) {
            ck_assert_msg(e == ENVLOG_NOMEM, "allocation %ld: %s (%s)", n, envlog_strerror(e),
                          envlog_errmsg());
            failures++;
        } else if (n) {
            ck_assert_uint_eq(entries, want);
        } else {
            want = entries;
            ck_assert_uint_gt(want, MANY);
        }
        if (s) {
            const envlog_damage *d;
            ck_assert_uint_eq(envlog_snap_bad_records(s), 0);
            ck_assert_uint_eq(envlog_snap_damages(s, &d), 0);
            envlog_snap_free(s);
        }
        if (n && made < n) {
            ck_assert_ok(e);
            break;
        }
    }
    ck_assert_int_gt(failures, 2);
    ck_assert_int_lt(n, 10000);
    free(raw);
    free(bin);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* Damage in snapshot/current (a bit flipped at every byte of its first
 * 4 KiB, at every 13th byte up to 40 KiB, which holds the INDEX, and at
 * every 1021st after; then the file cut at every 97th byte of its first
 * 40 KiB): opening the state either fails, naming what is wrong, or
 * succeeds; a lookup then finds the right winner, misses, or reports
 * corruption.  Never a wrong winner, never a crash. */
static void flip_at(const char *path, size_t at, uint8_t mask)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)at), 1);
    b ^= mask;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)at), 1);
    close(fd);
}

typedef struct dmg_count {
    unsigned opened, found, refused;
} dmg_count;

/* Opens the damaged environment and looks a few keys up. */
static void probe_damaged(const char *dir, size_t where, dmg_count *c)
{
    envlog_env *env;
    envlog_state *st;
    uint64_t sum = envlog_tune_checksum(CANDS, 3);
    ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
    envlog_err e = envlog_state_open(env, NULL, &st);
    if (e) {
        ck_assert_msg(e == ENVLOG_CORRUPT || e == ENVLOG_BAD_DATA || e == ENVLOG_FORMAT,
                      "damage at %zu: %s", where, envlog_errmsg());
        ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "snapshot"));
        c->refused++;
        envlog_env_close(env);
        return;
    }
    c->opened++;
    for (int i = (int)(where % 7); i < MANY; i += 499) {
        char key[32];
        envlog_tune_entry te;
        snprintf(key, sizeof key, "many-%d", i);
        e = envlog_state_winner(st, NS1, key, sum, &te);
        if (!e) {
            ck_assert_str_eq(te.winner, CANDS[i % 3]);
            c->found++;
        } else {
            ck_assert_msg(e == ENVLOG_NOT_FOUND || e == ENVLOG_CORRUPT,
                          "damage at %zu: lookup %s", where, envlog_errmsg());
        }
    }
    envlog_state_close(st);
    envlog_env_close(env);
}

START_TEST(test_index_damage)
{
    char *dir = tu_mkdtemp("index-dmg");
    envlog_env *env = tu_env(dir);
    many_tunes(env);
    envlog_compact_report r;
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, &r));
    envlog_env_close(env);
    char *snap = strdup(tu_path(dir, "snapshot/current"));
    size_t n;
    uint8_t *good = tu_read(snap, &n);
    size_t span = n < 40960 ? n : 40960;
    dmg_count c = {0, 0, 0};
    for (size_t at = 0; at < n; at += at < 600 ? 1 : at < 4096 ? 5 : at < span ? 13 : 1021) {
        uint8_t mask = (uint8_t)(1u << (at % 8));
        flip_at(snap, at, mask);
        probe_damaged(dir, at, &c);
        flip_at(snap, at, mask);
    }
    for (size_t len = 0; len < span; len += 97) {
        tu_write(snap, good, len);
        probe_damaged(dir, len, &c);
    }
    tu_write(snap, good, n);
    /* A damaged HEADER, MANIFEST or INDEX no longer makes the environment
     * unreadable: readers stand on the generation before. */
    ck_assert_uint_gt(c.opened, 0);
    ck_assert_uint_eq(c.refused, 0);
    ck_assert_uint_gt(c.found, 0);
    free(good);
    free(snap);
    free(dir);
}
END_TEST

/* A lookup first searches INDEX pairs it reads unchecked and trusts only
 * the ENTRY they lead to; only the search that checks every INDEX block it
 * reads may answer that a key is absent.  A bit of every 5th pair (its
 * hash, then its offset, in turn) is flipped in snapshot/current; the key
 * of that pair, its neighbours' and an absent key are looked up from a
 * cold open.  Each present key comes back with its own winner or, where
 * the damage hides it, as a miss that the state counts as damage: never a
 * wrong winner, never a miss nobody hears of. */
START_TEST(test_index_pair_damage)
{
    char *dir = tu_mkdtemp("pair-dmg");
    envlog_env *env = tu_env(dir);
    many_tunes(env);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL));
    envlog_env_close(env);
    char *path = strdup(tu_path(dir, "snapshot/current"));
    size_t n;
    uint8_t *raw = tu_read(path, &n);
    envlog_snap *snap;
    ck_assert_ok(envlog_snap_load(raw, n, true, &snap));
    uint64_t sum = envlog_tune_checksum(CANDS, 3);
    /* Which key each pair is for, by its hash. */
    int *key_of = malloc(sizeof(int) * snap->n_index);
    for (uint64_t i = 0; i < snap->n_index; i++)
        key_of[i] = -1;
    for (int k = 0; k < MANY; k++) {
        char key[32];
        snprintf(key, sizeof key, "many-%d", k);
        uint64_t h = envlog_entry_key_hash(ENVLOG_TABLE_TUNE, NS1, key, strlen(key), sum);
        for (uint64_t i = 0; i < snap->n_index; i++)
            if (envlog_get_be64(snap->index.p + 16 * i) == h)
                key_of[i] = k;
    }
    unsigned flipped = 0, hidden = 0;
    for (uint64_t i = 0; i < snap->n_index; i += 5) {
        uint8_t *at = memmem(raw, n, snap->index.p + 16 * i, 16);
        if (!at || key_of[i] < 0)
            continue; /* across a block's header */
        size_t off = (size_t)(at - raw) + (i / 5 % 2 ? 8 + i % 8 : i % 8);
        uint8_t mask = (uint8_t)(1u << (i % 8));
        flip_at(path, off, mask);
        flipped++;
        ck_assert_ok(envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env));
        envlog_state *st;
        ck_assert_ok(envlog_state_open(env, NULL, &st));
        bool missed = false;
        for (int d = -1; d <= 1; d++) {
            if ((d < 0 && !i) || i + (uint64_t)(d + 1) > snap->n_index || key_of[i + d] < 0)
                continue;
            int k = key_of[i + d];
            char key[32];
            envlog_tune_entry te;
            snprintf(key, sizeof key, "many-%d", k);
            envlog_err e = envlog_state_winner(st, NS1, key, sum, &te);
            ck_assert_msg(e == ENVLOG_OK || e == ENVLOG_NOT_FOUND,
                          "pair %" PRIu64 " byte %zu: %s", i, off, envlog_errmsg());
            if (!e) {
                ck_assert_str_eq(te.key, key);
                ck_assert_str_eq(te.winner, CANDS[k % 3]);
            }
            missed |= e != ENVLOG_OK;
        }
        envlog_tune_entry te;
        ck_assert_int_eq(envlog_state_winner(st, NS1, "absent", sum, &te), ENVLOG_NOT_FOUND);
        envlog_state_stats ss;
        envlog_state_stats_get(st, &ss);
        ck_assert_msg(!missed || ss.snapshot_damaged > 0,
                      "pair %" PRIu64 " byte %zu: a key missed, no damage counted", i, off);
        hidden += missed;
        envlog_state_close(st);
        envlog_env_close(env);
        flip_at(path, off, mask);
    }
    ck_assert_uint_gt(flipped, 500);
    ck_assert_uint_gt(hidden, flipped / 4);
    free(key_of);
    envlog_snap_free(snap);
    free(raw);
    free(path);
    free(dir);
}
END_TEST

/* why still finds the record behind a winner after compaction. */
static envlog_err find_tune_rec(void *ctx, const envlog_replay_rec *r)
{
    int *n = ctx;
    if (r->rec->kind == ENVLOG_KIND_TUNE && !strcmp(r->rec->u.tune.key, "k0-3") &&
        r->rec->u.tune.n_trials == 3 && r->session && r->session->label &&
        !strcmp(r->session->label, "populate"))
        (*n)++;
    return ENVLOG_OK;
}

START_TEST(test_compact_keeps_evidence)
{
    char *dir = tu_mkdtemp("evidence");
    envlog_env *env = tu_env(dir);
    populate(env, 0);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL));
    int n = 0;
    ck_assert_ok(envlog_replay_each(env, NULL, find_tune_rec, &n));
    ck_assert_int_eq(n, 1);
    envlog_env_close(env);
    free(dir);
}
END_TEST

START_TEST(test_compact_beside_live_writer)
{
    char *dir = tu_mkdtemp("live");
    envlog_env *env = tu_env(dir);
    populate(env, 0);
    envlog_session *live = begin(env, "live");
    tune(live, NS1, "live-0", 0, true, false);
    envlog_compact_report r;
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, &r));
    ck_assert_uint_eq(r.sessions_live, 1);
    ck_assert_uint_eq(count_sessions(dir), 2); /* the live one stays, and
                                                  the other until a kept
                                                  generation covers it */
    tune(live, NS1, "live-1", 1, true, false);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, &r));
    tune(live, NS1, "live-2", 2, true, false);
    ck_assert_ok(envlog_session_end(live));
    char *d = dump_dir(dir);
    ck_assert_ptr_nonnull(strstr(d, "\"live-0\""));
    ck_assert_ptr_nonnull(strstr(d, "\"live-1\""));
    ck_assert_ptr_nonnull(strstr(d, "\"live-2\""));
    /* Once its writer is gone a compaction covers it whole, and the next
     * (whose previous is that one) retires it. */
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, &r));
    ck_assert_uint_eq(count_sessions(dir), 1);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, &r));
    ck_assert_uint_eq(count_sessions(dir), 0);
    char *d2 = dump_dir(dir);
    ck_assert_str_eq(d, d2);
    free(d);
    free(d2);
    envlog_env_close(env);
    free(dir);
}
END_TEST

/* Every I/O call of a compaction fails in turn: each ends in an error or a
 * success, and the environment replays to the same state either way. */
START_TEST(test_compact_fault_every_call)
{
    char *dir;
    envlog_env *env = layered_env("cfault", &dir);
    char *want = dump_dir(dir);
    long n;
    int failures = 0;
    for (n = 1; n < 10000; n++) {
        char *copy = tu_mkdtemp("cfault-copy");
        tu_rmrf(copy);
        tu_copytree(dir, copy);
        envlog_env *e2 = tu_env(copy);
        tu_fault_arm(TU_ANY, n, n % 2 ? EIO : ENOSPC);
        envlog_err e = envlog_compact(e2, ENVLOG_EVIDENCE_WINNERS, NULL);
        bool hit = tu_fault_disarm();
        envlog_env_close(e2);
        char *got = dump_dir(copy);
        ck_assert_msg(!strcmp(want, got), "state changed after failing call %ld (%s)", n,
                      envlog_strerror(e));
        free(got);
        tu_rmrf(copy);
        free(copy);
        if (!hit) {
            ck_assert_ok(e);
            break;
        }
        failures += e != ENVLOG_OK;
    }
    ck_assert_int_gt(failures, 5);
    ck_assert_int_lt(n, 10000);
    free(want);
    envlog_env_close(env);
    free(dir);
}
END_TEST

/* The process dies after the N-th I/O call of a compaction, for every N:
 * the environment left behind replays to the same state, and the next
 * compaction cleans up what the dead one left. */
static long crash_at, crash_calls;
static pid_t crash_spared; /* a process whose calls do not count */
static envlog_io crash_io;

#define CRASHY(name, ret, params, args)                                        \
    static ret crash_##name params                                             \
    {                                                                          \
        ret r = envlog_io_posix()->name args;                                  \
        if (getpid() != crash_spared && ++crash_calls == crash_at)             \
            _exit(42);                                                         \
        return r;                                                              \
    }
CRASHY(openat, int, (int d, const char *p, int f, mode_t m), (d, p, f, m))
CRASHY(close, int, (int fd), (fd))
CRASHY(pwrite, ssize_t, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
CRASHY(fsync, int, (int fd), (fd))
CRASHY(renameat, int, (int a, const char *b, int c, const char *d), (a, b, c, d))
CRASHY(unlinkat, int, (int d, const char *p, int f), (d, p, f))
CRASHY(linkat, int, (int a, const char *b, int c, const char *d), (a, b, c, d))
CRASHY(mkdirat, int, (int d, const char *p, mode_t m), (d, p, m))
CRASHY(flock, int, (int fd, int op), (fd, op))

static void crash_io_init(void)
{
    crash_io = *envlog_io_posix();
    crash_io.openat = crash_openat;
    crash_io.close = crash_close;
    crash_io.pwrite = crash_pwrite;
    crash_io.fsync = crash_fsync;
    crash_io.renameat = crash_renameat;
    crash_io.unlinkat = crash_unlinkat;
    crash_io.linkat = crash_linkat;
    crash_io.mkdirat = crash_mkdirat;
    crash_io.flock = crash_flock;
}

START_TEST(test_compact_crash_every_step)
{
    char *dir = tu_mkdtemp("crash");
    envlog_env *env = tu_env(dir);
    populate(env, 0);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL));
    populate(env, 1);
    populate(env, 2);
    envlog_env_close(env);
    char *want = dump_dir(dir);
    crash_io_init();
    long n;
    for (n = 1; n < 10000; n++) {
        char *copy = tu_mkdtemp("crash-copy");
        tu_rmrf(copy);
        tu_copytree(dir, copy);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            envlog_env *e2;
            if (envlog_env_open(copy, 0, &e2))
                _exit(3);
            crash_at = n;
            crash_calls = 0;
            envlog_io_set(&crash_io);
            envlog_err e = envlog_compact(e2, ENVLOG_EVIDENCE_WINNERS, NULL);
            _exit(e ? 4 : 0);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        int code = WEXITSTATUS(status);
        ck_assert_msg(code == 42 || code == 0, "compaction child exited %d", code);
        char *got = dump_dir(copy);
        ck_assert_msg(!strcmp(want, got), "state changed after a crash at call %ld", n);
        free(got);
        char when[64];
        snprintf(when, sizeof when, "after a crash at call %ld", n);
        generations_agree(copy, want, when);
        /* The next compaction finishes the job from whatever was left. */
        envlog_env *e3 = tu_env(copy);
        ck_assert_ok(envlog_compact(e3, ENVLOG_EVIDENCE_WINNERS, NULL));
        envlog_env_close(e3);
        got = dump_dir(copy);
        ck_assert_msg(!strcmp(want, got), "state changed after recovering from call %ld", n);
        generations_agree(copy, want, "after recovering");
        /* What stays is what the generation kept does not cover yet: the
         * three sessions' last two, or none when the interrupted one had
         * already put its snapshot in place. */
        size_t left = count_sessions(copy);
        ck_assert_msg(left == 0 || left == 2, "%zu sessions left", left);
        free(got);
        tu_rmrf(copy);
        free(copy);
        if (code == 0)
            break;
    }
    ck_assert_int_gt(n, 5);
    free(want);
    free(dir);
}
END_TEST

/* The same, on the automatic path: a session end starts the compaction in
 * a detached process (this one is its subreaper, so it can wait for it),
 * and that process dies after its N-th I/O call, for every N. */
START_TEST(test_auto_compact_crash_every_step)
{
    char *dir = tu_mkdtemp("autocrash");
    envlog_env *env = tu_env(dir);
    populate(env, 0);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL));
    populate(env, 1);
    populate(env, 2);
    envlog_config cfg;
    envlog_config_defaults(&cfg);
    cfg.compact_sessions = 1;
    ck_assert_ok(envlog_config_write(env, &cfg));
    envlog_env_close(env);
    char *want = dump_dir(dir);
    crash_io_init();
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    long n;
    for (n = 1; n < 10000; n++) {
        char *copy = tu_mkdtemp("autocrash-copy");
        tu_rmrf(copy);
        tu_copytree(dir, copy);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            envlog_env *e2;
            if (envlog_env_open(copy, 0, &e2))
                _exit(3);
            /* A session that changes nothing the state shows: a forget of
             * what does not stand. */
            envlog_session *s;
            envlog_session_opts o = tu_opts("trigger", 0);
            if (envlog_session_begin(e2, &o, &s))
                _exit(4);
            envlog_forget f = {ENVLOG_TABLE_TUNE, NS1, "no-such-key", 1, "test", NULL};
            if (envlog_record_forget(s, &f, NULL))
                _exit(5);
            crash_spared = getpid();
            crash_at = n;
            crash_calls = 0;
            envlog_io_set(&crash_io);
            _exit(envlog_session_end(s) ? 6 : 0);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status), "session child: %d", status);
        /* The compactor, adopted here. */
        int code = -1, reaped = 0;
        for (pid_t c; (c = waitpid(-1, &status, 0)) > 0 || errno == EINTR;)
            if (c > 0) {
                reaped++;
                ck_assert(WIFEXITED(status));
                code = WEXITSTATUS(status);
            }
        ck_assert_int_eq(reaped, 1);
        ck_assert_msg(code == 42 || code == 0, "compactor exited %d", code);
        char *got = dump_dir(copy);
        ck_assert_msg(!strcmp(want, got), "state changed after a crash at call %ld", n);
        free(got);
        char when[64];
        snprintf(when, sizeof when, "after a crash at call %ld", n);
        generations_agree(copy, want, when);
        envlog_env *e3 = tu_env(copy);
        envlog_upkeep u;
        ck_assert_ok(envlog_upkeep_get(e3, &u));
        if (code == 0)
            ck_assert_msg(!strncmp(u.last_reason, "automatic: ", 11), "reason '%s'",
                          u.last_reason);
        ck_assert_ok(envlog_compact(e3, ENVLOG_EVIDENCE_WINNERS, NULL));
        envlog_env_close(e3);
        got = dump_dir(copy);
        ck_assert_msg(!strcmp(want, got), "state changed after recovering from call %ld", n);
        generations_agree(copy, want, "after recovering");
        free(got);
        tu_rmrf(copy);
        free(copy);
        if (code == 0)
            break;
    }
    ck_assert_int_gt(n, 5);
    free(want);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------- bundles */

static char *export_bundle_as(envlog_env *env, const char *name, const char *const *pfx,
                              size_t np, envlog_evidence ev, int format)
{
    char *path = strdup(tu_path(tu_root(), name));
    envlog_bundle_opts o = {.name = name, .prefixes = pfx, .n_prefixes = np, .evidence = ev,
                            .zstd_level = 3, .format = format};
    envlog_bundle_info *info;
    ck_assert_ok(envlog_bundle_export(env, &o, path, &info));
    ck_assert_uint_eq(info->bad_records, 0);
    ck_assert(info->content_ok);
    envlog_bundle_info_free(info);
    return path;
}

static char *export_bundle(envlog_env *env, const char *name, const char *const *pfx,
                           size_t np, envlog_evidence ev)
{
    return export_bundle_as(env, name, pfx, np, ev, 0);
}

typedef struct cmp_ctx {
    envlog_state *other;
    size_t n;
} cmp_ctx;

/* Every entry of one state stands, with the same value, in the other. */
static envlog_err same_in_other(void *ctx, const envlog_entry *e)
{
    cmp_ctx *c = ctx;
    c->n++;
    if (e->tune) {
        envlog_tune_entry t;
        ck_assert_ok(envlog_state_winner(c->other, e->tune->ns, e->tune->key,
                                         e->tune->checksum, &t));
        ck_assert_str_eq(t.winner, e->tune->winner);
    } else {
        envlog_kernel_entry k;
        ck_assert_ok(envlog_state_kernel(c->other, e->kernel->ns, &e->kernel->kernel_key, &k));
        ck_assert_mem_eq(k.binary_hash.b, e->kernel->binary_hash.b, 16);
        ck_assert_uint_eq(k.binary.size, e->kernel->binary.size);
        ck_assert_mem_eq(k.binary.data, e->kernel->binary.data, k.binary.size);
    }
    return ENVLOG_OK;
}

static size_t compare_states(envlog_state *a, envlog_state *b)
{
    cmp_ctx c = {b, 0};
    ck_assert_ok(envlog_state_each(a, same_in_other, &c));
    size_t na = c.n;
    c = (cmp_ctx){a, 0};
    ck_assert_ok(envlog_state_each(b, same_in_other, &c));
    ck_assert_uint_eq(na, c.n);
    return na;
}

size_t sn_compare_states(envlog_state *a, envlog_state *b) { return compare_states(a, b); }

START_TEST(test_bundle_round_trip)
{
    char *src = tu_mkdtemp("bsrc"), *dst = tu_mkdtemp("bdst");
    envlog_env *a = tu_env(src), *b = tu_env(dst);
    populate(a, 0);
    populate(a, 1);
    char *path = export_bundle(a, "H100 Linux", NULL, 0, ENVLOG_EVIDENCE_WINNERS);
    envlog_import_report r;
    ck_assert_ok(envlog_bundle_import(b, path, &r));
    ck_assert_uint_gt(r.taken, 0);
    ck_assert_uint_eq(r.rejected, 0);
    unlink(path); /* the entries no longer need the file */
    envlog_state *sa, *sb;
    ck_assert_ok(envlog_state_open(a, NULL, &sa));
    ck_assert_ok(envlog_state_open(b, NULL, &sb));
    ck_assert_uint_eq(compare_states(sa, sb), r.taken);
    /* Imported entries say so. */
    envlog_tune_entry t;
    ck_assert_ok(envlog_state_winner(sb, NS1, "k0-0", envlog_tune_checksum(CANDS, 3), &t));
    ck_assert_int_eq(t.origin, ENVLOG_IMPORTED);
    envlog_state_close(sa);
    envlog_state_close(sb);
    /* Importing again changes nothing and writes nothing. */
    size_t sessions = count_sessions(dst);
    char *d1 = dump_dir(dst);
    char *again = export_bundle(a, "H100 Linux", NULL, 0, ENVLOG_EVIDENCE_WINNERS);
    ck_assert_ok(envlog_bundle_import(b, again, &r));
    ck_assert_uint_eq(r.taken, 0);
    ck_assert_uint_gt(r.skipped, 0);
    ck_assert_uint_eq(count_sessions(dst), sessions);
    char *d2 = dump_dir(dst);
    ck_assert_str_eq(d1, d2);
    /* The bundle's own state answers lookups: its INDEX is made from its
     * entries as it is read (a bundle is written with an empty one). */
    envlog_state *bs;
    ck_assert_ok(envlog_bundle_state(again, &bs));
    ck_assert_ok(envlog_state_winner(bs, NS1, "k1-2", envlog_tune_checksum(CANDS, 3), &t));
    ck_assert_str_eq(t.winner, CANDS[2]);
    envlog_kernel_entry ke;
    envlog_hash128 kk = envlog_hash128_bytes("kern1", 5);
    ck_assert_ok(envlog_state_kernel(bs, KNS, &kk, &ke));
    ck_assert_uint_eq(ke.binary.size, 300);
    ck_assert_err(envlog_state_winner(bs, NS1, "k1-1", envlog_tune_checksum(CANDS, 3), &t),
                  ENVLOG_NOT_FOUND);
    envlog_state_close(bs);
    free(d1);
    free(d2);
    free(path);
    free(again);
    envlog_env_close(a);
    envlog_env_close(b);
    free(src);
    free(dst);
}
END_TEST

/* At --evidence none a tune ENTRY is its record without the trials: a
 * record that has trials is encoded again without them, one that has none
 * is taken as it is (the same bytes an encoding would give).  Four kinds
 * of tune (trials and a policy; a policy and parameters but no trials;
 * nothing but the fold's fields; trials alone), exported from the sessions
 * and again from a snapshot compacted at --evidence full: each ENTRY holds
 * no trial, keeps every other field, and its bytes are its own encoding. */
static void check_stripped(const char *path, size_t want)
{
    envlog_buf z = {0}, enc = {0};
    ck_assert_ok(envlog_bundle_read_path(path, &z));
    envlog_bundle_opened o;
    ck_assert_ok(envlog_bundle_open_mem(z.p, z.len, true, &o));
    envlog_snap_item it;
    envlog_record rec;
    size_t seen = 0;
    while (envlog_snap_next(o.snap, &it, &rec) == ENVLOG_OK) {
        if (it.kind != ENVLOG_KIND_ENTRY || it.table != ENVLOG_TABLE_TUNE)
            continue;
        const envlog_tune *t = &rec.u.tune;
        int k = t->key[strlen(t->key) - 1] - '0';
        ck_assert_uint_eq(t->n_trials, 0);
        ck_assert_uint_eq(t->n_candidates, 3);
        ck_assert_int_eq(t->winner, k % 3);
        if (k == 0 || k == 1)
            ck_assert_str_eq(t->policy, "median");
        else
            ck_assert_ptr_null(t->policy);
        ck_assert_uint_eq(t->n_params, k == 1 ? 2 : 0);
        if (k == 1)
            ck_assert(t->params[1].value == 0.25);
        ck_assert_ok(envlog_event_encode(&enc, ENVLOG_KIND_TUNE, &rec.stamp, rec.effect,
                                         ENVLOG_LEVEL_FULL, t));
        ck_assert_uint_eq(enc.len, it.record.size);
        ck_assert_mem_eq(enc.p, it.record.data, enc.len);
        seen++;
    }
    ck_assert_uint_eq(seen, want);
    envlog_bundle_close(&o);
    envlog_buf_free(&z);
    envlog_buf_free(&enc);
}

START_TEST(test_bundle_strips_trials)
{
    char *dir = tu_mkdtemp("strip");
    envlog_env *env = tu_env(dir);
    envlog_session_opts so = tu_opts("strip", 0);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &so, &s));
    envlog_trial tr[3];
    for (int i = 0; i < 3; i++)
        tr[i] = (envlog_trial){.name = CANDS[i], .index = (uint32_t)i, .samples = 3,
                               .min_ns = 50.0 + i, .median_ns = 60.0 + i, .mean_ns = 61.0 + i,
                               .max_ns = 70.0 + i, .stddev_ns = 1};
    envlog_param pm[2] = {{"block", 128}, {"ratio", 0.25}};
    for (int round = 0; round < 10; round++)
        for (int k = 0; k < 4; k++) {
            char key[32];
            snprintf(key, sizeof key, "strip-%d-%d", round, k);
            envlog_tune t = {.ns = NS1, .key = key, .checksum = envlog_tune_checksum(CANDS, 3),
                             .candidates = CANDS, .n_candidates = 3, .winner = k % 3,
                             .margin = 0.125, .wall_ns = 900 + (uint64_t)k, .stored = true};
            if (k == 0 || k == 3)
                t.trials = tr, t.n_trials = 3;
            if (k == 0 || k == 1)
                t.policy = "median";
            if (k == 1)
                t.params = pm, t.n_params = 2;
            ck_assert_ok(envlog_record_tune(s, &t, NULL));
        }
    ck_assert_ok(envlog_session_end(s));
    char *from_sessions = export_bundle(env, "strip-a", NULL, 0, ENVLOG_EVIDENCE_NONE);
    check_stripped(from_sessions, 40);
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_ALL, NULL));
    char *from_snapshot = export_bundle(env, "strip-b", NULL, 0, ENVLOG_EVIDENCE_NONE);
    check_stripped(from_snapshot, 40);
    /* A snapshot whose entries hold no trials: the next export takes them
     * as they are. */
    ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL));
    char *again = export_bundle(env, "strip-c", NULL, 0, ENVLOG_EVIDENCE_NONE);
    check_stripped(again, 40);
    unlink(from_sessions);
    unlink(from_snapshot);
    unlink(again);
    free(from_sessions);
    free(from_snapshot);
    free(again);
    envlog_env_close(env);
    free(dir);
}
END_TEST

START_TEST(test_bundle_namespace_filter)
{
    char *src = tu_mkdtemp("bfsrc"), *dst = tu_mkdtemp("bfdst");
    envlog_env *a = tu_env(src), *b = tu_env(dst);
    populate(a, 0);
    const char *pfx[] = {"autotune/rt/1.0/sm_80"};
    char *path = export_bundle(a, "sm80 only", pfx, 1, ENVLOG_EVIDENCE_NONE);
    envlog_bundle_info *info;
    ck_assert_ok(envlog_bundle_inspect(path, &info));
    ck_assert_uint_eq(info->tunes, 1);
    ck_assert_uint_eq(info->kernels, 0);
    ck_assert_uint_eq(info->n_namespaces, 1);
    ck_assert_str_eq(info->namespaces[0], NS2);
    envlog_bundle_info_free(info);
    envlog_import_report r;
    ck_assert_ok(envlog_bundle_import(b, path, &r));
    ck_assert_uint_eq(r.taken, 1);
    envlog_state *sb;
    ck_assert_ok(envlog_state_open(b, NULL, &sb));
    envlog_tune_entry t;
    ck_assert_ok(envlog_state_winner(sb, NS2, "k0-i", envlog_tune_checksum(CANDS, 3), &t));
    ck_assert_str_eq(t.winner, "tile32");
    ck_assert_err(envlog_state_winner(sb, NS1, "k0-0", envlog_tune_checksum(CANDS, 3), &t),
                  ENVLOG_NOT_FOUND);
    envlog_state_close(sb);
    free(path);
    envlog_env_close(a);
    envlog_env_close(b);
    free(src);
    free(dst);
}
END_TEST

START_TEST(test_local_after_import_and_stale)
{
    char *src = tu_mkdtemp("lsrc"), *dst = tu_mkdtemp("ldst");
    envlog_env *a = tu_env(src), *b = tu_env(dst);
    populate(a, 0);
    char *path = export_bundle(a, "b", NULL, 0, ENVLOG_EVIDENCE_WINNERS);
    ck_assert_ok(envlog_bundle_import(b, path, NULL));
    envlog_state *live;
    ck_assert_ok(envlog_env_state(b, &live));
    envlog_tune_entry t;
    uint64_t cs = envlog_tune_checksum(CANDS, 3);
    ck_assert_ok(envlog_state_winner(live, NS1, "k0-0", cs, &t));
    ck_assert_int_eq(t.origin, ENVLOG_IMPORTED);
    ck_assert_str_eq(t.winner, "tile16");
    /* A local tune replaces the imported entry. */
    envlog_session *s = begin(b, "local");
    tune(s, NS1, "k0-0", 2, true, false);
    ck_assert_ok(envlog_session_end(s));
    ck_assert_ok(envlog_state_winner(live, NS1, "k0-0", cs, &t));
    ck_assert_int_eq(t.origin, ENVLOG_LOCAL);
    ck_assert_str_eq(t.winner, "tile64");
    ck_assert_int_eq(t.rule, ENVLOG_RULE_LOCAL_OVER_IMPORTED);
    /* A stale entry (other candidates, so another checksum) is never seen. */
    const char *other[] = {"tile16", "tile32", "tile128"};
    ck_assert_err(envlog_state_winner(live, NS1, "k0-2", envlog_tune_checksum(other, 3), &t),
                  ENVLOG_NOT_FOUND);
    /* The same through a fresh fold. */
    char *d = dump_dir(dst);
    ck_assert_ptr_nonnull(strstr(d, "\"winner\":\"tile64\""));
    free(d);
    free(path);
    envlog_env_close(a);
    envlog_env_close(b);
    free(src);
    free(dst);
}
END_TEST

/* Several environments into one bundle: they fold as one in one total
 * order (between two local values the first stands, a local value replaces
 * an imported one), a session two of them hold (one copied from the other,
 * then compacted there) is taken once, and the manifest names each source. */
START_TEST(test_bundle_of_several_environments)
{
    char *da = tu_mkdtemp("mea"), *db = tu_mkdtemp("meb"), *dc = tu_mkdtemp("mec"),
         *dd = tu_mkdtemp("med");
    envlog_env *a = tu_env(da);
    envlog_session *s = begin(a, "a");
    tune(s, NS1, "shared", 0, true, false);
    tune(s, NS1, "only-a", 1, true, false);
    tune(s, NS2, "imp", 0, true, true);
    compile(s, "kern-a", 3);
    ck_assert_ok(envlog_session_end(s));
    /* c holds a's session too, compacted into its snapshot */
    tu_rmrf(dc);
    tu_copytree(da, dc);
    envlog_env *c = tu_env(dc);
    ck_assert_ok(envlog_compact(c, ENVLOG_EVIDENCE_WINNERS, NULL));
    envlog_env *b = tu_env(db);
    s = begin(b, "b");
    tune(s, NS1, "shared", 2, true, false); /* later: the first stands */
    tune(s, NS1, "only-b", 2, true, false);
    tune(s, NS2, "imp", 1, true, false);    /* local over imported */
    compile(s, "kern-b", 5);
    ck_assert_ok(envlog_session_end(s));

    char *one = strdup(tu_path(tu_root(), "me-a.envb"));
    envlog_bundle_opts o = {.name = "a", .zstd_level = 3};
    envlog_bundle_info *ia, *info;
    ck_assert_ok(envlog_bundle_export(a, &o, one, &ia));
    char *path = strdup(tu_path(tu_root(), "me.envb"));
    envlog_env *more[] = {c, b};
    o = (envlog_bundle_opts){.name = "several", .zstd_level = 3, .more = more, .n_more = 2};
    ck_assert_ok(envlog_bundle_export(a, &o, path, &info));
    ck_assert(info->content_ok);
    ck_assert_uint_eq(info->bad_records, 0);
    ck_assert_uint_eq(info->tunes, 4);
    ck_assert_uint_eq(info->kernels, 2);
    ck_assert_uint_eq(info->sessions, 2);
    ck_assert_uint_eq(info->n_sources, 3);
    char *ra = realpath(da, NULL), *rc = realpath(dc, NULL), *rb = realpath(db, NULL);
    ck_assert_str_eq(info->sources[0].path, ra);
    ck_assert_str_eq(info->sources[1].path, rc);
    ck_assert_str_eq(info->sources[2].path, rb);
    ck_assert_uint_eq(info->sources[0].sessions, 1);
    ck_assert_uint_eq(info->sources[0].records, ia->sources[0].records);
    ck_assert_uint_eq(info->sources[1].records, 0); /* all of it a's */
    ck_assert_uint_eq(info->sources[2].sessions, 1);
    ck_assert_uint_gt(info->sources[2].records, 4);
    free(ra);
    free(rc);
    free(rb);
    envlog_bundle_info_free(ia);
    envlog_bundle_info_free(info);

    envlog_env *d = tu_env(dd);
    envlog_import_report r;
    ck_assert_ok(envlog_bundle_import(d, path, &r));
    ck_assert_uint_eq(r.taken, 6);
    ck_assert_uint_eq(r.rejected, 0);
    envlog_state *st;
    ck_assert_ok(envlog_state_open(d, NULL, &st));
    uint64_t cs = envlog_tune_checksum(CANDS, 3);
    envlog_tune_entry t;
    ck_assert_ok(envlog_state_winner(st, NS1, "shared", cs, &t));
    ck_assert_str_eq(t.winner, "tile16");
    ck_assert_ok(envlog_state_winner(st, NS1, "only-a", cs, &t));
    ck_assert_str_eq(t.winner, "tile32");
    ck_assert_ok(envlog_state_winner(st, NS1, "only-b", cs, &t));
    ck_assert_str_eq(t.winner, "tile64");
    ck_assert_ok(envlog_state_winner(st, NS2, "imp", cs, &t));
    ck_assert_str_eq(t.winner, "tile32");
    envlog_kernel_entry k;
    envlog_hash128 kb = envlog_hash128_bytes("kern-b", 6);
    ck_assert_ok(envlog_state_kernel(st, KNS, &kb, &k));
    envlog_state_close(st);

    /* Anonymous: the sources stay, their paths do not. */
    o.anonymous = true;
    ck_assert_ok(envlog_bundle_export(a, &o, path, &info));
    ck_assert_uint_eq(info->n_sources, 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_str_eq(info->sources[i].path, "");
    envlog_bundle_info_free(info);
    /* A missing environment is an argument error; nothing is written. */
    envlog_env *bad[] = {b, NULL};
    o.more = bad;
    unlink(path);
    ck_assert_err(envlog_bundle_export(a, &o, path, NULL), ENVLOG_INVALID_ARG);
    ck_assert(!tu_exists(path));

    free(one);
    free(path);
    envlog_env_close(a);
    envlog_env_close(b);
    envlog_env_close(c);
    envlog_env_close(d);
    free(da);
    free(db);
    free(dc);
    free(dd);
}
END_TEST

START_TEST(test_bundle_import_memory)
{
    char *src = tu_mkdtemp("msrc"), *dst = tu_mkdtemp("mdst");
    envlog_env *a = tu_env(src), *b = tu_env(dst);
    populate(a, 0);
    char *path = export_bundle(a, "mem", NULL, 0, ENVLOG_EVIDENCE_ALL);
    size_t n;
    uint8_t *bytes = tu_read(path, &n);
    envlog_import_report r;
    ck_assert_ok(envlog_bundle_import_memory(b, bytes, n, &r));
    ck_assert_uint_eq(r.taken, 7); /* 5 tunes standing in NS1/NS2 + kernel: see populate */
    free(bytes);
    free(path);
    envlog_env_close(a);
    envlog_env_close(b);
    free(src);
    free(dst);
}
END_TEST

static envlog_err refuse_write(void *ctx, const char *text, size_t len)
{
    (void)text;
    (void)len;
    ++*(int *)ctx;
    return ENVLOG_PERMISSION;
}

/* envlog_bundle_export_to() hands the bundle to its writer in one call,
 * and returns the writer's code as it is (issue 17, item 3). */
START_TEST(test_bundle_export_to_writer)
{
    char *src = tu_mkdtemp("wsrc"), *dst = tu_mkdtemp("wdst");
    envlog_env *a = tu_env(src), *b = tu_env(dst);
    populate(a, 0);
    envlog_bundle_opts o = {.name = "to-writer", .evidence = ENVLOG_EVIDENCE_WINNERS};
    envlog_buf bytes = {0};
    envlog_bundle_info *info;
    ck_assert_ok(envlog_bundle_export_to(a, &o, mem_write, &bytes, &info));
    ck_assert_uint_eq(info->compressed_size, bytes.len);
    envlog_bundle_info_free(info);
    envlog_import_report r;
    ck_assert_ok(envlog_bundle_import_memory(b, bytes.p, bytes.len, &r));
    ck_assert_uint_eq(r.taken, 7);
    int calls = 0;
    envlog_bundle_info before;
    info = &before; /* set to NULL on failure */
    ck_assert_err(envlog_bundle_export_to(a, &o, refuse_write, &calls, &info),
                  ENVLOG_PERMISSION);
    ck_assert_int_eq(calls, 1);
    ck_assert_ptr_null(info);
    envlog_buf_free(&bytes);
    envlog_env_close(a);
    envlog_env_close(b);
    free(src);
    free(dst);
}
END_TEST

/* Every I/O call and every allocation of an export, then of an import,
 * fails in turn: each ends in a clean error, the bundle file is whole or
 * absent, and the importing environment is as before or fully imported. */
START_TEST(test_bundle_faults)
{
    char *src = tu_mkdtemp("fsrc");
    envlog_env *a = tu_env(src);
    populate(a, 0);
    char *good = export_bundle(a, "good", NULL, 0, ENVLOG_EVIDENCE_WINNERS);
    char *out = strdup(tu_path(tu_root(), "faulty.bundle"));
    long n;
    for (n = 1; n < 5000; n++) {
        unlink(out);
        envlog_bundle_opts o = {.name = "faulty", .prefixes = NULL, .n_prefixes = 0, .evidence = ENVLOG_EVIDENCE_WINNERS,
                            .zstd_level = 3};
        if (_i == 0)
            tu_fault_arm(TU_ANY, n, n % 2 ? EIO : ENOSPC);
        else
            envlog_alloc_fail_after(n);
        envlog_err e = envlog_bundle_export(a, &o, out, NULL);
        bool hit = _i == 0 ? tu_fault_disarm() : envlog_alloc_fail_reset() >= n;
        if (e) {
            ck_assert_str_ne(envlog_errmsg(), "no error detail");
            ck_assert(!tu_exists(out)); /* never a partial bundle */
        } else {
            envlog_bundle_info *info;
            ck_assert_ok(envlog_bundle_inspect(out, &info));
            ck_assert_uint_eq(info->bad_records, 0);
            envlog_bundle_info_free(info);
        }
        if (!hit && !e)
            break;
    }
    ck_assert_int_lt(n, 5000);
    /* The reference: the same import with nothing failing. */
    char *ref = tu_mkdtemp("fref");
    envlog_env *re = tu_env(ref);
    ck_assert_ok(envlog_bundle_import(re, good, NULL));
    envlog_state *rs;
    ck_assert_ok(envlog_state_open(re, NULL, &rs));
    for (n = 1; n < 5000; n++) {
        char *dst = tu_mkdtemp("fdst");
        envlog_env *b = tu_env(dst);
        if (_i == 0)
            tu_fault_arm(TU_ANY, n, n % 2 ? EIO : ENOSPC);
        else
            envlog_alloc_fail_after(n);
        envlog_import_report r;
        envlog_err e = envlog_bundle_import(b, good, &r);
        bool hit = _i == 0 ? tu_fault_disarm() : envlog_alloc_fail_reset() >= n;
        envlog_env_close(b);
        if (e)
            ck_assert_str_ne(envlog_errmsg(), "no error detail");
        if (e && _i == 1) /* memory, zstd's own included, is never damage */
            ck_assert_msg(e == ENVLOG_NOMEM, "allocation %ld failed: %s", n, envlog_errmsg());
        /* Whatever was taken before the failure is there whole (the fold
         * below reads it without damage); a retry completes the import. */
        b = tu_env(dst);
        ck_assert_ok(envlog_bundle_import(b, good, &r));
        envlog_state *bs;
        ck_assert_ok(envlog_state_open(b, NULL, &bs));
        envlog_state_stats ss;
        envlog_state_stats_get(bs, &ss);
        ck_assert_uint_eq(ss.damaged, 0);
        compare_states(rs, bs);
        envlog_state_close(bs);
        envlog_env_close(b);
        tu_rmrf(dst);
        free(dst);
        if (!hit && !e)
            break;
    }
    envlog_state_close(rs);
    envlog_env_close(re);
    free(ref);
    ck_assert_int_lt(n, 5000);
    free(good);
    free(out);
    envlog_env_close(a);
    free(src);
}
END_TEST

/* ----------------------------------------------------- hostile bundles */


static void assert_imports_nothing(const void *data, size_t n, envlog_err want)
{
    char *dir = tu_mkdtemp("hostile");
    envlog_env *env = tu_env(dir);
    envlog_import_report r;
    envlog_err e = envlog_bundle_import_memory(env, data, n, &r);
    ck_assert_err(e, want);
    ck_assert_str_ne(envlog_errmsg(), "no error detail");
    ck_assert_uint_eq(r.taken, 0);
    ck_assert_uint_eq(count_sessions(dir), 0);
    envlog_bundle_info *info;
    ck_assert_err(envlog_bundle_inspect_memory(data, n, &info), want);
    envlog_env_close(env);
    free(dir);
}

static uint8_t *good_bundle(size_t *n, uint8_t **raw, size_t *rawn)
{
    char *src = tu_mkdtemp("gsrc");
    envlog_env *a = tu_env(src);
    populate(a, 0);
    /* (format 1: the tests edit the snapshot inside) */
    char *path = export_bundle_as(a, "good", NULL, 0, ENVLOG_EVIDENCE_WINNERS, 1);
    uint8_t *z = tu_read(path, n);
    if (raw) {
        unsigned long long sz = ZSTD_getFrameContentSize(z, *n);
        *raw = malloc((size_t)sz);
        *rawn = ZSTD_decompress(*raw, (size_t)sz, z, *n);
        ck_assert(!ZSTD_isError(*rawn));
    }
    free(path);
    envlog_env_close(a);
    free(src);
    return z;
}

static uint8_t *recompress(const uint8_t *raw, size_t n, size_t *zn)
{
    size_t cap = ZSTD_compressBound(n);
    uint8_t *z = malloc(cap);
    *zn = ZSTD_compress(z, cap, raw, n, 1);
    ck_assert(!ZSTD_isError(*zn));
    return z;
}

START_TEST(test_hostile_bad_magic)
{
    uint8_t junk[256];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37);
    assert_imports_nothing(junk, sizeof junk, ENVLOG_FORMAT);
    /* A zstd frame holding something else than a snapshot. */
    size_t zn;
    uint8_t *z = recompress(junk, sizeof junk, &zn);
    assert_imports_nothing(z, zn, ENVLOG_FORMAT);
    free(z);
}
END_TEST

START_TEST(test_hostile_truncated)
{
    size_t n;
    uint8_t *z = good_bundle(&n, NULL, NULL);
    for (size_t cut = 1; cut < n; cut += (cut < 64 ? 1 : 97))
        assert_imports_nothing(z, cut, cut < 4 ? ENVLOG_FORMAT : ENVLOG_BAD_DATA);
    free(z);
}
END_TEST

START_TEST(test_hostile_inflates_past_limit)
{
    /* A frame header that claims 2 GiB, with one empty raw block. */
    uint8_t f[] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0x01, 0, 0};
    assert_imports_nothing(f, sizeof f, ENVLOG_TOO_BIG);
    /* Two frames that claim 600 MiB each: more than the limit together. */
    uint8_t two[2 * sizeof f];
    memcpy(f + 5, (const uint8_t[]){0, 0, 0x80, 0x25, 0, 0, 0, 0}, 8);
    memcpy(two, f, sizeof f);
    memcpy(two + sizeof f, f, sizeof f);
    assert_imports_nothing(f, sizeof f, ENVLOG_BAD_DATA); /* one is fine, but empty */
    assert_imports_nothing(two, sizeof two, ENVLOG_TOO_BIG);
}
END_TEST

START_TEST(test_hostile_unknown_schema)
{
    size_t n, rawn;
    uint8_t *raw;
    uint8_t *z = good_bundle(&n, &raw, &rawn);
    /* Rebuild the same snapshot with a schema from the future. */
    envlog_snap *s;
    ck_assert_ok(envlog_snap_load(raw, rawn, false, &s));
    envlog_snap_manifest m = *envlog_snap_manifest_get(s);
    m.schema = 99;
    envlog_snapw w = {0};
    envlog_snap_item it;
    envlog_record rec;
    envlog_snap_rewind(s);
    while (envlog_snap_next(s, &it, &rec) == ENVLOG_OK)
        ck_assert_ok(envlog_snapw_add(&w, &it, false, 0));
    envlog_buf out = {0};
    envlog_id128 id;
    ck_assert_ok(envlog_id_new(&id));
    ck_assert_ok(envlog_snapw_finish(&w, &m, &id, "bundle", &out));
    size_t zn;
    uint8_t *z2 = recompress(out.p, out.len, &zn);
    assert_imports_nothing(z2, zn, ENVLOG_FORMAT);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "schema 99"));
    envlog_buf_free(&out);
    envlog_snapw_free(&w);
    envlog_snap_free(s);
    free(z2);
    free(raw);
    free(z);
}
END_TEST

/* Flipping bytes inside the snapshot: records fail their checks and are
 * rejected one by one; the good ones are still taken, and a damaged
 * manifest or index refuses the whole bundle. */
START_TEST(test_hostile_damaged_records)
{
    size_t n, rawn;
    uint8_t *raw;
    uint8_t *z = good_bundle(&n, &raw, &rawn);
    size_t flips = 0, partial = 0;
    for (size_t at = 0; at < rawn; at += 53) {
        uint8_t *copy = malloc(rawn);
        memcpy(copy, raw, rawn);
        copy[at] ^= 0x5a;
        size_t zn;
        uint8_t *z2 = recompress(copy, rawn, &zn);
        char *dir = tu_mkdtemp("flip");
        envlog_env *env = tu_env(dir);
        envlog_import_report r;
        envlog_err e = envlog_bundle_import_memory(env, z2, zn, &r);
        ck_assert_msg(e == ENVLOG_OK || e == ENVLOG_FORMAT || e == ENVLOG_BAD_DATA,
                      "flip at %zu: %s", at, envlog_strerror(e));
        if (e == ENVLOG_OK) {
            ck_assert_uint_le(r.taken, 7);
            if (r.rejected)
                partial++;
        } else {
            ck_assert_uint_eq(count_sessions(dir), 0);
        }
        flips++;
        envlog_env_close(env);
        tu_rmrf(dir);
        free(dir);
        free(z2);
        free(copy);
    }
    ck_assert_uint_gt(flips, 10);
    ck_assert_uint_gt(partial, 0);
    free(raw);
    free(z);
}
END_TEST

/* An entry the recorder refuses (a trial naming no candidate) is rejected
 * on its own: the other entries are taken. */
START_TEST(test_import_rejects_one_entry)
{
    size_t n, rawn;
    uint8_t *raw;
    uint8_t *z = good_bundle(&n, &raw, &rawn);
    envlog_snap *s;
    ck_assert_ok(envlog_snap_load(raw, rawn, false, &s));
    envlog_snap_manifest m = *envlog_snap_manifest_get(s);
    envlog_snapw w = {0};
    envlog_snap_item it;
    envlog_record rec;
    envlog_buf bad = {0};
    bool broke = false;
    envlog_snap_rewind(s);
    while (envlog_snap_next(s, &it, &rec) == ENVLOG_OK) {
        if (!broke && it.kind == ENVLOG_KIND_ENTRY && rec.kind == ENVLOG_KIND_TUNE &&
            rec.u.tune.n_trials) {
            /* Trial 0's index (key 1 of the map at trials[0]) becomes 99. */
            static const uint64_t path[] = {8, 0, 1};
            ck_assert(tu_detail_edit(it.record.data, it.record.size, path, 3,
                                     (const uint8_t *)"\x18\x63", 2, false, 0, &bad));
            it.record.data = bad.p;
            it.record.size = bad.len;
            broke = true;
        }
        ck_assert_ok(envlog_snapw_add(&w, &it, false, 0));
    }
    ck_assert(broke);
    envlog_buf out = {0};
    envlog_id128 id;
    ck_assert_ok(envlog_id_new(&id));
    ck_assert_ok(envlog_snapw_finish(&w, &m, &id, "bundle", &out));
    size_t zn;
    uint8_t *z2 = recompress(out.p, out.len, &zn);
    char *dir = tu_mkdtemp("reject1");
    envlog_env *env = tu_env(dir);
    envlog_import_report r;
    ck_assert_ok(envlog_bundle_import_memory(env, z2, zn, &r));
    ck_assert_uint_eq(r.rejected, 1);
    ck_assert_uint_eq(r.taken, 6);
    ck_assert_ptr_nonnull(strstr(r.first_reject, "trial"));
    envlog_env_close(env);
    free(dir);
    envlog_buf_free(&bad);
    envlog_buf_free(&out);
    envlog_snapw_free(&w);
    envlog_snap_free(s);
    free(z2);
    free(raw);
    free(z);
}
END_TEST

/* The ids of the sessions, sorted, without reading them. */
START_TEST(test_sessions_ids)
{
    char *dir = tu_mkdtemp("ids");
    envlog_env *env = tu_env(dir);
    for (int i = 0; i < 3; i++)
        populate(env, i);
    envlog_id128 *ids;
    size_t n;
    ck_assert_ok(envlog_sessions_ids(env, &ids, &n));
    envlog_session_info *in;
    size_t k;
    ck_assert_ok(envlog_sessions_list(env, &in, &k));
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(k, 3);
    for (size_t i = 0; i < n; i++)
        ck_assert_mem_eq(ids[i].b, in[i].id.b, 16);
    envlog_sessions_free(in, k);
    envlog_ids_free(ids);
    envlog_env_close(env);
    free(dir);
}
END_TEST

/* The build's plain path over a tune record's values (envlog_build_no_trials)
 * says a record holds no trials, and is laid out as envlog writes one, only
 * where the walk of every item says so, and says it for the records envlog
 * writes: over the sample tunes with their trials and without, every bit
 * of the typical one flipped and every cut, and each value of the record's map and of its
 * detail replaced in turn by each item of a catalogue (every head, and the
 * shapes of a detail's settings: maps in an array, a key twice, a key past
 * 23, a text key, an array in an array, a map in a map, counts beyond the
 * bytes left; details of an empty map, of a map cut short). */
typedef struct trials_case {
    size_t seen, plain, walk;
} trials_case;

static void trials_agree(const envlog_buf *b, const char *what, void *ctx)
{
    trials_case *c = ctx;
    envlog_bytes in = {b->p, b->len};
    bool plain = envlog_build_no_trials_plain(&in), walk = envlog_build_no_trials(&in, true);
    tu_check(!plain || walk, "%s: the plain path takes a record the walk refuses", what);
    tu_check(envlog_build_no_trials(&in, false) == walk, "%s: the two ways disagree", what);
    c->seen++;
    c->plain += plain;
    c->walk += walk;
}

/* The unsigned keys of the map [p, p + n), at most `max`. */
static size_t map_keys(const uint8_t *p, size_t n, uint64_t *keys, size_t max)
{
    envlog_pull pl = {p, n, 0};
    envlog_tok t, k, v;
    ck_assert_ok(envlog_pull_next(&pl, &t));
    size_t got = 0;
    for (uint64_t i = 0; i < t.u && got < max; i++) {
        ck_assert_ok(envlog_pull_next(&pl, &k));
        ck_assert_ok(envlog_pull_next(&pl, &v));
        ck_assert_ok(envlog_pull_skip_at(&pl, &v, 1));
        keys[got++] = k.u;
    }
    return got;
}

START_TEST(test_no_trials_plain)
{
    static const tu_head_alt shapes[] = {
        {"settings", {0x82, 0xa2, 0x00, 0x61, 'a', 0x01, 0xf9, 0x3c, 0x00, 0xa0}, 10},
        {"settings with a key twice", {0x81, 0xa2, 0x00, 0x01, 0x00, 0x02}, 6},
        {"settings with a key in a byte", {0x81, 0xa1, 0x18, 0x18, 0x01}, 5},
        {"settings with a text key", {0x81, 0xa1, 0x61, 'k', 0x01}, 5},
        {"settings with a tag", {0x81, 0xa1, 0x00, 0xc1, 0x01}, 5},
        {"settings with an array", {0x81, 0xa1, 0x00, 0x81, 0x01}, 5},
        {"an array in an array", {0x81, 0x81, 0x01}, 3},
        {"a map of a map", {0xa1, 0x00, 0xa1, 0x00, 0x01}, 5},
        {"a map claiming more than is left", {0x81, 0xb8, 0xff, 0x00}, 4},
        {"an array claiming more than is left", {0x9a, 0, 1, 0, 0, 0x01}, 6},
        {"a half float cut short", {0xf9, 0x3c}, 2},
        {"a double cut short", {0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0}, 8},
        {"a detail of an empty map", {0x41, 0xa0}, 2},
        {"a detail of a map and more", {0x43, 0xa1, 0x09, 0x01}, 4},
    };
    const envlog_stamp st = {{{1, 2, 3}}, 7, 0};
    trials_case whole = {0}, damaged = {0}, edited = {0};
    for (int v = TU_EMPTY; v <= TU_UNICODE; v++)
        for (int trials = 0; trials < 2; trials++) {
            tu_sample s;
            tu_sample_make(&s, ENVLOG_KIND_TUNE, (tu_variant)v);
            if (!trials) {
                s.u.tune.n_trials = 0;
                s.u.tune.trials = NULL;
            }
            envlog_buf b = {0}, m = {0}, detail = {0};
            ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_TUNE, &st,
                                             envlog_effect_of(ENVLOG_KIND_TUNE, &s.u.tune),
                                             ENVLOG_LEVEL_FULL, &s.u.tune));
            char what[96];
            snprintf(what, sizeof what, "tune variant %d, %s trials", v,
                     trials ? "with" : "without");
            size_t plain_before = whole.plain;
            trials_agree(&b, what, &whole);
            /* The encoder's records without trials take the plain path. */
            if (!trials || !s.u.tune.n_trials)
                ck_assert_msg(whole.plain == plain_before + 1, "%s: not taken plainly", what);
            /* (every bit of the typical record's two forms: the others are
             * of the same fields, more of them) */
            if (v == TU_TYPICAL)
                tu_each_damage(&b, what, trials_agree, &damaged);
            uint64_t keys[64];
            size_t nk = map_keys(b.p, b.len, keys, 64);
            for (size_t i = 0; i < nk; i++)
                for (size_t a = 0; a < tu_n_head_alts + sizeof shapes / sizeof shapes[0]; a++) {
                    const tu_head_alt *alt =
                        a < tu_n_head_alts ? &tu_head_alts[a] : &shapes[a - tu_n_head_alts];
                    m.len = 0;
                    ck_assert(tu_cbor_edit(b.p, b.len, &keys[i], 1, alt->b, alt->n, false, 0, &m));
                    snprintf(what, sizeof what, "tune %d/%d, key %llu: %s", v, trials,
                             (unsigned long long)keys[i], alt->name);
                    trials_agree(&m, what, &edited);
                }
            if (tu_detail_bytes(b.p, b.len, &detail)) {
                nk = map_keys(detail.p, detail.len, keys, 64);
                for (size_t i = 0; i < nk; i++)
                    for (size_t a = 0; a < tu_n_head_alts + sizeof shapes / sizeof shapes[0];
                         a++) {
                        const tu_head_alt *alt = a < tu_n_head_alts
                                                     ? &tu_head_alts[a]
                                                     : &shapes[a - tu_n_head_alts];
                        m.len = 0;
                        ck_assert(tu_detail_edit(b.p, b.len, &keys[i], 1, alt->b, alt->n, false,
                                                 0, &m));
                        snprintf(what, sizeof what, "tune %d/%d, detail key %llu: %s", v,
                                 trials, (unsigned long long)keys[i], alt->name);
                        trials_agree(&m, what, &edited);
                    }
            }
            envlog_buf_free(&detail);
            envlog_buf_free(&m);
            envlog_buf_free(&b);
        }
    /* Damaged and edited records still take the plain path where the
     * damage left a value's shape plain, and the walk decides the rest. */
    ck_assert_uint_gt(damaged.plain, 100);
    ck_assert_uint_gt(damaged.walk, damaged.plain);
    ck_assert_uint_gt(edited.plain, 100);
    ck_assert_uint_gt(edited.walk, edited.plain);
}
END_TEST

Suite *suite_snapshot(void)
{
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("compaction");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_compact_keeps_state, 0, 3);
    tcase_add_test(tc, test_retire_never_live);
    tcase_add_test(tc, test_fold_walk_skips_detail);
    tcase_add_test(tc, test_trusted_item_encoding);
    tcase_add_test(tc, test_no_trials_plain);
    tcase_add_test(tc, test_compact_keeps_evidence);
    tcase_add_test(tc, test_index_in_place);
    tcase_add_test(tc, test_first_search);
    tcase_add_test(tc, test_index_damage);
    tcase_add_test(tc, test_index_pair_damage);
    tcase_add_test(tc, test_snapshot_alloc_faults);
    tcase_add_test(tc, test_lookup_read_faults);
    tcase_add_test(tc, test_lookup_gives_memory_back);
    tcase_add_test(tc, test_lookup_across_zero_tail);
    tcase_add_test(tc, test_lookup_long_entries);
    tcase_add_test(tc, test_compact_beside_live_writer);
    tcase_add_test(tc, test_compact_fault_every_call);
    tcase_add_test(tc, test_compact_crash_every_step);
    tcase_add_test(tc, test_auto_compact_crash_every_step);
    suite_add_tcase(s, tc);
    tc = tcase_create("bundles");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bundle_round_trip);
    tcase_add_test(tc, test_bundle_strips_trials);
    tcase_add_test(tc, test_bundle_namespace_filter);
    tcase_add_test(tc, test_local_after_import_and_stale);
    tcase_add_test(tc, test_bundle_of_several_environments);
    tcase_add_test(tc, test_bundle_import_memory);
    tcase_add_test(tc, test_bundle_export_to_writer);
    tcase_add_loop_test(tc, test_bundle_faults, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_hostile_bad_magic);
    tcase_add_test(tc, test_hostile_truncated);
    tcase_add_test(tc, test_hostile_inflates_past_limit);
    tcase_add_test(tc, test_hostile_unknown_schema);
    tcase_add_test(tc, test_hostile_damaged_records);
    tcase_add_test(tc, test_import_rejects_one_entry);
    tcase_add_test(tc, test_sessions_ids);
    suite_add_tcase(s, tc);
    sn_add_trust_tcases(s);
    sn_add_bundle2_tcases(s);
    return s;
}
