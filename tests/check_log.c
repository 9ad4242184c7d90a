/* SPDX-License-Identifier: MIT */
/*
 * check_log.c - the log module's framing and reader: fragments and block
 * boundaries, then the damage catalogue (LevelDB's log_test.cc, systemd's
 * test-journal-verify.c): truncation at every byte offset of a three-segment
 * session, every bit flipped, segments removed, swapped and replaced,
 * corruption followed by more appends, torn tails of a killed writer, and a
 * reader beside a live writer.
 *
 * The reader runs in-process; a damaged record is never handed out, so every
 * record that comes back is compared byte for byte with what was written.
 */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "suites.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- framing */

/* Checks the fragments of a record framed at [start, end) of `buf` the way
 * envlog(5) describes them, without the frame reader: headers, types,
 * checksums, zero padding, and the payload reassembled. */
static void check_fragments(const uint8_t *buf, uint64_t start, uint64_t end,
                            uint64_t seed, const uint8_t *p, size_t n)
{
    uint64_t at = start;
    size_t got = 0;
    int i = 0;
    for (;;) {
        uint64_t left = ENVLOG_BLOCK - at % ENVLOG_BLOCK;
        if (left < ENVLOG_FRAG_HDR) {
            for (uint64_t k = 0; k < left; k++)
                ck_assert_msg(buf[at + k] == 0, "padding at %llu not zero",
                              (unsigned long long)(at + k));
            at += left;
            continue;
        }
        const uint8_t *h = buf + at;
        uint16_t len = envlog_get_le16(h + 4);
        uint8_t type = h[6];
        ck_assert_uint_le(ENVLOG_FRAG_HDR + len, left);
        uint32_t want = (uint32_t)envlog_xxh64(h + 4, 3u + len, seed);
        ck_assert_uint_eq(envlog_get_le32(h), want);
        bool last = got + len == n;
        if (i == 0)
            ck_assert_uint_eq(type, last ? ENVLOG_FRAG_FULL : ENVLOG_FRAG_FIRST);
        else
            ck_assert_uint_eq(type, last ? ENVLOG_FRAG_LAST : ENVLOG_FRAG_MIDDLE);
        /* A fragment that is not the last fills its block. */
        if (!last)
            ck_assert_uint_eq(ENVLOG_FRAG_HDR + len, left);
        ck_assert(len == 0 || !memcmp(h + ENVLOG_FRAG_HDR, p + got, len));
        got += len;
        at += ENVLOG_FRAG_HDR + len;
        i++;
        if (last)
            break;
    }
    ck_assert_uint_eq(at, end);
    ck_assert_uint_eq(got, n);
}

/* Stack memory that reads as a stale XXH3 state at every 64-byte alignment
 * (the state's own): its seed `seed`, no external secret, the rest
 * garbage.  xxHash 0.8.1's reset with a seed keeps the state's secret when
 * the state already holds that seed and no external secret, so a state on
 * the stack that is not initialized first would hash with the garbage. */
static __attribute__((noinline)) void stale_xxh3_stack(uint64_t seed)
{
    volatile uint64_t pad[4096];
    size_t s = offsetof(XXH3_state_t, seed) % 64, x = offsetof(XXH3_state_t, extSecret) % 64;
    for (size_t i = 0; i < sizeof pad / sizeof pad[0]; i++) {
        size_t at = (size_t)((uintptr_t)&pad[i] % 64);
        pad[i] = at == s ? seed : at == x ? 0 : 0xababababababababULL;
    }
}

/* The chain a snapshot writer works out before framing (envlog_frame_chain,
 * a streaming hash of each fragment) is the one framing gives (each
 * fragment hashed whole), and the two-part hash is the hash of the two
 * parts together, whatever the stack held before: every seed, lengths
 * across block boundaries, after stale_xxh3_stack(). */
START_TEST(test_xxh3_stack_states)
{
    static const uint64_t seeds[] = {1, 0x9e3779b97f4a7c15ULL, UINT64_MAX};
    static const size_t lens[] = {0, 1, 100, 2000, 3000};
    static const uint64_t starts[] = {0, 100, ENVLOG_BLOCK - 10, ENVLOG_BLOCK - 3};
    ck_assert_msg(offsetof(XXH3_state_t, seed) % 64 != offsetof(XXH3_state_t, extSecret) % 64,
                  "this xxHash lays out its state so that the stale state cannot be made");
    uint8_t payload[3000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 131 + 7);
    uint8_t *dst = malloc(2 * ENVLOG_BLOCK + 8192);
    ck_assert_ptr_nonnull(dst);
    for (size_t a = 0; a < 3; a++)
        for (size_t l = 0; l < 5; l++)
            for (size_t p = 0; p < 4; p++) {
                uint64_t want = 0, at = starts[p];
                envlog_frame_write(dst, &at, seeds[a], payload, lens[l], &want);
                stale_xxh3_stack(seeds[a]);
                uint64_t got = envlog_frame_chain(starts[p], seeds[a], payload, lens[l], 0);
                ck_assert_msg(got == want, "seed %llx, %zu bytes at %llu: chain %llx, framing %llx",
                              (unsigned long long)seeds[a], lens[l],
                              (unsigned long long)starts[p], (unsigned long long)got,
                              (unsigned long long)want);
                size_t half = lens[l] / 2;
                stale_xxh3_stack(seeds[a]);
                uint64_t two = envlog_xxh64_2(payload, half, payload + half, lens[l] - half,
                                              seeds[a]);
                ck_assert_msg(two == XXH3_64bits_withSeed(payload, lens[l], seeds[a]),
                              "seed %llx, %zu bytes: the two-part hash differs",
                              (unsigned long long)seeds[a], lens[l]);
            }
    free(dst);
}
END_TEST

/* A payload's kind as its first three heads give it: a map of at least one
 * pair, key 0, an unsigned kind that fits an int; -1 otherwise.  Over every
 * first byte, the second byte's heads for 0 (and a few others), every third
 * byte and a fourth, with a few bytes after: the reader's shortcut for the
 * usual shape gives what the heads read one by one give. */
START_TEST(test_payload_kind)
{
    static const uint8_t second[] = {0x00, 0x01, 0x18, 0x20, 0x60, 0xf4};
    uint8_t b[8] = {0};
    size_t usual = 0;
    for (unsigned a = 0; a < 256; a++)
        for (size_t s = 0; s < sizeof second; s++)
            for (unsigned c = 0; c < 256; c++)
                for (unsigned d = 0; d < 256; d += 51)
                    for (size_t n = 0; n <= sizeof b; n += n < 4 ? 1 : 4) {
                        b[0] = (uint8_t)a;
                        b[1] = second[s];
                        b[2] = (uint8_t)c;
                        b[3] = (uint8_t)d;
                        int want = envlog_payload_kind_by_heads(b, n);
                        int got = envlog_payload_kind(b, n);
                        ck_assert_msg(got == want, "%02x %02x %02x %02x (%zu bytes): %d, not %d",
                                      a, second[s], c, d, n, got, want);
                        usual += want >= 0;
                    }
    ck_assert_uint_gt(usual, 1000);
}
END_TEST

START_TEST(test_framing_sizes)
{
    const uint64_t seed = 0x1234abcdu;
    const size_t B = ENVLOG_BLOCK, H = ENVLOG_FRAG_HDR;
    /* (start offset, payload size) pairs around every boundary case. */
    const struct {
        uint64_t start;
        size_t n;
        const char *what;
    } cases[] = {
        {0, 0, "empty record"},
        {0, 1, "one byte"},
        {0, 100, "fits"},
        {0, B - H, "ends exactly on the block boundary"},
        {0, B - H - 1, "leaves one byte: padding"},
        {0, B - H - 6, "leaves six bytes: padding"},
        {0, B - 2 * H, "leaves a header's room"},
        {0, B - H + 1, "spills one byte into the next block"},
        {B - H, 0, "empty record in the last header's room"},
        {B - H, 10, "starts with a header and no payload room"},
        {B - 6, 10, "starts in the padding"},
        {B - 1, 1, "starts one byte before the boundary"},
        {100, 3 * B, "spans four blocks"},
        {5, 2 * (B - H), "two whole fragments"},
        {0, (size_t)1 << 20, "1 MiB"},
        {B + 17, ((size_t)1 << 20) + 12345, "1 MiB and more, unaligned"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint64_t start = cases[c].start;
        size_t n = cases[c].n;
        uint64_t fs = envlog_framed_size(start, n);
        size_t cap = (size_t)(start + fs + 2 * B);
        uint8_t *buf = calloc(1, cap);
        uint8_t *p = malloc(n ? n : 1);
        ck_assert(buf && p);
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)(i * 131 + c);
        uint64_t pos = start, chain = 7, chain0 = 7;
        envlog_frame_write(buf, &pos, seed, p, n, &chain);
        ck_assert_msg(pos - start == fs, "%s: framed %llu, predicted %llu", cases[c].what,
                      (unsigned long long)(pos - start), (unsigned long long)fs);
        ck_assert_msg(chain != chain0, "%s: chain did not advance", cases[c].what);
        check_fragments(buf, start, pos, seed, p, n);
        if (!strcmp(cases[c].what, "ends exactly on the block boundary"))
            ck_assert_uint_eq(pos, B);
        /* The frame reader gets it back, then a clean end at the zeros. */
        envlog_frame_reader fr;
        envlog_frame_reader_init(&fr, buf, cap, seed, 0);
        fr.pos = start;
        ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
        ck_assert_uint_eq(fr.out_len, n);
        ck_assert(n == 0 || !memcmp(fr.out, p, n));
        ck_assert_uint_eq(fr.rec_off, start % B > B - H ? (start / B + 1) * B : start);
        ck_assert_uint_eq(fr.pos, pos);
        ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_END);
        /* The wrong seed (another segment's identity) fails every fragment. */
        envlog_frame_reader_free(&fr);
        envlog_frame_reader_init(&fr, buf, pos, seed + 1, 0);
        fr.pos = start;
        ck_assert_int_ne(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
        envlog_frame_reader_free(&fr);
        free(buf);
        free(p);
    }
}
END_TEST

