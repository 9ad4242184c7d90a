/* SPDX-License-Identifier: MIT */
/*
 * check_snapshot_trust.c - the snapshot held to the log's standard:
 *  - every size and alignment of a snapshot's last records reads back;
 *  - the damage catalogue over snapshot/current and over a bundle: each
 *    flipped bit leaves the state byte-identical or is reported, is never
 *    made permanent by a compaction, and `verify --fix` restores it;
 *  - one reader: a malformed record is dropped by the fold and by the full
 *    reader alike, before and after compaction;
 *  - compaction never changes what `why` says, at any evidence level;
 *  - a torn tail is only what an interrupted append leaves;
 *  - an ENTRY whose winner is out of range is damage, not a crash;
 *  - many processes creating one environment at once all succeed;
 *  - FIFOs, links, directories and devices planted where envlog's files
 *    should be never hang a reader and are reported;
 *  - stray entries in a session directory never stop a compaction.
 */
#include "check_replay.h"
#include "check_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

static envlog_err mem_write(void *ctx, const char *text, size_t len)
{
    return envlog_buf_append(ctx, text, len);
}

static char *dump(envlog_state *st)
{
    envlog_buf b = {0};
    ck_assert_ok(envlog_state_dump(st, mem_write, &b));
    envlog_buf_append(&b, "", 1);
    return (char *)b.p;
}

static void count_dmg(void *ctx, const envlog_damage *d, bool torn)
{
    (void)d;
    (void)torn;
    (*(int *)ctx)++;
}

/* ------------------------------------------------ sizes and alignments */

/* A snapshot of one user entry whose record is `pad` bytes longer than the
 * smallest, so its SEAL lands at every offset of a block in turn: it must
 * read back, lazily and whole, every time. */
static void one_size(size_t pad, envlog_buf *out)
{
    static uint8_t body[3 * 32768];
    envlog_buf b = {0};
    /* The body: a byte string of `pad` bytes. */
    envlog_buf item = {0};
    ck_assert_ok(envlog_enc_bytes(&item, body, pad));
    envlog_stamp st = {{{1}}, 1, 0};
    envlog_user u = {"pad", {item.p, item.len}};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_USER, &st, ENVLOG_OBSERVED,
                                     ENVLOG_LEVEL_FULL, &u));
    envlog_snapw w = {0};
    envlog_snap_item it = {.kind = ENVLOG_KIND_ENTRY, .table = ENVLOG_TABLE_USER,
                           .stamp = st, .unix_ns = 5, .record = {b.p, b.len}};
    ck_assert_ok(envlog_snapw_add(&w, &it, false, 0));
    envlog_snap_manifest m = {.schema = ENVLOG_BUNDLE_SCHEMA, .name = "",
                              .envlog_version = "t", .users = 1};
    envlog_id128 id = {{7}};
    out->len = 0;
    ck_assert_ok(envlog_snapw_finish(&w, &m, &id, "snapshot", out));
    envlog_snapw_free(&w);
    envlog_buf_free(&b);
    envlog_buf_free(&item);
}

START_TEST(test_seal_every_alignment)
{
    envlog_buf file = {0};
    size_t checked = 0, split = 0;
    one_size(0, &file);
    size_t base = file.len;
    /* Every end offset across the first three block boundaries, and the
     * ones between on a coarser step. */
    for (size_t pad = 0; base + pad < 3 * 32768 + 64; pad++) {
        size_t end = base + pad, off = end % 32768;
        if (off > 128 && off < 32768 - 128 && pad % 61)
            continue;
        one_size(pad, &file);
        envlog_snap *s;
        uint64_t seed = envlog_seg_seed(&(envlog_id128){{7}}, 0);
        tu_check(envlog_frames_end_in_seal(file.p, file.len, seed),
                 "%zu bytes: the SEAL is not seen at the end", file.len);
        /* A SEAL that did not fit in its block is cut in two. */
        split += file.len % 32768 < 40 && file.len % 32768 > 7;
        tu_check(envlog_snap_load(file.p, file.len, false, &s) == ENVLOG_OK,
                 "%zu bytes: refused lazily: %s", file.len, envlog_errmsg());
        envlog_snap_free(s);
        tu_check(envlog_snap_load(file.p, file.len, true, &s) == ENVLOG_OK,
                 "%zu bytes: refused whole: %s", file.len, envlog_errmsg());
        envlog_snap_counts c;
        tu_check(envlog_snap_read_counts(s, &c) && c.intact && c.users == 1,
                 "%zu bytes: not whole", file.len);
        envlog_snap_free(s);
        checked++;
    }
    ck_assert_uint_gt(checked, 1000);
    ck_assert_uint_gt(split, 10);
    envlog_buf_free(&file);
}
END_TEST

/* The same through compaction: environments whose snapshot ends at every
 * offset near a block boundary compact and read back (status, replay,
 * compaction again). */
/* The size of snapshot/current after compacting a user record of `n`
 * bytes, checking the state reads back the same. */
