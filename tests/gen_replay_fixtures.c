/* SPDX-License-Identifier: MIT */
/*
 * gen_replay_fixtures.c - writes the environments under fixtures/replay/
 * that the replay, why, status, trace, verify and forget golden tests read.
 *
 * It is run once, by hand (`make fixtures-replay`), and its output is
 * committed: session ids, start times and offsets are then fixed, so golden
 * outputs that show them stay stable.  `make check` only builds it and runs
 * it into a scratch directory, so it cannot rot unnoticed.
 *
 *   main/         six sessions, two of them overlapping in time, covering
 *                 every fold rule: first local stands, a later local value
 *                 kept out, local over imported, imported ignored (over a
 *                 local and over an imported value), forget, not stored;
 *                 kernels (local over imported too); user records; spans,
 *                 marks, failed and loaded compiles
 *   damage-base/  a session of several 32 KiB segments and a small clean one
 *   torn/         damage-base with the last record of the big session cut in
 *                 half (a torn tail: the writer died mid-record)
 *   flipped/      damage-base with bits flipped in a record in the middle of
 *                 the big session's second segment
 *   missing/      damage-base without the big session's second segment
 *
 * Uses only the public API, like any other program that records, but for
 * the imported records a bundle import alone writes (envlog_record_imported).
 */
#include "envlog.h"
#include "log_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NS90 "autotune/triton/3.0.0/sm_90"
#define NS80 "autotune/triton/3.0.0/sm_80"
#define KNS90 "nvrtc/12.4/sm_90"
#define KNS80 "nvrtc/12.4/sm_80"

static const char *out_root;

static void die(const char *what, envlog_err e)
{
    fprintf(stderr, "gen_replay_fixtures: %s: %s (%s)\n", what, envlog_errmsg(),
            envlog_strerror(e));
    exit(2);
}

static void ok(envlog_err e, const char *what)
{
    if (e)
        die(what, e);
}

static void sys(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "gen_replay_fixtures: %s: %s\n", what, strerror(errno));
        exit(2);
    }
}

/* Lets the clock move, so records of different sessions never tie and the
 * total order is the order written here. */