START_TEST(test_framing_sequence)
{
    /* Many records of sizes that walk across every in-block position read
     * back in order, with the chain the writer computed. */
    const uint64_t seed = 99;
    size_t cap = 8u << 20;
    uint8_t *buf = calloc(1, cap);
    ck_assert_ptr_nonnull(buf);
    uint64_t pos = 0, chain = 0;
    size_t sizes[700];
    for (size_t i = 0; i < 700; i++)
        sizes[i] = (i * 7919) % (i % 10 == 0 ? 70000 : 9000);
    uint8_t *p = malloc(70000);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < 700; i++) {
        memset(p, (int)(i & 0xff), sizes[i]);
        ck_assert_uint_le(pos + envlog_framed_size(pos, sizes[i]), cap);
        envlog_frame_write(buf, &pos, seed, p, sizes[i], &chain);
    }
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, buf, pos, seed, 0);
    for (size_t i = 0; i < 700; i++) {
        ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
        ck_assert_uint_eq(fr.out_len, sizes[i]);
        for (size_t k = 0; k < sizes[i]; k++)
            if (fr.out[k] != (uint8_t)(i & 0xff))
                ck_abort_msg("record %zu byte %zu differs", i, k);
    }
    ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_END);
    ck_assert_uint_eq(fr.chain, chain);
    envlog_frame_reader_free(&fr);
    free(p);
    free(buf);
}
END_TEST

START_TEST(test_frame_reader_resync)
{
    /* Damage in block 0 costs the rest of block 0 and the tail of a record
     * that continues into block 1, no more. */
    const uint64_t seed = 5;
    size_t cap = 4 * ENVLOG_BLOCK;
    uint8_t *buf = calloc(1, cap);
    ck_assert_ptr_nonnull(buf);
    uint8_t p[30000];
    memset(p, 0xab, sizeof p);
    uint64_t pos = 0, offs[8];
    for (int i = 0; i < 8; i++) {
        offs[i] = pos;
        envlog_frame_write(buf, &pos, seed, p, i == 1 ? 30000 : 6000, NULL);
    }
    /* Record 0 at 0, record 1 spans into block 1, 2.. follow. */
    ck_assert_uint_lt(offs[1], ENVLOG_BLOCK);
    ck_assert_uint_gt(offs[2], ENVLOG_BLOCK);
    buf[offs[0] + 10] ^= 1;
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, buf, pos, seed, 0);
    ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_BAD);
    ck_assert_uint_eq(fr.bad_off, 0);
    ck_assert_uint_eq(fr.bad_off + fr.bad_len, offs[2]);
    for (int i = 2; i < 8; i++) {
        ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
        ck_assert_uint_eq(fr.rec_off, offs[i]);
    }
    ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_END);
    envlog_frame_reader_free(&fr);
    free(buf);
}
END_TEST

/* --------------------------------------------------- a session on disk */

/* One frame of a segment as written, from a walk of the intact file. */
typedef struct frame {
    uint64_t off, end;
    int kind;
    uint64_t seq;
} frame;

typedef struct seg {
    char name[40];
    char path[4200];
    uint32_t segment;
    uint8_t *data;
    size_t size;
    frame *f;
    size_t nf;
    size_t first_event; /* index in the readback of its first event */
    size_t n_events;
} seg;

typedef struct sess {
    char *dir;
    envlog_env *env;
    envlog_id128 id;
    char sdir[4096];
    seg s[16];
    size_t nseg;
    tu_readback orig;
} sess;

/* `rec` is the record written after the `*got` before it (counted). */
static void check_next_written(const sess *x, const envlog_record *rec, size_t *got)
{
    ck_assert_uint_lt(*got, x->orig.n);
    const tu_rec *w = &x->orig.recs[(*got)++];
    ck_assert_uint_eq(rec->stamp.seq, w->seq);
    ck_assert(rec->payload.size == w->size && !memcmp(rec->payload.data, w->payload, w->size));
}

/* Walks segment `g` with the frame reader to find every frame's extent. */
static void walk_frames(sess *x, seg *g)
{
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, g->data, g->size, envlog_seg_seed(&x->id, g->segment), 0);
    size_t cap = 0;
    envlog_fr_status st;
    while ((st = envlog_frame_reader_next(&fr)) == ENVLOG_FR_RECORD) {
        if (g->nf == cap) {
            cap = cap ? 2 * cap : 64;
            g->f = realloc(g->f, cap * sizeof *g->f);
            ck_assert_ptr_nonnull(g->f);
        }
        frame *f = &g->f[g->nf++];
        f->off = fr.rec_off;
        f->end = fr.pos;
        f->kind = envlog_payload_kind(fr.out, fr.out_len);
        f->seq = 0;
        if (f->kind != ENVLOG_KIND_HEADER && f->kind != ENVLOG_KIND_SEAL) {
            envlog_arena a = {0};
            envlog_record rec;
            ck_assert_ok(envlog_event_decode(fr.out, fr.out_len, &rec, &a));
            f->seq = rec.stamp.seq;
            envlog_arena_free(&a);
        }
    }
    ck_assert_int_eq(st, ENVLOG_FR_END);
    envlog_frame_reader_free(&fr);
}

/* Loads the segments and the reference readback of session x->id. */
static void sess_load(sess *x)
{
    char hex[33];
    envlog_id_format(&x->id, hex);
    snprintf(x->sdir, sizeof x->sdir, "%s/sessions/%s", x->dir, hex);
    envlog_seg_name *names;
    size_t n;
    int fd = open(x->sdir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fd, 0);
    ck_assert_ok(envlog_list_segments(fd, &names, &n));
    close(fd);
    ck_assert_uint_le(n, 16);
    x->nseg = n;
    ck_assert_ok(tu_read_session(x->env, &x->id, &x->orig));
    ck_assert_uint_eq(x->orig.n_corrupt + x->orig.n_truncated, 0);
    size_t ev = 0;
    for (size_t i = 0; i < n; i++) {
        seg *g = &x->s[i];
        memcpy(g->name, names[i].name, sizeof g->name);
        snprintf(g->path, sizeof g->path, "%s/%s", x->sdir, g->name);
        g->segment = names[i].segment;
        g->data = tu_read(g->path, &g->size);
        walk_frames(x, g);
        g->first_event = ev;
        for (size_t k = 0; k < g->nf; k++) {
            if (g->f[k].kind == ENVLOG_KIND_HEADER || g->f[k].kind == ENVLOG_KIND_SEAL)
                continue;
            /* The readback and the frame walk agree on every event. */
            ck_assert_uint_lt(ev, x->orig.n);
            ck_assert_uint_eq(x->orig.recs[ev].seq, g->f[k].seq);
            ck_assert_uint_eq(x->orig.recs[ev].file_offset, g->f[k].off);
            ck_assert_uint_eq(x->orig.recs[ev].segment, g->segment);
            ev++;
            g->n_events++;
        }
        ck_assert_int_eq(g->f[0].kind, ENVLOG_KIND_HEADER);
        ck_assert_int_eq(g->f[g->nf - 1].kind, ENVLOG_KIND_SEAL);
        ck_assert_uint_eq(g->f[g->nf - 1].end, g->size);
    }
    ck_assert_uint_eq(ev, x->orig.n);
    envlog_free(names);
}

/* Records a session of varied records until it has `nseg` segments of
 * `segsize` (the last one holding at least `tail` bytes), ends it, and
 * loads it. */
static void sess_make(sess *x, const char *tag, uint64_t segsize, size_t nseg,
                      uint64_t tail)
{
    memset(x, 0, sizeof *x);
    x->dir = tu_mkdtemp(tag);
    x->env = tu_env(x->dir);
    envlog_session_opts o = tu_opts("damage ✓", segsize);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(x->env, &o, &s));
    envlog_session_stats st;
    uint64_t seg_bytes = 0, last_segments = 0;
    for (unsigned i = 0;; i++) {
        envlog_session_stats_get(s, &st);
        if (st.segments != last_segments) {
            last_segments = st.segments;
            seg_bytes = st.bytes;
        }
        if (st.segments > nseg)
            ck_abort_msg("overshot to %llu segments", (unsigned long long)st.segments);
        if (st.segments == nseg && st.bytes - seg_bytes >= tail)
            break;
        if (i % 7 == 3) {
            char label[64];
            snprintf(label, sizeof label, "mark %u ✓", i);
            ck_assert_ok(envlog_record_mark(s, label, NULL));
        } else {
            /* Sizes that land records across block boundaries. */
            ck_assert_ok(tu_record_tune(s, "k", i, (i * 613) % 2900, NULL));
        }
    }
    x->id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    sess_load(x);
    ck_assert_uint_eq(x->nseg, nseg);
}

static void sess_free(sess *x)
{
    for (size_t i = 0; i < x->nseg; i++) {
        free(x->s[i].data);
        free(x->s[i].f);
    }
    tu_readback_free(&x->orig);
    envlog_env_close(x->env);
    tu_rmrf(x->dir);
    free(x->dir);
}

static void seg_restore(const seg *g)
{
    tu_write(g->path, g->data, g->size);
}

/* What one read of the (damaged) session gave, compared as it goes. */
typedef struct scan {
    size_t n;              /* records returned */
    size_t n_corrupt, n_trunc;
    envlog_damage trunc;
    envlog_session_state state;
    uint64_t last_seq;
} scan;

/* Reads the session, checking that each record returned is byte-identical
 * to the written record of the same seq and that seqs only go up. */
static void sess_scan(sess *x, scan *sc)
{
    memset(sc, 0, sizeof *sc);
    envlog_reader *r;
    envlog_err e = envlog_reader_open(x->env, &x->id, &r);
    tu_check(e == ENVLOG_OK, "reader_open: %s", envlog_errmsg());
    const envlog_record *rec;
    size_t hint = 0;
    bool have = false;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (e == ENVLOG_CORRUPT) {
            sc->n_corrupt++;
            tu_check(sc->n_corrupt < 1000, "endless damage reports");
            continue;
        }
        if (e == ENVLOG_TRUNCATED) {
            sc->n_trunc++;
            sc->trunc = *envlog_reader_damage(r);
            continue;
        }
        tu_check(e == ENVLOG_OK, "reader: %s: %s", envlog_strerror(e), envlog_errmsg());
        uint64_t seq = rec->stamp.seq;
        tu_check(!have || seq > sc->last_seq, "seq %llu after %llu",
                 (unsigned long long)seq, (unsigned long long)sc->last_seq);
        while (hint < x->orig.n && x->orig.recs[hint].seq < seq)
            hint++;
        tu_check(hint < x->orig.n && x->orig.recs[hint].seq == seq,
                 "seq %llu was never written", (unsigned long long)seq);
        const tu_rec *w = &x->orig.recs[hint];
        tu_check(w->size == rec->payload.size &&
                 !memcmp(w->payload, rec->payload.data, w->size),
                 "record seq %llu differs from what was written", (unsigned long long)seq);
        tu_check(rec->kind == w->kind, "kind differs");
        have = true;
        sc->last_seq = seq;
        sc->n++;
    }
    sc->state = envlog_reader_state(r);
    envlog_reader_close(r);
}