static off_t compact_one(size_t n)
{
    {
        rp_renv r = rp_renv_new("align");
        envlog_session *s = rp_sbegin(r.env, "align", 0);
        static uint8_t body[80000];
        envlog_buf item = {0};
        ck_assert_ok(envlog_enc_bytes(&item, body, n));
        ck_assert_ok(envlog_record_user(s, "pad", item.p, item.len, ENVLOG_CHANGED, NULL));
        envlog_buf_free(&item);
        rp_end(s);
        char *before = rp_dump_env(r.env, NULL);
        ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL));
        off_t size = tu_size(tu_path(r.dir, "snapshot/current"));
        char *after = rp_dump_env(r.env, &(envlog_replay_opts){.check_snapshot = true});
        ck_assert_str_eq(before, after);
        /* Read as a runtime reads it: the new snapshot itself, no damage. */
        envlog_state *st = rp_sopen(r.env, NULL);
        envlog_state_stats ss = rp_stats(st);
        ck_assert_msg(ss.snapshot_generation == 1 && !ss.snapshot_damaged,
                      "a snapshot of %lld bytes is not read back", (long long)size);
        envlog_state_close(st);
        ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL));
        free(before);
        free(after);
        rp_renv_free(&r);
        return size;
    }
}

START_TEST(test_compaction_at_every_alignment)
{
    /* Walk the end of the snapshot across the boundary of its second
     * block, byte by byte (the SEAL split in two on the way). */
    off_t s0 = compact_one(40000);
    int ends_near = 0;
    for (int delta = -48; delta <= 24; delta++) {
        off_t size = compact_one((size_t)(40000 + (65536 - s0) + delta));
        ends_near += size % 32768 < 64 || size % 32768 > 32768 - 64;
    }
    ck_assert_int_gt(ends_near, 40);
}
END_TEST

/* ----------------------------------------------------- damage catalogue */

/* An environment with two generations: one compaction folded round 0,
 * the next round 1; round 2 stays in its session. */
static rp_renv layered(const char *tag)
{
    rp_renv r = rp_renv_new(tag);
    sn_populate(r.env, 0);
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL));
    sn_populate(r.env, 1);
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL));
    sn_populate(r.env, 2);
    return r;
}

/* One flip of snapshot/current, seen through a view of the file: readers
 * that read the snapshot whole give the whole state; readers that read it
 * as lookups need it give it or say they met damage; the check says
 * damage exactly when the file is not whole. */
static void probe_flip(rp_renv *r, const char *want, int64_t at, uint8_t mask, bool *saw)
{
    tu_view_set("current", UINT64_MAX, at, mask);
    int dmg = 0;
    envlog_state *st;
    envlog_replay_opts o = {.on_damage = count_dmg, .ctx = &dmg, .check_snapshot = true};
    ck_assert_ok(envlog_state_open(r->env, &o, &st));
    char *got = dump(st);
    tu_check(!strcmp(got, want), "byte %lld bit mask %02x: the state changed",
             (long long)at, mask);
    free(got);
    envlog_state_close(st);
    envlog_snapshot_report rep;
    ck_assert_ok(envlog_snapshot_check(r->env, NULL, NULL, NULL, &rep));
    tu_check(rep.current.intact == (dmg == 0), "byte %lld: check says %s, readers met %d",
             (long long)at, rep.current.intact ? "whole" : "damaged", dmg);
    /* Lazily: the same state, or damage said. */
    ck_assert_ok(envlog_state_open(r->env, NULL, &st));
    got = dump(st);
    envlog_state_stats ss;
    envlog_state_stats_get(st, &ss);
    tu_check(!strcmp(got, want) || ss.snapshot_damaged || ss.snapshot_lost ||
                 ss.snapshot_generation == 2,
             "byte %lld: a lazy reader lost entries without a word", (long long)at);
    free(got);
    envlog_state_close(st);
    tu_view_clear();
    if (dmg)
        *saw = true;
}

START_TEST(test_snapshot_damage_catalogue)
{
    rp_renv r = layered("dmg-cat");
    char *want = rp_dump_env(r.env, NULL);
    const char *cur = tu_path(r.dir, "snapshot/current");
    size_t n;
    uint8_t *good = tu_read(cur, &n);
    bool saw = false;
    /* Every offset, the bit turning with the offset; every bit of the
     * first 600 bytes (HEADER, MANIFEST, INDEX). */
    for (size_t at = 0; at < n; at++)
        probe_flip(&r, want, (int64_t)at, (uint8_t)(1u << (at % 8)), &saw);
    for (size_t at = 0; at < 600 && at < n; at++)
        for (int bit = 0; bit < 8; bit++)
            if (bit != (int)(at % 8))
                probe_flip(&r, want, (int64_t)at, (uint8_t)(1u << bit), &saw);
    ck_assert(saw);
    free(good);
    free(want);
    rp_renv_free(&r);
}
END_TEST

/* For a sample of flips, for real: compaction refuses to build on it (the
 * damage is never made permanent), verify --fix restores the generation
 * before, keeps the damaged file aside, and then everything is whole. */
