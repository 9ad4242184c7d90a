/* SPDX-License-Identifier: MIT */
/*
 * testutil.c - scratch directories, file helpers, the failing I/O table,
 * sample records of every kind and whole-session reads for the suites.
 *
 * The samples are written out field by field, and so is their comparison:
 * a round trip checked with the codec's own tables would not notice a field
 * the tables forgot.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ test cases */

TCase *tu_tcase(Suite *s, const char *name, double seconds)
{
    TCase *tc = tcase_create(name);
    if (seconds > 0)
        tcase_set_timeout(tc, seconds);
    suite_add_tcase(s, tc);
    return tc;
}

pid_t tu_fork_pipe(int p[2])
{
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    close(p[pid == 0 ? 0 : 1]);
    return pid;
}

/* ------------------------------------------------------------ directories */

const char *tu_root(void)
{
    const char *r = getenv("ENVLOG_TEST_ROOT");
    return r && *r ? r : "/tmp";
}

char *tu_mkdtemp(const char *tag)
{
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s-XXXXXX", tu_root(), tag), 0);
    ck_assert_msg(mkdtemp(p) != NULL, "mkdtemp %s: %s", p, strerror(errno));
    return p;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void tu_rmrf(const char *path)
{
    if (path)
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void tu_copytree(const char *src, const char *dst)
{
    struct stat st;
    ck_assert_int_eq(lstat(src, &st), 0);
    if (S_ISDIR(st.st_mode)) {
        ck_assert_msg(mkdir(dst, 0700) == 0 || errno == EEXIST, "mkdir %s", dst);
        DIR *d = opendir(src);
        ck_assert_ptr_nonnull(d);
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            char *a, *b;
            ck_assert_int_ge(asprintf(&a, "%s/%s", src, de->d_name), 0);
            ck_assert_int_ge(asprintf(&b, "%s/%s", dst, de->d_name), 0);
            tu_copytree(a, b);
            free(a);
            free(b);
        }
        closedir(d);
    } else if (S_ISREG(st.st_mode)) {
        size_t n;
        uint8_t *p = tu_read(src, &n);
        tu_write(dst, p, n);
        free(p);
    }
}

typedef struct strv {
    char **v;
    size_t n, cap;
} strv;

static void strv_push(strv *s, char *x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        ck_assert_ptr_nonnull(s->v);
    }
    s->v[s->n++] = x;
}

static void list_into(const char *base, const char *rel, strv *out)
{
    char *dir;
    ck_assert_int_ge(asprintf(&dir, "%s%s%s", base, *rel ? "/" : "", rel), 0);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "opendir %s", dir);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *r, *full;
        struct stat st;
        ck_assert_int_ge(asprintf(&r, "%s%s%s", rel, *rel ? "/" : "", de->d_name), 0);
        ck_assert_int_ge(asprintf(&full, "%s/%s", base, r), 0);
        ck_assert_int_eq(lstat(full, &st), 0);
        free(full);
        if (S_ISDIR(st.st_mode)) {
            char *slash;
            ck_assert_int_ge(asprintf(&slash, "%s/", r), 0);
            strv_push(out, slash);
            list_into(base, r, out);
            free(r);
        } else {
            char *sized;
            ck_assert_int_ge(asprintf(&sized, "%s %lld", r, (long long)st.st_size), 0);
            strv_push(out, sized);
            free(r);
        }
    }
    closedir(d);
    free(dir);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *tu_listing(const char *dir)
{
    strv s = {0};
    list_into(dir, "", &s);
    qsort(s.v, s.n, sizeof *s.v, str_cmp);
    size_t len = 1;
    for (size_t i = 0; i < s.n; i++)
        len += strlen(s.v[i]) + 1;
    char *out = malloc(len);
    ck_assert_ptr_nonnull(out);
    out[0] = 0;
    for (size_t i = 0; i < s.n; i++) {
        strcat(out, s.v[i]);
        strcat(out, "\n");
        free(s.v[i]);
    }
    free(s.v);
    return out;
}

const char *tu_path(const char *a, const char *b)
{
    static char bufs[8][4096];
    static int k;
    char *p = bufs[k++ % 8];
    snprintf(p, 4096, "%s/%s", a, b);
    return p;
}

/* ------------------------------------------------------------------ files */

uint8_t *tu_read(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    uint8_t *p = malloc((size_t)st.st_size + 1);
    ck_assert_ptr_nonnull(p);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, p + got, (size_t)st.st_size - got, (off_t)got);
        ck_assert_msg(r > 0, "read %s", path);
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return p;
}

void tu_write(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, (const uint8_t *)p + done, n - done, (off_t)done);
        ck_assert_msg(w > 0, "write %s", path);
        done += (size_t)w;
    }
    close(fd);
}

void tu_truncate(const char *path, off_t len)
{
    ck_assert_msg(truncate(path, len) == 0, "truncate %s: %s", path, strerror(errno));
}

off_t tu_size(const char *path)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "stat %s", path);
    return st.st_size;
}

bool tu_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ------------------------------------------------------- fault injection */

const char *const tu_call_names[TU_N_CALLS] = {
    "open", "openat", "close", "pread", "pwrite", "fsync", "ftruncate",
    "fallocate", "mmap", "munmap", "msync", "mkdirat", "renameat", "unlinkat",
    "flock", "fstat", "writeback", "linkat", "fstatat", "opendir", "readdir",
};

typedef struct fault_state {
    tu_call which;
    long nth;
    int err;
    long calls[TU_N_CALLS + 1];
    bool fired;
} fault_state;

static fault_state fault_here, *F = &fault_here;
#define fault (*F)

static pid_t fault_spared; /* its calls neither count nor fail */

/* True when this call of `c` is the one to fail. */
static bool hit(tu_call c)
{
    if (fault_spared && getpid() == fault_spared)
        return false;
    long k = ++fault.calls[c];
    long any = ++fault.calls[TU_ANY];
    if (fault.fired || fault.nth <= 0)
        return false;
    if ((fault.which == TU_ANY && any == fault.nth) ||
        (fault.which == c && k == fault.nth)) {
        fault.fired = true;
        return true;
    }
    return false;
}