/* Events of segment g wholly before byte x. */
static size_t events_before(const seg *g, uint64_t x)
{
    size_t n = 0;
    for (size_t k = 0; k < g->nf; k++)
        if (g->f[k].kind != ENVLOG_KIND_HEADER && g->f[k].kind != ENVLOG_KIND_SEAL &&
            g->f[k].end <= x)
            n++;
    return n;
}

/* The frame cut by a truncation at x, or NULL. */
static const frame *frame_cut(const seg *g, uint64_t x)
{
    for (size_t k = 0; k < g->nf; k++)
        if (g->f[k].off < x && x < g->f[k].end)
            return &g->f[k];
    return NULL;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Reads the session with segment k cut at `cut` (through a file view, or
 * for real when `real`) and checks the outcome.  `crash`: no segment after
 * k exists (a crash while k was being written); else later segments are
 * intact (damage). */
static void check_cut(sess *x, size_t k, uint64_t cut, bool crash, bool real)
{
    seg *g = &x->s[k];
    scan sc;
    if (real) {
        tu_write(g->path, g->data, (size_t)cut);
        sess_scan(x, &sc);
        seg_restore(g);
    } else {
        tu_view_set(g->name, cut, -1, 0);
        sess_scan(x, &sc);
        tu_view_clear();
    }
    size_t later = crash ? 0 : x->orig.n - (g->first_event + g->n_events);
    size_t want = g->first_event + events_before(g, cut) + later;
    tu_check(sc.n == want, "cut at segment %zu byte %llu: %zu records, want %zu", k,
                  (unsigned long long)cut, sc.n, want);
    tu_check(sc.n_trunc == 0 || crash, "cut at %zu/%llu with later segments: torn",
                  k, (unsigned long long)cut);
    if (!crash) {
        tu_check(sc.n_corrupt >= 1, "cut at segment %zu byte %llu not reported", k,
                      (unsigned long long)cut);
        tu_check(sc.state == ENVLOG_STATE_DAMAGED, "state %s",
                 envlog_session_state_name(sc.state));
        return;
    }
    const frame *f = frame_cut(g, cut);
    if (f && f->off == 0 && !all_zero(g->data, (size_t)cut)) {
        /* A HEADER cut short: the writer puts it in with one write, so no
         * crash leaves one; it is damage, never a torn tail to cut. */
        tu_check(sc.n_trunc == 0 && sc.n_corrupt >= 1 && sc.state == ENVLOG_STATE_DAMAGED,
                 "cut at %zu/%llu inside the header: %zu torn, %zu corrupt, state %s", k,
                 (unsigned long long)cut, sc.n_trunc, sc.n_corrupt,
                 envlog_session_state_name(sc.state));
        return;
    }
    tu_check(sc.n_corrupt == 0, "cut at segment %zu byte %llu reported corrupt", k,
                  (unsigned long long)cut);
    /* Inside a frame it is a torn tail at the frame's start - unless the
     * bytes left of it are zeros, which no reader can tell from the
     * preallocated zero fill that ends a segment. */
    if (f && !all_zero(g->data + f->off, (size_t)(cut - f->off))) {
        tu_check(sc.n_trunc == 1, "cut at %zu/%llu inside frame [%llu, %llu) of kind "
                      "%d: no torn tail, state %s", k, (unsigned long long)cut,
                      (unsigned long long)f->off, (unsigned long long)f->end, f->kind,
                      envlog_session_state_name(sc.state));
        tu_check(sc.trunc.offset == f->off, "torn at %llu, want %llu",
                 (unsigned long long)sc.trunc.offset, (unsigned long long)f->off);
        tu_check(sc.trunc.segment == g->segment, "torn in segment %u",
                 (unsigned)sc.trunc.segment);
        tu_check(!memcmp(sc.trunc.session.b, x->id.b, 16), "torn: wrong session");
        tu_check(sc.state == ENVLOG_STATE_TORN, "state %s",
                 envlog_session_state_name(sc.state));
    } else {
        tu_check(sc.n_trunc == 0, "cut at %zu/%llu between frames: torn", k,
                      (unsigned long long)cut);
        tu_check(sc.state == ENVLOG_STATE_UNSEALED, "state %s",
                 envlog_session_state_name(sc.state));
    }
}

/* Offsets worth a real truncation: around every frame, and a sample. */
static bool cut_sampled(const seg *g, uint64_t cut)
{
    if (cut % 509 == 0)
        return true;
    for (size_t f = 0; f < g->nf; f++) {
        uint64_t o = g->f[f].off;
        if (cut == o || cut == o + 1 || cut == o + ENVLOG_FRAG_HDR ||
            cut + 1 == g->f[f].end)
            return true;
    }
    return false;
}

START_TEST(test_truncate_every_offset)
{
    /* A crash at any byte of the session: the segment being written ends
     * there and no later segment exists.  Exactly the records completed
     * before the cut come back; a cut inside a frame is a torn tail at the
     * frame's start; nothing is ever reported corrupt. */
    sess x;
    sess_make(&x, "trunc", 2 * ENVLOG_BLOCK, 3, 3000);
    size_t total = 0, real = 0;
    for (size_t k = x.nseg; k-- > 0;) {
        seg *g = &x.s[k];
        if (k + 1 < x.nseg)
            ck_assert_int_eq(unlink(x.s[k + 1].path), 0);
        for (uint64_t cut = g->size; cut-- > 0; total++) {
            check_cut(&x, k, cut, true, false);
            if (cut_sampled(g, cut)) {
                check_cut(&x, k, cut, true, true);
                real++;
            }
        }
    }
    ck_assert_uint_gt(total, 2 * 2 * ENVLOG_BLOCK);
    ck_assert_uint_gt(real, 300);
    sess_free(&x);
}
END_TEST

START_TEST(test_truncate_inner_segment)
{
    /* A segment cut short while later segments exist is damage, not a torn
     * tail: reported corrupt, and the records of the later segments still
     * come back whole.  (Every offset around each frame and every 11th
     * byte: the every-offset walk above already covers each cut's framing.) */
    sess x;
    sess_make(&x, "trunc-inner", 2 * ENVLOG_BLOCK, 3, 3000);
    size_t tried = 0;
    for (size_t k = 0; k + 1 < x.nseg; k++) {
        seg *g = &x.s[k];
        for (uint64_t cut = g->size; cut-- > 0;) {
            bool near = cut % 11 == 0;
            for (size_t f = 0; f < g->nf && !near; f++)
                near = cut + 8 >= g->f[f].off && cut <= g->f[f].off + 8;
            if (!near)
                continue;
            check_cut(&x, k, cut, false, false);
            if (cut_sampled(g, cut))
                check_cut(&x, k, cut, false, true);
            tried++;
        }
    }
    ck_assert_uint_gt(tried, 10000);
    sess_free(&x);
}
END_TEST

/* Reads with bit `bit` of byte `at` of segment g flipped (through a view,
 * or for real) and checks what came back. */
static bool flip_and_scan(sess *x, seg *g, size_t at, int bit, bool real,
                          size_t *undetected)
{
    /* Before its SEAL, a sealed segment's damage is corruption: a torn
     * tail is what a writer that never sealed leaves. */
    bool before_seal = at < g->f[g->nf - 1].off;
    scan sc;
    if (real) {
        g->data[at] ^= (uint8_t)(1u << bit);
        seg_restore(g);
        g->data[at] ^= (uint8_t)(1u << bit);
        sess_scan(x, &sc);
        seg_restore(g);
    } else {
        tu_view_set(g->name, UINT64_MAX, (int64_t)at, (uint8_t)(1u << bit));
        sess_scan(x, &sc);
        tu_view_clear();
    }
    bool detected = sc.n_corrupt || sc.n_trunc;
    tu_check(!before_seal || sc.n_trunc == 0, "flip at %zu.%d of a sealed segment "
             "reported as a torn tail", at, bit);
    if (!detected) {
        /* Not seen: then nothing may be missing either. */
        tu_check(sc.n == x->orig.n, "flip at %zu.%d: %zu of %zu records, no damage",
                      at, bit, sc.n, x->orig.n);
        tu_check(sc.state == ENVLOG_STATE_SEALED, "flip at %zu.%d unseen but %s", at, bit,
                 envlog_session_state_name(sc.state));
        (*undetected)++;
    } else {
        tu_check(sc.state != ENVLOG_STATE_SEALED, "flip at %zu.%d: damage but sealed",
                 at, bit);
    }
    return detected;
}

START_TEST(test_flip_every_bit)
{
    /* A small segment (no block padding, every byte inside a checksummed
     * fragment): every flip is seen, and what comes back is unchanged. */
    sess x;
    memset(&x, 0, sizeof x);
    x.dir = tu_mkdtemp("flip");
    x.env = tu_env(x.dir);
    envlog_session_opts o = tu_opts("flip", 0);
    const char *devs[] = {"sm_90"};
    o.devices = devs;
    o.n_devices = 1;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(x.env, &o, &s));
    ck_assert_ok(envlog_record_mark(s, "held before the first change", NULL));
    ck_assert_ok(tu_record_tune(s, "flip", 1, 40, NULL));
    tu_sample c;
    tu_sample_make(&c, ENVLOG_KIND_COMPILE, TU_TYPICAL);
    ck_assert_ok(envlog_record_compile(s, &c.u.compile, NULL));
    envlog_span sp;
    ck_assert_ok(envlog_span_open(s, "span", &sp));
    envlog_attr at = {"k", "v"};
    ck_assert_ok(envlog_span_close(&sp, &at, 1, NULL));
    ck_assert_ok(envlog_record_user(s, "u", "\x82\x01\x02", 3, ENVLOG_OBSERVED, NULL));
    x.id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    sess_load(&x);
    ck_assert_uint_eq(x.nseg, 1);
    seg *g = &x.s[0];
    ck_assert_uint_lt(g->size, ENVLOG_BLOCK);
    size_t undetected = 0;
    for (size_t i = 0; i < g->size; i++)
        for (int bit = 0; bit < 8; bit++) {
            flip_and_scan(&x, g, i, bit, false, &undetected);
            if ((i * 8 + (size_t)bit) % 61 == 0)
                flip_and_scan(&x, g, i, bit, true, &undetected);
        }
    /* Each flip changes a checksummed byte or the checksum: a miss would
     * need a 32-bit checksum collision. */
    ck_assert_uint_eq(undetected, 0);
    sess_free(&x);
}
END_TEST