START_TEST(test_snapshot_damage_repair)
{
    rp_renv r = layered("dmg-fix");
    char *want = rp_dump_env(r.env, NULL);
    envlog_env_close(r.env);
    const char *cur = tu_path(r.dir, "snapshot/current");
    size_t n;
    uint8_t *good = tu_read(cur, &n);
    char *copy = tu_mkdtemp("dmg-fix-copy");
    int refused = 0;
    for (size_t at = 3; at < n; at += 89) {
        tu_rmrf(copy);
        tu_copytree(r.dir, copy);
        const char *ccur = tu_path(copy, "snapshot/current");
        uint8_t *bad = malloc(n);
        memcpy(bad, good, n);
        bad[at] ^= 0x10;
        tu_write(ccur, bad, n);
        free(bad);
        envlog_env *env = tu_env(copy);
        envlog_snapshot_report rep;
        ck_assert_ok(envlog_snapshot_check(env, NULL, NULL, NULL, &rep));
        envlog_err e = envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL);
        if (!rep.current.intact) {
            refused++;
            ck_assert_msg(e == ENVLOG_CORRUPT, "byte %zu: compaction over a damaged snapshot: "
                          "%s", at, envlog_strerror(e));
            ck_assert(rep.previous.intact);
            envlog_snapshot_fix fix;
            ck_assert_ok(envlog_snapshot_repair(env, &fix));
            ck_assert(fix.restored);
            ck_assert(tu_exists(tu_path(copy, "snapshot/current.broken")));
            ck_assert_ok(envlog_snapshot_check(env, NULL, NULL, NULL, &rep));
            ck_assert(rep.current.intact);
            ck_assert_ok(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL));
        } else {
            ck_assert_ok(e);
        }
        envlog_env_close(env);
        char *got = sn_dump(copy, NULL);
        ck_assert_msg(!strcmp(want, got), "byte %zu: the state changed", at);
        free(got);
    }
    ck_assert_int_gt(refused, 5);
    /* Current gone altogether: readers stand on previous; the repair puts
     * it back. */
    tu_rmrf(copy);
    tu_copytree(r.dir, copy);
    ck_assert_int_eq(unlink(tu_path(copy, "snapshot/current")), 0);
    char *got = sn_dump(copy, NULL);
    ck_assert_str_eq(want, got);
    free(got);
    envlog_env *env = tu_env(copy);
    ck_assert_err(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL), ENVLOG_CORRUPT);
    envlog_snapshot_fix fix;
    ck_assert_ok(envlog_snapshot_repair(env, &fix));
    ck_assert(fix.restored);
    envlog_env_close(env);
    got = sn_dump(copy, NULL);
    ck_assert_str_eq(want, got);
    free(got);
    tu_rmrf(copy);
    free(copy);
    free(good);
    free(want);
    r.env = tu_env(r.dir);
    rp_renv_free(&r);
}
END_TEST

/* The damage catalogue over a bundle: every offset of the snapshot inside
 * it flipped (and compressed again): an import takes exactly what a clean
 * import takes, or fewer entries with the rest counted rejected, or
 * nothing; never an entry a clean import would not give. */
typedef struct same_ctx {
    envlog_state *clean;
    size_t n;
    bool differs;
} same_ctx;

static envlog_err in_clean(void *ctx, const envlog_entry *e)
{
    same_ctx *c = ctx;
    c->n++;
    envlog_tune_entry t;
    envlog_kernel_entry k;
    if (e->tune)
        c->differs |= envlog_state_winner(c->clean, e->tune->ns, e->tune->key,
                                          e->tune->checksum, &t) != ENVLOG_OK ||
                      t.winner_index != e->tune->winner_index;
    else
        c->differs |= envlog_state_kernel(c->clean, e->kernel->ns, &e->kernel->kernel_key,
                                          &k) != ENVLOG_OK ||
                      memcmp(k.binary_hash.b, e->kernel->binary_hash.b, 16);
    return ENVLOG_OK;
}

