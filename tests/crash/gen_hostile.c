/* SPDX-License-Identifier: MIT */
/*
 * gen_hostile.c - writes the hostile-input catalogue's files
 * (fixtures/hostile/, described by its MANIFEST): segments whose records
 * carry lengths up to 2^64, deep nesting, wrong types and invalid UTF-8,
 * all behind valid checksums (framed with the log's own framing, so only
 * the decoder can refuse them); zstd frames that lie about their size or
 * inflate past the limit (hand-made RLE blocks, a few KiB each); bundles
 * format 2 whose column images lie (sizes, counts, column lengths); a
 * bundle whose entries are named with "/" and ".."; garbage and truncated
 * snapshots.  Run by hand (`make fixtures-hostile`); the output is
 * committed.  Deterministic except the bundle and snapshot (ids, times).
 *
 *   gen-hostile OUTDIR
 */
#include "replay_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* Every segment fixture belongs to this session (its checksum seed). */
#define HOSTILE_ID "01900000000000000000000000000001"

static const char *outdir;

static void die(const char *what)
{
    fprintf(stderr, "gen-hostile: %s: %s\n", what, envlog_errmsg());
    exit(2);
}

static void put(const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "gen-hostile: writing %s: %s\n", path, strerror(errno));
        exit(2);
    }
    printf("  %s (%zu bytes)\n", name, n);
}

/* ------------------------------------------------------------ segments */

typedef struct seg {
    uint8_t *p;
    size_t cap;
    uint64_t pos;
    uint64_t seed;
    uint64_t chain;
    envlog_id128 id;
} seg;

static void seg_frame(seg *s, const uint8_t *rec, size_t n)
{
    uint64_t need = s->pos + envlog_framed_size(s->pos, n);
    if (need > s->cap) {
        size_t cap = (size_t)((need + ENVLOG_BLOCK - 1) / ENVLOG_BLOCK * ENVLOG_BLOCK);
        s->p = realloc(s->p, cap);
        memset(s->p + s->cap, 0, cap - s->cap);
        s->cap = cap;
    }
    envlog_frame_write(s->p, &s->pos, s->seed, rec, n, &s->chain);
}

/* A segment of HOSTILE_ID (its checksum seed) whose HEADER names session
 * `named` and says format `version`. */
static void seg_open(seg *s, const envlog_id128 *named, uint64_t version)
{
    memset(s, 0, sizeof *s);
    if (envlog_id_parse(HOSTILE_ID, &s->id))
        die("id");
    s->seed = envlog_seg_seed(&s->id, 0);
    envlog_seg_header h = {ENVLOG_KIND_HEADER, ENVLOG_MAGIC, version, named ? *named : s->id,
                           0, 0, 0, "session"};
    envlog_buf b = {0};
    if (envlog_struct_encode(&b, &envlog_seg_header_schema, &h, ENVLOG_LEVEL_BASIC))
        die("header");
    /* The HEADER does not enter the chain. */
    seg_frame(s, b.p, b.len);
    s->chain = 0;
    envlog_buf_free(&b);
}

static void seg_begin(seg *s)
{
    seg_open(s, NULL, ENVLOG_LOG_VERSION);
    envlog_buf b = {0};
    /* seq 0: a proper session record. */
    envlog_session_rec r = {.id = s->id, .start_unix_ns = 1700000000000000000ull,
                            .envlog_version = "0.1.0", .label = "hostile", .host = "h",
                            .os = "Linux", .arch = "x86_64", .level = ENVLOG_LEVEL_BASIC};
    envlog_stamp st = {s->id, 0, 0};
    if (envlog_event_encode(&b, ENVLOG_KIND_SESSION, &st, ENVLOG_OBSERVED, ENVLOG_LEVEL_BASIC,
                            &r))
        die("session record");
    seg_frame(s, b.p, b.len);
    envlog_buf_free(&b);
}

/* A proper tune at `seq`, so a reader that gets past damage has
 * something to read after it. */