START_TEST(test_flip_multiblock)
{
    /* Two segments with records across block boundaries and block padding:
     * one bit of every third byte (rotating through the bit positions).  Padding
     * may hide a flip; nothing else may, and no damaged record is ever
     * returned. */
    sess x;
    sess_make(&x, "flip2", 2 * ENVLOG_BLOCK, 2, 100);
    size_t undetected = 0, bytes = 0;
    for (size_t k = 0; k < x.nseg; k++) {
        seg *g = &x.s[k];
        for (size_t i = 0; i < g->size; i += 3, bytes++) {
            if (i % 397 == 0)
                flip_and_scan(&x, g, i, (int)(i % 8), true, &undetected);
            if (!flip_and_scan(&x, g, i, (int)(i % 8), false, &undetected)) {
                /* Only a byte of block-tail padding can go unseen. */
                bool padding = ENVLOG_BLOCK - i % ENVLOG_BLOCK < ENVLOG_FRAG_HDR &&
                               g->data[i] == 0;
                tu_check(padding, "flip of segment %zu byte %zu went unseen", k, i);
            }
        }
    }
    ck_assert_uint_lt(undetected, 64);
    ck_assert_uint_gt(bytes, 2 * ENVLOG_BLOCK / 3);
    sess_free(&x);
}
END_TEST

START_TEST(test_segment_chain)
{
    sess x;
    sess_make(&x, "chain", 2 * ENVLOG_BLOCK, 3, 2000);
    scan sc;
    /* Intact: sealed, every record. */
    sess_scan(&x, &sc);
    ck_assert_uint_eq(sc.n, x.orig.n);
    ck_assert_int_eq(sc.state, ENVLOG_STATE_SEALED);
    ck_assert_uint_eq(sc.n_corrupt + sc.n_trunc, 0);
    /* Segment names: <segment>-<first record seq>.log, in order. */
    for (size_t k = 0; k < x.nseg; k++) {
        char want[40];
        envlog_seg_name_format(want, (uint32_t)k, k ? x.orig.recs[x.s[k].first_event].seq : 0);
        ck_assert_str_eq(x.s[k].name, want);
    }
    ck_assert_str_eq(x.s[0].name, "00000000-0000000000000000.log");

    /* The middle segment removed: detected, the others' records whole. */
    seg *mid = &x.s[1];
    ck_assert_int_eq(unlink(mid->path), 0);
    envlog_reader *r;
    ck_assert_ok(envlog_reader_open(x.env, &x.id, &r));
    const envlog_record *rec;
    envlog_err e;
    size_t got = 0, corrupt = 0;
    bool said_missing = false;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (e == ENVLOG_CORRUPT) {
            corrupt++;
            const envlog_damage *d = envlog_reader_damage(r);
            said_missing |= strstr(d->reason, "missing") != NULL;
            if (corrupt == 1)
                ck_assert_uint_eq(d->segment, 2);
            continue;
        }
        ck_assert_ok(e);
        got++;
    }
    ck_assert_int_eq(envlog_reader_state(r), ENVLOG_STATE_DAMAGED);
    envlog_reader_close(r);
    ck_assert(said_missing);
    ck_assert_uint_ge(corrupt, 1);
    ck_assert_uint_eq(got, x.orig.n - mid->n_events);
    sess_scan(&x, &sc); /* and they are byte-identical */
    ck_assert_uint_eq(sc.n, x.orig.n - mid->n_events);
    seg_restore(mid);

    /* Segments 1 and 2 swapped under each other's names. */
    seg *a = &x.s[1], *b = &x.s[2];
    tu_write(a->path, b->data, b->size);
    tu_write(b->path, a->data, a->size);
    sess_scan(&x, &sc);
    ck_assert_uint_ge(sc.n_corrupt, 1);
    ck_assert_int_eq(sc.state, ENVLOG_STATE_DAMAGED);
    seg_restore(a);
    seg_restore(b);

    /* A segment renamed to a later number (a gap before it). */
    char moved[4200];
    snprintf(moved, sizeof moved, "%s/00000005-%016llu.log", x.sdir,
             (unsigned long long)x.orig.recs[b->first_event].seq);
    ck_assert_int_eq(rename(b->path, moved), 0);
    sess_scan(&x, &sc);
    ck_assert_uint_ge(sc.n_corrupt, 1);
    ck_assert_uint_eq(sc.n, x.orig.n - b->n_events);
    ck_assert_int_eq(rename(moved, b->path), 0);

    /* The same segment of another session put in its place: other
     * checksums, nothing from it is taken. */
    sess y;
    sess_make(&y, "chain-other", 2 * ENVLOG_BLOCK, 3, 2000);
    tu_write(mid->path, y.s[1].data, y.s[1].size);
    sess_scan(&x, &sc);
    ck_assert_uint_ge(sc.n_corrupt, 1);
    ck_assert_uint_eq(sc.n, x.orig.n - mid->n_events);
    seg_restore(mid);
    sess_free(&y);

    /* A sealed segment's SEAL replaced by zeros, later segments intact:
     * "not sealed but followed by another". */
    seg *s0 = &x.s[0];
    const frame *seal = &s0->f[s0->nf - 1];
    uint8_t *z = calloc(1, seal->end - seal->off);
    int fd = open(s0->path, O_WRONLY);
    ck_assert_int_eq(pwrite(fd, z, seal->end - seal->off, (off_t)seal->off),
                     (ssize_t)(seal->end - seal->off));
    close(fd);
    free(z);
    sess_scan(&x, &sc);
    ck_assert_uint_ge(sc.n_corrupt, 1);
    ck_assert_uint_eq(sc.n, x.orig.n);
    seg_restore(s0);

    /* Junk appended after the last SEAL. */
    seg *last = &x.s[x.nseg - 1];
    fd = open(last->path, O_WRONLY | O_APPEND);
    ck_assert_int_eq(write(fd, "junk after the seal", 19), 19);
    close(fd);
    sess_scan(&x, &sc);
    ck_assert_uint_ge(sc.n_corrupt, 1);
    ck_assert_uint_eq(sc.n_trunc, 0);
    ck_assert_uint_eq(sc.n, x.orig.n);
    seg_restore(last);

    /* A well-framed record appended after the SEAL (bytes of the writer's
     * own framing): "record after the seal". */
    uint8_t *grown = malloc(last->size + 4096);
    memcpy(grown, last->data, last->size);
    uint64_t pos = last->size;
    const tu_rec *lr = &x.orig.recs[x.orig.n - 1];
    ck_assert_uint_lt(lr->size, 4000);
    envlog_frame_write(grown, &pos, envlog_seg_seed(&x.id, last->segment), lr->payload,
                       lr->size, NULL);
    tu_write(last->path, grown, (size_t)pos);
    free(grown);
    sess_scan(&x, &sc);
    ck_assert_uint_ge(sc.n_corrupt, 1);
    ck_assert_uint_eq(sc.n, x.orig.n);
    seg_restore(last);

    sess_scan(&x, &sc);
    ck_assert_int_eq(sc.state, ENVLOG_STATE_SEALED);
    sess_free(&x);
}
END_TEST

START_TEST(test_corrupt_then_append)
{
    /* Damage in the middle of a live segment, then the writer goes on: the
     * reader drops the damaged block's records, resyncs, and returns the
     * later ones whole (LevelDB's "corrupt then append"). */
    char *dir = tu_mkdtemp("cta");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("cta", 0);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    envlog_stamp st[400];
    for (unsigned i = 0; i < 100; i++)
        ck_assert_ok(tu_record_tune(s, "before", i, 200, &st[i]));
    envlog_id128 id = envlog_session_id(s);
    char hex[33], path[4096];
    envlog_id_format(&id, hex);
    snprintf(path, sizeof path, "%s/sessions/%s/00000000-0000000000000000.log", dir, hex);
    /* Records 10.. are in block 0: damage one byte of record 10's payload. */
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    const tu_rec *r10 = tu_find_seq(&rb, st[10].seq);
    ck_assert_ptr_nonnull(r10);
    ck_assert_uint_lt(r10->file_offset + 100, ENVLOG_BLOCK);
    uint64_t dmg_at = r10->file_offset;
    tu_readback_free(&rb);
    int fd = open(path, O_RDWR);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)dmg_at + 20), 1);
    b ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)dmg_at + 20), 1);
    close(fd);
    for (unsigned i = 100; i < 400; i++)
        ck_assert_ok(tu_record_tune(s, "after", i, 200, &st[i]));
    ck_assert_ok(envlog_session_end(s));

    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_ge(rb.n_corrupt, 1);
    ck_assert_uint_eq(rb.n_truncated, 0);
    ck_assert_uint_eq(rb.first_damage.offset, dmg_at);
    ck_assert_uint_eq(rb.first_damage.segment, 0);
    ck_assert_int_eq(rb.state, ENVLOG_STATE_DAMAGED);
    /* Records before the damage, and every record from block 1 on. */
    for (unsigned i = 0; i < 10; i++)
        ck_assert_ptr_nonnull(tu_find_seq(&rb, st[i].seq));
    ck_assert_ptr_null(tu_find_seq(&rb, st[10].seq));
    size_t later = 0;
    for (unsigned i = 11; i < 400; i++) {
        const tu_rec *r = tu_find_seq(&rb, st[i].seq);
        if (r) {
            ck_assert_uint_ge(r->file_offset, ENVLOG_BLOCK);
            later++;
        }
    }
    ck_assert_uint_gt(later, 300);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* -------------------------------------------- killed writers, torn tails */

/* Forks a writer that records `n` tunes into `dir`, reports its session id
 * through a pipe, and is then killed without ending the session. */