START_TEST(test_bundle_damage_catalogue)
{
    rp_renv r = layered("dmg-bundle");
    const char *path = tu_path(r.dir, "b.envb");
    char *bpath = strdup(path);
    envlog_bundle_opts bo = {.name = "b", .evidence = ENVLOG_EVIDENCE_WINNERS,
                             .zstd_level = 1, .format = 1};
    ck_assert_ok(envlog_bundle_export(r.env, &bo, bpath, NULL));
    size_t zn;
    uint8_t *z = tu_read(bpath, &zn);
    unsigned long long rn = ZSTD_getFrameContentSize(z, zn);
    uint8_t *raw = malloc(rn), *zz = malloc(ZSTD_compressBound(rn));
    ck_assert_uint_eq(ZSTD_decompress(raw, rn, z, zn), rn);
    rp_renv clean = rp_renv_new("dmg-bundle-clean");
    envlog_import_report rep;
    ck_assert_ok(envlog_bundle_import_memory(clean.env, z, zn, &rep));
    uint64_t all = rep.taken;
    envlog_state *cst = rp_sopen(clean.env, NULL);
    size_t partial = 0, refused = 0;
    for (size_t at = 0; at < rn; at++) {
        raw[at] ^= (uint8_t)(1u << (at % 8));
        size_t k = ZSTD_compress(zz, ZSTD_compressBound(rn), raw, rn, 1);
        raw[at] ^= (uint8_t)(1u << (at % 8));
        rp_renv t = rp_renv_new("dmg-bundle-t");
        envlog_err e = envlog_bundle_import_memory(t.env, zz, k, &rep);
        if (e) {
            tu_check(e == ENVLOG_FORMAT || e == ENVLOG_BAD_DATA, "byte %zu: import: %s", at,
                     envlog_strerror(e));
            refused++;
        } else {
            tu_check(rep.taken == all || rep.rejected > 0,
                     "byte %zu: %llu taken of %llu and none rejected", at,
                     (unsigned long long)rep.taken, (unsigned long long)all);
            partial += rep.taken < all;
            envlog_state *st = rp_sopen(t.env, NULL);
            same_ctx c = {cst, 0, false};
            ck_assert_ok(envlog_state_each(st, in_clean, &c));
            tu_check(!c.differs, "byte %zu: an entry a clean import does not give", at);
            envlog_state_close(st);
        }
        rp_renv_free(&t);
    }
    ck_assert_uint_gt(refused, 0);
    ck_assert_uint_gt(partial, 0);
    envlog_state_close(cst);
    rp_renv_free(&clean);
    free(raw);
    free(zz);
    free(z);
    free(bpath);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------ one reader */

/* A format 2 record whose detail does not keep its rules (a trial naming a
 * candidate the tune does not have) stands for every reader: the full
 * reader hands it out saying why, without its trials; the fold takes it;
 * a compaction keeps it as it is. */
START_TEST(test_detail_problem_stands)
{
    rp_renv r = rp_renv_new("detail-problem");
    static const char *const cands[] = {"a", "b"};
    envlog_trial tr = {.name = "b", .index = 1, .samples = 3, .median_ns = 5};
    envlog_tune t = {.ns = NS_A, .candidates = cands, .n_candidates = 2, .winner = 1,
                     .stored = true, .checksum = envlog_tune_checksum(cands, 2),
                     .trials = &tr, .n_trials = 1, .policy = "p"};
    envlog_buf recs[2] = {{0}}, edited = {0};
    t.key = "good";
    tu_record_with_seq(&recs[0], ENVLOG_KIND_TUNE, 1, 10, &t);
    t.key = "bad-detail";
    tu_record_with_seq(&recs[1], ENVLOG_KIND_TUNE, 2, 20, &t);
    static const uint64_t idx[] = {8, 0, 1};
    ck_assert(tu_detail_edit(recs[1].p, recs[1].len, idx, 3, (const uint8_t *)"\x18\x63", 2,
                             false, 0, &edited));
    const uint8_t *p[2] = {recs[0].p, edited.p};
    size_t n[2] = {recs[0].len, edited.len};
    envlog_id128 id = tu_raw_session(r.env, p, n, 2, true);
    envlog_reader *rd;
    const envlog_record *rec;
    ck_assert_ok(envlog_reader_open(r.env, &id, &rd));
    int seen = 0, problems = 0;
    while (envlog_reader_next(rd, &rec) == ENVLOG_OK) {
        seen++;
        if (rec->kind == ENVLOG_KIND_TUNE && !strcmp(rec->u.tune.key, "bad-detail")) {
            ck_assert_ptr_nonnull(rec->detail_problem);
            ck_assert_ptr_nonnull(strstr(rec->detail_problem, "candidate"));
            ck_assert_uint_eq(rec->u.tune.n_trials, 0);
            ck_assert_int_eq(rec->u.tune.winner, 1);
            problems++;
        } else {
            ck_assert_ptr_null(rec->detail_problem);
        }
    }
    ck_assert_int_eq(envlog_reader_state(rd), ENVLOG_STATE_SEALED);
    envlog_reader_close(rd);
    ck_assert_int_eq(seen, 3);
    ck_assert_int_eq(problems, 1);
    for (int round = 0; round < 2; round++) {
        envlog_state *st = rp_sopen(r.env, NULL);
        ck_assert_uint_eq(rp_stats(st).tunes, 2);
        ck_assert_uint_eq(rp_stats(st).damaged, 0);
        envlog_tune_entry te;
        ck_assert_ok(envlog_state_winner(st, NS_A, "bad-detail", t.checksum, &te));
        ck_assert_str_eq(te.winner, "b");
        envlog_state_close(st);
        /* The same after a compaction: the record is kept as it is. */
        envlog_compact_report cr;
        ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_ALL, &cr));
    }
    envlog_buf_free(&recs[0]);
    envlog_buf_free(&recs[1]);
    envlog_buf_free(&edited);
    rp_renv_free(&r);
}
END_TEST


/* A tune whose trials are text (a field the fold does not store) and one
 * with its key twice: the fold and the full reader both drop them, before
 * and after a compaction. */
