/* SPDX-License-Identifier: MIT */
/*
 * check_bundle2.c - bundle format 2 (envlog(5), BUNDLES): the column image
 * is a lossless transform of any snapshot, whatever pieces the snapshot
 * comes in and however its records are framed; exports round trip through
 * inspect, import and the state a diff reads, in both formats alike; every
 * bit flipped and every truncation of a bundle is refused or gives the
 * bundle's own entries; hostile images (lengths and counts that lie,
 * columns short or long) are refused, naming what is wrong.
 */
#include "bundle_cols.h"
#include "check_replay.h"
#include "check_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

static envlog_err to_buf(void *ctx, const uint8_t *p, size_t n)
{
    return envlog_buf_append(ctx, p, n);
}

/* The column image of the snapshot [p, p+n), handed to the encoder in
 * pieces of `piece` bytes. */
static envlog_buf image_of(const uint8_t *p, size_t n, size_t piece)
{
    envlog_cols_enc *c;
    ck_assert_ok(envlog_cols_enc_new(&c));
    envlog_sink in = envlog_cols_sink(c);
    ck_assert_ok(in.begin(in.ctx, n));
    for (size_t at = 0; at < n; at += piece)
        ck_assert_ok(in.write(in.ctx, p + at, n - at < piece ? n - at : piece));
    envlog_buf img = {0};
    envlog_sink out = {NULL, to_buf, &img};
    ck_assert_ok(envlog_cols_finish(c, &out));
    envlog_cols_enc_free(c);
    return img;
}

/* The mark of a bundle format `version`, then `img` as one zstd frame
 * (with its checksum when `checksum`). */
static envlog_buf wrap(const uint8_t *img, size_t n, bool checksum, unsigned version)
{
    envlog_buf b = {0};
    static const uint8_t mark[22] = {0x5e, 0x2a, 0x4d, 0x18, 16, 0, 0, 0, 'e', 'n', 'v',
                                     'l', 'o', 'g', '-', 'b', 'u', 'n', 'd', 'l', 'e', 0};
    uint8_t v[2] = {(uint8_t)version, (uint8_t)(version >> 8)};
    ck_assert_ok(envlog_buf_append(&b, mark, sizeof mark));
    ck_assert_ok(envlog_buf_append(&b, v, 2));
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, checksum)));
    size_t cap = ZSTD_compressBound(n);
    ck_assert_ok(envlog_buf_reserve(&b, cap));
    size_t zn = ZSTD_compress2(cc, b.p + b.len, cap, img, n);
    ck_assert(!ZSTD_isError(zn));
    b.len += zn;
    ZSTD_freeCCtx(cc);
    return b;
}

/* The snapshot a bundle holds, decoded as every reader decodes it. */
static envlog_buf snapshot_in(const uint8_t *z, size_t n, int *format)
{
    envlog_bundle_opened o;
    ck_assert_ok(envlog_bundle_open_mem(z, n, true, &o));
    envlog_buf b = {0};
    ck_assert_ok(envlog_buf_append(&b, o.raw, o.n));
    *format = o.format;
    envlog_bundle_close(&o);
    return b;
}

/* An environment with every fold rule (sn_populate), a compaction under
 * it, and a kernel whose record spans blocks. */
static rp_renv varied(const char *tag)
{
    rp_renv r = rp_renv_new(tag);
    sn_populate(r.env, 0);
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL));
    sn_populate(r.env, 1);
    envlog_session *s = rp_sbegin(r.env, "big", 0);
    static uint8_t bin[100000];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (uint8_t)(i * 7 + i / 300);
    envlog_compile c = {.ns = KNS_A, .name = "big", .kernel_key = rp_kkey(77),
                        .options = "-O3", .compiler_version = "12.4", .arch = "sm_90",
                        .outcome = ENVLOG_COMPILED, .duration_ns = 10,
                        .binary_hash = envlog_hash128_bytes(bin, sizeof bin),
                        .binary_size = sizeof bin, .binary = {bin, sizeof bin}};
    ck_assert_ok(envlog_record_compile(s, &c, NULL));
    rp_rtune(s, NS_B, "after-the-big-one", 1);
    rp_end(s);
    return r;
}

/* --------------------------------------------------- a lossless transform */

/* Snapshots of every evidence level, one of them with records over several
 * blocks, given to the encoder a byte at a time, in odd pieces and whole:
 * the image always decodes to the same bytes. */
START_TEST(test_cols_lossless)
{
    static const envlog_evidence ev[] = {ENVLOG_EVIDENCE_NONE, ENVLOG_EVIDENCE_WINNERS,
                                         ENVLOG_EVIDENCE_ALL};
    static const size_t pieces[] = {1, 7, 4093, 32768, SIZE_MAX};
    rp_renv r = varied("cols-lossless");
    for (size_t k = 0; k < 3; k++) {
        ck_assert_ok(envlog_compact(r.env, ev[k], NULL));
        size_t n;
        uint8_t *snap = tu_read(tu_path(r.dir, "snapshot/current"), &n);
        ck_assert_uint_gt(n, 2 * ENVLOG_BLOCK);
        envlog_buf first = {0};
        for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
            envlog_buf img = image_of(snap, n, pieces[i]);
            if (!first.p)
                ck_assert_ok(envlog_buf_append(&first, img.p, img.len));
            else
                ck_assert_mem_eq(first.p, img.p, first.len);
            uint8_t *back;
            size_t bn;
            ck_assert_ok(envlog_cols_decode(img.p, img.len, &back, &bn));
            ck_assert_uint_eq(bn, n);
            ck_assert_mem_eq(back, snap, n);
            envlog_free(back);
            envlog_buf_free(&img);
        }
        envlog_buf_free(&first);
        free(snap);
    }
    rp_renv_free(&r);
}
END_TEST