static envlog_id128 killed_writer(const char *dir, unsigned n, uint64_t segsize)
{
    int p[2], go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = tu_fork_pipe(p);
    if (pid == 0) {
        close(go[1]);
        envlog_env *env;
        envlog_session *s;
        envlog_session_opts o = tu_opts("killed", segsize);
        if (envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env) ||
            envlog_session_begin(env, &o, &s))
            _exit(3);
        for (unsigned i = 0; i < n; i++)
            if (tu_record_tune(s, "killed", i, 100, NULL))
                _exit(4);
        envlog_id128 id = envlog_session_id(s);
        if (write(p[1], &id, sizeof id) != sizeof id)
            _exit(5);
        char c;
        (void)!read(go[0], &c, 1); /* wait to be killed */
        _exit(6);
    }
    close(go[0]);
    envlog_id128 id;
    ck_assert_int_eq(read(p[0], &id, sizeof id), (ssize_t)sizeof id);
    kill(pid, SIGKILL);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    close(p[0]);
    close(go[1]);
    return id;
}

START_TEST(test_killed_writer)
{
    /* A killed process loses nothing it recorded: every record is there,
     * the session is unsealed (its lock went with the process). */
    char *dir = tu_mkdtemp("killed");
    envlog_id128 id = killed_writer(dir, 300, 2 * ENVLOG_BLOCK);
    envlog_env *env = tu_env(dir);
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n, 301);
    ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
    ck_assert_int_eq(rb.state, ENVLOG_STATE_UNSEALED);
    for (size_t i = 0; i < rb.n; i++)
        ck_assert_uint_eq(rb.recs[i].seq, i);
    ck_assert_uint_gt(rb.recs[rb.n - 1].segment, 0);
    tu_readback_free(&rb);
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(in[0].state, ENVLOG_STATE_UNSEALED);
    ck_assert_uint_eq(in[0].records, 301);
    envlog_sessions_free(in, n);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_torn_tail)
{
    char *dir = tu_mkdtemp("torn");
    envlog_id128 id = killed_writer(dir, 40, 0);
    envlog_env *env = tu_env(dir);
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n, 41);
    const tu_rec last = rb.recs[rb.n - 1];
    char hex[33], path[4096], seg0[40];
    ck_assert_uint_eq(last.segment, 0);
    envlog_seg_name_format(seg0, 0, 0);
    envlog_id_format(&id, hex);
    snprintf(path, sizeof path, "%s/sessions/%s/%s", dir, hex, seg0);
    size_t size;
    uint8_t *orig = tu_read(path, &size);
    uint64_t end = last.file_offset + envlog_framed_size(last.file_offset, last.size);

    /* (1) Cut in the middle of the last record. */
    tu_truncate(path, (off_t)(last.file_offset + (end - last.file_offset) / 2));
    tu_readback t;
    ck_assert_ok(tu_read_session(env, &id, &t));
    ck_assert_uint_eq(t.n, 40);
    ck_assert_uint_eq(t.n_truncated, 1);
    ck_assert_uint_eq(t.n_corrupt, 0);
    ck_assert_uint_eq(t.torn.offset, last.file_offset);
    ck_assert_uint_eq(t.torn.segment, last.segment);
    ck_assert_uint_gt(t.torn.bytes, 0);
    ck_assert_int_eq(t.state, ENVLOG_STATE_TORN);
    tu_readback_free(&t);
    /* The summary says so too. */
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(in[0].state, ENVLOG_STATE_TORN);
    ck_assert_uint_eq(in[0].records, 40);
    ck_assert_uint_gt(in[0].dropped_bytes, 0);
    envlog_sessions_free(in, n);

    /* (2) The preallocated file keeps its size, the record's second half
     * never reached the disk (zeros). */
    tu_write(path, orig, size);
    uint64_t mid = last.file_offset + (end - last.file_offset) / 2;
    int fd = open(path, O_WRONLY);
    uint8_t zeros[4096] = {0};
    ck_assert_int_eq(pwrite(fd, zeros, end - mid, (off_t)mid), (ssize_t)(end - mid));
    close(fd);
    ck_assert_ok(tu_read_session(env, &id, &t));
    ck_assert_uint_eq(t.n, 40);
    ck_assert_uint_eq(t.n_truncated, 1);
    ck_assert_uint_eq(t.n_corrupt, 0);
    ck_assert_uint_eq(t.torn.offset, last.file_offset);
    ck_assert_int_eq(t.state, ENVLOG_STATE_TORN);
    tu_readback_free(&t);

    /* (3) Only the header bytes of the last record are there. */
    tu_write(path, orig, size);
    fd = open(path, O_WRONLY);
    ck_assert_int_eq(pwrite(fd, zeros, end - last.file_offset - ENVLOG_FRAG_HDR,
                            (off_t)(last.file_offset + ENVLOG_FRAG_HDR)),
                     (ssize_t)(end - last.file_offset - ENVLOG_FRAG_HDR));
    close(fd);
    ck_assert_ok(tu_read_session(env, &id, &t));
    ck_assert_uint_eq(t.n, 40);
    ck_assert_uint_eq(t.n_truncated, 1);
    ck_assert_uint_eq(t.torn.offset, last.file_offset);
    tu_readback_free(&t);

    /* (4) Intact again: unsealed, not torn. */
    tu_write(path, orig, size);
    ck_assert_ok(tu_read_session(env, &id, &t));
    ck_assert_uint_eq(t.n, 41);
    ck_assert_uint_eq(t.n_truncated + t.n_corrupt, 0);
    ck_assert_int_eq(t.state, ENVLOG_STATE_UNSEALED);
    tu_readback_free(&t);
    free(orig);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_live_reader)
{
    /* A reader beside a writer that still holds the session: no damage, the
     * preallocated zeros are the end of data, the state is LIVE. */
    char *dir = tu_mkdtemp("live");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("live", 2 * ENVLOG_BLOCK);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    envlog_id128 id;
    unsigned written = 0;
    for (int round = 0; round < 6; round++) {
        for (unsigned i = 0; i < 37; i++, written++)
            ck_assert_ok(tu_record_tune(s, "live", written, (written * 97) % 1500, NULL));
        id = envlog_session_id(s);
        tu_readback rb;
        ck_assert_ok(tu_read_session(env, &id, &rb));
        ck_assert_uint_eq(rb.n, written + 1);
        ck_assert_uint_eq(rb.n_corrupt + rb.n_truncated, 0);
        ck_assert_int_eq(rb.state, ENVLOG_STATE_LIVE);
        for (size_t i = 0; i < rb.n; i++)
            ck_assert_uint_eq(rb.recs[i].seq, i);
        tu_readback_free(&rb);
        envlog_session_info *in;
        size_t n;
        ck_assert_ok(envlog_sessions_list(env, &in, &n));
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(in[0].state, ENVLOG_STATE_LIVE);
        envlog_sessions_free(in, n);
    }
    envlog_session_stats st;
    envlog_session_stats_get(s, &st);
    ck_assert_uint_ge(st.segments, 2);
    ck_assert_ok(envlog_session_end(s));
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_int_eq(rb.state, ENVLOG_STATE_SEALED);
    ck_assert_uint_eq(rb.n, written + 1);
    tu_readback_free(&rb);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_big_records)
{
    /* A 1 MiB record in a default session, and records larger than the
     * rotation size (their segment grows to hold them); both again in a
     * session written a batch at a time, the 1 MiB record four batches. */
    char *dir = tu_mkdtemp("big");
    envlog_env *env = tu_env(dir);
    for (int variant = 0; variant < 4; variant++) {
        envlog_session_opts o = tu_opts("big", variant % 2 ? 2 * ENVLOG_BLOCK : 0);
        envlog_session *s;
        ck_assert_ok(envlog_session_begin(env, &o, &s));
        if (variant >= 2) /* written a batch at a time, records past a batch */
            envlog_session_batch(s);
        size_t sizes[] = {1u << 20, 100, 3 * ENVLOG_BLOCK + 1, ENVLOG_BLOCK - 7, 5};
        uint8_t *bin = malloc(1u << 20);
        envlog_stamp st[5];
        for (int i = 0; i < 5; i++) {
            for (size_t k = 0; k < sizes[i]; k++)
                bin[k] = (uint8_t)(k * 13 + (size_t)i);
            envlog_compile c = {.ns = "nvrtc/x/sm_90", .name = "big",
                                .outcome = ENVLOG_COMPILED, .binary = {bin, sizes[i]},
                                .binary_size = sizes[i]};
            c.binary_hash = envlog_hash128_bytes(bin, sizes[i]);
            ck_assert_ok(envlog_record_compile(s, &c, &st[i]));
        }
        envlog_id128 id = envlog_session_id(s);
        ck_assert_ok(envlog_session_end(s));
        envlog_reader *r;
        ck_assert_ok(envlog_reader_open(env, &id, &r));
        const envlog_record *rec;
        ck_assert_ok(envlog_reader_next(r, &rec));
        ck_assert_int_eq(rec->kind, ENVLOG_KIND_SESSION);
        for (int i = 0; i < 5; i++) {
            ck_assert_ok(envlog_reader_next(r, &rec));
            ck_assert_uint_eq(rec->stamp.seq, st[i].seq);
            ck_assert_uint_eq(rec->u.compile.binary.size, sizes[i]);
            envlog_hash128 h = envlog_hash128_bytes(rec->u.compile.binary.data, sizes[i]);
            ck_assert(!memcmp(h.b, rec->u.compile.binary_hash.b, 16));
        }
        ck_assert_err(envlog_reader_next(r, &rec), ENVLOG_END);
        ck_assert_int_eq(envlog_reader_state(r), ENVLOG_STATE_SEALED);
        envlog_reader_close(r);
        free(bin);
    }
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* ------------------------------------------------------ batched writers */

/* A session directory in `env` for segment writers of its own; its id in
 * *id, its descriptor returned. */
static int raw_session_dir(envlog_env *env, const envlog_id128 *id)
{
    char hex[33];
    envlog_id_format(id, hex);
    ck_assert_int_eq(mkdirat(env->sessions_fd, hex, 0700), 0);
    int dfd;
    ck_assert_ok(envlog_open_dir(env->sessions_fd, hex, &dfd));
    return dfd;
}

/* Record `i` (seq i + 1) of the batched writers' tests into `b`: compiles
 * whose binaries are sizes across a block, a batch, and a batch and a
 * half, each byte its own. */
static void batch_rec(size_t i, uint8_t *bin, envlog_buf *b)
{
    static const size_t sizes[] = {1,     731,   40,   ENVLOG_BLOCK - 7, 100,
                                   5000,  ENVLOG_SEGW_BATCH + ENVLOG_SEGW_BATCH / 2,
                                   17,    ENVLOG_SEGW_BATCH - 3, 2 * ENVLOG_BLOCK + 1};
    size_t n = sizes[i % (sizeof sizes / sizeof *sizes)];
    for (size_t k = 0; k < n; k++)
        bin[k] = (uint8_t)(k * 31 + i * 7 + 1);
    envlog_compile c = {.ns = "nvrtc/x/sm_90", .name = "batch", .outcome = ENVLOG_COMPILED,
                        .binary = {bin, n}, .binary_size = n};
    c.binary_hash = envlog_hash128_bytes(bin, n);
    b->len = 0;
    tu_record_with_seq(b, ENVLOG_KIND_COMPILE, i + 1, 0, &c);
}

/* The session record, then records of batch_rec() until `n` or the
 * segment is full; @return how many went in after the session record. */
static size_t batch_fill(envlog_segw *w, const envlog_id128 *id, size_t n, uint8_t *tmp)
{
    envlog_session_rec sr = {.id = *id, .start_unix_ns = 1, .label = "batch", .host = "h",
                             .pid = 1};
    envlog_stamp st = {*id, 0, 0};
    envlog_buf b = {0};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_SESSION, &st, ENVLOG_OBSERVED,
                                     ENVLOG_LEVEL_BASIC, &sr));
    ck_assert_ok(envlog_segw_append(w, b.p, b.len, 0));
    envlog_buf_free(&b);
    size_t i = 0;
    for (; i < n; i++) {
        batch_rec(i, tmp, &b);
        if (!envlog_segw_fits(w, b.len))
            break;
        ck_assert_ok(envlog_segw_append(w, b.p, b.len, i + 1));
    }
    envlog_buf_free(&b);
    return i;
}