START_TEST(test_one_reader_across_compaction)
{
    rp_renv r = rp_renv_new("one-reader");
    static const char *const cands[] = {"a", "b"};
    envlog_tune t = {.ns = NS_A, .candidates = cands, .n_candidates = 2, .winner = 1,
                     .stored = true, .checksum = envlog_tune_checksum(cands, 2)};
    envlog_buf recs[5] = {{0}};
    const char *keys[5] = {"good-0", "bad-trials", "good-1", "bad-twice", "good-2"};
    for (int i = 0; i < 5; i++) {
        t.key = keys[i];
        tu_record_with_seq(&recs[i], ENVLOG_KIND_TUNE, (uint64_t)i + 1, 10u * (uint64_t)i, &t);
    }
    envlog_buf edited = {0};
    static const uint64_t trials[] = {8};
    ck_assert(tu_cbor_edit(recs[1].p, recs[1].len, trials, 0, (const uint8_t *)"\x61x", 2,
                           true, 8, &edited));
    envlog_buf_free(&recs[1]);
    recs[1] = edited;
    edited = (envlog_buf){0};
    ck_assert(tu_cbor_edit(recs[3].p, recs[3].len, trials, 0, (const uint8_t *)"\x61k", 2,
                           true, 5, &edited));
    envlog_buf_free(&recs[3]);
    recs[3] = edited;
    const uint8_t *p[5];
    size_t n[5];
    for (int i = 0; i < 5; i++) {
        p[i] = recs[i].p;
        n[i] = recs[i].len;
    }
    envlog_id128 id = tu_raw_session(r.env, p, n, 5, true);
    tu_readback rb;
    tu_read_session(r.env, &id, &rb);
    ck_assert_uint_eq(rb.n, 4); /* the session record and three tunes */
    ck_assert_uint_ge(rb.n_corrupt, 2); /* each, and the seqs they leave out */
    tu_readback_free(&rb);
    int dmg = 0;
    envlog_state *st = rp_sopen(r.env, &(envlog_replay_opts){.on_damage = count_dmg,
                                                             .ctx = &dmg});
    ck_assert_uint_eq(rp_stats(st).tunes, 3);
    ck_assert_int_ge(dmg, 2);
    envlog_state_close(st);
    /* Compaction keeps the damaged session and the same three tunes. */
    envlog_compact_report cr;
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_ALL, &cr));
    ck_assert_uint_eq(cr.sessions_damaged, 1);
    st = rp_sopen(r.env, &(envlog_replay_opts){.check_snapshot = true});
    ck_assert_uint_eq(rp_stats(st).tunes, 3);
    rp_no_winner(st, NS_A, "bad-trials", t.checksum);
    rp_no_winner(st, NS_A, "bad-twice", t.checksum);
    envlog_state_close(st);
    for (int i = 0; i < 5; i++)
        envlog_buf_free(&recs[i]);
    rp_renv_free(&r);
}
END_TEST

/* -------------------------------------------------- why across compaction */

typedef struct why_line {
    char text[512];
} why_line;

typedef struct why_ctx {
    why_line *v;
    size_t n, cap;
} why_ctx;

static envlog_err why_of(void *ctx, const envlog_entry *e)
{
    why_ctx *w = ctx;
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 32;
        w->v = realloc(w->v, w->cap * sizeof *w->v);
    }
    char id[33];
    const envlog_stamp *st = e->tune ? &e->tune->stamp : &e->kernel->stamp;
    envlog_id_format(&st->session, id);
    snprintf(w->v[w->n++].text, sizeof w->v[0].text, "%s %s rule=%d origin=%d set_by=%s:%llu",
             e->tune ? e->tune->ns : e->kernel->ns, e->tune ? e->tune->key : e->kernel->name,
             e->tune ? (int)e->tune->rule : (int)e->kernel->rule,
             e->tune ? (int)e->tune->origin : (int)e->kernel->origin, id,
             (unsigned long long)st->seq);
    return ENVLOG_OK;
}

/* What `why` says of every standing entry: the rule, the origin, the
 * record that set it. */
static char *whys(envlog_env *env)
{
    envlog_state *st = rp_sopen(env, &(envlog_replay_opts){.check_snapshot = true});
    why_ctx w = {0};
    ck_assert_ok(envlog_state_each(st, why_of, &w));
    envlog_state_close(st);
    size_t len = 1;
    for (size_t i = 0; i < w.n; i++)
        len += strlen(w.v[i].text) + 1;
    char *s = malloc(len);
    s[0] = 0;
    for (size_t i = 0; i < w.n; i++) {
        strcat(s, w.v[i].text);
        strcat(s, "\n");
    }
    free(w.v);
    return s;
}

START_TEST(test_why_unchanged_by_compaction)
{
    static const envlog_evidence levels[] = {ENVLOG_EVIDENCE_NONE, ENVLOG_EVIDENCE_WINNERS,
                                             ENVLOG_EVIDENCE_ALL};
    rp_renv r = rp_renv_new("why-compact");
    /* Imported values, one replaced by a local value later (in another
     * session), one left imported; first local values. */
    envlog_session *s = rp_sbegin(r.env, "import", 0);
    rp_rtune_full(s, NS_A, "replaced", SET_A, 0, true, true);
    rp_rtune_full(s, NS_A, "kept-imported", SET_A, 1, true, true);
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, true, 3, 100);
    rp_end(s);
    rp_settle();
    s = rp_sbegin(r.env, "local", 0);
    rp_rtune(s, NS_A, "replaced", 2);
    rp_rtune(s, NS_A, "local", 1);
    rp_rcompile(s, KNS_A, 1, ENVLOG_COMPILED, false, 5, 100);
    rp_end(s);
    char *before = whys(r.env);
    ck_assert_ptr_nonnull(strstr(before, "replaced rule=1 origin=0"));
    char *dump0 = rp_dump_env(r.env, NULL);
    ck_assert_ok(envlog_compact(r.env, levels[_i], NULL));
    char *one = whys(r.env);
    ck_assert_str_eq(before, one);
    ck_assert_ok(envlog_compact(r.env, levels[_i], NULL));
    char *two = whys(r.env);
    ck_assert_str_eq(before, two);
    /* A local value after two compactions still replaces nothing it
     * should not, and the dump never changed. */
    char *dump2 = rp_dump_env(r.env, NULL);
    ck_assert_str_eq(dump0, dump2);
    free(before);
    free(one);
    free(two);
    free(dump0);
    free(dump2);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------- torn tails */

/* A last segment overwritten with another segment's bytes is damage, not a
 * torn tail: verify --fix leaves it as it is. */
