/* SPDX-License-Identifier: MIT */
/*
 * check_replay_history.c - the replay suite's tests of history: the total
 * order against an independent sort, the directory listing order made
 * irrelevant, --until (a stamp and a time) against a copy of the history
 * physically cut at that point, damage in one session (torn tail, flipped
 * bits, a missing segment, an unreadable directory) never stopping the
 * fold of the others, and allocation and read faults.
 */
#include "check_replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        char label[16];
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

/* The same fold whatever reads the sessions (envlog_replay_opts.threads:
 * the calling thread alone, or workers reading ahead) and in whatever
 * order their directories are listed: records of every kind, sessions that
 * overlap in time, binaries that span several fragments, a session with
 * damage in it. */
START_TEST(test_fold_same_whatever_reads)
{
    rp_renv r = rp_renv_new("ahead");
    enum { N = 6 };
    envlog_session *s[N];
    for (int i = 0; i < N; i++)
        s[i] = rp_sbegin(r.env, "s", i % 2 ? 65536 : 0);
    size_t big = 40000;
    uint8_t *bin = malloc(big);
    ck_assert_ptr_nonnull(bin);
    for (int i = 0; i < 60; i++) {
        envlog_session *x = s[(i * 5) % N];
        rp_rtune_full(x, i % 2 ? NS_A : NS_B, i % 3 ? "k1" : "k2", SET_A, i % 3, true,
                      i % 5 == 0);
        if (i % 7 == 3)
            rp_rforget(x, ENVLOG_TABLE_TUNE, NS_A, "k1", rp_csum(SET_A));
        if (i % 4 == 1) {
            for (size_t k = 0; k < big; k++)
                bin[k] = (uint8_t)(k * 7 + i);
            char name[32];
            snprintf(name, sizeof name, "big_%d", i);
            envlog_compile c = {.ns = KNS_A, .name = name, .kernel_key = rp_kkey((uint8_t)(i % 5)),
                                .options = "-O3", .compiler_version = "12.4", .arch = "sm_90",
                                .outcome = ENVLOG_COMPILED, .duration_ns = 10,
                                .binary_hash = envlog_hash128_bytes(bin, big),
                                .binary_size = big, .binary = {bin, big}};
            ck_assert_ok(envlog_record_compile(x, &c, NULL));
        }
        static const uint8_t body[] = {0x00};
        ck_assert_ok(envlog_record_user(x, "u", body, 1, ENVLOG_CHANGED, NULL));
        rp_nap_us(20);
    }
    free(bin);
    for (int i = 0; i < N; i++)
        rp_end(s[i]);
    /* One session damaged in the middle: what it still holds folds. */
    char *sdir = strdup(tu_path(r.dir, "sessions")), **names;
    size_t n = rp_list_dir(sdir, &names);
    ck_assert_uint_eq(n, N);
    char *seg;
    ck_assert_int_ge(asprintf(&seg, "%s/%s", sdir, names[2]), 0);
    char **segs;
    size_t ns = rp_list_dir(seg, &segs);
    ck_assert_uint_ge(ns, 1);
    char *f;
    ck_assert_int_ge(asprintf(&f, "%s/%s", seg, segs[0]), 0);
    size_t len;
    uint8_t *data = tu_read(f, &len);
    ck_assert_uint_gt(len, 2000);
    data[len / 2] ^= 0x40;
    tu_write(f, data, len);
    free(data);
    free(f);
    rp_free_names(segs, ns);
    free(seg);

    envlog_replay_opts o = {.threads = 1};
    char *ref = rp_dump_env(r.env, &o);
    static const int threads[] = {0, 2, 3, 9};
    const size_t window = envlog_reader_window;
    static const int perms[][N] = {{5, 4, 3, 2, 1, 0}, {1, 3, 0, 2, 5, 4}, {2, 0, 5, 1, 4, 3}};
    for (size_t p = 0; p < 3; p++) {
        char *copy = tu_mkdtemp("ahead-copy");
        envlog_env *e2 = tu_env(copy);
        for (int i = 0; i < N; i++) {
            char *a, *b;
            ck_assert_int_ge(asprintf(&a, "%s/%s", sdir, names[perms[p][i]]), 0);
            ck_assert_int_ge(asprintf(&b, "%s/sessions/%s", copy, names[perms[p][i]]), 0);
            tu_copytree(a, b);
            free(a);
            free(b);
        }
        for (size_t t = 0; t < 2 * sizeof threads / sizeof *threads; t++) {
            /* Read alone, a segment is read a window at a time: the
             * default window, then one block (records, binaries and the
             * damage across windows). */
            o.threads = threads[t / 2];
            if (t % 2 && o.threads)
                continue;
            envlog_reader_window = t % 2 ? ENVLOG_BLOCK : window;
            char *d = rp_dump_env(e2, &o);
            ck_assert_str_eq(d, ref);
            free(d);
            /* A binary folded where it lies, in fragments, reads back whole. */
            envlog_state *st = rp_sopen(e2, &o);
            envlog_kernel_entry ke;
            envlog_hash128 kk = rp_kkey(1);
            ck_assert_ok(envlog_state_kernel(st, KNS_A, &kk, &ke));
            ck_assert_uint_eq(ke.binary.size, big);
            envlog_hash128 h = envlog_hash128_bytes(ke.binary.data, ke.binary.size);
            ck_assert_mem_eq(h.b, ke.binary_hash.b, 16);
            envlog_state_close(st);
            envlog_reader_window = window;
        }
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
    /* As a writer killed mid-record leaves it: half the record, no seal,
     * then the zeros of the preallocation up to a whole block. */
    tu_truncate(seg, (off_t)(last->file_offset + (last->file_end - last->file_offset) / 2));
    tu_truncate(seg, (off_t)((last->file_end + ENVLOG_BLOCK - 1) / ENVLOG_BLOCK * ENVLOG_BLOCK));
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

/* A writer that still holds its lock is never repaired, whatever its last
 * segment ends in; once it is gone, the same bytes are a torn tail. */
START_TEST(test_repair_refuses_live)
{
    rp_renv r = rp_renv_new("repairlive");
    envlog_session *s = rp_sbegin(r.env, "live", 0);
    envlog_stamp t = rp_rtune(s, NS_A, "k", 0);
    rp_placed_list l = rp_order_of(r.env, NULL);
    ck_assert_uint_eq(l.n, 2);
    char *seg = rp_segment_file(r.dir, &t.session, 0);
    size_t len;
    uint8_t *p = tu_read(seg, &len);
    ck_assert_uint_gt(len, l.v[1].file_end + 40);
    memset(p + l.v[1].file_end, 0x41, 40); /* a partial record after the last */
    tu_write(seg, p, len);
    envlog_repair rep;
    ck_assert_err(envlog_session_repair(r.env, &t.session, &rep), ENVLOG_BUSY);
    ck_assert(!rep.repaired);
    size_t len2;
    uint8_t *q = tu_read(seg, &len2);
    ck_assert_uint_eq(len2, len);
    ck_assert(!memcmp(p, q, len));
    free(q);
    /* the live state is no damage to a reader either */
    rp_dmg_list dl = {0};
    envlog_replay_opts o = {.on_damage = rp_on_dmg, .ctx = &dl};
    envlog_state *st = rp_sopen(r.env, &o);
    ck_assert_uint_eq(dl.n, 0);
    rp_winner(st, NS_A, "k");
    envlog_state_close(st);
    /* As a killed writer leaves it: the lock gone, the segment unsealed
     * (ending the session seals it; the bytes are put back after). */
    rp_end(s);
    tu_write(seg, p, len);
    ck_assert_ok(envlog_session_repair(r.env, &t.session, &rep));
    ck_assert(rep.repaired);
    ck_assert_uint_eq(rep.segment, 0);
    ck_assert_uint_eq(rep.cut_at, l.v[1].file_end);
    ck_assert_uint_eq(tu_size(seg), l.v[1].file_end);
    char *broken;
    ck_assert_int_ge(asprintf(&broken, "%s.broken", seg), 0);
    size_t blen;
    uint8_t *b = tu_read(broken, &blen);
    ck_assert_uint_eq(blen, len);
    ck_assert(!memcmp(b, p, len));
    free(b);
    free(broken);
    free(p);
    free(seg);
    rp_placed_free(&l);
    rp_renv_free(&r);
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
    static const tu_call calls[] = {TU_PREAD, TU_OPENAT, TU_FSTAT, TU_MMAP};
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
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

/* The merge's hint: every record it hands out was told of first, once,
 * its payload at the same address (the record's fields may come from a
 * copy: a record read alone is held while its session's next is read),
 * with the value the hint gave for it (here one for every record of an
 * odd seq, none for the others), and the fold of a state (which asks for
 * its slots then, and takes the key's hash the hint worked out) is the
 * fold without it.  Read by the calling thread alone, a tune is handed
 * out after its session's next record was told of (held); read by
 * workers, never. */
typedef struct told_rec {
    envlog_id128 session;
    uint64_t seq;
    const uint8_t *payload;
} told_rec;
typedef struct hinted {
    told_rec told[64]; /* told of and not handed out yet */
    size_t n_told, hints, handed, valued;
    size_t ahead;      /* handed out after its session's next was told of */
    bool fail;
} hinted;

static told_rec told_of(const envlog_record *rec)
{
    return (told_rec){rec->stamp.session, rec->stamp.seq, rec->payload.data};
}

static uint64_t hint_value(const envlog_record *rec)
{
    return rec->stamp.seq * 0x9e3779b97f4a7c15u ^ rec->stamp.session.b[0];
}

static bool hint_one(void *ctx, const envlog_merge_rec *m, uint64_t *value)
{
    hinted *h = ctx;
    h->hints++;
    if (m->has_hinted)
        h->fail = true; /* a value before the hint gave one */
    if (h->n_told == sizeof h->told / sizeof h->told[0])
        h->fail = true;
    else
        h->told[h->n_told++] = told_of(m->r.rec);
    *value = hint_value(m->r.rec);
    return m->r.rec->stamp.seq % 2;
}

static envlog_err hand_one(void *ctx, const envlog_merge_rec *m)
{
    hinted *h = ctx;
    h->handed++;
    bool odd = m->r.rec->stamp.seq % 2;
    if (m->has_hinted != odd || (odd && m->hinted != hint_value(m->r.rec)))
        h->fail = true; /* not the value the hint gave for this record */
    h->valued += m->has_hinted;
    told_rec t = told_of(m->r.rec);
    for (size_t i = 0; i < h->n_told; i++)
        if (!memcmp(h->told[i].session.b, t.session.b, 16) && h->told[i].seq > t.seq) {
            h->ahead++;
            break;
        }
    for (size_t i = 0; i < h->n_told; i++)
        if (!memcmp(h->told[i].session.b, t.session.b, 16) && h->told[i].seq == t.seq &&
            h->told[i].payload == t.payload) {
            h->told[i] = h->told[--h->n_told];
            return ENVLOG_OK;
        }
    h->fail = true; /* handed out without a word first */
    return ENVLOG_OK;
}

/* The merge reads sealed segments from their mappings and gives their
 * pages back a step behind it: in segments of several MiB, every entry
 * still answers from its record (the tunes by their winners, a kernel
 * whose binary spans several blocks byte for byte), and the dumps agree,
 * read alone and with a worker; a walk with no keeper gives the records a
 * reader of windows gives. */
#define INPLACE_KEYS 6000
static void inplace_key(char *key, size_t size, int i)
{
    snprintf(key, size, "inplace-%05d-%.300s", i,
             "................................................................"
             "................................................................"
             "................................................................"
             "................................................................"
             "............................................................");
}

START_TEST(test_fold_in_place_across_dropped_pages)
{
    rp_renv r = rp_renv_new("inplace");
    char key[400];
    size_t big = 3 * ENVLOG_BLOCK + 77;
    uint8_t *bin = malloc(big);
    ck_assert_ptr_nonnull(bin);
    for (size_t i = 0; i < big; i++)
        bin[i] = (uint8_t)(i * 31 + 5);
    for (int sess = 0; sess < 2; sess++) {
        envlog_session *s = rp_sbegin(r.env, "inplace", 4u << 20);
        for (int i = sess; i < INPLACE_KEYS; i += 2) {
            inplace_key(key, sizeof key, i);
            rp_rtune(s, NS_A, key, i % 3);
            if (i == INPLACE_KEYS / 2) {
                envlog_compile c = {.ns = KNS_A, .name = "big", .kernel_key = rp_kkey(77),
                                    .outcome = ENVLOG_COMPILED,
                                    .binary_hash = envlog_hash128_bytes(bin, big),
                                    .binary_size = big, .binary = {bin, big}};
                ck_assert_ok(envlog_record_compile(s, &c, NULL));
            }
        }
        rp_end(s);
    }
    static const int threads[] = {1, 2};
    char *dumps[2];
    for (size_t t = 0; t < 2; t++) {
        envlog_replay_opts o = {.threads = threads[t]};
        envlog_state *st = rp_sopen(r.env, &o);
        for (int i = 0; i < INPLACE_KEYS; i++) {
            inplace_key(key, sizeof key, i);
            envlog_tune_entry te = rp_winner(st, NS_A, key);
            ck_assert_str_eq(te.winner, SET_A[i % 3]);
        }
        envlog_kernel_entry ke = rp_kernel(st, KNS_A, 77);
        ck_assert_uint_eq(ke.binary.size, big);
        ck_assert(!memcmp(ke.binary.data, bin, big));
        dumps[t] = rp_dump_of(st);
        envlog_state_close(st);
    }
    ck_assert_str_eq(dumps[0], dumps[1]);
    free(dumps[0]);
    free(dumps[1]);
    /* A walk with no keeper reads in place too: the same records, byte for
     * byte, as a session reader that copies windows. */
    rp_placed_list l = rp_order_of(r.env, NULL);
    uint64_t walked = 0, read = 0;
    size_t n_read = 0;
    for (size_t i = 0; i < l.n; i++)
        walked ^= envlog_xxh64(l.v[i].payload, l.v[i].size, l.v[i].seq);
    char **names;
    size_t n_names = rp_list_dir(tu_path(r.dir, "sessions"), &names);
    ck_assert_uint_eq(n_names, 2);
    for (size_t i = 0; i < n_names; i++) {
        envlog_id128 id;
        envlog_reader *rd;
        const envlog_record *rec;
        ck_assert_ok(envlog_id_parse(names[i], &id));
        ck_assert_ok(envlog_reader_open(r.env, &id, &rd));
        while (envlog_reader_next(rd, &rec) == ENVLOG_OK && rec) {
            read ^= envlog_xxh64(rec->payload.data, rec->payload.size, rec->stamp.seq);
            n_read++;
        }
        envlog_reader_close(rd);
    }
    rp_free_names(names, n_names);
    ck_assert_uint_eq(l.n, n_read);
    ck_assert_uint_eq(l.n, INPLACE_KEYS + 3); /* and a compile and two sessions */
    ck_assert(walked == read);
    rp_placed_free(&l);
    free(bin);
    rp_renv_free(&r);
}
END_TEST

START_TEST(test_merge_hint)
{
    rp_renv r = rp_renv_new("hint");
    enum { N = 5 };
    envlog_session *s[N];
    for (int i = 0; i < N; i++)
        s[i] = rp_sbegin(r.env, "s", 0);
    for (int i = 0; i < 200; i++)
        rp_rtune_full(s[(i * 3) % N], i % 2 ? NS_A : NS_B, i % 3 ? "k1" : "k2", SET_A,
                      i % 3, true, i % 5 == 0);
    for (int i = 0; i < N; i++)
        rp_end(s[i]);
    for (int snap = 0; snap < 2; snap++) {
        if (snap) { /* half the history in the snapshot, merged in */
            ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_ALL, NULL));
            envlog_session *x = rp_sbegin(r.env, "after", 0);
            rp_rtune_full(x, NS_A, "k3", SET_A, 1, true, false);
            rp_end(x);
        }
        envlog_snap *sn = NULL;
        int gen;
        ck_assert_ok(envlog_snap_pick(r.env, false, NULL, NULL, &sn, &gen));
        envlog_merge_src src = {r.env, sn};
        for (int threads = 1; threads <= 2; threads++) {
            hinted h = {0};
            ck_assert_ok(envlog_replay_merge(&src, 1, &(envlog_replay_opts){.threads = threads},
                                             true, true, NULL, hand_one, hint_one, &h));
            ck_assert(!h.fail);
            ck_assert_uint_eq(h.n_told, 0);
            ck_assert_uint_eq(h.hints, h.handed);
            ck_assert_uint_ge(h.handed, 200);
            ck_assert_uint_ge(h.valued, 100);
            if (threads == 2)
                ck_assert_uint_eq(h.ahead, 0);
            else if (!snap)
                ck_assert_uint_ge(h.ahead, 150);
        }
        envlog_snap_unmap(sn);
    }
    rp_renv_free(&r);
}
END_TEST

/* A snapshot opened for lookups is not mapped: the open and a lookup make
 * no mapping at all; the first walk maps it, and a mapping that fails is
 * the system's error from the walk (never damage, never "no record"). */
static envlog_err count_entry(void *ctx, const envlog_entry *e)
{
    (void)e;
    ++*(size_t *)ctx;
    return ENVLOG_OK;
}

START_TEST(test_snapshot_mapped_by_walks_only)
{
    rp_renv r = rp_renv_new("lazymap");
    envlog_session *s = rp_sbegin(r.env, "one", 0);
    envlog_stamp first = rp_rtune_full(s, NS_A, "k0", SET_A, 0, true, false);
    for (int i = 1; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        rp_rtune_full(s, NS_A, key, SET_A, i % 3, true, false);
    }
    rp_end(s);
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_ALL, NULL));

    /* Open and look up: no mmap called (one would fail). */
    envlog_state *st;
    envlog_tune_entry te;
    tu_fault_arm(TU_MMAP, 1, EIO);
    ck_assert_ok(envlog_state_open(r.env, NULL, &st));
    ck_assert_ok(envlog_state_winner(st, NS_A, "k7", rp_csum(SET_A), &te));
    ck_assert_int_eq(tu_fault_calls(TU_MMAP), 0);
    /* A walk of every entry maps it: that mapping fails, as the system's. */
    size_t n = 0;
    ck_assert_err(envlog_state_each(st, count_entry, &n), ENVLOG_IO);
    ck_assert(tu_fault_disarm());
    /* And maps it once the system lets it. */
    n = 0;
    ck_assert_ok(envlog_state_each(st, count_entry, &n));
    ck_assert_uint_eq(n, 20);
    envlog_state_close(st);

    /* Up to a stamp the snapshot holds: its search walks the snapshot. */
    envlog_replay_opts o = {.until_stamp = true, .until_session = first.session,
                            .until_seq = first.seq};
    tu_fault_arm(TU_MMAP, 1, EIO);
    ck_assert_err(envlog_state_open(r.env, &o, &st), ENVLOG_IO);
    ck_assert(tu_fault_disarm());
    ck_assert_ok(envlog_state_open(r.env, &o, &st));
    envlog_state_stats sst;
    envlog_state_stats_get(st, &sst);
    ck_assert_uint_eq(sst.tunes, 1);
    envlog_state_close(st);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ cases */

void rp_add_history_tcases(Suite *s)
{
    TCase *t;
    t = tcase_create("order");
    tcase_add_test(t, test_order_cmp);
    tcase_add_test(t, test_total_order);
    tcase_add_test(t, test_listing_order_irrelevant);
    tcase_add_test(t, test_fold_same_whatever_reads);
    tcase_add_test(t, test_merge_hint);
    tcase_add_test(t, test_fold_in_place_across_dropped_pages);
    tcase_add_test(t, test_until_stamp);
    tcase_add_test(t, test_until_time);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);

    t = tcase_create("damage");
    tcase_add_test(t, test_damage_torn_tail);
    tcase_add_test(t, test_damage_corrupt_segment);
    tcase_add_test(t, test_damage_missing_segment);
    tcase_add_test(t, test_damage_unreadable_session);
    tcase_add_test(t, test_repair_refuses_live);
    suite_add_tcase(s, t);

    t = tcase_create("faults");
    tcase_add_test(t, test_state_open_alloc_faults);
    tcase_add_test(t, test_state_open_read_faults);
    tcase_add_test(t, test_snapshot_mapped_by_walks_only);
    tcase_set_timeout(t, 120);
    suite_add_tcase(s, t);
}