/* A segment written a batch at a time is the one the mapped writer
 * writes, byte for byte, at each sync policy: after every sync (what is
 * in the file then is the mapped writer's to the same byte) and sealed. */
START_TEST(test_segw_batched_same_bytes)
{
    static const envlog_sync policies[] = {ENVLOG_SYNC_NONE, ENVLOG_SYNC_CLOSE,
                                           ENVLOG_SYNC_RECORD};
    envlog_sync sync = policies[_i];
    char *dir = tu_mkdtemp("batched");
    envlog_env *env = tu_env(dir);
    envlog_id128 id;
    ck_assert_ok(envlog_id_new(&id));
    char *paths[2];
    envlog_segw w[2];
    int dfd[2];
    uint8_t *tmp = malloc(2 * ENVLOG_SEGW_BATCH);
    for (int k = 0; k < 2; k++) {
        /* Two directories, one id: two copies of one session. */
        envlog_id128 dir_id = id;
        dir_id.b[0] ^= (uint8_t)k;
        dfd[k] = raw_session_dir(env, &dir_id);
        ck_assert_ok(envlog_segw_create(&w[k], dfd[k], &id, 0, 0, 0, 8u << 20, "session", sync,
                                        k == 1));
        ck_assert(k == 1 ? w[k].map == NULL && w[k].stage : w[k].map && !w[k].stage);
        char hex[33];
        envlog_id_format(&dir_id, hex);
        paths[k] = strdup(tu_path(tu_path(tu_path(dir, "sessions"), hex), w[k].name));
    }
    size_t n[2];
    for (int k = 0; k < 2; k++)
        n[k] = batch_fill(&w[k], &id, sync == ENVLOG_SYNC_RECORD ? 12 : 40, tmp);
    ck_assert_uint_eq(n[0], n[1]);
    ck_assert_uint_ge(n[0], 10);
    ck_assert_uint_eq(w[0].pos, w[1].pos);
    ck_assert_uint_eq(w[0].chain, w[1].chain);
    /* Synced: the file holds the batched writer's every record. */
    ck_assert_ok(envlog_segw_sync(&w[1]));
    size_t la, lb;
    uint8_t *a = tu_read(paths[0], &la), *b = tu_read(paths[1], &lb);
    ck_assert_uint_ge(lb, w[1].pos);
    ck_assert_uint_ge(la, w[0].pos);
    ck_assert(!memcmp(a, b, (size_t)w[1].pos));
    free(a);
    free(b);
    for (int k = 0; k < 2; k++) {
        ck_assert_ok(envlog_segw_seal(&w[k]));
        close(dfd[k]);
    }
    a = tu_read(paths[0], &la);
    b = tu_read(paths[1], &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert(!memcmp(a, b, la));
    free(a);
    free(b);
    free(paths[0]);
    free(paths[1]);
    free(tmp);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* A batched writer of segment 0 of a new session of `env` at policy
 * `sync`: its id in *id, the directory's descriptor returned. */
static int batched_segw(envlog_env *env, envlog_sync sync, envlog_id128 *id, envlog_segw *w)
{
    ck_assert_ok(envlog_id_new(id));
    int dfd = raw_session_dir(env, id);
    ck_assert_ok(envlog_segw_create(w, dfd, id, 0, 0, 0, 8u << 20, "session", sync, true));
    return dfd;
}

/* A batched writer's write that fails at any call: the append, sync or
 * seal that made it fails naming the segment, every later one fails too
 * (the batch's records are lost, so nothing may follow them), and the
 * file holds whole records, the first ones, with no damage a reader
 * reports; the same after a failed sync at the policy record. */
START_TEST(test_segw_batched_write_fails)
{
    char *dir = tu_mkdtemp("batchfail");
    envlog_env *env = tu_env(dir);
    uint8_t *tmp = malloc(2 * ENVLOG_SEGW_BATCH);
    for (long nth = 1;; nth++) {
        envlog_id128 id;
        envlog_segw w;
        int dfd = batched_segw(env, ENVLOG_SYNC_CLOSE, &id, &w);
        tu_fault_arm(TU_PWRITE, nth, EIO);
        envlog_session_rec sr = {.id = id, .start_unix_ns = 1, .label = "b", .host = "h",
                                 .pid = 1};
        envlog_stamp st = {id, 0, 0};
        envlog_buf b = {0};
        ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_SESSION, &st, ENVLOG_OBSERVED,
                                         ENVLOG_LEVEL_BASIC, &sr));
        envlog_err e = envlog_segw_append(&w, b.p, b.len, 0);
        size_t i = 0;
        for (; !e && i < 24; i++) {
            batch_rec(i, tmp, &b);
            e = envlog_segw_append(&w, b.p, b.len, i + 1);
        }
        bool sealed = !e;
        if (sealed)
            e = envlog_segw_seal(&w); /* closes the segment, failing or not */
        bool hit = tu_fault_disarm();
        if (!hit) {
            ck_assert_ok(e);
            envlog_buf_free(&b);
            close(dfd);
            ck_assert_int_gt(nth, 3); /* the records took several batches */
            break;
        }
        ck_assert_err(e, ENVLOG_IO);
        ck_assert_msg(strstr(envlog_errmsg(), w.name), "%s", envlog_errmsg());
        /* Nothing after the lost batch. */
        ck_assert_err(envlog_segw_append(&w, tmp, 5, 100), ENVLOG_IO);
        ck_assert_msg(strstr(envlog_errmsg(), "lost a batch"), "%s", envlog_errmsg());
        ck_assert_err(envlog_segw_sync(&w), ENVLOG_IO);
        if (!sealed)
            ck_assert_err(envlog_segw_seal(&w), ENVLOG_IO);
        close(dfd);
        tu_readback rb;
        ck_assert_ok(tu_read_session(env, &id, &rb));
        ck_assert_msg(rb.n_corrupt == 0, "nth %ld: %zu damaged, the first at %llu: %s", nth,
                      rb.n_corrupt, (unsigned long long)rb.first_damage.offset,
                      rb.first_damage.reason);
        for (size_t k = 1; k < rb.n; k++) {
            ck_assert_uint_eq(rb.recs[k].seq, k);
            batch_rec(k - 1, tmp, &b);
            ck_assert_uint_eq(rb.recs[k].size, b.len);
            ck_assert(!memcmp(rb.recs[k].payload, b.p, b.len));
        }
        ck_assert_uint_lt(rb.n, i + 1);
        tu_readback_free(&rb);
        envlog_buf_free(&b);
    }
    /* At the policy record, a sync that fails after a record: the record
     * is in the file although its call failed, so every later call fails
     * too (a record after it would take its seq again). */
    envlog_id128 id;
    envlog_segw w;
    int dfd = batched_segw(env, ENVLOG_SYNC_RECORD, &id, &w);
    ck_assert_uint_eq(batch_fill(&w, &id, 2, tmp), 2);
    envlog_buf b = {0};
    batch_rec(2, tmp, &b);
    tu_fault_arm(TU_FSYNC, 1, EIO);
    ck_assert_err(envlog_segw_append(&w, b.p, b.len, 3), ENVLOG_IO);
    ck_assert(tu_fault_disarm());
    ck_assert_err(envlog_segw_append(&w, b.p, b.len, 3), ENVLOG_IO);
    ck_assert_msg(strstr(envlog_errmsg(), "lost a batch") && strstr(envlog_errmsg(), w.name),
                  "%s", envlog_errmsg());
    ck_assert_err(envlog_segw_sync(&w), ENVLOG_IO);
    ck_assert_err(envlog_segw_seal(&w), ENVLOG_IO);
    close(dfd);
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &id, &rb));
    ck_assert_uint_eq(rb.n_corrupt, 0);
    ck_assert_uint_le(rb.n, 4); /* seq 3 once at most */
    tu_readback_free(&rb);
    envlog_buf_free(&b);
    free(tmp);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* Every allocation of reading a record of four blocks fails in turn: the
 * frame reader says ENVLOG_FR_NOMEM with nothing skipped and no damage
 * noted, and reading on once memory is back gives the record whole and
 * the rest after it, with the writer's chain. */
