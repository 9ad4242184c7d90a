/* SPDX-License-Identifier: MIT */
/*
 * check_replay.h - what the replay suite's files share: namespaces and
 * candidate sets, recording helpers that assert success, state lookups that
 * assert what stands, dumps, directory helpers and the total order as
 * replay gives it.  Defined in check_replay_util.c.
 */
#ifndef ENVLOG_CHECK_REPLAY_H
#define ENVLOG_CHECK_REPLAY_H

#include "replay_int.h"
#include "testutil.h"

#define NS_A "autotune/rt/1.0/sm_90"
#define NS_B "autotune/rt/1.0/sm_80"
#define NS_V "autotune/rt/2.0/sm_90"
#define KNS_A "nvrtc/12.4/sm_90"
#define KNS_B "nvrtc/12.4/sm_80"

extern const char *const SET_A[3];
extern const char *const SET_B[3];

/* An environment directory and its open handle. */
typedef struct rp_renv {
    char *dir;
    envlog_env *env;
} rp_renv;

/* One record where the total order put it. */
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

/* Damage reports as on_damage gave them (the first 32). */
typedef struct rp_dmg_list {
    envlog_damage d[32];
    bool torn[32];
    size_t n;
} rp_dmg_list;

/* Asserts two stamps are the same record's. */
#define rp_assert_stamp(got, want)                                             \
    do {                                                                       \
        envlog_stamp g_ = (got), w_ = (want);                                  \
        ck_assert_msg(rp_stamp_eq(&g_, &w_), "%s: stamp seq %llu, want %llu",  \
                      #got, (unsigned long long)g_.seq,                        \
                      (unsigned long long)w_.seq);                             \
    } while (0)

/* Lets the clock move (1 ms), so the next record is later in the total
 * order than every record before it; rp_nap_us() for shorter naps. */
void rp_settle(void);
void rp_nap_us(long us);

/* A fresh environment under the runner's root; free closes it. */
/* A new environment whose sessions never start a compaction of their own
 * (its config says auto_compact = off), so nothing changes its files behind
 * a test's back; rp_renv_bare() leaves it with no config (the defaults). */
rp_renv rp_renv_new(const char *tag);
rp_renv rp_renv_bare(const char *tag);
void rp_renv_free(rp_renv *r);

/* A session (sync NONE; `seg` is the segment size, 0 for the default). */
envlog_session *rp_sbegin(envlog_env *env, const char *label, uint64_t seg);
void rp_end(envlog_session *s);

/* The tune-set checksum of SET_A or SET_B. */
uint64_t rp_csum(const char *const *set);

/* Records, asserting success; each returns the record's stamp. */
envlog_stamp rp_rtune_full(envlog_session *s, const char *ns, const char *key,
                           const char *const *set, int64_t winner, bool stored,
                           bool imported);
/* A stored local tune over SET_A. */
envlog_stamp rp_rtune(envlog_session *s, const char *ns, const char *key,
                      int64_t winner);
/* Kernel key number `id` (16 bytes derived from it). */
envlog_hash128 rp_kkey(uint8_t id);
/* A compile of kernel `key` with a binary of `size` bytes from `fill` up. */
envlog_stamp rp_rcompile(envlog_session *s, const char *ns, uint8_t key,
                         envlog_outcome outcome, bool imported, uint8_t fill,
                         size_t size);
envlog_stamp rp_rforget(envlog_session *s, envlog_table table, const char *ns,
                        const char *key, uint64_t checksum);
envlog_stamp rp_rforget_kernel(envlog_session *s, const char *ns, uint8_t key);

/* envlog_state_open(), asserting success. */
envlog_state *rp_sopen(envlog_env *env, const envlog_replay_opts *o);
bool rp_stamp_eq(const envlog_stamp *a, const envlog_stamp *b);
/* The entry of (ns, key, SET_A), asserting it stands; and that none does. */
envlog_tune_entry rp_winner(envlog_state *st, const char *ns, const char *key);
void rp_no_winner(envlog_state *st, const char *ns, const char *key,
                  uint64_t checksum);
envlog_kernel_entry rp_kernel(envlog_state *st, const char *ns, uint8_t key);
void rp_no_kernel(envlog_state *st, const char *ns, uint8_t key);
envlog_state_stats rp_stats(envlog_state *st);

/* An envlog_write_fn to a FILE *. */
envlog_err rp_mem_write(void *ctx, const char *text, size_t len);
/* The canonical dump as a string the caller frees: of a state, or of a
 * fresh fold of `env` under `o`. */
char *rp_dump_of(envlog_state *st);
char *rp_dump_env(envlog_env *env, const envlog_replay_opts *o);

/* The names in `dir` (no dot entries), sorted; free with rp_free_names(). */
size_t rp_list_dir(const char *dir, char ***out);
void rp_free_names(char **v, size_t n);
/* <envdir>/sessions/<id>, and the file of one of its segments (caller
 * frees). */
char *rp_session_dir(const char *envdir, const envlog_id128 *id);
char *rp_segment_file(const char *envdir, const envlog_id128 *id, uint32_t seg);

/* Every record of `env` as envlog_replay_each() hands them out, in order. */
envlog_err rp_collect(void *ctx, const envlog_replay_rec *r);
rp_placed_list rp_order_of(envlog_env *env, const envlog_replay_opts *o);
void rp_placed_free(rp_placed_list *l);

/* An on_damage callback filling an rp_dmg_list (ctx). */
void rp_on_dmg(void *ctx, const envlog_damage *d, bool torn);

/* The tcases of check_replay_history.c: order, until, damage, faults. */
void rp_add_history_tcases(Suite *s);

#endif /* ENVLOG_CHECK_REPLAY_H */