static void seg_good_tune(seg *s, uint64_t seq)
{
    static const char *const c[] = {"a", "b"};
    envlog_tune t = {.ns = "autotune/hostile/1/dev", .key = "good", .checksum =
                     envlog_tune_checksum(c, 2), .candidates = c, .n_candidates = 2,
                     .policy = "median", .winner = 1, .winner_ns = 3, .stored = true};
    envlog_stamp st = {s->id, seq, seq * 1000};
    envlog_buf b = {0};
    if (envlog_event_encode(&b, ENVLOG_KIND_TUNE, &st, ENVLOG_CHANGED, ENVLOG_LEVEL_BASIC, &t))
        die("tune");
    seg_frame(s, b.p, b.len);
    envlog_buf_free(&b);
}

static void seg_put(seg *s, const char *name)
{
    /* Unsealed, as a killed writer leaves it (what the zero fill says is
     * "no more data"). */
    put(name, s->p, (size_t)s->pos);
    free(s->p);
}

/* The envelope of an event record: {0: kind, 1: seq, 2: offset, 3: effect}
 * in a map of `pairs` pairs; the caller appends the rest. */
static void env_head(envlog_buf *b, unsigned kind, uint64_t seq, size_t pairs)
{
    b->len = 0;
    envlog_enc_map(b, pairs);
    envlog_enc_uint(b, 0);
    envlog_enc_uint(b, kind);
    envlog_enc_uint(b, 1);
    envlog_enc_uint(b, seq);
    envlog_enc_uint(b, 2);
    envlog_enc_uint(b, seq * 1000);
    envlog_enc_uint(b, 3);
    envlog_enc_uint(b, kind == ENVLOG_KIND_MARK ? 0 : 1);
}

static void raw(envlog_buf *b, const void *p, size_t n)
{
    if (envlog_buf_append(b, p, n))
        die("append");
}

static void text(envlog_buf *b, const char *s)
{
    uint8_t h = (uint8_t)(0x60 + strlen(s));
    if (strlen(s) > 23)
        die("text too long for the short form");
    raw(b, &h, 1);
    raw(b, s, strlen(s));
}

/* A tune's envelope and namespace, then the key's label (5): the caller
 * appends the key and the rest. */
static void tune_head(envlog_buf *b, uint64_t seq, size_t pairs)
{
    env_head(b, ENVLOG_KIND_TUNE, seq, pairs);
    envlog_enc_uint(b, 4);
    text(b, "autotune/x/1/d");
    envlog_enc_uint(b, 5);
}

/* One segment per hostile record: session record, the record at seq 1,
 * a good tune at seq 2. */
static void one(const char *name, const envlog_buf *rec)
{
    seg s;
    seg_begin(&s);
    seg_frame(&s, rec->p, rec->len);
    seg_good_tune(&s, 2);
    seg_put(&s, name);
}