START_TEST(test_frame_reader_alloc_faults)
{
    const uint64_t seed = 7;
    const size_t sizes[] = {40, 3 * ENVLOG_BLOCK + 100, 60};
    size_t cap = 6 * ENVLOG_BLOCK;
    uint8_t *buf = calloc(1, cap), *p = malloc(sizes[1]);
    ck_assert(buf && p);
    uint64_t pos = 0, chain = 0, chain_a = 0, start_b = 0;
    for (int i = 0; i < 3; i++) {
        for (size_t k = 0; k < sizes[i]; k++)
            p[k] = (uint8_t)(k * 31 + (size_t)i);
        envlog_frame_write(buf, &pos, seed, p, sizes[i], &chain);
        if (i == 0) {
            chain_a = chain;
            start_b = pos;
        }
    }
    long n;
    int failures = 0;
    for (n = 1; n < 100; n++) {
        envlog_frame_reader fr;
        envlog_frame_reader_init(&fr, buf, pos, seed, 0);
        ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
        envlog_alloc_fail_after(n);
        envlog_fr_status st = envlog_frame_reader_next(&fr);
        long made = envlog_alloc_fail_reset();
        if (st != ENVLOG_FR_RECORD) {
            ck_assert_msg(st == ENVLOG_FR_NOMEM, "allocation %ld: status %d", n, (int)st);
            failures++;
            ck_assert_uint_eq(fr.pos, start_b);
            ck_assert_uint_eq(fr.rec_off, start_b);
            ck_assert_uint_eq(fr.bad_len, 0);
            ck_assert_str_eq(fr.why, "");
            ck_assert_uint_eq(fr.chain, chain_a);
            ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
        }
        ck_assert_uint_eq(fr.rec_off, start_b);
        ck_assert_uint_eq(fr.out_len, sizes[1]);
        for (size_t k = 0; k < sizes[1]; k++)
            if (fr.out[k] != (uint8_t)(k * 31 + 1))
                ck_abort_msg("allocation %ld: byte %zu differs", n, k);
        ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
        ck_assert_uint_eq(fr.out_len, sizes[2]);
        ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_END);
        ck_assert_uint_eq(fr.chain, chain);
        envlog_frame_reader_free(&fr);
        if (made < n)
            break;
    }
    ck_assert_int_gt(failures, 0);
    ck_assert_int_lt(n, 100);
    free(p);
    free(buf);
}
END_TEST

/* The same through a session reader: a compile record of four blocks
 * between small ones, every allocation of reading the session failing in
 * turn.  Each failure is ENVLOG_NOMEM (never ENVLOG_CORRUPT or a torn
 * tail), no damage is noted, and a fresh reader gets every record. */
START_TEST(test_reader_alloc_faults_multiblock)
{
    char *dir = tu_mkdtemp("ralloc");
    envlog_env *env = tu_env(dir);
    envlog_session_opts o = tu_opts("ralloc", 0);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    size_t big = 3 * ENVLOG_BLOCK + 100;
    uint8_t *bin = malloc(big);
    ck_assert_ptr_nonnull(bin);
    for (size_t k = 0; k < big; k++)
        bin[k] = (uint8_t)(k * 13);
    ck_assert_ok(tu_record_tune(s, "before", 0, 0, NULL));
    envlog_compile c = {.ns = "nvrtc/x/sm_90", .name = "big", .outcome = ENVLOG_COMPILED,
                        .binary = {bin, big}, .binary_size = big};
    c.binary_hash = envlog_hash128_bytes(bin, big);
    ck_assert_ok(envlog_record_compile(s, &c, NULL));
    ck_assert_ok(tu_record_tune(s, "after", 1, 0, NULL));
    envlog_id128 id = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    long n;
    int failures = 0;
    for (n = 1; n < 1000; n++) {
        envlog_reader *r;
        ck_assert_ok(envlog_reader_open(env, &id, &r));
        const envlog_record *rec;
        envlog_alloc_fail_after(n);
        envlog_err e;
        int count = 0;
        while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK)
            count++;
        long made = envlog_alloc_fail_reset();
        if (e != ENVLOG_END) {
            ck_assert_msg(e == ENVLOG_NOMEM, "allocation %ld: %s (%s)", n, envlog_strerror(e),
                          envlog_errmsg());
            failures++;
            ck_assert_uint_eq(envlog_reader_damage(r)->bytes, 0);
            ck_assert_str_eq(envlog_reader_damage(r)->reason, "");
        } else {
            ck_assert_int_eq(count, 4);
        }
        ck_assert_int_ne(envlog_reader_state(r), ENVLOG_STATE_DAMAGED);
        envlog_reader_close(r);
        if (made < n) {
            ck_assert_err(e, ENVLOG_END);
            break;
        }
    }
    ck_assert_int_gt(failures, 0);
    ck_assert_int_lt(n, 1000);
    /* Read whole afterwards: the big record byte for byte. */
    envlog_reader *r;
    ck_assert_ok(envlog_reader_open(env, &id, &r));
    const envlog_record *rec;
    int count = 0;
    envlog_err e;
    while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK) {
        if (rec->kind == ENVLOG_KIND_COMPILE) {
            ck_assert_uint_eq(rec->u.compile.binary.size, big);
            ck_assert(!memcmp(rec->u.compile.binary.data, bin, big));
        }
        count++;
    }
    ck_assert_err(e, ENVLOG_END);
    ck_assert_int_eq(count, 4);
    envlog_reader_close(r);
    free(bin);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_reader_errors)
{
    char *dir = tu_mkdtemp("rerr");
    envlog_env *env = tu_env(dir);
    envlog_id128 id;
    ck_assert_ok(envlog_id_new(&id));
    envlog_reader *r = (envlog_reader *)1;
    ck_assert_err(envlog_reader_open(env, &id, &r), ENVLOG_NOT_FOUND);
    ck_assert_ptr_null(r);
    envlog_reader_close(NULL);
    /* A session directory that is a symbolic link is refused. */
    envlog_session_opts o = tu_opts("real", 0);
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    ck_assert_ok(tu_record_tune(s, "x", 1, 0, NULL));
    envlog_id128 real = envlog_session_id(s);
    ck_assert_ok(envlog_session_end(s));
    char a[33], b[33];
    envlog_id_format(&real, a);
    envlog_id_format(&id, b);
    char target[4096], link[4096];
    snprintf(target, sizeof target, "%s/sessions/%s", dir, a);
    snprintf(link, sizeof link, "%s/sessions/%s", dir, b);
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_err(envlog_reader_open(env, &id, &r), ENVLOG_PERMISSION);
    /* A segment that is a symbolic link is not read through either. */
    char segl[4200];
    snprintf(segl, sizeof segl, "%s/00000001-0000000000000009.log", target);
    ck_assert_int_eq(symlink("/etc/passwd", segl), 0);
    tu_readback rb;
    ck_assert_ok(tu_read_session(env, &real, &rb));
    ck_assert_uint_ge(rb.n_corrupt, 1);
    ck_assert_uint_eq(rb.n, 2);
    tu_readback_free(&rb);
    /* A listing shows the link as a damaged session, not a copy. */
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(env, &in, &n));
    ck_assert_uint_eq(n, 2);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(in[i].state, ENVLOG_STATE_DAMAGED);
    envlog_sessions_free(in, n);
    envlog_env_close(env);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(test_reader_io_faults)
{
    /* Fail each I/O call the reader makes, one at a time: a clean error,
     * and what came back before it is what was written. */
    sess x;
    sess_make(&x, "rfault", 2 * ENVLOG_BLOCK, 3, 1000);
    long n;
    for (n = 1; n < 1000; n++) {
        tu_fault_arm(TU_ANY, n, EIO);
        envlog_reader *r;
        envlog_err e = envlog_reader_open(x.env, &x.id, &r);
        size_t got = 0;
        if (!e) {
            const envlog_record *rec;
            while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK)
                check_next_written(&x, rec, &got);
            envlog_reader_close(r);
        }
        bool fired = tu_fault_disarm();
        if (!fired) {
            ck_assert_err(e, ENVLOG_END);
            ck_assert_uint_eq(got, x.orig.n);
            break;
        }
        ck_assert_msg(e == ENVLOG_IO || e == ENVLOG_CORRUPT || e == ENVLOG_END,
                      "call %ld: %s", n, envlog_strerror(e));
        if (e == ENVLOG_IO)
            ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "Input/output error"));
    }
    ck_assert_int_gt(n, 3);
    sess_free(&x);
}
END_TEST

/* ---------------------------------------------------- reading in windows */

/* What a keeper was given, handed back at the end. */
typedef struct kept_list {
    struct { void *p; size_t n; bool mapped; } v[64];
    size_t n;
} kept_list;

static void keep_into(void *ctx, void *p, size_t n, bool mapped)
{
    kept_list *k = ctx;
    ck_assert_uint_lt(k->n, 64);
    k->v[k->n].p = p;
    k->v[k->n].n = n;
    k->v[k->n++].mapped = mapped;
}

static void kept_free(kept_list *k)
{
    for (size_t i = 0; i < k->n; i++) {
        if (k->v[i].mapped)
            munmap(k->v[i].p, k->v[i].n);
        else
            envlog_free(k->v[i].p);
    }
    k->n = 0;
}

static void trace_add(char **t, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void trace_add(char **t, size_t *len, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    *t = realloc(*t, *len + (size_t)n + 1);
    ck_assert_ptr_nonnull(*t);
    memcpy(*t + *len, line, (size_t)n + 1);
    *len += (size_t)n;
}

/* Everything one read of the session says, in order: each record's seq,
 * offsets and bytes, each damage's place and reason, the end state; with a
 * keeper, where the keeper has each record: the same bytes, at the
 * record's offset.  The window is the reader's own with `own`
 * (envlog_reader_set_window, as a merge sets it), else everyone's. */
static char *read_trace(sess *x, bool in_place, size_t window, bool keep, bool own)
{
    size_t was = envlog_reader_window;
    if (!own)
        envlog_reader_window = window;
    kept_list kl = {.n = 0};
    char *t = NULL;
    size_t len = 0;
    envlog_reader *r;
    ck_assert_ok(envlog_reader_open(x->env, &x->id, &r));
    envlog_reader_set_in_place(r, in_place);
    if (own)
        envlog_reader_set_window(r, window);
    if (keep)
        envlog_reader_set_keep(r, keep_into, &kl);
    const envlog_record *rec;
    envlog_err e;
    for (int guard = 0; (e = envlog_reader_next(r, &rec)) != ENVLOG_END; guard++) {
        ck_assert_int_lt(guard, 100000);
        if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
            const envlog_damage *d = envlog_reader_damage(r);
            trace_add(&t, &len, "%s seg %u at %llu bytes %llu: %s\n", envlog_strerror(e),
                      (unsigned)d->segment, (unsigned long long)d->offset,
                      (unsigned long long)d->bytes, d->reason);
            continue;
        }
        ck_assert_msg(e == ENVLOG_OK, "%s", envlog_errmsg());
        uint64_t h = envlog_xxh64(rec->payload.data, rec->payload.size, 0);
        trace_add(&t, &len, "seq %llu seg %u at %llu..%llu size %zu hash %016llx\n",
                  (unsigned long long)rec->stamp.seq, (unsigned)rec->segment,
                  (unsigned long long)rec->file_offset, (unsigned long long)rec->file_end,
                  rec->payload.size, (unsigned long long)h);
        const uint8_t *kept = envlog_reader_kept(r);
        envlog_frag_loc loc;
        if (!keep) {
            ck_assert_ptr_null(kept);
        } else if (kept) {
            ck_assert(!memcmp(kept, rec->payload.data, rec->payload.size));
        } else {
            /* In fragments: the keeper's segment has them at the record's
             * offset, and they read back as its bytes. */
            ck_assert(envlog_reader_loc(r, &loc));
            ck_assert_uint_eq(loc.offset, rec->file_offset);
            envlog_frame_reader fr;
            envlog_frame_reader_init(&fr, loc.seg, loc.seg_len, loc.seed, 0);
            fr.pos = (size_t)loc.offset;
            ck_assert_int_eq(envlog_frame_reader_next(&fr), ENVLOG_FR_RECORD);
            ck_assert_uint_eq(fr.out_len, rec->payload.size);
            ck_assert(!memcmp(fr.out, rec->payload.data, fr.out_len));
            envlog_frame_reader_free(&fr);
        }
    }
    trace_add(&t, &len, "state %s\n", envlog_session_state_name(envlog_reader_state(r)));
    envlog_reader_close(r);
    kept_free(&kl);
    envlog_reader_window = was;
    return t;
}