START_TEST(test_overwritten_segment_is_not_torn)
{
    rp_renv r = rp_renv_new("overwrite");
    envlog_session *a = rp_sbegin(r.env, "a", 0), *b = rp_sbegin(r.env, "b", 0);
    for (int i = 0; i < 20; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        rp_rtune(a, NS_A, key, i % 3);
        rp_rtune(b, NS_B, key, i % 3);
    }
    envlog_id128 ia = envlog_session_id(a), ib = envlog_session_id(b);
    rp_end(a);
    rp_end(b);
    char *fa = rp_segment_file(r.dir, &ia, 0), *fb = rp_segment_file(r.dir, &ib, 0);
    size_t n;
    uint8_t *other = tu_read(fb, &n);
    tu_write(fa, other, n);
    tu_readback rb;
    tu_read_session(r.env, &ia, &rb);
    ck_assert_uint_eq(rb.n_truncated, 0);
    ck_assert_uint_ge(rb.n_corrupt, 1);
    ck_assert_int_eq(rb.state, ENVLOG_STATE_DAMAGED);
    tu_readback_free(&rb);
    envlog_repair rep;
    ck_assert_ok(envlog_session_repair(r.env, &ia, &rep));
    ck_assert(!rep.repaired);
    ck_assert_uint_eq((size_t)tu_size(fa), n);
    /* A dead, unsealed session whose last record spans three blocks,
     * damaged in its first: what follows that block is not zeros, so it is
     * not what an interrupted append leaves: damage, never cut. */
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        envlog_session *c;
        envlog_session_opts o = tu_opts("c", 0);
        static uint8_t body[70000];
        envlog_buf item = {0};
        if (envlog_session_begin(r.env, &o, &c) || envlog_enc_bytes(&item, body, sizeof body) ||
            envlog_record_user(c, "big", item.p, item.len, ENVLOG_CHANGED, NULL))
            _exit(1);
        envlog_id128 id = envlog_session_id(c);
        if (write(pfd[1], id.b, 16) != 16)
            _exit(2);
        _exit(0); /* gone without a SEAL */
    }
    envlog_id128 ic;
    ck_assert_int_eq(read(pfd[0], ic.b, 16), 16);
    int wst;
    waitpid(pid, &wst, 0);
    ck_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    close(pfd[0]);
    close(pfd[1]);
    char *fc = rp_segment_file(r.dir, &ic, 0);
    size_t cn;
    uint8_t *cb = tu_read(fc, &cn);
    cb[2000] ^= 0xff; /* inside the big record's FIRST fragment */
    tu_write(fc, cb, cn);
    tu_read_session(r.env, &ic, &rb);
    ck_assert_uint_eq(rb.n_truncated, 0);
    ck_assert_uint_ge(rb.n_corrupt, 1);
    tu_readback_free(&rb);
    ck_assert_ok(envlog_session_repair(r.env, &ic, &rep));
    ck_assert(!rep.repaired);
    /* And one whose last fragment (opening block 2) has no header yet, as
     * a writer killed while copying it leaves it, is a torn tail. */
    cb[2000] ^= 0xff;
    ck_assert_uint_gt(cn, 65536 + 7);
    memset(cb + 65536, 0, 7);
    tu_write(fc, cb, cn);
    tu_read_session(r.env, &ic, &rb);
    ck_assert_uint_eq(rb.n_truncated, 1);
    ck_assert_uint_eq(rb.n_corrupt, 0);
    tu_readback_free(&rb);
    free(cb);
    free(fc);
    free(other);
    free(fa);
    free(fb);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------ a winner out of range */

/* A bundle whose tune ENTRY names a winner past its candidates: counted a
 * damaged record by inspect, rejected by import, and the state a diff reads
 * from it holds the other entries and never indexes past the candidates. */