static void tick(void)
{
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

static char *path2(const char *a, const char *b)
{
    char *p;
    if (asprintf(&p, "%s/%s", a, b) < 0)
        exit(2);
    return p;
}

static envlog_session *begin(envlog_env *env, const char *label, const char *rt,
                             const char *rtv, const char *device, uint64_t seg)
{
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = label;
    o.runtime = rt;
    o.runtime_version = rtv;
    o.devices = device ? &device : NULL;
    o.n_devices = device ? 1 : 0;
    o.process_mode = "execute";
    o.auto_compact = -1; /* the fixtures are the sessions as written */
    if (seg)
        o.segment_size = seg;
    envlog_session *s;
    ok(envlog_session_begin(env, &o, &s), "beginning a session");
    tick();
    return s;
}

/* ------------------------------------------------------------------ tunes */

typedef struct tune_spec {
    const char *ns, *key;
    const char *const *cands;
    size_t n;
    const double *median; /* per candidate; < 0: the trial failed */
    int64_t winner;
    bool stored, imported, short_circuit;
    const char *policy;
} tune_spec;

static envlog_stamp tune(envlog_session *s, const tune_spec *sp)
{
    envlog_trial tr[8];
    size_t nt = 0;
    double best = 0, second = 0;
    for (size_t i = 0; sp->median && i < sp->n; i++) {
        double m = sp->median[i];
        if (m < 0) {
            tr[nt++] = (envlog_trial){.name = sp->cands[i], .index = (uint32_t)i,
                                      .error = "too many resources requested for launch"};
            continue;
        }
        tr[nt++] = (envlog_trial){.name = sp->cands[i], .index = (uint32_t)i,
                                  .samples = 10, .min_ns = m * 0.97, .median_ns = m,
                                  .mean_ns = m * 1.01, .max_ns = m * 1.12,
                                  .stddev_ns = m * 0.02};
        if ((int64_t)i == sp->winner)
            best = m;
        else if (!second || m < second)
            second = m;
    }
    envlog_param params[] = {{"min_samples", 5}, {"max_samples", 10},
                             {"noise", 0.03}};
    double margin = best > 0 && second > 0 ? second / best - 1 : 0;
    envlog_tune t = {
        .ns = sp->ns, .key = sp->key,
        .checksum = envlog_tune_checksum(sp->cands, sp->n),
        .candidates = sp->cands, .n_candidates = sp->n,
        .trials = nt ? tr : NULL, .n_trials = nt,
        .policy = sp->policy ? sp->policy : "median-adaptive",
        .params = sp->median ? params : NULL, .n_params = sp->median ? 3 : 0,
        .winner = sp->winner, .margin = margin,
        .within_noise = margin > 0 && margin < 0.03,
        .short_circuit = sp->short_circuit,
        .wall_ns = sp->median ? 1500000 : 0,
        .stored = sp->stored,
    };
    envlog_stamp st;
    ok(sp->imported ? envlog_record_imported(s, ENVLOG_KIND_TUNE, &t, &st)
                    : envlog_record_tune(s, &t, &st), "recording a tune");
    tick();
    return st;
}

static const char *const MM[] = {"mm_64x64", "mm_128x64", "mm_128x128"};
static const double MM_T[] = {9120.0, 7410.0, 8025.0};
static const char *const CONV[] = {"winograd", "implicit_gemm", "direct"};
static const double CONV_A[] = {3050.0, 3390.0, 3120.0};
static const double CONV_C[] = {3200.0, 3310.0, 3010.0};
static const char *const SM[] = {"softmax_warp", "softmax_block"};
static const double SM_T[] = {1880.0, 1790.0};
static const double SM_B[] = {1705.0, 1790.0}; /* as the bundle's machine saw it */
static const char *const LN[] = {"ln_fused", "ln_two_pass"};
static const double LN_T[] = {2200.0, 2710.0};
static const char *const ATT[] = {"fa2", "fa3", "naive"};
static const double ATT_T[] = {15100.0, 12750.0, -1};
static const char *const GM[] = {"gemm_tn", "gemm_nt"};
static const double GM_90[] = {5020.0, 5110.0};
static const double GM_80[] = {8400.0, 7990.0};
static const char *const RMS[] = {"rms_warp", "rms_block"};
static const double RMS_T[] = {990.0, 1020.0};
static const double RMS_T2[] = {1010.0, 960.0};
static const char *const SWI[] = {"swiglu_fused", "swiglu_split"};
static const double SWI_T[] = {2400.0, 2210.0};

/* --------------------------------------------------------------- compiles */

typedef struct kernel_spec {
    const char *ns, *name, *arch, *source;
    envlog_outcome outcome;
    bool imported;
    uint8_t fill;
    const envlog_stamp *tune;
    size_t binary_size;
} kernel_spec;

static envlog_stamp compile(envlog_session *s, const kernel_spec *k)
{
    static uint8_t bin[8192];
    size_t size = k->outcome == ENVLOG_COMPILED ? k->binary_size : 0;
    for (size_t i = 0; i < size; i++)
        bin[i] = (uint8_t)(k->fill + i * 7);
    char comp[512];
    envlog_hash128 src = envlog_hash128_bytes(k->source, strlen(k->source));
    snprintf(comp, sizeof comp, "%s|%s|%s|%s", k->source, "-O3 --use_fast_math",
             "12.4.131", k->arch);
    envlog_compile c = {
        .ns = k->ns, .name = k->name,
        .kernel_key = envlog_hash128_bytes(comp, strlen(comp)),
        .source_hash = src, .options = "-O3 --use_fast_math",
        .compiler_version = "12.4.131", .arch = k->arch, .outcome = k->outcome,
        .duration_ns = k->outcome == ENVLOG_LOADED ? 0 : 900000,
        .binary_hash = size ? envlog_hash128_bytes(bin, size) : (envlog_hash128){{0}},
        .binary_size = size, .binary = {size ? bin : NULL, size},
        .log = k->outcome == ENVLOG_FAILED ? "error: identifier \"tile\" is undefined" : "",
        .has_tune = k->tune != NULL,
    };
    if (k->tune)
        c.tune = *k->tune;
    envlog_stamp st;
    ok(k->imported ? envlog_record_imported(s, ENVLOG_KIND_COMPILE, &c, &st)
                   : envlog_record_compile(s, &c, &st), "recording a compile");
    tick();
    return st;
}

static void import_rec(envlog_session *s, const char *bundle, uint64_t taken,
                       uint64_t skipped)
{
    static const uint8_t manifest[] = {0xa1, 0x01, 0x6a, 'h', '1', '0', '0', '-',
                                       'l', 'i', 'n', 'u', 'x'};
    envlog_import im = {.bundle = bundle,
                        .bundle_hash = envlog_hash128_bytes(bundle, strlen(bundle)),
                        .manifest = {manifest, sizeof manifest},
                        .taken = taken, .skipped = skipped};
    ok(envlog_record_import(s, &im, NULL), "recording an import");
    tick();
}

static void end(envlog_session *s)
{
    ok(envlog_session_end(s), "ending a session");
    tick();
}

static envlog_env *fresh_env(const char *name)
{
    char *p = path2(out_root, name);
    envlog_env *env;
    ok(envlog_env_open(p, ENVLOG_OPEN_CREATE, &env), p);
    free(p);
    return env;
}

/* ---------------------------------------------------------------- main/ */

static void gen_main(void)
{
    envlog_env *env = fresh_env("main");
    envlog_session *a = begin(env, "tuner-1", "triton", "3.0.0", "H100-SXM5-80GB:sm_90", 0);
    envlog_span sp;
    ok(envlog_span_open(a, "model.load", &sp), "opening a span");
    tick();
    envlog_stamp mm = tune(a, &(tune_spec){NS90, "matmul_128", MM, 3, MM_T, 1, true,
                                           false, false, NULL});
    envlog_span inner;
    ok(envlog_span_open(a, "compile.matmul", &inner), "opening a span");
    compile(a, &(kernel_spec){KNS90, "matmul_kernel", "sm_90", "__global__ void mm(){}",
                              ENVLOG_COMPILED, false, 0x11, &mm, 96});
    envlog_attr attrs[] = {{"model", "llama-7b"}, {"batch", "8"}};
    ok(envlog_span_close(&inner, NULL, 0, NULL), "closing a span");
    ok(envlog_span_close(&sp, attrs, 2, NULL), "closing a span");
    tick();

    /* A bundle import: every value it brings is IMPORTED. */
    envlog_session *b = begin(env, "bundle-import", "envlog", ENVLOG_VERSION_STRING, NULL, 0);
    import_rec(b, "h100-linux", 3, 0);
    tune(b, &(tune_spec){NS90, "softmax_64", SM, 2, SM_B, 0, true, true, false, NULL});
    tune(b, &(tune_spec){NS90, "rmsnorm_16", RMS, 2, RMS_T, 0, true, true, false, NULL});
    compile(b, &(kernel_spec){KNS90, "softmax_kernel", "sm_90", "__global__ void sm(){}",
                              ENVLOG_COMPILED, true, 0x22, NULL, 64});
    end(b);

    /* tuner-2 overlaps tuner-1: it started later (its id sorts after) but
     * tunes conv_3x3 first, so its value is the one that stands. */
    envlog_session *c = begin(env, "tuner-2", "triton", "3.0.0", "H100-SXM5-80GB:sm_90", 0);
    tune(c, &(tune_spec){NS90, "conv_3x3", CONV, 3, CONV_C, 2, true, false, false, NULL});
    tune(a, &(tune_spec){NS90, "conv_3x3", CONV, 3, CONV_A, 0, true, false, false, NULL});
    tune(c, &(tune_spec){NS90, "matmul_128", MM, 3, NULL, 0, false, false, true,
                         "cached-guess"});
    envlog_stamp smt = tune(c, &(tune_spec){NS90, "softmax_64", SM, 2, SM_T, 1, true,
                                            false, false, NULL});
    compile(c, &(kernel_spec){KNS90, "softmax_kernel", "sm_90", "__global__ void sm(){}",
                              ENVLOG_COMPILED, false, 0x33, &smt, 80});
    tune(c, &(tune_spec){NS90, "layernorm_32", LN, 2, LN_T, 0, true, false, false, NULL});
    tune(c, &(tune_spec){NS90, "attn_256", ATT, 3, ATT_T, 1, true, false, false, NULL});
    tune(c, &(tune_spec){NS90, "gemm_64", GM, 2, GM_90, 0, true, false, false, NULL});

    ok(envlog_record_mark(a, "ready", NULL), "recording a mark");
    tick();
    static const uint8_t body[] = {0xa2, 0x01, 0x64, 'f', 'a', 's', 't', 0x02, 0x03};
    ok(envlog_record_user(a, "myrt.config", body, sizeof body, ENVLOG_CHANGED, NULL),
       "recording a user record");
    tick();
    compile(a, &(kernel_spec){KNS90, "attn_kernel", "sm_90", "__global__ void at(){tile}",
                              ENVLOG_FAILED, false, 0, NULL, 0});
    compile(a, &(kernel_spec){KNS90, "matmul_kernel", "sm_90", "__global__ void mm(){}",
                              ENVLOG_LOADED, false, 0, NULL, 0});
    end(a);
    end(c);

    envlog_session *d = begin(env, "tuner-a100", "triton", "3.0.0", "A100-SXM4-40GB:sm_80", 0);
    tune(d, &(tune_spec){NS80, "gemm_64", GM, 2, GM_80, 1, true, false, false, NULL});
    /* never stored on this device, forgotten on the other: why tells both */
    tune(d, &(tune_spec){NS80, "layernorm_32", LN, 2, NULL, 1, false, false, true,
                         "cached-guess"});
    compile(d, &(kernel_spec){KNS80, "matmul_kernel", "sm_80", "__global__ void mm(){}",
                              ENVLOG_COMPILED, false, 0x44, NULL, 72});
    end(d);

    envlog_session *e = begin(env, "cleanup", "envlog", ENVLOG_VERSION_STRING, NULL, 0);
    envlog_forget f = {ENVLOG_TABLE_TUNE, NS90, "layernorm_32",
                       envlog_tune_checksum(LN, 2), "stale after a driver update", NULL};
    ok(envlog_record_forget(e, &f, NULL), "recording a forget");
    tick();
    end(e);

    /* A newer bundle: softmax_64 has a local value now and rmsnorm_16 an
     * imported one, so both are ignored; swiglu_8 is new and stands as
     * imported. */
    envlog_session *g = begin(env, "bundle-import", "envlog", ENVLOG_VERSION_STRING, NULL, 0);
    import_rec(g, "h100-linux-2", 1, 2);
    tune(g, &(tune_spec){NS90, "softmax_64", SM, 2, SM_B, 0, true, true, false, NULL});
    tune(g, &(tune_spec){NS90, "rmsnorm_16", RMS, 2, RMS_T2, 1, true, true, false, NULL});
    tune(g, &(tune_spec){NS90, "swiglu_8", SWI, 2, SWI_T, 1, true, true, false, NULL});
    end(g);
    envlog_env_close(env);
}

/* ------------------------------------------------------- damaged copies */

static void copy_tree(const char *src, const char *dst)
{
    struct stat st;
    sys(lstat(src, &st), src);
    if (S_ISDIR(st.st_mode)) {
        sys(mkdir(dst, 0700) && errno != EEXIST, dst);
        DIR *d = opendir(src);
        if (!d)
            sys(-1, src);
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char *a = path2(src, de->d_name), *b = path2(dst, de->d_name);
            copy_tree(a, b);
            free(a);
            free(b);
        }
        closedir(d);
        return;
    }
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out)
        sys(-1, dst);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)))
        if (fwrite(buf, 1, n, out) != n)
            sys(-1, dst);
    fclose(in);
    sys(fclose(out), dst);
}