#define PX envlog_io_posix()
static int f_open(const char *p, int fl, mode_t m)
{
    if (hit(TU_OPEN)) return errno = fault.err, -1;
    return PX->open(p, fl, m);
}
static int f_openat(int d, const char *p, int fl, mode_t m)
{
    if (hit(TU_OPENAT)) return errno = fault.err, -1;
    return PX->openat(d, p, fl, m);
}
static int f_close(int fd)
{
    if (hit(TU_CLOSE)) {
        PX->close(fd); /* a failed close still releases the descriptor */
        return errno = fault.err, -1;
    }
    return PX->close(fd);
}
static ssize_t f_pread(int fd, void *b, size_t n, off_t o)
{
    if (hit(TU_PREAD)) return errno = fault.err, -1;
    return PX->pread(fd, b, n, o);
}
static ssize_t f_pwrite(int fd, const void *b, size_t n, off_t o)
{
    if (hit(TU_PWRITE)) return errno = fault.err, -1;
    return PX->pwrite(fd, b, n, o);
}
static int f_fsync(int fd)
{
    if (hit(TU_FSYNC)) return errno = fault.err, -1;
    /* Counted, not done: these tests are about what a failure does, and
     * thousands of real fdatasyncs would make them slow for nothing. */
    (void)fd;
    return 0;
}
static int f_ftruncate(int fd, off_t l)
{
    if (hit(TU_FTRUNCATE)) return errno = fault.err, -1;
    return PX->ftruncate(fd, l);
}
static int f_fallocate(int fd, off_t o, off_t l)
{
    if (hit(TU_FALLOCATE)) return fault.err;
    return PX->fallocate(fd, o, l);
}
static void *f_mmap(size_t l, int prot, int fd)
{
    if (hit(TU_MMAP)) return errno = fault.err, MAP_FAILED;
    return PX->mmap(l, prot, fd);
}
static int f_munmap(void *p, size_t l)
{
    if (hit(TU_MUNMAP)) {
        PX->munmap(p, l);
        return errno = fault.err, -1;
    }
    return PX->munmap(p, l);
}
static int f_msync(void *p, size_t l)
{
    if (hit(TU_MSYNC)) return errno = fault.err, -1;
    return PX->msync(p, l);
}
static int f_mkdirat(int d, const char *p, mode_t m)
{
    if (hit(TU_MKDIRAT)) return errno = fault.err, -1;
    return PX->mkdirat(d, p, m);
}
static int f_renameat(int od, const char *op, int nd, const char *np)
{
    if (hit(TU_RENAMEAT)) return errno = fault.err, -1;
    return PX->renameat(od, op, nd, np);
}
static int f_unlinkat(int d, const char *p, int fl)
{
    if (hit(TU_UNLINKAT)) return errno = fault.err, -1;
    return PX->unlinkat(d, p, fl);
}
static int f_flock(int fd, int op)
{
    if (hit(TU_FLOCK)) return errno = fault.err, -1;
    return PX->flock(fd, op);
}
static int f_fstat(int fd, struct stat *st)
{
    if (hit(TU_FSTAT)) return errno = fault.err, -1;
    return PX->fstat(fd, st);
}

static int f_linkat(int od, const char *op, int nd, const char *np)
{
    if (hit(TU_LINKAT)) return errno = fault.err, -1;
    return PX->linkat(od, op, nd, np);
}

static int f_writeback(int fd, off_t o, off_t l)
{
    if (hit(TU_WRITEBACK)) return errno = fault.err, -1;
    return PX->writeback(fd, o, l);
}

static int f_fstatat(int d, const char *p, struct stat *st)
{
    if (hit(TU_FSTATAT)) return errno = fault.err, -1;
    return PX->fstatat(d, p, st);
}

static void *f_opendir(int d, bool through)
{
    if (hit(TU_OPENDIR)) return errno = fault.err, NULL;
    return PX->opendir(d, through);
}

static int f_readdir(void *dir, const char **name)
{
    if (hit(TU_READDIR)) return errno = fault.err, -1;
    return PX->readdir(dir, name);
}

static void f_closedir(void *dir) { PX->closedir(dir); }

static const envlog_io failing_io = {
    .open = f_open, .openat = f_openat, .close = f_close, .pread = f_pread,
    .pwrite = f_pwrite, .fsync = f_fsync, .ftruncate = f_ftruncate,
    .fallocate = f_fallocate, .mmap = f_mmap, .munmap = f_munmap,
    .msync = f_msync, .mkdirat = f_mkdirat, .renameat = f_renameat,
    .unlinkat = f_unlinkat, .flock = f_flock, .fstat = f_fstat,
    .writeback = f_writeback, .linkat = f_linkat, .fstatat = f_fstatat,
    .opendir = f_opendir, .readdir = f_readdir, .closedir = f_closedir,
};

void tu_fault_arm(tu_call which, long nth, int err)
{
    memset(F, 0, sizeof *F);
    fault.which = which;
    fault.nth = nth;
    fault.err = err;
    envlog_io_set(&failing_io);
}