/* The reader reads a segment that nothing changes a window at a time:
 * what it says of any session, damaged or not, is what it says reading
 * the segment's mapping, whatever the window (everyone's, or the reader's
 * own as a merge gives it one), with and without a keeper, and the keeper
 * has each record at its offset. */
static void windows_match(sess *x, const char *what)
{
    char *ref = read_trace(x, true, 0, true, false);
    static const size_t windows[] = {ENVLOG_BLOCK, 3 * ENVLOG_BLOCK, (size_t)1 << 20};
    for (size_t w = 0; w < 3; w++)
        for (int way = 0; way < 3; way++) {
            bool keep = way > 0, own = way == 2;
            char *t = read_trace(x, false, windows[w], keep, own);
            ck_assert_msg(!strcmp(t, ref),
                          "%s, window %zu, keeper %d, own window %d:\n%s\nmapped:\n%s", what,
                          windows[w], keep, own, t, ref);
            free(t);
        }
    free(ref);
}

START_TEST(test_windows_read_as_mapping)
{
    sess x;
    /* Segments of 8 blocks of records of every size, some spanning blocks. */
    sess_make(&x, "windows", 8 * ENVLOG_BLOCK, 3, 3000);
    windows_match(&x, "intact");
    size_t n = 0;
    for (size_t k = 0; k < x.nseg; k++) {
        seg *g = &x.s[k];
        /* A byte flipped every 997 bytes, one at a time. */
        for (size_t at = 13 + k; at < g->size; at += 997, n++) {
            tu_view_set(g->name, UINT64_MAX, (int64_t)at, (uint8_t)(1u << (at % 8)));
            char what[64];
            snprintf(what, sizeof what, "segment %zu byte %zu flipped", k, at);
            windows_match(&x, what);
            tu_view_clear();
        }
        /* Cut short: a segment that is not the last is damaged. */
        for (uint64_t cut = g->size / 3; cut < g->size; cut += g->size / 3, n++) {
            tu_view_set(g->name, cut, -1, 0);
            char what[64];
            snprintf(what, sizeof what, "segment %zu cut at %llu", k, (unsigned long long)cut);
            windows_match(&x, what);
            tu_view_clear();
        }
    }
    ck_assert_uint_gt(n, 200);
    sess_free(&x);
}
END_TEST

/* A segment removed while the reader is in the middle of it (a compaction
 * retiring the session meanwhile) reads to its end: the windows after the
 * first come from what the reader has open, not from the file's name. */
START_TEST(test_windows_segment_removed)
{
    sess x;
    sess_make(&x, "win-rm", 8 * ENVLOG_BLOCK, 2, 3000);
    size_t was = envlog_reader_window;
    envlog_reader_window = ENVLOG_BLOCK;
    envlog_reader *r;
    ck_assert_ok(envlog_reader_open(x.env, &x.id, &r));
    const envlog_record *rec;
    size_t got = 0;
    envlog_err e;
    while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK) {
        check_next_written(&x, rec, &got);
        if (got == 1)
            ck_assert_int_eq(unlink(x.s[0].path), 0);
    }
    ck_assert_msg(e == ENVLOG_END, "%s", envlog_errmsg());
    ck_assert_uint_eq(got, x.orig.n);
    ck_assert_uint_gt(x.s[0].n_events, 40);
    envlog_reader_close(r);
    envlog_reader_window = was;
    sess_free(&x);
}
END_TEST

/* A record held (envlog_reader_hold) keeps its bytes through every read
 * after it, whatever windows those read and whatever damage they report,
 * until the next hold; one put together from fragments cannot be held,
 * nor one read in place from a mapping no keeper takes.  Every third
 * record is held, so a held one outlives several reads and, in windows of
 * one block, several windows.  Returns the holds made. */
static size_t hold_through(sess *x, bool in_place, bool keep, size_t window, const char *what)
{
    size_t was = envlog_reader_window;
    envlog_reader_window = window;
    kept_list kl = {.n = 0};
    envlog_reader *r;
    ck_assert_ok(envlog_reader_open(x->env, &x->id, &r));
    envlog_reader_set_in_place(r, in_place);
    if (keep)
        envlog_reader_set_keep(r, keep_into, &kl);
    const uint8_t *hp = NULL;
    size_t hn = 0, held = 0, refused = 0, n = 0;
    uint64_t hh = 0, hseq = 0;
    const envlog_record *rec;
    envlog_err e;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (hp)
            ck_assert_msg(envlog_xxh64(hp, hn, 0) == hh,
                          "%s: the bytes of held seq %llu changed (window %zu, in place %d, "
                          "keeper %d)", what, (unsigned long long)hseq, window, in_place, keep);
        if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED)
            continue;
        ck_assert_msg(e == ENVLOG_OK, "%s", envlog_errmsg());
        if (n++ % 3)
            continue;
        hp = NULL;
        if (!envlog_reader_hold(r)) {
            refused++;
            continue;
        }
        held++;
        hp = rec->payload.data;
        hn = rec->payload.size;
        hh = envlog_xxh64(hp, hn, 0);
        hseq = rec->stamp.seq;
    }
    envlog_reader_close(r);
    kept_free(&kl);
    envlog_reader_window = was;
    if (in_place && !keep) {
        /* Only the last segment, read whole, holds. */
        ck_assert_uint_gt(refused, 3 * held);
        return held;
    }
    /* Records of up to 2900 bytes in blocks of 32 KiB: some lie across
     * two blocks, most in one. */
    ck_assert_uint_gt(held, 3 * refused);
    return held;
}

START_TEST(test_reader_hold)
{
    sess x;
    sess_make(&x, "hold", 8 * ENVLOG_BLOCK, 3, 3000);
    static const size_t windows[] = {ENVLOG_BLOCK, 3 * ENVLOG_BLOCK, (size_t)1 << 20};
    for (size_t w = 0; w < 3; w++)
        for (int way = 0; way < 4; way++)
            if (way != 2) /* in place with no keeper */
                ck_assert_uint_gt(hold_through(&x, way / 2, way % 2, windows[w], "intact"), 20);
    hold_through(&x, true, false, ENVLOG_BLOCK, "in place, no keeper");
    for (size_t k = 0; k < x.nseg; k++) {
        seg *g = &x.s[k];
        for (size_t at = 29 + k; at < g->size; at += 4999) {
            tu_view_set(g->name, UINT64_MAX, (int64_t)at, 0x10);
            char what[64];
            snprintf(what, sizeof what, "segment %zu byte %zu flipped", k, at);
            hold_through(&x, false, false, ENVLOG_BLOCK, what);
            hold_through(&x, false, true, ENVLOG_BLOCK, what);
            tu_view_clear();
        }
    }
    sess_free(&x);
}
END_TEST

/* The reader reads a segment a window at a time (envlog_reader_window):
 * one block at a time, every record and every damage of the catalogue
 * lies across windows, and what comes back must be the same. */
static size_t window_was;

static void window_one_block(void)
{
    window_was = envlog_reader_window;
    envlog_reader_window = ENVLOG_BLOCK;
}

static void window_default(void)
{
    envlog_reader_window = window_was;
}

/* The damage catalogue. */
static void add_damage_tests(TCase *tc)
{
    tcase_add_test(tc, test_truncate_every_offset);
    tcase_add_test(tc, test_truncate_inner_segment);
    tcase_add_test(tc, test_flip_every_bit);
    tcase_add_test(tc, test_flip_multiblock);
    tcase_add_test(tc, test_segment_chain);
    tcase_add_test(tc, test_corrupt_then_append);
}

Suite *suite_log(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tu_tcase(s, "framing", 60);
    tcase_add_test(tc, test_payload_kind);
    tcase_add_test(tc, test_xxh3_stack_states);
    tcase_add_test(tc, test_framing_sizes);
    tcase_add_test(tc, test_framing_sequence);
    tcase_add_test(tc, test_frame_reader_resync);
    tcase_add_test(tc, test_frame_reader_alloc_faults);
    tcase_add_test(tc, test_big_records);
    tcase_add_loop_test(tc, test_segw_batched_same_bytes, 0, 3);
    tcase_add_test(tc, test_segw_batched_write_fails);

    tc = tu_tcase(s, "damage", 1200);
    add_damage_tests(tc);

    tc = tu_tcase(s, "damage in windows", 1200);
    tcase_add_test(tc, test_windows_read_as_mapping);
    tcase_add_test(tc, test_windows_segment_removed);
    tcase_add_test(tc, test_reader_hold);
    tcase_add_checked_fixture(tc, window_one_block, window_default);
    add_damage_tests(tc);
    tcase_add_test(tc, test_big_records);
    tcase_add_test(tc, test_torn_tail);
    tcase_add_test(tc, test_reader_io_faults);
    tcase_add_test(tc, test_reader_alloc_faults_multiblock);

    tc = tu_tcase(s, "reader", 120);
    tcase_add_test(tc, test_killed_writer);
    tcase_add_test(tc, test_torn_tail);
    tcase_add_test(tc, test_live_reader);
    tcase_add_test(tc, test_reader_errors);
    tcase_add_test(tc, test_reader_io_faults);
    tcase_add_test(tc, test_reader_alloc_faults_multiblock);
    return s;
}