/* What is not a whole snapshot in envlog's framing never makes an image. */
START_TEST(test_cols_refuses_partial_snapshot)
{
    rp_renv r = varied("cols-partial");
    ck_assert_ok(envlog_compact(r.env, ENVLOG_EVIDENCE_WINNERS, NULL));
    size_t n;
    uint8_t *snap = tu_read(tu_path(r.dir, "snapshot/current"), &n);
    ck_assert_uint_gt(n, 2 * ENVLOG_BLOCK);
    static const size_t cuts[] = {3, 7, 100, 40000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        envlog_cols_enc *c;
        ck_assert_ok(envlog_cols_enc_new(&c));
        envlog_sink in = envlog_cols_sink(c);
        ck_assert_ok(in.begin(in.ctx, n));
        ck_assert_ok(in.write(in.ctx, snap, n - cuts[i]));
        envlog_buf img = {0};
        envlog_sink out = {NULL, to_buf, &img};
        ck_assert_int_eq(envlog_cols_finish(c, &out), ENVLOG_BAD_DATA);
        ck_assert_uint_eq(img.len, 0);
        envlog_cols_enc_free(c);
    }
    /* A fragment of a type that cannot come there. */
    snap[6] = ENVLOG_FRAG_LAST;
    envlog_cols_enc *c;
    ck_assert_ok(envlog_cols_enc_new(&c));
    envlog_sink in = envlog_cols_sink(c);
    ck_assert_int_eq(in.write(in.ctx, snap, n), ENVLOG_BAD_DATA);
    envlog_cols_enc_free(c);
    free(snap);
    rp_renv_free(&r);
}
END_TEST

/* ----------------------------------------------------------- round trips */

static char *export_as(rp_renv *r, const char *name, int format, envlog_evidence ev,
                       envlog_bundle_info **info)
{
    char *path = strdup(tu_path(r->dir, name));
    envlog_bundle_opts o = {.name = name, .evidence = ev, .format = format};
    ck_assert_ok(envlog_bundle_export(r->env, &o, path, info));
    return path;
}

/* The bytes (*n of them) of a bundle of `r` exported in `format` to *path
 * (the caller frees both). */
static uint8_t *exported(rp_renv *r, int format, envlog_evidence ev, char **path, size_t *n)
{
    envlog_bundle_info *info;
    *path = export_as(r, "x", format, ev, &info);
    envlog_bundle_info_free(info);
    return tu_read(*path, n);
}

/* The same environment exported in both formats: each says its format, the
 * two hold the same snapshot records, the states a diff reads from them are
 * the same, and each imports the source's entries. */
START_TEST(test_bundle2_round_trip)
{
    static const envlog_evidence ev[] = {ENVLOG_EVIDENCE_NONE, ENVLOG_EVIDENCE_WINNERS,
                                         ENVLOG_EVIDENCE_ALL};
    rp_renv r = varied("b2-trip");
    envlog_state *src = rp_sopen(r.env, NULL);
    envlog_bundle_info *i2, *i1;
    char *p2 = export_as(&r, "two", 0, ev[_i], &i2);
    char *p1 = export_as(&r, "one", 1, ev[_i], &i1);
    ck_assert_int_eq(i2->format, 2);
    ck_assert_int_eq(i1->format, 1);
    ck_assert_uint_eq(i2->bad_records, 0);
    ck_assert(i2->content_ok);
    ck_assert_uint_eq(i2->tunes, i1->tunes);
    ck_assert_uint_eq(i2->kernels, i1->kernels);
    ck_assert_uint_eq(i2->evidence, i1->evidence);
    ck_assert_mem_eq(i2->content_hash.b, i1->content_hash.b, 16);
    envlog_bundle_info_free(i1);
    envlog_bundle_info *again;
    ck_assert_ok(envlog_bundle_inspect(p2, &again));
    ck_assert_int_eq(again->format, 2);
    ck_assert_uint_eq(again->size, i2->size);
    envlog_bundle_info_free(again);
    envlog_bundle_info_free(i2);
    /* The same records (the id and creation time aside): the states a diff
     * reads are the same dump. */
    envlog_state *s2, *s1;
    ck_assert_ok(envlog_bundle_state(p2, &s2));
    ck_assert_ok(envlog_bundle_state(p1, &s1));
    char *d2 = rp_dump_of(s2), *d1 = rp_dump_of(s1);
    ck_assert_str_eq(d2, d1);
    free(d2);
    free(d1);
    envlog_state_close(s2);
    envlog_state_close(s1);
    /* Imported, the source's entries stand, and a second import takes
     * nothing. */
    rp_renv t = rp_renv_new("b2-trip-in");
    envlog_import_report rep;
    ck_assert_ok(envlog_bundle_import(t.env, p2, &rep));
    ck_assert_uint_eq(rep.rejected, 0);
    ck_assert_uint_gt(rep.taken, 5);
    envlog_state *in = rp_sopen(t.env, NULL);
    ck_assert_uint_eq(sn_compare_states(src, in), rep.taken);
    envlog_state_close(in);
    ck_assert_ok(envlog_bundle_import(t.env, p2, &rep));
    ck_assert_uint_eq(rep.taken, 0);
    rp_renv_free(&t);
    envlog_state_close(src);
    free(p2);
    free(p1);
    rp_renv_free(&r);
}
END_TEST