void tu_fault_share(void)
{
    if (F != &fault_here)
        return;
    void *p = mmap(NULL, sizeof *F, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    memcpy(p, F, sizeof *F);
    F = p;
}

void tu_fault_spare(pid_t pid)
{
    fault_spared = pid;
}

bool tu_fault_disarm(void)
{
    envlog_io_set(NULL);
    fault_spared = 0;
    return fault.fired;
}

long tu_fault_calls(tu_call which)
{
    return fault.calls[which];
}

/* ------------------------------------------------------------ file views */

static struct {
    char name[64];
    uint64_t cut;
    int64_t flip_at;
    uint8_t mask;
    int fds[8];
} view;

static bool view_fd(int fd)
{
    for (int i = 0; i < 8; i++)
        if (view.fds[i] == fd)
            return true;
    return false;
}

static int v_openat(int d, const char *p, int fl, mode_t m)
{
    int fd = PX->openat(d, p, fl, m);
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (fd >= 0 && !strcmp(base, view.name))
        for (int i = 0; i < 8; i++)
            if (view.fds[i] < 0) {
                view.fds[i] = fd;
                break;
            }
    return fd;
}

static int v_close(int fd)
{
    for (int i = 0; i < 8; i++)
        if (view.fds[i] == fd)
            view.fds[i] = -1;
    return PX->close(fd);
}

static ssize_t v_pread(int fd, void *b, size_t n, off_t o)
{
    if (!view_fd(fd))
        return PX->pread(fd, b, n, o);
    if ((uint64_t)o >= view.cut)
        return 0;
    if (n > view.cut - (uint64_t)o)
        n = (size_t)(view.cut - (uint64_t)o);
    ssize_t r = PX->pread(fd, b, n, o);
    if (r > 0 && view.flip_at >= o && view.flip_at < o + r)
        ((uint8_t *)b)[view.flip_at - o] ^= view.mask;
    return r;
}

static int v_fstat(int fd, struct stat *st)
{
    int rc = PX->fstat(fd, st);
    if (rc == 0 && view_fd(fd) && (uint64_t)st->st_size > view.cut)
        st->st_size = (off_t)view.cut;
    return rc;
}

/* A viewed file's mapping shows the view too: a private copy, read
 * through v_pread (so cut and flipped as it is). */
static void *v_mmap(size_t len, int prot, int fd)
{
    if (!view_fd(fd))
        return PX->mmap(len, prot, fd);
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return m;
    for (size_t at = 0; at < len;) {
        ssize_t r = v_pread(fd, m + at, len - at, (off_t)at);
        if (r <= 0)
            break;
        at += (size_t)r;
    }
    return m;
}

static envlog_io view_io;

void tu_view_set(const char *name, uint64_t cut, int64_t flip_at, uint8_t mask)
{
    ck_assert_uint_lt(strlen(name), sizeof view.name);
    strcpy(view.name, name);
    view.cut = cut;
    view.flip_at = flip_at;
    view.mask = mask;
    for (int i = 0; i < 8; i++)
        view.fds[i] = -1;
    view_io = *PX;
    view_io.openat = v_openat;
    view_io.close = v_close;
    view_io.pread = v_pread;
    view_io.fstat = v_fstat;
    view_io.mmap = v_mmap;
    envlog_io_set(&view_io);
}

void tu_view_clear(void)
{
    envlog_io_set(NULL);
}

/* --------------------------------------------------------- sample records */

const envlog_kind tu_kinds[8] = {
    ENVLOG_KIND_SESSION, ENVLOG_KIND_TUNE, ENVLOG_KIND_COMPILE, ENVLOG_KIND_SPAN,
    ENVLOG_KIND_MARK, ENVLOG_KIND_IMPORT, ENVLOG_KIND_FORGET, ENVLOG_KIND_USER,
};

/* Storage that lives as long as the test process: listed in a static
 * array, so LeakSanitizer sees it reachable at exit. */
static void **kept;
static size_t n_kept, cap_kept;

static void *keep(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    ck_assert_ptr_nonnull(p);
    if (n_kept == cap_kept) {
        cap_kept = cap_kept ? 2 * cap_kept : 256;
        kept = realloc(kept, cap_kept * sizeof *kept);
        ck_assert_ptr_nonnull(kept);
    }
    kept[n_kept++] = p;
    return p;
}

static char *long_text(size_t n, const char *unit)
{
    size_t u = strlen(unit);
    char *s = keep(n + u + 1);
    size_t at = 0;
    while (at + u <= n) {
        memcpy(s + at, unit, u);
        at += u;
    }
    s[at] = 0;
    return s;
}

static envlog_hash128 h128(uint8_t seed)
{
    envlog_hash128 h;
    for (int i = 0; i < 16; i++)
        h.b[i] = (uint8_t)(seed * 17 + i * 31);
    return h;
}

/* A manifest as one CBOR item: {"name": t, "entries": [1, 2, 3], 7: h'00ff'} */
static envlog_bytes manifest(const char *t)
{
    envlog_buf b = {0};
    ck_assert_ok(envlog_enc_map(&b, 3));
    ck_assert_ok(envlog_enc_text(&b, "name", 4));
    ck_assert_ok(envlog_enc_text(&b, t, strlen(t)));
    ck_assert_ok(envlog_enc_text(&b, "entries", 7));
    ck_assert_ok(envlog_enc_array(&b, 3));
    for (int i = 1; i <= 3; i++)
        ck_assert_ok(envlog_enc_uint(&b, (uint64_t)i));
    ck_assert_ok(envlog_enc_uint(&b, 7));
    ck_assert_ok(envlog_enc_bytes(&b, "\x00\xff", 2));
    uint8_t *p = keep(b.len);
    memcpy(p, b.p, b.len);
    envlog_bytes out = {p, b.len};
    envlog_buf_free(&b);
    return out;
}

static const char *const uni_words[] = {
    "ÿ", "日本語のカーネル", "🚀 launch", "Ωμέγα", "e\xcc\x81", "\xef\xbf\xbd",
    "\xf4\x8f\xbf\xbf", "tab\tquote\"back\\slash\nnl\x01\x7f",
};
#define N_UNI (sizeof uni_words / sizeof uni_words[0])

static void make_session(envlog_session_rec *r, tu_variant v)
{
    memset(r, 0, sizeof *r);
    if (v == TU_EMPTY)
        return;
    bool uni = v == TU_UNICODE, max = v == TU_MAXIMAL;
    r->id = h128(1);
    r->start_unix_ns = max ? UINT64_MAX : 1717171717123456789ull;
    r->envlog_version = "0.1.0";
    r->runtime = uni ? "ランタイム" : max ? long_text(70000, "rt") : "example-rt";
    r->runtime_version = uni ? "1.0-β" : "12.4.1";
    r->label = uni ? "nuit blanche ☾ é" : max ? long_text(100000, "label ") : "nightly";
    r->host = uni ? "hôte-Ünïcødé" : "build-01";
    r->pid = max ? UINT64_MAX : 4242;
    r->os = "Linux";
    r->arch = uni ? "x86_64 ✓" : "x86_64";
    size_t nd = max ? 300 : 2;
    const char **devs = keep(nd * sizeof *devs);
    for (size_t i = 0; i < nd; i++)
        devs[i] = uni ? uni_words[i % N_UNI] : i % 2 ? "sm_90/H100-80GB/580.1" : "";
    r->devices = devs;
    r->n_devices = nd;
    r->process_mode = uni ? "exécuter" : "execute";
    r->level = max ? ENVLOG_LEVEL_FULL : ENVLOG_LEVEL_BASIC;
    r->dropped = max ? UINT64_MAX : 3;
}

static void make_tune(envlog_tune *t, tu_variant v)
{
    memset(t, 0, sizeof *t);
    t->winner = -1; /* none: an empty tune names no candidate */
    if (v == TU_EMPTY)
        return;
    bool uni = v == TU_UNICODE, max = v == TU_MAXIMAL;
    size_t nc = max ? 1000 : 4;
    const char **cands = keep(nc * sizeof *cands);
    for (size_t i = 0; i < nc; i++) {
        char *c = keep(48);
        snprintf(c, 48, "%s%zu", uni ? uni_words[i % N_UNI] : "tile", i);
        cands[i] = c;
    }
    size_t nt = max ? 257 : 3;
    envlog_trial *tr = keep(nt * sizeof *tr);
    static const double specials[] = {0.0, -0.0, 1.5, 0.1, 1e-310, 1e300,
                                      INFINITY, -INFINITY, NAN, 3.0e38f,
                                      -123456.789};
    for (size_t i = 0; i < nt; i++) {
        tr[i].name = cands[i % nc];
        tr[i].index = max && i == 0 ? (uint32_t)(nc - 1) : (uint32_t)(i % nc);
        tr[i].samples = max && i == 1 ? UINT64_MAX : 10 + i;
        size_t ns = max ? 64 : 5;
        double *sm = keep(ns * sizeof *sm);
        for (size_t k = 0; k < ns; k++)
            sm[k] = max ? specials[(i + k) % 11] : 400.0 + (double)k * 0.25;
        tr[i].sample_ns = sm;
        tr[i].n_sample_ns = i == 2 ? 0 : ns;
        tr[i].min_ns = max ? specials[i % 11] : 398.5;
        tr[i].median_ns = 401.25 + (double)i;
        tr[i].mean_ns = 0.1 * (double)(i + 1);
        tr[i].max_ns = max ? NAN : 512.0;
        tr[i].stddev_ns = max ? -0.0 : 2.75;
        tr[i].error = i == 1 ? (uni ? "échec: mémoire insuffisante ✗" : "launch failed")
                             : NULL;
        tr[i].has_start = i != 2; /* one trial recorded without its times */
        tr[i].start_ns = max ? UINT64_MAX - i : 5000 + 1000 * i;
        tr[i].wall_ns = max ? UINT64_MAX : 900;
    }
    size_t np = max ? 100 : 2;
    envlog_param *pa = keep(np * sizeof *pa);
    for (size_t i = 0; i < np; i++) {
        pa[i].name = uni ? uni_words[i % N_UNI] : i ? "max_samples" : "min_samples";
        pa[i].value = max ? specials[i % 11] : (double)(5 * (i + 1));
    }
    t->ns = uni ? "autotune/ランタイム/1.0/設備" : max ? long_text(66000, "ns/") :
                "autotune/example-rt/1.0/sim-gpu";
    t->key = uni ? "matmul 𝑛=1024 ⊗" : max ? long_text(65535, "k") : "matmul-1024";
    t->checksum = max ? UINT64_MAX : envlog_tune_checksum(cands, nc);
    t->candidates = cands;
    t->n_candidates = nc;
    t->trials = tr;
    t->n_trials = nt;
    t->policy = uni ? "médiane-adaptative" : "median-adaptive";
    t->params = pa;
    t->n_params = np;
    t->winner = max ? (int64_t)nc - 1 : 2;
    t->margin = max ? NAN : 0.078;
    t->within_noise = max;
    t->short_circuit = uni;
    t->wall_ns = max ? UINT64_MAX : 2100000;
    t->stored = true;
    t->imported = uni;
    t->winner_ns = max ? NAN : 401.25;
    t->has_start = true;
    t->start_ns = max ? UINT64_MAX : 4000;
    t->thread = max ? UINT64_MAX : 4242;
}

static void make_compile(envlog_compile *c, tu_variant v)
{
    memset(c, 0, sizeof *c);
    if (v == TU_EMPTY)
        return;
    bool uni = v == TU_UNICODE, max = v == TU_MAXIMAL;
    c->ns = uni ? "nvrtc/12.4/sm_90/ü" : "nvrtc/12.4/sm_90";
    c->name = uni ? "カーネル_gemm" : max ? long_text(70000, "kernel_") : "gemm_tile64";
    c->kernel_key = h128(2);
    c->source_hash = h128(3);
    c->options = uni ? "-DNAME=\"é\" --use_fast_math" : "--use_fast_math -O3";
    c->compiler_version = "12.4.131";
    c->arch = "sm_90";
    c->outcome = max ? ENVLOG_FAILED : ENVLOG_COMPILED;
    c->duration_ns = max ? UINT64_MAX : 31000000;
    c->binary_hash = h128(4);
    size_t bn = max ? (1u << 20) + 3 : 300;
    uint8_t *bin = keep(bn);
    for (size_t i = 0; i < bn; i++)
        bin[i] = (uint8_t)(i * 7 + (i >> 8));
    c->binary = (envlog_bytes){bin, bn};
    c->binary_size = bn;
    c->log = uni ? "avertissement : variable « x » inutilisée" :
             max ? long_text(200000, "warning: line\n") : "";
    c->source = uni ? "// ソース\n__global__ void k() {}" :
                max ? long_text(300000, "int x; ") : "__global__ void k() {}";
    size_t irn = max ? 100000 : 17;
    uint8_t *ir = keep(irn);
    for (size_t i = 0; i < irn; i++)
        ir[i] = (uint8_t)(255 - i);
    c->ir = (envlog_bytes){ir, irn};
    c->has_tune = true;
    c->tune.session = h128(5);
    c->tune.seq = max ? UINT64_MAX : 7;
    c->tune.offset_ns = max ? UINT64_MAX : 12345;
    c->imported = uni;
    c->has_start = true;
    c->start_ns = max ? UINT64_MAX : 9000;
    c->thread = max ? UINT64_MAX : 4243;
}

static void make_span(envlog_span_rec *s, tu_variant v)
{
    memset(s, 0, sizeof *s);
    if (v == TU_EMPTY)
        return;
    bool uni = v == TU_UNICODE, max = v == TU_MAXIMAL;
    s->name = uni ? "warm-up ☀" : "warm-up";
    s->id = max ? UINT64_MAX : 3;
    s->parent = max ? UINT64_MAX - 1 : 1;
    s->open_ns = max ? UINT64_MAX : 1000;
    s->duration_ns = max ? UINT64_MAX : 2500;
    size_t na = max ? 2000 : 2;
    envlog_attr *a = keep(na * sizeof *a);
    for (size_t i = 0; i < na; i++) {
        a[i].key = uni ? uni_words[i % N_UNI] : i % 2 ? "shape" : "dtype";
        a[i].value = uni ? uni_words[(i + 3) % N_UNI] : i % 2 ? "1024x1024" : "";
    }
    s->attrs = a;
    s->n_attrs = na;
    s->has_thread = true;
    s->thread = max ? UINT64_MAX : 4244;
    s->open = true; /* written only when true: present in every sample */
}

static void make_mark(envlog_mark *m, tu_variant v)
{
    memset(m, 0, sizeof *m);
    if (v == TU_EMPTY)
        return;
    m->label = v == TU_UNICODE ? "jalon ✔ 里程碑" :
               v == TU_MAXIMAL ? long_text(1u << 20, "mark") : "checkpoint";
    m->wall_unix_ns = v == TU_MAXIMAL ? UINT64_MAX : 1717171717000000000ull;
}

static void make_import(envlog_import *im, tu_variant v)
{
    memset(im, 0, sizeof *im);
    if (v == TU_EMPTY)
        return;
    bool uni = v == TU_UNICODE, max = v == TU_MAXIMAL;
    im->bundle = uni ? "H100 Linux — prêt" : "h100-linux";
    im->bundle_hash = h128(6);
    im->manifest = manifest(uni ? "паке́т" : max ? long_text(100000, "m") : "h100");
    im->taken = max ? UINT64_MAX : 12;
    im->skipped = max ? UINT64_MAX : 1;
    im->rejected = max ? UINT64_MAX : 0;
}

static void make_forget(envlog_forget *f, tu_variant v)
{
    memset(f, 0, sizeof *f);
    if (v == TU_EMPTY)
        return;
    bool uni = v == TU_UNICODE, max = v == TU_MAXIMAL;
    f->table = max ? ENVLOG_TABLE_KERNEL : ENVLOG_TABLE_TUNE;
    f->ns = uni ? "autotune/ü/1.0" : "autotune/example-rt/1.0/sim-gpu";
    f->key = uni ? "clé 🔑" : "matmul-1024";
    f->checksum = max ? UINT64_MAX : 99;
    f->reason = uni ? "périmé" : max ? long_text(70000, "stale ") : "stale";
}

static void make_user(envlog_user *u, tu_variant v)
{
    memset(u, 0, sizeof *u);
    if (v == TU_EMPTY)
        return;
    u->kind = v == TU_UNICODE ? "mon-genre·ü" : "profiler-sample";
    u->body = manifest(v == TU_UNICODE ? "données" :
                       v == TU_MAXIMAL ? long_text(500000, "x") : "b");
}

void tu_sample_make(tu_sample *s, envlog_kind kind, tu_variant v)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    switch (kind) {
    case ENVLOG_KIND_SESSION: make_session(&s->u.session, v); break;
    case ENVLOG_KIND_TUNE: make_tune(&s->u.tune, v); break;
    case ENVLOG_KIND_COMPILE: make_compile(&s->u.compile, v); break;
    case ENVLOG_KIND_SPAN: make_span(&s->u.span, v); break;
    case ENVLOG_KIND_MARK: make_mark(&s->u.mark, v); break;
    case ENVLOG_KIND_IMPORT: make_import(&s->u.import, v); break;
    case ENVLOG_KIND_FORGET: make_forget(&s->u.forget, v); break;
    case ENVLOG_KIND_USER: make_user(&s->u.user, v); break;
    default: ck_abort_msg("no sample for kind %d", (int)kind);
    }
}