/* Where the records of one session lie: segment and byte range. */
typedef struct place {
    uint32_t segment;
    uint64_t off, end;
    uint64_t seq;
} place;

static size_t places_of(envlog_env *env, const envlog_id128 *id, place *v, size_t cap)
{
    envlog_reader *r;
    ok(envlog_reader_open(env, id, &r), "opening a reader");
    const envlog_record *rec;
    size_t n = 0;
    envlog_err e;
    while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK)
        if (n < cap)
            v[n++] = (place){rec->segment, rec->file_offset, rec->file_end, rec->stamp.seq};
    if (e != ENVLOG_END)
        die("reading back the damage base", e);
    envlog_reader_close(r);
    return n;
}

/* The file name of segment `seg` of session `hex` under environment `env`. */
static char *segment_path(const char *env, const char *hex, uint32_t seg)
{
    char *dir, *found = NULL;
    if (asprintf(&dir, "%s/%s/sessions/%s", out_root, env, hex) < 0)
        exit(2);
    DIR *d = opendir(dir);
    if (!d)
        sys(-1, dir);
    struct dirent *de;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "%08u-", seg);
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix)) &&
            strlen(de->d_name) > 4 && !strcmp(de->d_name + strlen(de->d_name) - 4, ".log"))
            found = path2(dir, de->d_name);
    closedir(d);
    free(dir);
    if (!found) {
        fprintf(stderr, "gen_replay_fixtures: no segment %u in %s\n", seg, hex);
        exit(2);
    }
    return found;
}