START_TEST(test_entry_winner_out_of_range)
{
    rp_renv r = rp_renv_new("winner-range");
    envlog_session *s = rp_sbegin(r.env, "w", 0);
    rp_rtune(s, NS_A, "w0", 0);
    rp_rtune(s, NS_A, "w1", 1);
    rp_end(s);
    char *bp = strdup(tu_path(r.dir, "w.envb"));
    envlog_bundle_opts bo = {.name = "w", .evidence = ENVLOG_EVIDENCE_NONE, .zstd_level = 1,
                             .format = 1};
    ck_assert_ok(envlog_bundle_export(r.env, &bo, bp, NULL));
    size_t zn;
    uint8_t *z = tu_read(bp, &zn);
    unsigned long long rn = ZSTD_getFrameContentSize(z, zn);
    uint8_t *raw = malloc(rn);
    ck_assert_uint_eq(ZSTD_decompress(raw, rn, z, zn), rn);
    envlog_snap *snap;
    ck_assert_ok(envlog_snap_load(raw, rn, true, &snap));
    envlog_snapw w = {0};
    envlog_snap_item it;
    envlog_record rec;
    envlog_buf edited = {0}, inner = {0};
    bool broke = false;
    envlog_snap_rewind(snap);
    while (envlog_snap_next(snap, &it, &rec) == ENVLOG_OK) {
        if (!broke && it.kind == ENVLOG_KIND_ENTRY && it.table == ENVLOG_TABLE_TUNE) {
            static const uint64_t winner[] = {11};
            ck_assert(tu_cbor_edit(it.record.data, it.record.size, winner, 1,
                                   (const uint8_t *)"\x18\x63", 2, false, 0, &inner));
            it.record.data = inner.p;
            it.record.size = inner.len;
            broke = true;
        }
        ck_assert_ok(envlog_snapw_add(&w, &it, false, 0));
    }
    envlog_snap_manifest m = *envlog_snap_manifest_get(snap);
    envlog_id128 id;
    ck_assert_ok(envlog_id_new(&id));
    ck_assert_ok(envlog_snapw_finish(&w, &m, &id, "bundle", &edited));
    size_t cap = ZSTD_compressBound(edited.len);
    uint8_t *z2 = malloc(cap);
    size_t z2n = ZSTD_compress(z2, cap, edited.p, edited.len, 1);
    envlog_bundle_info *info;
    ck_assert_ok(envlog_bundle_inspect_memory(z2, z2n, &info));
    ck_assert_uint_eq(info->bad_records, 1);
    envlog_bundle_info_free(info);
    tu_write(bp, z2, z2n);
    envlog_state *st;
    ck_assert_ok(envlog_bundle_state(bp, &st));
    char *d = dump(st); /* walks every entry: no out-of-range read */
    free(d);
    ck_assert_uint_eq(rp_stats(st).tunes, 1);
    ck_assert_uint_eq(rp_stats(st).snapshot_lost, 1);
    envlog_state_close(st);
    rp_renv t = rp_renv_new("winner-range-in");
    envlog_import_report ir;
    ck_assert_ok(envlog_bundle_import(t.env, bp, &ir));
    ck_assert_uint_eq(ir.taken, 1);
    ck_assert_uint_eq(ir.rejected, 1);
    rp_renv_free(&t);
    envlog_buf_free(&edited);
    envlog_buf_free(&inner);
    envlog_snapw_free(&w);
    envlog_snap_free(snap);
    free(raw);
    free(z);
    free(z2);
    free(bp);
    rp_renv_free(&r);
}
END_TEST

/* -------------------------------------------------- concurrent creation */

/* 8 processes open (creating) one new environment at the same moment, 100
 * rounds: all of them, every time; half the rounds import a bundle into
 * it instead. */
START_TEST(test_concurrent_creation)
{
    rp_renv src = rp_renv_new("cc-src");
    envlog_session *s = rp_sbegin(src.env, "src", 0);
    rp_rtune(s, NS_A, "cc", 1);
    rp_end(s);
    char *bp = strdup(tu_path(src.dir, "cc.envb"));
    envlog_bundle_opts bo = {.name = "cc", .zstd_level = 1};
    ck_assert_ok(envlog_bundle_export(src.env, &bo, bp, NULL));
    char *root = tu_mkdtemp("cc");
    int failures = 0;
    for (int round = 0; round < 100; round++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/r%d/env", root, round);
        int go[2];
        ck_assert_int_eq(pipe(go), 0);
        pid_t kids[8];
        for (int k = 0; k < 8; k++) {
            kids[k] = fork();
            ck_assert_int_ge(kids[k], 0);
            if (kids[k] == 0) {
                close(go[1]);
                char c;
                if (read(go[0], &c, 1) != 0)
                    _exit(9);
                envlog_env *env;
                if (envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env)) {
                    fprintf(stderr, "concurrent creation, round %d: open: %s\n", round,
                            envlog_errmsg());
                    _exit(1);
                }
                if (round % 2) {
                    envlog_import_report ir;
                    if (envlog_bundle_import(env, bp, &ir)) {
                        fprintf(stderr, "concurrent creation, round %d: import: %s\n", round,
                                envlog_errmsg());
                        _exit(2);
                    }
                }
                envlog_env_close(env);
                _exit(0);
            }
        }
        close(go[0]);
        close(go[1]); /* all start at once */
        for (int k = 0; k < 8; k++) {
            int st;
            ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
            if (WIFSIGNALED(st))
                fprintf(stderr, "concurrent creation, round %d: a process died of signal %d\n",
                        round, WTERMSIG(st));
            failures += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
        /* One marker, the environment whole; the entry imported. */
        envlog_env *env;
        ck_assert_ok(envlog_env_open(dir, 0, &env));
        if (round % 2) {
            envlog_state *st = rp_sopen(env, NULL);
            rp_winner(st, NS_A, "cc");
            envlog_state_close(st);
        }
        envlog_env_close(env);
    }
    ck_assert_int_eq(failures, 0);
    tu_rmrf(root);
    free(root);
    free(bp);
    rp_renv_free(&src);
}
END_TEST

/* --------------------------------------------------------- planted files */

typedef enum plant { P_FIFO, P_LINK, P_DIR, P_DEVICE, P_FILE, P_N } plant;
static const char *const plant_names[] = {"a FIFO", "a symbolic link", "a directory",
                                          "a device", "a regular file"};

static void plant_at(const char *path, plant p)
{
    tu_rmrf(path);
    unlink(path);
    int rc = 0;
    switch (p) {
    case P_FIFO: rc = mkfifo(path, 0600); break;
    case P_LINK: rc = symlink("/dev/zero", path); break;
    case P_DIR: rc = mkdir(path, 0700); break;
    case P_DEVICE:
        rc = geteuid() == 0 ? mknod(path, S_IFCHR | 0600, makedev(1, 5)) /* zero */
                            : symlink("/dev/zero", path);
        break;
    case P_FILE: tu_write(path, "junk", 4); break;
    case P_N: break;
    }
    ck_assert_msg(rc == 0, "planting at %s: %s", path, strerror(errno));
}