/* ------------------------------------------------------------ comparison */

static void str_eq(const char *what, const char *a, const char *b)
{
    if (!a || !b)
        ck_assert_msg(a == b, "%s: %s vs %s", what, a ? a : "NULL", b ? b : "NULL");
    else
        ck_assert_msg(!strcmp(a, b), "%s differs: '%.60s' vs '%.60s'", what, a, b);
}

static void dbl_eq(const char *what, double a, double b)
{
    if (isnan(a) || isnan(b))
        ck_assert_msg(isnan(a) && isnan(b), "%s: %g vs %g", what, a, b);
    else
        ck_assert_msg(!memcmp(&a, &b, sizeof a), "%s: %.17g vs %.17g", what, a, b);
}

static void bytes_eq(const char *what, envlog_bytes a, envlog_bytes b)
{
    ck_assert_msg(a.size == b.size, "%s: %zu vs %zu bytes", what, a.size, b.size);
    if (a.size)
        ck_assert_msg(!memcmp(a.data, b.data, a.size), "%s: bytes differ", what);
}

static void h_eq(const char *what, const envlog_hash128 *a, const envlog_hash128 *b)
{
    ck_assert_msg(!memcmp(a->b, b->b, 16), "%s differs", what);
}

static void texts_eq(const char *what, const char *const *a, size_t na,
                     const char *const *b, size_t nb)
{
    ck_assert_msg(na == nb, "%s: %zu vs %zu items", what, na, nb);
    for (size_t i = 0; i < na; i++)
        str_eq(what, a[i], b[i]);
}