static void segments(void)
{
    envlog_buf b = {0};
    static const uint8_t len64[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

    /* A tune key of 2^64-1 bytes (and none there). */
    tune_head(&b, 1, 6);
    raw(&b, "\x7b", 1);
    raw(&b, len64, 8);
    one("seg-text-len-2e64.log", &b);

    /* A record map of 2^64-1 pairs. */
    b.len = 0;
    raw(&b, "\xbb", 1);
    raw(&b, len64, 8);
    envlog_enc_uint(&b, 0);
    envlog_enc_uint(&b, ENVLOG_KIND_TUNE);
    envlog_enc_uint(&b, 1);
    envlog_enc_uint(&b, 1);
    one("seg-map-count-2e64.log", &b);

    /* A candidates array of 2^64-1 names, three of them there. */
    tune_head(&b, 1, 7);
    text(&b, "k");
    envlog_enc_uint(&b, 7);
    raw(&b, "\x9b", 1);
    raw(&b, len64, 8);
    text(&b, "a");
    text(&b, "b");
    text(&b, "c");
    one("seg-array-count-2e64.log", &b);

    /* A trials array of 2^32 maps (a count that fits 32 bits but not the
     * record). */
    tune_head(&b, 1, 7);
    text(&b, "k");
    envlog_enc_uint(&b, 8);
    raw(&b, "\x9a\xff\xff\xff\xff", 5);
    raw(&b, "\xa0", 1);
    one("seg-trials-count-2e32.log", &b);

    /* A compile binary of 2^63 bytes. */
    env_head(&b, ENVLOG_KIND_COMPILE, 1, 8);
    envlog_enc_uint(&b, 4);
    text(&b, "nvrtc/13.0/sm_90");
    envlog_enc_uint(&b, 5);
    text(&b, "k");
    envlog_enc_uint(&b, 11);
    envlog_enc_uint(&b, 0);
    envlog_enc_uint(&b, 15);
    raw(&b, "\x5b\x80\x00\x00\x00\x00\x00\x00\x00", 9);
    one("seg-bytes-len-2e63.log", &b);

    /* A user record whose body nests 10,000 arrays deep (several
     * fragments across blocks). */
    env_head(&b, ENVLOG_KIND_USER, 1, 6);
    envlog_enc_uint(&b, 4);
    text(&b, "deep");
    envlog_enc_uint(&b, 5);
    for (int i = 0; i < 10000; i++)
        raw(&b, "\x81", 1);
    raw(&b, "\x00", 1);
    one("seg-deep-nesting.log", &b);

    /* Deep nesting under an unknown key, which readers skip. */
    env_head(&b, ENVLOG_KIND_MARK, 1, 6);
    envlog_enc_uint(&b, 4);
    text(&b, "m");
    envlog_enc_uint(&b, 99);
    for (int i = 0; i < 10000; i++)
        raw(&b, "\xa1\x00", 2);
    raw(&b, "\x00", 1);
    one("seg-deep-unknown-key.log", &b);

    /* An indefinite-length map (envlog writes none; readers refuse). */
    b.len = 0;
    raw(&b, "\xbf\x00\x14\x01\x01\x02\x00\x03\x00\x04\x61m\xff", 13);
    one("seg-indefinite.log", &b);

    /* Wrong types: one record per field, each with a good tune after. */
    {
        seg s;
        seg_begin(&s);
        uint64_t seq = 1;
        /* key as an integer */
        tune_head(&b, seq++, 6);
        envlog_enc_uint(&b, 42);
        seg_frame(&s, b.p, b.len);
        /* seq as text */
        b.len = 0;
        envlog_enc_map(&b, 4);
        envlog_enc_uint(&b, 0);
        envlog_enc_uint(&b, ENVLOG_KIND_MARK);
        envlog_enc_uint(&b, 1);
        text(&b, "two");
        envlog_enc_uint(&b, 3);
        envlog_enc_uint(&b, 0);
        envlog_enc_uint(&b, 4);
        text(&b, "m");
        seg_frame(&s, b.p, b.len);
        seq++;
        /* winner as text, checksum negative */
        tune_head(&b, seq++, 8);
        text(&b, "k");
        envlog_enc_uint(&b, 6);
        raw(&b, "\x20", 1);
        envlog_enc_uint(&b, 11);
        text(&b, "first");
        seg_frame(&s, b.p, b.len);
        /* kernel key as text, binary as an array */
        env_head(&b, ENVLOG_KIND_COMPILE, seq++, 7);
        envlog_enc_uint(&b, 4);
        text(&b, "nvrtc/13.0/sm_90");
        envlog_enc_uint(&b, 6);
        text(&b, "not sixteen bytes");
        envlog_enc_uint(&b, 15);
        raw(&b, "\x83\x01\x02\x03", 4);
        seg_frame(&s, b.p, b.len);
        /* a record that is an array, not a map */
        b.len = 0;
        raw(&b, "\x84\x00\x14\x01\x05", 5);
        seg_frame(&s, b.p, b.len);
        seq++;
        /* a kind nobody knows, with a body */
        env_head(&b, 200, seq++, 5);
        envlog_enc_uint(&b, 4);
        text(&b, "from the future");
        seg_frame(&s, b.p, b.len);
        /* trials holding integers instead of maps */
        tune_head(&b, seq++, 7);
        text(&b, "k2");
        envlog_enc_uint(&b, 8);
        raw(&b, "\x82\x01\x02", 3);
        seg_frame(&s, b.p, b.len);
        seg_good_tune(&s, seq);
        seg_put(&s, "seg-wrong-types.log");
    }

    /* Invalid UTF-8 in text fields, each record on its own. */
    {
        static const struct {
            const char *name;
            const char *bytes;
            size_t n;
        } bad[] = {
            {"seg-utf8-invalid-byte.log", "ke\xffy", 4},
            {"seg-utf8-overlong.log", "\xc0\xaf", 2},
            {"seg-utf8-surrogate.log", "\xed\xa0\x80", 3},
            {"seg-utf8-truncated.log", "ab\xe2\x82", 4},
            {"seg-utf8-nul.log", "a\0b", 3},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            tune_head(&b, 1, 6);
            uint8_t h = (uint8_t)(0x60 + bad[i].n);
            raw(&b, &h, 1);
            raw(&b, bad[i].bytes, bad[i].n);
            one(bad[i].name, &b);
        }
        /* In the session record itself: its label. */
        seg s;
        seg_open(&s, NULL, ENVLOG_LOG_VERSION);
        env_head(&b, ENVLOG_KIND_SESSION, 0, 6);
        envlog_enc_uint(&b, 5);
        envlog_enc_uint(&b, 1700000000000000000ull);
        envlog_enc_uint(&b, 9);
        raw(&b, "\x63\xe2\x28\xa1", 4);
        seg_frame(&s, b.p, b.len);
        seg_good_tune(&s, 1);
        seg_put(&s, "seg-utf8-session-label.log");
    }

    /* A whole, good session: for the symbolic-link cases. */
    {
        seg s;
        seg_begin(&s);
        seg_good_tune(&s, 1);
        seg_put(&s, "seg-good.log");
    }

    /* Seqs that go back: 1, 2, then 2 again and 1. */
    {
        seg s;
        seg_begin(&s);
        seg_good_tune(&s, 1);
        seg_good_tune(&s, 2);
        seg_good_tune(&s, 2);
        seg_good_tune(&s, 1);
        seg_put(&s, "seg-seq-backwards.log");
    }

    /* A header that names another session (checksums seeded right). */
    {
        envlog_id128 other;
        if (envlog_id_parse(HOSTILE_ID, &other))
            die("id");
        other.b[15] ^= 0x55;
        seg s;
        seg_open(&s, &other, ENVLOG_LOG_VERSION);
        seg_good_tune(&s, 0);
        seg_put(&s, "seg-header-other-session.log");
    }

    /* A header from a format version of the future. */
    {
        seg s;
        seg_open(&s, NULL, 99);
        seg_good_tune(&s, 0);
        seg_put(&s, "seg-header-version-99.log");
    }
    envlog_buf_free(&b);
}

/* ------------------------------------------------------------ zstd frames */

/* A frame header stating `size` bytes (single segment when small enough
 * for the window to be the content), then `blocks` RLE blocks of 128 KiB
 * each, the last one marked last. */
static void rle_frame(envlog_buf *b, uint64_t size, bool state_size, uint64_t blocks)
{
    raw(b, "\x28\xb5\x2f\xfd", 4);
    if (state_size) {
        /* FCS of 8 bytes, not single segment: a window descriptor of 1 MiB
         * (exponent 10: 2^(10+10)). */
        raw(b, "\xc0", 1);
        raw(b, "\x50", 1);
        uint8_t fcs[8];
        for (int i = 0; i < 8; i++)
            fcs[i] = (uint8_t)(size >> (8 * i));
        raw(b, fcs, 8);
    } else {
        raw(b, "\x00", 1);
        raw(b, "\x50", 1);
    }
    for (uint64_t i = 0; i < blocks; i++) {
        uint32_t bsize = 128u << 10;
        uint32_t h = (bsize << 3) | (1u << 1) | (i + 1 == blocks ? 1u : 0u);
        uint8_t hb[4] = {(uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16), 0x00};
        raw(b, hb, 4);
    }
}

static void frames(void)
{
    envlog_buf b = {0};
    rle_frame(&b, (uint64_t)2 << 30, true, 1);
    put("bundle-claims-2GiB.bundle", b.p, b.len);
    b.len = 0;
    /* Claims 64 MiB, holds 1 GiB: the inflater must stop at the claim. */
    rle_frame(&b, (uint64_t)64 << 20, true, 8192);
    put("bundle-holds-more-than-claimed.bundle", b.p, b.len);
    b.len = 0;
    /* Claims 900 MiB (under the limit), holds 128 KiB. */
    rle_frame(&b, (uint64_t)900 << 20, true, 1);
    put("bundle-claims-more-than-held.bundle", b.p, b.len);
    b.len = 0;
    rle_frame(&b, 0, false, 4);
    put("bundle-size-unstated.bundle", b.p, b.len);
    b.len = 0;
    rle_frame(&b, (uint64_t)600 << 20, true, 1);
    rle_frame(&b, (uint64_t)600 << 20, true, 1);
    put("bundle-two-frames-over-limit.bundle", b.p, b.len);
    b.len = 0;
    uint64_t r = 12345;
    for (int i = 0; i < 4096; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        uint8_t c = (uint8_t)(r >> 56);
        raw(&b, &c, 1);
    }
    put("garbage.bin", b.p, b.len);
    envlog_buf_free(&b);
}

/* ------------------------------------------- bundle format 2 that lies */

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A bundle format `version` around a column image (envlog(5), "The column
 * image") that states `size` and `records`, at depth 3, with `n_cols`
 * columns of the lengths given over `body`: in one checksummed frame, so
 * only the column decoder can refuse it. */
static void bundle2(const char *name, unsigned version, uint64_t size, uint64_t records,
                    uint32_t n_cols, const uint64_t *lens, const char *body, size_t body_len)
{
    envlog_buf img = {0}, b = {0};
    uint8_t h[64] = "envlogc2";
    put_le(h + 8, size, 8);
    put_le(h + 48, records, 8);
    put_le(h + 56, 3, 4);
    put_le(h + 60, n_cols, 4);
    raw(&img, h, sizeof h);
    for (uint32_t i = 0; i < n_cols; i++) {
        uint8_t l[8];
        put_le(l, lens[i], 8);
        raw(&img, l, 8);
    }
    raw(&img, body, body_len);
    uint8_t mark[24] = {0x5e, 0x2a, 0x4d, 0x18, 16, 0, 0, 0, 'e', 'n', 'v', 'l', 'o', 'g',
                        '-', 'b', 'u', 'n', 'd', 'l', 'e', 0, (uint8_t)version, 0};
    raw(&b, mark, sizeof mark);
    size_t cap = ZSTD_compressBound(img.len);
    if (envlog_buf_reserve(&b, cap))
        die("reserve");
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    size_t zn = cc ? ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1) : 0;
    if (!cc || ZSTD_isError(zn) ||
        ZSTD_isError(zn = ZSTD_compress2(cc, b.p + b.len, cap, img.p, img.len)))
        die("compress");
    ZSTD_freeCCtx(cc);
    b.len += zn;
    put(name, b.p, b.len);
    envlog_buf_free(&b);
    envlog_buf_free(&img);
}

static void bundles2(void)
{
    static const uint64_t one[] = {1}, count[] = {9}, lie[] = {UINT64_MAX}, shorter[] = {1, 0};
    const uint64_t gib = ENVLOG_BUNDLE_MAX_SIZE;
    /* A 1 GiB snapshot stated by an image of a few bytes: refused when its
     * records end, with no memory taken for what it states. */
    bundle2("bundle2-claims-1GiB.bundle", 2, gib, 1, 1, one, "\xa0", 1);
    bundle2("bundle2-array-count-2e64.bundle", 2, gib, 1, 1, count,
            "\x9b\xff\xff\xff\xff\xff\xff\xff\xff", 9);
    bundle2("bundle2-column-claims-2e64.bundle", 2, 64, 1, 1, lie, "\xa0", 1);
    bundle2("bundle2-column-short.bundle", 2, 64, 1, 2, shorter, "\x81", 1);
    bundle2("bundle2-records-2e64.bundle", 2, 64, UINT64_MAX, 1, one, "\xa0", 1);
    bundle2("bundle2-format-3.bundle", 3, 64, 1, 1, one, "\xa0", 1);
}

/* ------------------------------------------- names with "/" and ".." */

static void ok(envlog_err e, const char *what)
{
    if (e)
        die(what);
}

/* The first half of the file at `path` (at most 1 MiB) as `name`. */
static void put_half(const char *path, const char *name)
{
    static uint8_t p[1 << 20];
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path);
    size_t n = fread(p, 1, sizeof p, f);
    fclose(f);
    put(name, p, n / 2);
}