static void gen_damage(void)
{
    envlog_env *env = fresh_env("damage-base");
    envlog_session *big = begin(env, "big", "triton", "3.0.0", "H100-SXM5-80GB:sm_90", 32768);
    envlog_stamp first = {0};
    for (int i = 0; i < 14; i++) {
        char name[32], src[64];
        snprintf(name, sizeof name, "kernel_%02d", i);
        snprintf(src, sizeof src, "__global__ void k%02d(){}", i);
        envlog_stamp st = compile(big, &(kernel_spec){KNS90, name, "sm_90", src,
                                                      ENVLOG_COMPILED, false,
                                                      (uint8_t)i, NULL, 6000});
        if (i == 0)
            first = st;
    }
    envlog_session *small = begin(env, "small", "triton", "3.0.0", "H100-SXM5-80GB:sm_90", 0);
    tune(small, &(tune_spec){NS90, "matmul_128", MM, 3, MM_T, 1, true, false, false, NULL});
    tune(small, &(tune_spec){NS90, "softmax_64", SM, 2, SM_T, 1, true, false, false, NULL});
    envlog_id128 big_id = first.session;
    end(big);
    end(small);

    place pl[64];
    size_t n = places_of(env, &big_id, pl, 64);
    envlog_env_close(env);
    if (n < 10 || pl[n - 1].segment < 2) {
        fprintf(stderr, "gen_replay_fixtures: the big session needs 3 segments\n");
        exit(2);
    }
    char hex[33];
    envlog_id_format(&big_id, hex);
    char *base = path2(out_root, "damage-base");
    const char *names[] = {"torn", "flipped", "missing"};
    for (int i = 0; i < 3; i++) {
        char *p = path2(out_root, names[i]);
        copy_tree(base, p);
        free(p);
    }
    free(base);

    /* torn: as a writer killed in the middle of its last record leaves
     * the segment: half the record, no seal, and the rest of the file the
     * zeros of its preallocation (whole 32 KiB blocks: a file trimmed to
     * another size was sealed, and its damage is not a torn tail). */
    const place *last = &pl[n - 1];
    char *seg = segment_path("torn", hex, last->segment);
    sys(truncate(seg, (off_t)(last->off + (last->end - last->off) / 2)), seg);
    sys(truncate(seg, (off_t)((last->end + 32767) / 32768 * 32768)), seg);
    free(seg);

    /* flipped: bits in the middle of a record inside segment 1. */
    const place *mid = NULL;
    size_t in_seg1 = 0;
    for (size_t i = 0; i < n; i++)
        in_seg1 += pl[i].segment == 1;
    for (size_t i = 0, k = 0; i < n; i++)
        if (pl[i].segment == 1 && k++ == in_seg1 / 2)
            mid = &pl[i];
    seg = segment_path("flipped", hex, 1);
    int fd = open(seg, O_RDWR);
    sys(fd < 0, seg);
    uint8_t byte;
    off_t at = (off_t)(mid->off + (mid->end - mid->off) / 2);
    sys(pread(fd, &byte, 1, at) != 1, seg);
    byte ^= 0x5a;
    sys(pwrite(fd, &byte, 1, at) != 1, seg);
    close(fd);
    free(seg);

    /* missing: the middle segment removed. */
    seg = segment_path("missing", hex, 1);
    sys(unlink(seg), seg);
    free(seg);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_replay_fixtures OUTDIR (OUTDIR must not exist)\n");
        return 2;
    }
    out_root = argv[1];
    if (mkdir(out_root, 0755)) {
        fprintf(stderr, "gen_replay_fixtures: %s: %s\n", out_root, strerror(errno));
        return 2;
    }
    gen_main();
    gen_damage();
    return 0;
}