static void check_session(const envlog_session_rec *w, const envlog_session_rec *g)
{
    h_eq("session.id", &w->id, &g->id);
    ck_assert_uint_eq(w->start_unix_ns, g->start_unix_ns);
    str_eq("envlog_version", w->envlog_version, g->envlog_version);
    str_eq("runtime", w->runtime, g->runtime);
    str_eq("runtime_version", w->runtime_version, g->runtime_version);
    str_eq("label", w->label, g->label);
    str_eq("host", w->host, g->host);
    ck_assert_uint_eq(w->pid, g->pid);
    str_eq("os", w->os, g->os);
    str_eq("arch", w->arch, g->arch);
    texts_eq("devices", w->devices, w->n_devices, g->devices, g->n_devices);
    str_eq("process_mode", w->process_mode, g->process_mode);
    ck_assert_int_eq(w->level, g->level);
    ck_assert_uint_eq(w->dropped, g->dropped);
}

static void check_tune(const envlog_tune *w, const envlog_tune *g, bool full)
{
    str_eq("tune.ns", w->ns, g->ns);
    str_eq("tune.key", w->key, g->key);
    ck_assert_uint_eq(w->checksum, g->checksum);
    texts_eq("candidates", w->candidates, w->n_candidates, g->candidates,
             g->n_candidates);
    ck_assert_uint_eq(w->n_trials, g->n_trials);
    for (size_t i = 0; i < w->n_trials; i++) {
        const envlog_trial *a = &w->trials[i], *b = &g->trials[i];
        str_eq("trial.name", a->name, b->name);
        ck_assert_uint_eq(a->index, b->index);
        ck_assert_uint_eq(a->samples, b->samples);
        size_t want = full ? a->n_sample_ns : 0;
        ck_assert_uint_eq(want, b->n_sample_ns);
        for (size_t k = 0; k < want; k++)
            dbl_eq("sample_ns", a->sample_ns[k], b->sample_ns[k]);
        dbl_eq("min_ns", a->min_ns, b->min_ns);
        dbl_eq("median_ns", a->median_ns, b->median_ns);
        dbl_eq("mean_ns", a->mean_ns, b->mean_ns);
        dbl_eq("max_ns", a->max_ns, b->max_ns);
        dbl_eq("stddev_ns", a->stddev_ns, b->stddev_ns);
        str_eq("trial.error", a->error, b->error);
        ck_assert_int_eq(a->has_start, b->has_start);
        ck_assert_uint_eq(a->has_start ? a->start_ns : 0, b->start_ns);
        ck_assert_uint_eq(a->has_start ? a->wall_ns : 0, b->wall_ns);
    }
    str_eq("policy", w->policy, g->policy);
    ck_assert_uint_eq(w->n_params, g->n_params);
    for (size_t i = 0; i < w->n_params; i++) {
        str_eq("param.name", w->params[i].name, g->params[i].name);
        dbl_eq("param.value", w->params[i].value, g->params[i].value);
    }
    ck_assert_int_eq(w->winner, g->winner);
    dbl_eq("margin", w->margin, g->margin);
    ck_assert_int_eq(w->within_noise, g->within_noise);
    ck_assert_int_eq(w->short_circuit, g->short_circuit);
    ck_assert_uint_eq(w->wall_ns, g->wall_ns);
    ck_assert_int_eq(w->stored, g->stored);
    ck_assert_int_eq(w->imported, g->imported);
    dbl_eq("winner_ns", w->winner_ns, g->winner_ns);
    ck_assert_int_eq(w->has_start, g->has_start);
    ck_assert_uint_eq(w->has_start ? w->start_ns : 0, g->start_ns);
    ck_assert_uint_eq(w->has_start ? w->thread : 0, g->thread);
}