/* The bundle's bytes decode to a snapshot that reads whole; a format that
 * is neither is refused. */
START_TEST(test_bundle2_formats)
{
    rp_renv r = varied("b2-formats");
    char *p2;
    size_t zn;
    uint8_t *z = exported(&r, 2, ENVLOG_EVIDENCE_WINNERS, &p2, &zn);
    ck_assert_uint_gt(zn, ENVLOG_BUNDLE_MARK_LEN);
    ck_assert_mem_eq(z + 8, "envlog-bundle", 13);
    int format;
    envlog_buf snap = snapshot_in(z, zn, &format);
    ck_assert_int_eq(format, 2);
    envlog_snap *s;
    ck_assert_ok(envlog_snap_load(snap.p, snap.len, true, &s));
    ck_assert_uint_eq(envlog_snap_bad_records(s), 0);
    ck_assert(envlog_snap_content_ok(s));
    envlog_snap_free(s);
    envlog_buf_free(&snap);
    envlog_bundle_opts o = {.name = "x", .format = 3};
    ck_assert_int_eq(envlog_bundle_export(r.env, &o, p2, NULL), ENVLOG_INVALID_ARG);
    free(z);
    free(p2);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------------ damage catalogue */

/* Every bit of a small bundle flipped, and every truncation: each is
 * refused, naming why, or reads as the bundle itself (a flip zstd does not
 * look at); an import takes nothing from a refused one and never an entry
 * that the bundle does not hold. */
/* An environment of two tunes and a kernel, recorded in a session
 * "small". */
static rp_renv small_env(const char *tag)
{
    rp_renv r = rp_renv_new(tag);
    envlog_session *s = rp_sbegin(r.env, "small", 0);
    rp_rtune(s, NS_A, "k1", 0);
    rp_rtune(s, NS_A, "k2", 2);
    rp_rcompile(s, KNS_A, 5, ENVLOG_COMPILED, false, 9, 40);
    rp_end(s);
    return r;
}

START_TEST(test_bundle2_damage_catalogue)
{
    rp_renv r = small_env("b2-dmg");
    envlog_bundle_info *info;
    char *p = export_as(&r, "small", 0, ENVLOG_EVIDENCE_NONE, &info);
    envlog_bundle_info_free(info);
    size_t n;
    uint8_t *z = tu_read(p, &n);
    ck_assert_uint_lt(n, 2048);
    envlog_state *clean;
    ck_assert_ok(envlog_bundle_state(p, &clean));
    rp_renv t = rp_renv_new("b2-dmg-in");
    size_t refused = 0, same = 0;
    for (size_t bit = 0; bit < 8 * n; bit++) {
        z[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        envlog_err e = envlog_bundle_inspect_memory(z, n, &info);
        if (e) {
            tu_check(e == ENVLOG_FORMAT || e == ENVLOG_BAD_DATA || e == ENVLOG_TOO_BIG,
                     "bit %zu: %s", bit, envlog_strerror(e));
            tu_check(strcmp(envlog_errmsg(), "no error detail"), "bit %zu: no detail", bit);
            refused++;
        } else {
            /* Only what the bundle holds: the same snapshot. */
            tu_check(!info->bad_records && info->content_ok, "bit %zu: damage read", bit);
            envlog_bundle_info_free(info);
            envlog_import_report rep;
            rp_renv u = rp_renv_new("b2-dmg-flip");
            ck_assert_ok(envlog_bundle_import_memory(u.env, z, n, &rep));
            tu_check(rep.taken == 3 && !rep.rejected, "bit %zu: %llu taken", bit,
                     (unsigned long long)rep.taken);
            envlog_state *st = rp_sopen(u.env, NULL);
            ck_assert_uint_eq(sn_compare_states(st, clean), 3);
            envlog_state_close(st);
            rp_renv_free(&u);
            same++;
        }
        if (bit % 61 == 0) { /* an import of a refused one writes nothing */
            envlog_import_report rep;
            envlog_err ie = envlog_bundle_import_memory(t.env, z, n, &rep);
            tu_check(!!ie == !!e, "bit %zu: import %s, inspect %s", bit,
                     envlog_strerror(ie), envlog_strerror(e));
            if (!ie) { /* (a second import of the same entries takes nothing) */
                rp_renv_free(&t);
                t = rp_renv_new("b2-dmg-in");
            }
        }
        z[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    ck_assert_uint_gt(refused, 8 * n * 9 / 10);
    for (size_t cut = 0; cut < n; cut++) {
        envlog_err e = envlog_bundle_inspect_memory(z, cut, &info);
        tu_check(e == ENVLOG_FORMAT || e == ENVLOG_BAD_DATA, "cut at %zu: %s", cut,
                 envlog_strerror(e));
        if (cut >= ENVLOG_BUNDLE_MARK_LEN)
            tu_check(e == ENVLOG_BAD_DATA, "cut at %zu: %s", cut, envlog_errmsg());
        envlog_import_report rep;
        tu_check(envlog_bundle_import_memory(t.env, z, cut, &rep) != ENVLOG_OK, "cut at %zu",
                 cut);
    }
    /* Nothing of a refused bundle was recorded. */
    envlog_state *st = rp_sopen(t.env, NULL);
    ck_assert_uint_eq(rp_stats(st).tunes + rp_stats(st).kernels, 0);
    envlog_state_close(st);
    envlog_state_close(clean);
    rp_renv_free(&t);
    free(z);
    free(p);
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------- read ahead or not */

/* A kernel `i` of `size` bytes. */
static void huge_kernel(envlog_session *s, int i, size_t size)
{
    uint8_t *bin = malloc(size);
    for (size_t k = 0; k < size; k++)
        bin[k] = (uint8_t)(k * 13 + (size_t)i + k / 1000);
    envlog_compile c = {.ns = KNS_A, .name = "huge",
                        .kernel_key = rp_kkey((uint8_t)(100 + i / 200)),
                        .options = "-O3", .compiler_version = "12.4",
                        .arch = "sm_90", .outcome = ENVLOG_COMPILED,
                        .duration_ns = 10,
                        .binary_hash = envlog_hash128_bytes(bin, size),
                        .binary_size = size, .binary = {bin, size}};
    ck_assert_ok(envlog_record_compile(s, &c, NULL));
    free(bin);
}

/* A session `label` of `n` tunes ("<label>-<i>", in two namespaces, every
 * other one with trials), with a kernel of `kernel` bytes and more at
 * every `every`-th from the 7th, and one of `last` bytes after them (none
 * when 0). */
static void many_tunes(rp_renv *r, const char *label, int n, int every, size_t kernel,
                       size_t last)
{
    envlog_session *s = rp_sbegin(r->env, label, 0);
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s-%d", label, i);
        rp_rtune(s, i % 3 ? NS_A : NS_B, key, i % 2);
        if (i % every == 7)
            huge_kernel(s, i, kernel + (size_t)i);
    }
    if (last)
        huge_kernel(s, 5000, last);
    rp_end(s);
}

/* One import of [z, z+n) into a new environment, `threads` as
 * envlog_import_opts says, and then (when `again`) a second of the same:
 * what each report says, as text, and in *st the environment's state. */
/* What an import of [z, z+n) into `env` says (its error and report), as
 * a line of text in `line`. */
static void import_line(envlog_env *env, const uint8_t *z, size_t n, int threads,
                        char *line, size_t cap)
{
    envlog_import_opts o = {.threads = threads};
    envlog_import_report rep;
    envlog_err e = envlog_bundle_import_x(env, z, n, &o, &rep);
    snprintf(line, cap, "%s %s: taken %llu skipped %llu rejected %llu foreign "
             "%llu other %llu (%s) first reject: %s\n", envlog_strerror(e),
             e ? envlog_errmsg() : "", (unsigned long long)rep.taken,
             (unsigned long long)rep.skipped, (unsigned long long)rep.rejected,
             (unsigned long long)rep.foreign, (unsigned long long)rep.other_version,
             rep.other_versions, rep.first_reject);
}

static char *import_outcome(const uint8_t *z, size_t n, int threads, bool again,
                            rp_renv *t, envlog_state **st)
{
    envlog_buf out = {0};
    *t = rp_renv_new("b2-threads-in");
    for (int round = 0; round < 1 + again; round++) {
        char line[1024];
        import_line(t->env, z, n, threads, line, sizeof line);
        ck_assert_ok(envlog_buf_append(&out, line, strlen(line)));
    }
    ck_assert_ok(envlog_buf_append(&out, "", 1));
    *st = rp_sopen(t->env, NULL);
    return (char *)out.p;
}

/* An import reads the bundle's entries on a thread of its own or on the
 * calling one (envlog_import_opts.threads): the reports and the states are
 * the same, for bundles of both formats with more entries than the read
 * ahead holds at once and kernels of several blocks (copied out of the
 * frame reader, and over the size it holds one at a time), and for a
 * bundle with damaged records among the others (counted, the rest taken). */
START_TEST(test_bundle2_import_threads)
{
    rp_renv r = varied("b2-threads");
    envlog_session *s = rp_sbegin(r.env, "many", 0);
    char key[32];
    for (int i = 0; i < 700; i++) {
        snprintf(key, sizeof key, "many-%d", i);
        rp_rtune(s, i % 3 ? NS_A : NS_B, key, i % 2);
        if (i % 200 == 7) /* a kernel over 256 KiB */
            huge_kernel(s, i, 300000 + (size_t)i);
    }
    rp_end(s);
    for (int format = 1; format <= 3; format++) {
        char *path;
        size_t n;
        uint8_t *z = exported(&r, format == 3 ? 1 : format, ENVLOG_EVIDENCE_ALL, &path, &n);
        if (format == 3) {
            /* Format 1 with a byte of a record in its middle changed: that
             * record is damage, counted and rejected, the others taken. */
            int f;
            envlog_buf snap = snapshot_in(z, n, &f);
            snap.p[snap.len / 2] ^= 0x40;
            free(z);
            size_t cap = ZSTD_compressBound(snap.len);
            z = malloc(cap);
            n = ZSTD_compress(z, cap, snap.p, snap.len, 3);
            ck_assert(!ZSTD_isError(n));
            envlog_buf_free(&snap);
        }
        rp_renv ta, tb;
        envlog_state *sa, *sb;
        char *alone = import_outcome(z, n, 1, true, &ta, &sa);
        ck_assert_msg(!strncmp(alone, "success : taken 7", 17), "format %d: %s", format,
                      alone); /* 700 and more */
        ck_assert_msg(!!strstr(alone, "rejected 0 ") == (format != 3), "format %d: %s",
                      format, alone);
        for (int threads = 0; threads <= 2; threads += 2) {
            char *ahead = import_outcome(z, n, threads, true, &tb, &sb);
            ck_assert_str_eq(ahead, alone);
            ck_assert_uint_ge(sn_compare_states(sa, sb), 700);
            free(ahead);
            envlog_state_close(sb);
            rp_renv_free(&tb);
        }
        envlog_state_close(sa);
        rp_renv_free(&ta);
        free(alone);
        free(z);
        free(path);
    }
    rp_renv_free(&r);
}
END_TEST

/* ------------------------------------------------ decoded while read */

/* Imports of [z, z+n) into `a` by the calling thread alone and into `b`
 * with the snapshot decoded on a thread of its own while the import reads
 * it: the same error, message and report (`what` says which bundle). */
static void fed_agrees(envlog_env *a, envlog_env *b, const uint8_t *z, size_t n,
                       const char *what, size_t at)
{
    char whole[1024], fed[1024];
    import_line(a, z, n, 1, whole, sizeof whole);
    import_line(b, z, n, 2, fed, sizeof fed);
    tu_check(!strcmp(whole, fed), "%s %zu: alone: %s         fed: %s", what, at, whole, fed);
}

/* The column image inside a format 2 bundle [z, z+n). */
static envlog_buf image_in(const uint8_t *z, size_t n)
{
    unsigned long long in = ZSTD_getFrameContentSize(z + ENVLOG_BUNDLE_MARK_LEN,
                                                     n - ENVLOG_BUNDLE_MARK_LEN);
    ck_assert(in != ZSTD_CONTENTSIZE_ERROR && in != ZSTD_CONTENTSIZE_UNKNOWN);
    envlog_buf img = {0};
    ck_assert_ok(envlog_buf_reserve(&img, in));
    img.len = ZSTD_decompress(img.p, in, z + ENVLOG_BUNDLE_MARK_LEN,
                              n - ENVLOG_BUNDLE_MARK_LEN);
    ck_assert_uint_eq(img.len, in);
    return img;
}

/* fed_agrees() over the bundle of `img` with bit `bit` flipped. */
static void fed_agrees_flipped(envlog_env *a, envlog_env *b, envlog_buf *img, size_t bit,
                               const char *what)
{
    img->p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    envlog_buf z = wrap(img->p, img->len, true, 2);
    img->p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    fed_agrees(a, b, z.p, z.len, what, bit);
    envlog_buf_free(&z);
}

/* A bundle import's verdict is the same whether its snapshot is decoded
 * whole first or on a thread of its own while the import reads and
 * records what is decoded: every bit of a small bundle flipped and every
 * cut, every bit of its column image (compressed again, so that the
 * decoder reads it), then bits across the image of a bundle of 700
 * entries and kernels over several blocks (where the decoder's refusal
 * comes after entries were recorded, which are then undone), and the
 * environments hold the same after all of it. */
START_TEST(test_bundle2_fed_agrees)
{
    rp_renv r = small_env("b2-fed");
    char *p;
    size_t n;
    uint8_t *z = exported(&r, 0, ENVLOG_EVIDENCE_ALL, &p, &n);
    rp_renv a = rp_renv_new("b2-fed-a"), b = rp_renv_new("b2-fed-b");
    for (size_t bit = 0; bit < 8 * n; bit++) {
        z[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        fed_agrees(a.env, b.env, z, n, "small bundle, bit", bit);
        z[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    for (size_t cut = 0; cut <= n; cut++)
        fed_agrees(a.env, b.env, z, cut, "small bundle cut at", cut);
    envlog_buf img = image_in(z, n);
    for (size_t bit = 0; bit < 8 * img.len; bit++)
        fed_agrees_flipped(a.env, b.env, &img, bit, "small image, bit");
    envlog_buf_free(&img);
    free(z);
    free(p);
    many_tunes(&r, "many", 700, 200, 90000, 0);
    z = exported(&r, 0, ENVLOG_EVIDENCE_ALL, &p, &n);
    img = image_in(z, n);
    for (size_t k = 0; k < 97; k++)
        fed_agrees_flipped(a.env, b.env, &img, k * (8 * img.len - 1) / 96,
                           "700 entries' image, bit");
    envlog_buf_free(&img);
    fed_agrees(a.env, b.env, z, n, "700 entries, whole", 0);
    envlog_state *sa = rp_sopen(a.env, NULL), *sb = rp_sopen(b.env, NULL);
    ck_assert_uint_ge(sn_compare_states(sa, sb), 707);
    envlog_state_close(sa);
    envlog_state_close(sb);
    rp_renv_free(&a);
    rp_renv_free(&b);
    free(z);
    free(p);
    rp_renv_free(&r);
}
END_TEST


/* --------------------------------------------------- the export's check */

/* The process's address space in bytes (VmSize). */
static uint64_t vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1)
            break;
    fclose(f);
    ck_assert_uint_gt(kb, 0);
    return kb << 10;
}

static envlog_buf image(uint64_t size, uint64_t records, uint32_t depth, uint32_t n_cols,
                        const uint64_t *lens, const char *body, size_t body_len);

/* A check of the image `img` (envlog_cols_check(), what an export's
 * read-back runs) says what the whole decode says, with its message; when
 * both take it, the load of what the check keeps says what the load of
 * the whole says, and the two snapshots' head and tail are the same bytes.
 * Counts the images taken. */
static void check_agrees(const envlog_buf *img, const char *what, void *ctx)
{
    size_t *taken = ctx;
    uint8_t *whole = NULL, *sparse = NULL;
    size_t n1 = 0;
    uint64_t n2 = 0;
    char m1[512], m2[512];
    envlog_err e1 = envlog_cols_decode(img->p, img->len, &whole, &n1);
    snprintf(m1, sizeof m1, "%s", e1 ? envlog_errmsg() : "");
    envlog_err e2 = envlog_cols_check(img->p, img->len, &sparse, &n2);
    snprintf(m2, sizeof m2, "%s", e2 ? envlog_errmsg() : "");
    tu_check(e1 == e2 && !strcmp(m1, m2), "%s: decoded: %s (%s); checked: %s (%s)", what,
             envlog_strerror(e1), m1, envlog_strerror(e2), m2);
    if (!e1 && !e2) {
        tu_check(n1 == n2, "%s: %zu bytes decoded, %llu checked", what, n1,
                 (unsigned long long)n2);
        envlog_snap *a = NULL, *b = NULL;
        e1 = envlog_snap_load(whole, n1, false, &a);
        snprintf(m1, sizeof m1, "%s", e1 ? envlog_errmsg() : "");
        e2 = envlog_snap_load(sparse, (size_t)n2, false, &b);
        snprintf(m2, sizeof m2, "%s", e2 ? envlog_errmsg() : "");
        tu_check(e1 == e2 && !strcmp(m1, m2), "%s: loads: %s (%s), %s (%s)", what,
                 envlog_strerror(e1), m1, envlog_strerror(e2), m2);
        size_t edge = n1 < 200 ? n1 : 200;
        tu_check(!memcmp(whole, sparse, edge) && !memcmp(whole + n1 - edge,
                                                         sparse + n1 - edge, edge),
                 "%s: the head or the tail differs", what);
        if (!e1 && !e2)
            tu_check(!memcmp(envlog_snap_manifest_raw(a).data, envlog_snap_manifest_raw(b).data,
                             envlog_snap_manifest_raw(a).size),
                     "%s: the manifests differ", what);
        envlog_snap_free(a);
        envlog_snap_free(b);
        ++*taken;
    }
    envlog_free(whole);
    envlog_unreserve(sparse, (size_t)n2);
}

/* envlog_cols_check() against envlog_cols_decode(): every bit of a small
 * bundle's image flipped and every cut, then an image of several MiB (its
 * window used again many times, a record larger than the window) whole,
 * with bits flipped across it and cut at places across it; and an export
 * of it describes what an inspection of the file reads. */
START_TEST(test_cols_check_agrees)
{
    rp_renv r = small_env("b2-check");
    char *p;
    size_t n, taken = 0;
    uint8_t *z = exported(&r, 0, ENVLOG_EVIDENCE_ALL, &p, &n);
    envlog_buf img = image_in(z, n);
    tu_each_damage(&img, "small image", check_agrees, &taken);
    ck_assert_uint_gt(taken, 0);
    envlog_buf_free(&img);
    free(z);
    free(p);
    many_tunes(&r, "big", 3000, 100, 60000, (size_t)3 << 19); /* 1.5 MiB: past the window */
    envlog_bundle_info *info, *seen;
    p = export_as(&r, "big", 0, ENVLOG_EVIDENCE_ALL, &info);
    ck_assert_ok(envlog_bundle_inspect(p, &seen));
    ck_assert_uint_gt(info->size, 4u << 20);
    ck_assert_uint_eq(info->size, seen->size);
    ck_assert_uint_eq(info->tunes, seen->tunes);
    ck_assert_uint_eq(info->kernels, seen->kernels);
    ck_assert_uint_eq(info->sessions, seen->sessions);
    ck_assert_uint_eq(info->n_namespaces, seen->n_namespaces);
    for (size_t i = 0; i < info->n_namespaces; i++) {
        ck_assert_str_eq(info->namespaces[i], seen->namespaces[i]);
        ck_assert_uint_eq(info->namespace_entries[i], seen->namespace_entries[i]);
    }
    ck_assert_int_eq(info->content_ok, seen->content_ok);
    ck_assert(!memcmp(info->content_hash.b, seen->content_hash.b, 16));
    envlog_bundle_info_free(info);
    envlog_bundle_info_free(seen);
    z = tu_read(p, &n);
    img = image_in(z, n);
    taken = 0;
    check_agrees(&img, "big image", &taken);
    ck_assert_uint_eq(taken, 1);
    for (size_t k = 0; k < 64; k++) {
        size_t bit = k * (8 * img.len - 1) / 63;
        img.p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        char what[64];
        snprintf(what, sizeof what, "big image, bit %zu", bit);
        check_agrees(&img, what, &taken);
        img.p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        envlog_buf cut = {img.p, bit / 8, bit / 8};
        snprintf(what, sizeof what, "big image cut at %zu", bit / 8);
        check_agrees(&cut, what, &taken);
    }
    envlog_buf_free(&img);
    free(z);
    free(p);
    rp_renv_free(&r);
    /* An image that states a gigabyte and is refused after the check took
     * address space for it gives all of it back, every time. */
    static const uint64_t one[] = {1};
    img = image(ENVLOG_BUNDLE_MAX_SIZE, 1, 3, 1, one, "\xa0", 1);
    check_agrees(&img, "an image stating a gigabyte", &taken);
    uint64_t before = vm_size();
    for (int i = 0; i < 8; i++) {
        uint8_t *sparse;
        uint64_t got;
        ck_assert_int_eq(envlog_cols_check(img.p, img.len, &sparse, &got), ENVLOG_BAD_DATA);
        ck_assert_ptr_null(sparse);
    }
    ck_assert_msg(vm_size() < before + (256u << 20), "address space grew from %llu to %llu",
                  (unsigned long long)before, (unsigned long long)vm_size());
    envlog_buf_free(&img);
}
END_TEST

/* --------------------------------------------------------- hostile images */

/* An image with the header fields given and `n_cols` columns. */
static envlog_buf image(uint64_t size, uint64_t records, uint32_t depth, uint32_t n_cols,
                        const uint64_t *lens, const char *body, size_t body_len)
{
    envlog_buf b = {0};
    uint8_t h[ENVLOG_COLS_HDR] = "envlogc2";
    for (int i = 0; i < 8; i++) {
        h[8 + i] = (uint8_t)(size >> (8 * i));
        h[48 + i] = (uint8_t)(records >> (8 * i));
    }
    for (int i = 0; i < 4; i++) {
        h[56 + i] = (uint8_t)(depth >> (8 * i));
        h[60 + i] = (uint8_t)(n_cols >> (8 * i));
    }
    ck_assert_ok(envlog_buf_append(&b, h, sizeof h));
    for (uint32_t c = 0; c < n_cols; c++) {
        uint8_t l[8];
        for (int i = 0; i < 8; i++)
            l[i] = (uint8_t)(lens[c] >> (8 * i));
        ck_assert_ok(envlog_buf_append(&b, l, 8));
    }
    ck_assert_ok(envlog_buf_append(&b, body, body_len));
    return b;
}

/* The bundle of `img` is refused with `want`, its message holding `why`,
 * and an import of it writes nothing. */
static void refused(envlog_buf img, bool checksum, unsigned version, envlog_err want,
                    const char *why)
{
    envlog_buf z = wrap(img.p, img.len, checksum, version);
    envlog_bundle_info *info;
    envlog_err e = envlog_bundle_inspect_memory(z.p, z.len, &info);
    ck_assert_msg(e == want, "%s: %s (%s)", why, envlog_strerror(e), envlog_errmsg());
    ck_assert_msg(strstr(envlog_errmsg(), why), "want '%s', got '%s'", why, envlog_errmsg());
    rp_renv r = rp_renv_new("b2-hostile");
    envlog_import_report rep;
    for (int threads = 1; threads <= 2; threads++) {
        /* Decoded whole first, or while the import records what is
         * decoded (all of it, when only the hash is wrong), then undone. */
        envlog_import_opts o = {.threads = threads};
        ck_assert_int_eq(envlog_bundle_import_x(r.env, z.p, z.len, &o, &rep), want);
        ck_assert_msg(strstr(envlog_errmsg(), why), "want '%s', got '%s'", why,
                      envlog_errmsg());
        ck_assert_uint_eq(rep.taken, 0);
        envlog_state *st = rp_sopen(r.env, NULL);
        ck_assert_uint_eq(rp_stats(st).tunes + rp_stats(st).kernels, 0);
        envlog_state_close(st);
        /* Nor does the environment's live state hold any of it. */
        ck_assert_ok(envlog_env_state(r.env, &st));
        ck_assert_uint_eq(rp_stats(st).tunes + rp_stats(st).kernels, 0);
    }
    rp_renv_free(&r);
    envlog_buf_free(&z);
    envlog_buf_free(&img);
}

#define BODY(s) s, sizeof s - 1

START_TEST(test_bundle2_hostile)
{
    static const uint64_t one[] = {1}, two[] = {1, 11}, none[] = {0, 0};
    const uint64_t G = ENVLOG_BUNDLE_MAX_SIZE;
    /* The header's own fields. */
    refused(image(G + 1, 4, 3, 1, one, BODY("\xa0")), true, 2, ENVLOG_TOO_BIG,
            "over the 1073741824-byte limit");
    refused(image(64, UINT64_MAX, 3, 1, one, BODY("\xa0")), true, 2, ENVLOG_BAD_DATA,
            "records in a snapshot of 64 bytes");
    refused(image(64, 1, 0, 1, one, BODY("\xa0")), true, 2, ENVLOG_BAD_DATA, "of depth 0");
    refused(image(64, 1, 65, 1, one, BODY("\xa0")), true, 2, ENVLOG_BAD_DATA, "of depth 65");
    refused(image(64, 1, 3, 0, one, BODY("")), true, 2, ENVLOG_BAD_DATA, "with 0 columns");
    envlog_buf many = image(64, 1, 3, 1, one, BODY("\xa0"));
    many.p[60] = 9000 & 0xff; /* (the count only: no reader reads further) */
    many.p[61] = 9000 >> 8;
    refused(many, true, 2, ENVLOG_BAD_DATA, "with 9000 columns");
    /* Column lengths that lie: more than the image holds, or less. */
    static const uint64_t huge[] = {UINT64_MAX};
    refused(image(64, 1, 3, 1, huge, BODY("\xa0")), true, 2, ENVLOG_BAD_DATA,
            "column 0 claims 18446744073709551615 bytes");
    refused(image(64, 1, 3, 2, none, BODY("\xa0")), true, 2, ENVLOG_BAD_DATA,
            "take 0 bytes, not the 1 that follow");
    /* A count of 2^64 - 1, a string of 2^63 bytes, a record larger than the
     * snapshot stated: refused before a byte of them is taken. */
    static const uint64_t nine[] = {9};
    refused(image(G, 1, 3, 1, nine, BODY("\x9b\xff\xff\xff\xff\xff\xff\xff\xff")), true, 2,
            ENVLOG_BAD_DATA, "an array of 18446744073709551615 items, more than the bytes left");
    refused(image(G, 1, 3, 1, nine, BODY("\xbb\xff\xff\xff\xff\xff\xff\xff\xff")), true, 2,
            ENVLOG_BAD_DATA, "a map of 18446744073709551615 pairs");
    refused(image(G, 1, 3, 1, nine, BODY("\x7b\x80\x00\x00\x00\x00\x00\x00\x00")), true, 2,
            ENVLOG_BAD_DATA, "column 0:");
    static const uint64_t ten[] = {10};
    refused(image(8, 1, 3, 1, ten, BODY("\x69" "abcdefghi")), true, 2, ENVLOG_BAD_DATA,
            "take more than the 8 bytes it states");
    /* A column shorter than its items, one that holds more, a column the
     * image does not list. */
    static const uint64_t arr[] = {1, 0};
    refused(image(64, 1, 3, 2, arr, BODY("\x81")), true, 2, ENVLOG_BAD_DATA,
            "column 1 ends before its items do");
    refused(image(64, 1, 3, 1, one, BODY("\x81")), true, 2, ENVLOG_BAD_DATA,
            "more than the 1 columns it lists");
    static const uint64_t extra[] = {3};
    refused(image(8, 1, 3, 1, extra, BODY("\xa0\xa0\xa0")), true, 2, ENVLOG_BAD_DATA,
            "column 0 holds 2 bytes its records do not use");
    /* Numbers: one of 11 bytes, one wider than its head, none at all. */
    refused(image(64, 1, 3, 2, two, BODY("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")),
            true, 2, ENVLOG_BAD_DATA, "column 1: a number over 64 bits");
    static const uint64_t wide[] = {1, 2};
    refused(image(64, 1, 3, 2, wide, BODY("\x18\xd8\x04")), true, 2, ENVLOG_BAD_DATA,
            "does not fit the 1 bytes its head gives it");
    static const uint64_t nonum[] = {1, 0};
    refused(image(64, 1, 3, 2, nonum, BODY("\x19")), true, 2, ENVLOG_BAD_DATA,
            "column 1 ends before its numbers do");
    refused(image(64, 1, 3, 1, one, BODY("\xfc")), true, 2, ENVLOG_BAD_DATA,
            "repeats an item before it holds one");
    /* Records that frame to other than the size stated. */
    refused(image(64, 1, 3, 1, one, BODY("\xa0")), true, 2, ENVLOG_BAD_DATA,
            "its records take 8 bytes, not the 64 it states");
    /* Not a column image; a frame without its checksum; a newer format. */
    refused(image(64, 1, 3, 1, one, BODY("\xa0")), false, 2, ENVLOG_BAD_DATA,
            "does not carry its checksum");
    envlog_buf junk = {0};
    ck_assert_ok(envlog_buf_append(&junk, "not an image at all, but long enough: "
                                   "sixty-four bytes and more of text", 72));
    refused(junk, true, 2, ENVLOG_BAD_DATA, "no column image inside");
    refused(image(8, 1, 3, 1, one, BODY("\xa0")), true, 3, ENVLOG_FORMAT, "bundle format 3");
}
END_TEST

/* A real image with its hash or its id changed: the snapshot it gives is
 * refused whole. */
START_TEST(test_bundle2_hash_and_id)
{
    rp_renv r = varied("b2-hash");
    char *p;
    size_t zn;
    uint8_t *z = exported(&r, 0, ENVLOG_EVIDENCE_NONE, &p, &zn);
    unsigned long long in = ZSTD_getFrameContentSize(z + ENVLOG_BUNDLE_MARK_LEN,
                                                     zn - ENVLOG_BUNDLE_MARK_LEN);
    ck_assert(in != ZSTD_CONTENTSIZE_ERROR && in != ZSTD_CONTENTSIZE_UNKNOWN);
    uint8_t *img = malloc(in);
    ck_assert_uint_eq(ZSTD_decompress(img, in, z + ENVLOG_BUNDLE_MARK_LEN,
                                      zn - ENVLOG_BUNDLE_MARK_LEN), in);
    static const size_t at[] = {16, 31, 32, 47};
    for (size_t i = 0; i < 4; i++) {
        envlog_buf b = {0};
        ck_assert_ok(envlog_buf_append(&b, img, in));
        b.p[at[i]] ^= 1;
        refused(b, true, 2, ENVLOG_BAD_DATA, "does not match its hash");
    }
    /* And unchanged, it reads. */
    envlog_bundle_info *info;
    envlog_buf same = wrap(img, in, true, 2);
    ck_assert_ok(envlog_bundle_inspect_memory(same.p, same.len, &info));
    envlog_bundle_info_free(info);
    envlog_buf_free(&same);
    free(img);
    free(z);
    free(p);
    rp_renv_free(&r);
}
END_TEST

void sn_add_bundle2_tcases(Suite *s)
{
    TCase *tc = tcase_create("bundle format 2");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_cols_lossless);
    tcase_add_test(tc, test_cols_refuses_partial_snapshot);
    tcase_add_loop_test(tc, test_bundle2_round_trip, 0, 3);
    tcase_add_test(tc, test_bundle2_formats);
    tcase_add_test(tc, test_bundle2_damage_catalogue);
    tcase_add_test(tc, test_bundle2_hostile);
    tcase_add_test(tc, test_bundle2_hash_and_id);
    tcase_add_test(tc, test_bundle2_import_threads);
    tcase_add_test(tc, test_bundle2_fed_agrees);
    tcase_add_test(tc, test_cols_check_agrees);
    suite_add_tcase(s, tc);
}