static void names_bundle(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/.gen-env-XXXXXX", outdir);
    if (!mkdtemp(dir))
        die("mkdtemp");
    char env_dir[4200];
    snprintf(env_dir, sizeof env_dir, "%s/env", dir);
    envlog_env *env;
    ok(envlog_env_open(env_dir, ENVLOG_OPEN_CREATE, &env), "env");
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = "hostile names";
    envlog_session *s;
    ok(envlog_session_begin(env, &o, &s), "session");
    static const char *const c[] = {"a", "b"};
    static const char *const nss[] = {"../../etc/passwd", "autotune/../../x", "/abs/ns",
                                      "a//b", "./here", "ok/ns/1/dev"};
    static const char *const keys[] = {"../../k", "k/with/slashes", "k\nnewline", "..",
                                       "k", "fine"};
    for (size_t i = 0; i < sizeof nss / sizeof nss[0]; i++) {
        envlog_tune t = {.ns = nss[i], .key = keys[i], .checksum = envlog_tune_checksum(c, 2),
                         .candidates = c, .n_candidates = 2, .policy = "median",
                         .winner = 0, .winner_ns = 1, .stored = true};
        ok(envlog_record_tune(s, &t, NULL), "tune");
    }
    uint8_t bin[32];
    memset(bin, 7, sizeof bin);
    static const char *const kn[] = {"../../../tmp/evil", "/etc/shadow", "k/../../x"};
    for (size_t i = 0; i < 3; i++) {
        envlog_compile k = {.ns = i == 0 ? "../nvrtc/13.0" : "nvrtc/13.0/sm_90",
                            .name = kn[i], .options = "", .compiler_version = "13.0",
                            .arch = "sm_90", .outcome = ENVLOG_COMPILED, .binary = {bin, 32},
                            .binary_size = 32, .binary_hash = envlog_hash128_bytes(bin, 32)};
        k.kernel_key = envlog_hash128_bytes(kn[i], strlen(kn[i]));
        ok(envlog_record_compile(s, &k, NULL), "compile");
    }
    ok(envlog_session_end(s), "end");
    char bpath[4300];
    snprintf(bpath, sizeof bpath, "%s/bundle-names.bundle", outdir);
    /* (in bundle format 1, as the committed one is) */
    envlog_bundle_opts bo = {.name = "../../../names/with/slashes",
                             .evidence = ENVLOG_EVIDENCE_WINNERS, .zstd_level = 19,
                             .format = 1};
    ok(envlog_bundle_export(env, &bo, bpath, NULL), "export");
    printf("  bundle-names.bundle\n");
    /* The same in bundle format 2, cut in half. */
    char b2path[4300];
    snprintf(b2path, sizeof b2path, "%s/.names2.bundle", outdir);
    bo.format = 2;
    bo.zstd_level = 0;
    ok(envlog_bundle_export(env, &bo, b2path, NULL), "export");
    /* A snapshot, to cut in half. */
    ok(envlog_compact(env, ENVLOG_EVIDENCE_NONE, NULL), "compact");
    envlog_env_close(env);
    char cur[4400];
    snprintf(cur, sizeof cur, "%s/snapshot/current", env_dir);
    put_half(cur, "snapshot-truncated.bin");
    /* The bundles cut in half. */
    put_half(bpath, "bundle-truncated.bundle");
    put_half(b2path, "bundle2-truncated.bundle");
    unlink(b2path);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd))
        die("rm");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen-hostile OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    mkdir(outdir, 0755);
    segments();
    frames();
    bundles2();
    names_bundle();
    return 0;
}