static void check_compile(const envlog_compile *w, const envlog_compile *g, bool full)
{
    str_eq("compile.ns", w->ns, g->ns);
    str_eq("compile.name", w->name, g->name);
    h_eq("kernel_key", &w->kernel_key, &g->kernel_key);
    h_eq("source_hash", &w->source_hash, &g->source_hash);
    str_eq("options", w->options, g->options);
    str_eq("compiler_version", w->compiler_version, g->compiler_version);
    str_eq("arch", w->arch, g->arch);
    ck_assert_int_eq(w->outcome, g->outcome);
    ck_assert_uint_eq(w->duration_ns, g->duration_ns);
    h_eq("binary_hash", &w->binary_hash, &g->binary_hash);
    ck_assert_uint_eq(w->binary_size, g->binary_size);
    bytes_eq("binary", w->binary, g->binary);
    str_eq("log", w->log, g->log);
    str_eq("source", full ? w->source : NULL, g->source);
    bytes_eq("ir", full ? w->ir : (envlog_bytes){NULL, 0}, g->ir);
    ck_assert_int_eq(w->has_tune, g->has_tune);
    if (w->has_tune) {
        h_eq("tune.session", &w->tune.session, &g->tune.session);
        ck_assert_uint_eq(w->tune.seq, g->tune.seq);
        ck_assert_uint_eq(w->tune.offset_ns, g->tune.offset_ns);
    }
    ck_assert_int_eq(w->imported, g->imported);
    ck_assert_int_eq(w->has_start, g->has_start);
    ck_assert_uint_eq(w->has_start ? w->start_ns : 0, g->start_ns);
    ck_assert_uint_eq(w->has_start ? w->thread : 0, g->thread);
}

static void check_span(const envlog_span_rec *w, const envlog_span_rec *g)
{
    str_eq("span.name", w->name, g->name);
    ck_assert_uint_eq(w->id, g->id);
    ck_assert_uint_eq(w->parent, g->parent);
    ck_assert_uint_eq(w->open_ns, g->open_ns);
    ck_assert_uint_eq(w->duration_ns, g->duration_ns);
    ck_assert_uint_eq(w->n_attrs, g->n_attrs);
    for (size_t i = 0; i < w->n_attrs; i++) {
        str_eq("attr.key", w->attrs[i].key, g->attrs[i].key);
        str_eq("attr.value", w->attrs[i].value, g->attrs[i].value);
    }
    ck_assert_int_eq(w->has_thread, g->has_thread);
    ck_assert_uint_eq(w->has_thread ? w->thread : 0, g->thread);
    ck_assert_int_eq(w->open, g->open);
}

void tu_sample_check(envlog_kind kind, const void *want, const void *got, bool full)
{
    switch (kind) {
    case ENVLOG_KIND_SESSION: check_session(want, got); break;
    case ENVLOG_KIND_TUNE: check_tune(want, got, full); break;
    case ENVLOG_KIND_COMPILE: check_compile(want, got, full); break;
    case ENVLOG_KIND_SPAN: check_span(want, got); break;
    case ENVLOG_KIND_MARK: {
        const envlog_mark *w = want, *g = got;
        str_eq("mark.label", w->label, g->label);
        ck_assert_uint_eq(w->wall_unix_ns, g->wall_unix_ns);
        break;
    }
    case ENVLOG_KIND_IMPORT: {
        const envlog_import *w = want, *g = got;
        str_eq("bundle", w->bundle, g->bundle);
        h_eq("bundle_hash", &w->bundle_hash, &g->bundle_hash);
        bytes_eq("manifest", w->manifest, g->manifest);
        ck_assert_uint_eq(w->taken, g->taken);
        ck_assert_uint_eq(w->skipped, g->skipped);
        ck_assert_uint_eq(w->rejected, g->rejected);
        break;
    }
    case ENVLOG_KIND_FORGET: {
        const envlog_forget *w = want, *g = got;
        ck_assert_int_eq(w->table, g->table);
        str_eq("forget.ns", w->ns, g->ns);
        str_eq("forget.key", w->key, g->key);
        ck_assert_uint_eq(w->checksum, g->checksum);
        str_eq("reason", w->reason, g->reason);
        break;
    }
    case ENVLOG_KIND_USER: {
        const envlog_user *w = want, *g = got;
        str_eq("user.kind", w->kind, g->kind);
        bytes_eq("user.body", w->body, g->body);
        break;
    }
    default: ck_abort_msg("no comparison for kind %d", (int)kind);
    }
}

/* ------------------------------------------------------------- sessions */

static void rb_push(tu_readback *rb, const envlog_record *r)
{
    tu_rec *n = realloc(rb->recs, (rb->n + 1) * sizeof *n);
    tu_check(n != NULL, "out of memory");
    rb->recs = n;
    tu_rec *x = &rb->recs[rb->n++];
    x->seq = r->stamp.seq;
    x->kind = r->kind;
    x->effect = r->effect;
    x->segment = r->segment;
    x->file_offset = r->file_offset;
    x->size = r->payload.size;
    x->payload = malloc(x->size ? x->size : 1);
    tu_check(x->payload != NULL, "out of memory");
    memcpy(x->payload, r->payload.data, x->size);
}

envlog_err tu_read_session(envlog_env *env, const envlog_id128 *id, tu_readback *rb)
{
    memset(rb, 0, sizeof *rb);
    envlog_reader *r;
    envlog_err e = envlog_reader_open(env, id, &r);
    if (e) {
        rb->error = e;
        return e;
    }
    const envlog_record *rec;
    /* A reader that never ends is a defect: bound the calls. */
    for (long guard = 0; guard < 100000000; guard++) {
        e = envlog_reader_next(r, &rec);
        if (e == ENVLOG_END)
            break;
        if (e == ENVLOG_OK) {
            tu_check(rec != NULL, "no record with ENVLOG_OK");
            tu_check(!memcmp(rec->stamp.session.b, id->b, 16),
                     "record stamped with another session");
            rb_push(rb, rec);
        } else if (e == ENVLOG_CORRUPT) {
            if (!rb->n_corrupt++ && !rb->n_truncated)
                rb->first_damage = *envlog_reader_damage(r);
        } else if (e == ENVLOG_TRUNCATED) {
            rb->torn = *envlog_reader_damage(r);
            if (!rb->n_truncated++ && !rb->n_corrupt)
                rb->first_damage = rb->torn;
        } else {
            rb->error = e;
            break;
        }
    }
    tu_check(e == ENVLOG_END || rb->error, "reader did not end");
    rb->state = envlog_reader_state(r);
    envlog_reader_close(r);
    return rb->error;
}