/* Everything a reader and a maintainer do, in a child that must finish
 * within 20 s (no open() may wait on a FIFO). */
static int exercise(const char *dir)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(20);
        envlog_env *env;
        envlog_err e = envlog_env_open(dir, 0, &env);
        if (e)
            _exit(e == ENVLOG_FORMAT || e == ENVLOG_BAD_DATA ? 10 : 11);
        envlog_state *st;
        envlog_replay_opts o = {.check_snapshot = true};
        if (envlog_state_open(env, &o, &st) == ENVLOG_OK) {
            envlog_buf b = {0};
            envlog_state_dump(st, mem_write, &b);
            envlog_buf_free(&b);
            envlog_state_close(st);
        }
        envlog_session_info *in;
        size_t n;
        if (!envlog_sessions_list(env, &in, &n))
            envlog_sessions_free(in, n);
        envlog_snapshot_report rep;
        envlog_snapshot_check(env, NULL, NULL, NULL, &rep);
        envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL);
        envlog_session *s;
        if (!envlog_session_begin(env, NULL, &s)) {
            tu_record_tune(s, "planted", 1, 0, NULL);
            envlog_session_end(s);
        }
        envlog_env_close(env);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(!WIFSIGNALED(st), "%s: killed by signal %d (a hang, or a crash)", dir,
                  WTERMSIG(st));
    return WEXITSTATUS(st);
}

START_TEST(test_planted_files)
{
    rp_renv r = layered("planted");
    envlog_id128 *ids;
    size_t n;
    ck_assert_ok(envlog_sessions_ids(r.env, &ids, &n));
    ck_assert_uint_ge(n, 1);
    char sid[33];
    envlog_id_format(&ids[0], sid);
    envlog_ids_free(ids);
    envlog_env_close(r.env);
    r.env = NULL;
    char sdir[64], seg[128], removing[64];
    snprintf(sdir, sizeof sdir, "sessions/%s", sid);
    snprintf(seg, sizeof seg, "sessions/%s/00000000-0000000000000000.log", sid);
    snprintf(removing, sizeof removing, "sessions/%s.removing", sid);
    const char *paths[] = {"FORMAT", "LOCK", "snapshot/current", "snapshot/previous",
                           "snapshot/current.tmp", "snapshot", sdir, seg, removing};
    char *copy = tu_mkdtemp("planted-copy");
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        for (int p = 0; p < P_N; p++) {
            tu_rmrf(copy);
            tu_copytree(r.dir, copy);
            plant_at(tu_path(copy, paths[i]), (plant)p);
            int code = exercise(copy);
            /* Only a FORMAT that is not a file may make it no environment;
             * nothing else stops the readers. */
            ck_assert_msg(code == 0 || (code == 10 && !strcmp(paths[i], "FORMAT")),
                          "%s as %s: exit %d", paths[i], plant_names[p], code);
        }
    tu_rmrf(copy);
    free(copy);
    r.env = tu_env(r.dir);
    rp_renv_free(&r);
}
END_TEST

/* A directory or file that is not a segment, inside a session directory:
 * reported, the session kept, and compaction goes on. */
START_TEST(test_stray_entries)
{
    rp_renv r = rp_renv_new("stray");
    envlog_session *s = rp_sbegin(r.env, "stray", 0);
    rp_rtune(s, NS_A, "s0", 0);
    envlog_id128 id = envlog_session_id(s);
    rp_end(s);
    char *sd = rp_session_dir(r.dir, &id);
    ck_assert_int_eq(mkdir(tu_path(sd, "junk"), 0700), 0);
    tu_write(tu_path(sd, "notes.txt"), "x", 1);
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(r.env, &in, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(in[0].strays, 2);
    envlog_sessions_free(in, n);
    for (int i = 0; i < 3; i++) {
        envlog_compact_report cr;
        ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, &cr));
        ck_assert(tu_exists(tu_path(sd, "junk")));
        ck_assert(tu_exists(tu_path(sd, "notes.txt")));
    }
    envlog_state *st = rp_sopen(r.env, NULL);
    rp_winner(st, NS_A, "s0");
    envlog_state_close(st);
    free(sd);
    rp_renv_free(&r);
}
END_TEST

void sn_add_trust_tcases(Suite *s)
{
    TCase *tc = tcase_create("trust");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_seal_every_alignment);
    tcase_add_test(tc, test_compaction_at_every_alignment);
    tcase_add_test(tc, test_snapshot_damage_catalogue);
    tcase_add_test(tc, test_snapshot_damage_repair);
    tcase_add_test(tc, test_bundle_damage_catalogue);
    tcase_add_test(tc, test_one_reader_across_compaction);
    tcase_add_test(tc, test_detail_problem_stands);
    tcase_add_loop_test(tc, test_why_unchanged_by_compaction, 0, 3);
    tcase_add_test(tc, test_overwritten_segment_is_not_torn);
    tcase_add_test(tc, test_entry_winner_out_of_range);
    tcase_add_test(tc, test_concurrent_creation);
    tcase_add_test(tc, test_planted_files);
    tcase_add_test(tc, test_stray_entries);
    suite_add_tcase(s, tc);
}