void tu_readback_free(tu_readback *rb)
{
    for (size_t i = 0; i < rb->n; i++)
        free(rb->recs[i].payload);
    free(rb->recs);
    memset(rb, 0, sizeof *rb);
}

const tu_rec *tu_find_seq(const tu_readback *rb, uint64_t seq)
{
    for (size_t i = 0; i < rb->n; i++)
        if (rb->recs[i].seq == seq)
            return &rb->recs[i];
    return NULL;
}

envlog_env *tu_env(const char *path)
{
    envlog_env *env;
    ck_assert_ok(envlog_env_open(path, ENVLOG_OPEN_CREATE, &env));
    return env;
}

envlog_session_opts tu_opts(const char *label, uint64_t segment_size)
{
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = label;
    o.segment_size = segment_size;
    return o;
}

envlog_err tu_record_tune(envlog_session *s, const char *prefix, unsigned i,
                          size_t pad, envlog_stamp *st)
{
    static const char *const cands[] = {"a", "b", "c"};
    char key[128];
    snprintf(key, sizeof key, "%s-%u", prefix, i);
    char *policy = malloc(pad + 2);
    /* No ck_assert here: forked children call this, and Check's marks
     * belong to the test process alone. */
    if (!policy)
        return ENVLOG_NOMEM;
    memset(policy, 'p', pad + 1);
    policy[pad + 1] = 0;
    envlog_trial tr[2] = {
        {.name = "a", .index = 0, .samples = i, .min_ns = 1, .median_ns = 2},
        {.name = "b", .index = 1, .samples = 3, .min_ns = 4, .median_ns = i},
    };
    envlog_tune t = {.ns = "autotune/test/1/dev", .key = key,
                     .checksum = envlog_tune_checksum(cands, 3),
                     .candidates = cands, .n_candidates = 3, .trials = tr,
                     .n_trials = 2, .policy = policy, .winner = (int64_t)(i % 3),
                     .margin = 0.5, .wall_ns = i, .stored = true};
    envlog_err e = envlog_record_tune(s, &t, st);
    free(policy);
    return e;
}

/* ------------------------------------------------------------ CBOR edits */

static bool edit_item(envlog_pull *p, envlog_buf *out, const uint64_t *path, size_t depth,
                      const uint8_t *with, size_t with_n, bool add, uint64_t add_key)
{
    size_t start = p->pos;
    envlog_tok t;
    if (envlog_pull_next(p, &t))
        return false;
    if (!depth && !add) {
        if (envlog_pull_skip_after(p, &t))
            return false;
        return envlog_buf_append(out, with, with_n) == ENVLOG_OK;
    }
    if (t.type != ENVLOG_TOK_MAP && t.type != ENVLOG_TOK_ARRAY)
        return false;
    bool map = t.type == ENVLOG_TOK_MAP;
    if (!depth) { /* add a pair to this map */
        if (!map || envlog_enc_map(out, t.u + 1))
            return false;
        size_t body = p->pos;
        for (uint64_t i = 0; i < 2 * t.u; i++) {
            envlog_tok c;
            if (envlog_pull_next(p, &c) || envlog_pull_skip_after(p, &c))
                return false;
        }
        return !envlog_buf_append(out, p->p + body, p->pos - body) &&
               !envlog_enc_uint(out, add_key) && !envlog_buf_append(out, with, with_n);
    }
    if (envlog_buf_append(out, p->p + start, p->pos - start))
        return false;
    bool found = false;
    for (uint64_t i = 0; i < t.u; i++) {
        bool here = !map && i == path[0];
        if (map) {
            size_t k0 = p->pos;
            envlog_tok k;
            if (envlog_pull_next(p, &k) || envlog_pull_skip_after(p, &k) ||
                envlog_buf_append(out, p->p + k0, p->pos - k0))
                return false;
            here = k.type == ENVLOG_TOK_UINT && k.u == path[0];
        }
        if (here) {
            found = true;
            if (!edit_item(p, out, path + 1, depth - 1, with, with_n, add, add_key))
                return false;
            continue;
        }
        size_t v0 = p->pos;
        envlog_tok v;
        if (envlog_pull_next(p, &v) || envlog_pull_skip_after(p, &v) ||
            envlog_buf_append(out, p->p + v0, p->pos - v0))
            return false;
    }
    return found;
}

bool tu_cbor_edit(const uint8_t *p, size_t n, const uint64_t *path, size_t depth,
                  const uint8_t *with, size_t with_n, bool add, uint64_t add_key,
                  envlog_buf *out)
{
    envlog_pull pl = {p, n, 0};
    out->len = 0;
    return edit_item(&pl, out, path, depth, with, with_n, add, add_key) && pl.pos == n;
}

bool tu_detail_bytes(const uint8_t *p, size_t n, envlog_buf *detail)
{
    envlog_pull pl = {p, n, 0};
    envlog_tok t, k, v;
    if (envlog_pull_next(&pl, &t) || t.type != ENVLOG_TOK_MAP)
        return false;
    for (uint64_t i = 0; i < t.u; i++) {
        if (envlog_pull_next(&pl, &k) || envlog_pull_next(&pl, &v))
            return false;
        if (k.type == ENVLOG_TOK_UINT && k.u == 23 && v.type == ENVLOG_TOK_BYTES) {
            detail->len = 0;
            ck_assert_ok(envlog_buf_append(detail, v.data, v.len));
            return true;
        }
        if (envlog_pull_skip_after(&pl, &v))
            return false;
    }
    return false;
}

bool tu_detail_edit(const uint8_t *p, size_t n, const uint64_t *path, size_t depth,
                    const uint8_t *with, size_t with_n, bool add, uint64_t add_key,
                    envlog_buf *out)
{
    envlog_buf d = {0}, e = {0}, w = {0};
    bool ok;
    if (!tu_detail_bytes(p, n, &d)) {
        ok = tu_cbor_edit(p, n, path, depth, with, with_n, add, add_key, out);
    } else if ((ok = tu_cbor_edit(d.p, d.len, path, depth, with, with_n, add, add_key, &e))) {
        static const uint64_t k23[] = {23};
        ck_assert_ok(envlog_enc_bytes(&w, e.p, e.len));
        ok = tu_cbor_edit(p, n, k23, 1, w.p, w.len, false, 0, out);
    }
    envlog_buf_free(&d);
    envlog_buf_free(&e);
    envlog_buf_free(&w);
    return ok;
}

/* ------------------------------------------------------------ raw sessions */

envlog_id128 tu_raw_session(envlog_env *env, const uint8_t *const *recs,
                            const size_t *lens, size_t n, bool seal)
{
    envlog_id128 id;
    ck_assert_ok(envlog_id_new(&id));
    char hex[33];
    envlog_id_format(&id, hex);
    ck_assert_int_eq(mkdirat(env->sessions_fd, hex, 0700), 0);
    int dfd;
    ck_assert_ok(envlog_open_dir(env->sessions_fd, hex, &dfd));
    envlog_segw w;
    ck_assert_ok(envlog_segw_create(&w, dfd, &id, 0, 0, 0, 1u << 20, "session",
                                    ENVLOG_SYNC_NONE, false));
    envlog_session_rec sr = {.id = id, .start_unix_ns = envlog_clock_unix_ns(),
                             .label = "raw", .host = "h", .pid = 1};
    envlog_stamp st = {id, 0, 0};
    envlog_buf b = {0};
    ck_assert_ok(envlog_event_encode(&b, ENVLOG_KIND_SESSION, &st, ENVLOG_OBSERVED,
                                     ENVLOG_LEVEL_BASIC, &sr));
    ck_assert_ok(envlog_segw_append(&w, b.p, b.len, 0));
    for (size_t i = 0; i < n; i++)
        ck_assert_ok(envlog_segw_append(&w, recs[i], lens[i], i + 1));
    if (seal)
        ck_assert_ok(envlog_segw_seal(&w));
    else
        envlog_segw_abandon(&w);
    envlog_buf_free(&b);
    close(dfd);
    return id;
}

void tu_record_with_seq(envlog_buf *b, envlog_kind kind, uint64_t seq, uint64_t offset,
                        const void *body)
{
    envlog_stamp st = {{{0}}, seq, offset};
    envlog_effect eff = kind == ENVLOG_KIND_USER ? ENVLOG_OBSERVED
                                                 : envlog_effect_of(kind, body);
    ck_assert_ok(envlog_event_encode(b, kind, &st, eff, ENVLOG_LEVEL_FULL, body));
}

/* ------------------------------------------------------- damage catalogues */

void tu_each_damage(const envlog_buf *b, const char *label,
                    void (*fn)(const envlog_buf *, const char *what, void *ctx), void *ctx)
{
    envlog_buf m = {0};
    char what[96];
    for (size_t at = 0; at < b->len; at++)
        for (int bit = 0; bit < 8; bit++) {
            m.len = 0;
            ck_assert_ok(envlog_buf_append(&m, b->p, b->len));
            m.p[at] ^= (uint8_t)(1u << bit);
            snprintf(what, sizeof what, "%s, byte %zu bit %d", label, at, bit);
            fn(&m, what, ctx);
        }
    for (size_t cut = 0; cut < b->len; cut++) {
        envlog_buf c = {b->p, cut, cut};
        snprintf(what, sizeof what, "%s, cut at %zu", label, cut);
        fn(&c, what, ctx);
    }
    envlog_buf_free(&m);
}

const tu_head_alt tu_head_alts[] = {
    {"0", {0x00}, 1},
    {"1", {0x01}, 1},
    {"2", {0x02}, 1},
    {"23", {0x17}, 1},
    {"1 in a byte", {0x18, 0x01}, 2},
    {"1 in 2 bytes", {0x19, 0x00, 0x01}, 3},
    {"1 in 4 bytes", {0x1a, 0, 0, 0, 0x01}, 5},
    {"1 in 8 bytes", {0x1b, 0, 0, 0, 0, 0, 0, 0, 0x01}, 9},
    {"2^32", {0x1b, 0, 0, 0, 0x01, 0, 0, 0, 0}, 9},
    {"2^63 - 1", {0x1b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 9},
    {"2^63", {0x1b, 0x80, 0, 0, 0, 0, 0, 0, 0}, 9},
    {"2^64 - 1", {0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 9},
    {"a reserved head", {0x1c}, 1},
    {"a reserved head, 16 bytes after", {0x1c, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, 17},
    {"-1", {0x20}, 1},
    {"-2 in a byte", {0x38, 0x01}, 2},
    {"-1 in 8 bytes", {0x3b, 0, 0, 0, 0, 0, 0, 0, 0}, 9},
    {"-2^63", {0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 9},
    {"-2^63 - 1", {0x3b, 0x80, 0, 0, 0, 0, 0, 0, 0}, 9},
    {"false", {0xf4}, 1},
    {"true", {0xf5}, 1},
    {"null", {0xf6}, 1},
    {"undefined", {0xf7}, 1},
    {"simple 16", {0xf0}, 1},
    {"half 1.5", {0xf9, 0x3e, 0x00}, 3},
    {"single 1.5", {0xfa, 0x3f, 0xc0, 0, 0}, 5},
    {"single NaN", {0xfa, 0x7f, 0xc0, 0, 0x01}, 5},
    {"double 1.5", {0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, 9},
    {"double -0", {0xfb, 0x80, 0, 0, 0, 0, 0, 0, 0}, 9},
    {"a single cut short", {0xfa, 0x3f, 0xc0}, 3},
    {"empty text", {0x60}, 1},
    {"text", {0x63, 'a', 'b', 'c'}, 4},
    {"text, length in a byte", {0x78, 0x03, 'a', 'b', 'c'}, 5},
    {"text, length in 8 bytes", {0x7b, 0, 0, 0, 0, 0, 0, 0, 0x01, 'a'}, 10},
    {"text, not UTF-8", {0x62, 0xc3, 0x28}, 3},
    {"text with a NUL", {0x62, 'a', 0x00}, 3},
    {"text, longer than the record", {0x79, 0xff, 0xff, 'a'}, 4},
    {"indefinite text", {0x7f, 0x61, 'a', 0xff}, 4},
    {"empty bytes", {0x40}, 1},
    {"15 bytes", {0x4f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 16},
    {"16 bytes", {0x50, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 17},
    {"16 bytes, length in a byte",
     {0x58, 0x10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 18},
    {"17 bytes", {0x51, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, 18},
    {"empty array", {0x80}, 1},
    {"an array of a text", {0x81, 0x61, 'x'}, 3},
    {"an array of two texts, length in a byte", {0x98, 0x02, 0x61, 'x', 0x61, 'y'}, 6},
    {"an array of a number", {0x81, 0x01}, 2},
    {"empty map", {0xa0}, 1},
    {"a tag", {0xc1, 0x01}, 2},
};
const size_t tu_n_head_alts = sizeof tu_head_alts / sizeof tu_head_alts[0];
