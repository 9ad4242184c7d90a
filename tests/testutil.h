/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - what the Check suites share: scratch directories under the
 * runner's temporary root, file helpers, an I/O table that fails a chosen
 * call, sample records of every kind, and reading a session back whole.
 *
 * Suites may use the library's internal headers; the helpers here never
 * touch anything outside the runner's temporary root.
 */
#ifndef ENVLOG_TESTUTIL_H
#define ENVLOG_TESTUTIL_H

#include "log_int.h"

#include <check.h>
#include <stdio.h>

/* ------------------------------------------------------------ test cases */

/* A test case of suite `s`, added to it, that times out after `seconds`
 * (0: Check's default). */
TCase *tu_tcase(Suite *s, const char *name, double seconds);

/* fork() with a pipe from the child to the parent: the child gets 0 and
 * writes to p[1], the parent gets the child's pid and reads p[0]; each
 * side's other end is closed. */
pid_t tu_fork_pipe(int p[2]);

/* ------------------------------------------------------------ directories */

/* The runner's temporary root (made once, removed at the end). */
const char *tu_root(void);
/* A fresh directory under the root; the caller frees the string. */
char *tu_mkdtemp(const char *tag);
/* Removes a tree (no symbolic link is followed). */
void tu_rmrf(const char *path);
/* Copies a tree of directories and regular files. */
void tu_copytree(const char *src, const char *dst);
/* Every path under `dir` (relative, sorted, directories with a trailing
 * '/'), newline-joined; the caller frees the string. */
char *tu_listing(const char *dir);
/* "a/b" in a static rotating buffer. */
const char *tu_path(const char *a, const char *b);

/* ------------------------------------------------------------------ files */

/* Reads a whole file; aborts the test when it cannot. */
uint8_t *tu_read(const char *path, size_t *n);
void tu_write(const char *path, const void *p, size_t n);
void tu_truncate(const char *path, off_t len);
off_t tu_size(const char *path);
bool tu_exists(const char *path);

/* ------------------------------------------------------- fault injection */

/* The calls the failing table can fail. */
typedef enum tu_call {
    TU_OPEN, TU_OPENAT, TU_CLOSE, TU_PREAD, TU_PWRITE, TU_FSYNC, TU_FTRUNCATE,
    TU_FALLOCATE, TU_MMAP, TU_MUNMAP, TU_MSYNC, TU_MKDIRAT, TU_RENAMEAT,
    TU_UNLINKAT, TU_FLOCK, TU_FSTAT, TU_WRITEBACK, TU_LINKAT, TU_FSTATAT,
    TU_OPENDIR, TU_READDIR, TU_N_CALLS,
    TU_ANY = TU_N_CALLS /* count every call */
} tu_call;

extern const char *const tu_call_names[TU_N_CALLS];

/* Installs a table that fails the `nth` (from 1) call of `which` (or of any
 * call, TU_ANY) with `err`, once; nth 0 fails nothing and only counts.
 * Counters start at 0.  Its fsync succeeds without syncing. */
void tu_fault_arm(tu_call which, long nth, int err);
/* From here on the table's counters live in memory this process shares
 * with the processes it forks, so calls they make count and a fault they
 * meet shows in tu_fault_disarm() here. */
void tu_fault_share(void);
/* Calls made by process `pid` neither count nor fail (0: none spared): a
 * process that starts another (an automatic compaction) arms the table for
 * that one alone. */
void tu_fault_spare(pid_t pid);
/* Restores the POSIX table; @return true when the fault was injected. */
bool tu_fault_disarm(void);
/* Calls of `which` made since arming (TU_ANY: all). */
long tu_fault_calls(tu_call which);

/* A view of one file, as the library reads it through the I/O table: the
 * file named `name` (the last path component) looks `cut` bytes long (or
 * its real size, when shorter) and byte `flip_at` (when >= 0) has `mask`
 * XORed in.  The damage loops use it to read thousands of variants of a
 * segment without rewriting it each time; tu_view_clear() restores POSIX. */
void tu_view_set(const char *name, uint64_t cut, int64_t flip_at, uint8_t mask);
void tu_view_clear(void);

/* --------------------------------------------------------- sample records */

/* One record of any kind, in storage the sample owns. */
typedef struct tu_sample {
    envlog_kind kind;
    union {
        envlog_session_rec session;
        envlog_tune tune;
        envlog_compile compile;
        envlog_span_rec span;
        envlog_mark mark;
        envlog_import import;
        envlog_forget forget;
        envlog_user user;
    } u;
} tu_sample;

typedef enum tu_variant { TU_EMPTY, TU_TYPICAL, TU_MAXIMAL, TU_UNICODE } tu_variant;

/* Fills `s` with a sample of `kind`.  Storage is static (one per kind and
 * variant), valid for the test. */
void tu_sample_make(tu_sample *s, envlog_kind kind, tu_variant v);
/* Asserts that `got` equals `want` field by field (full_only fields only
 * when `full`). */
void tu_sample_check(envlog_kind kind, const void *want, const void *got, bool full);

/* The built-in kinds, in order. */
extern const envlog_kind tu_kinds[8];

/* ------------------------------------------------------------- sessions */

/* A record as read back: stamp, kind and a copy of its payload. */
typedef struct tu_rec {
    uint64_t seq;
    envlog_kind kind;
    envlog_effect effect;
    uint32_t segment;
    uint64_t file_offset;
    uint8_t *payload;
    size_t size;
} tu_rec;

/* Everything a reader returned, with the damage seen on the way. */
typedef struct tu_readback {
    tu_rec *recs;
    size_t n;
    size_t n_corrupt;
    size_t n_truncated;
    envlog_damage first_damage;
    envlog_damage torn;        /* the last TRUNCATED's damage */
    envlog_session_state state;
    envlog_err error;          /* a hard error (IO, NOMEM) that stopped it */
} tu_readback;

/* Reads session `id` of `env` to its end; never fails the test itself. */
envlog_err tu_read_session(envlog_env *env, const envlog_id128 *id, tu_readback *rb);
void tu_readback_free(tu_readback *rb);
/* The record of seq `seq` in `rb`, or NULL. */
const tu_rec *tu_find_seq(const tu_readback *rb, uint64_t seq);

/* Opens (creating) the environment at `path`, asserting success. */
envlog_env *tu_env(const char *path);
/* Session options with a label and a segment size (0: default). */
envlog_session_opts tu_opts(const char *label, uint64_t segment_size);

/* A stored tune (CHANGED) keyed "<prefix>-<i>", with payload about `pad`
 * bytes larger than the minimum. */
envlog_err tu_record_tune(envlog_session *s, const char *prefix, unsigned i,
                          size_t pad, envlog_stamp *st);

/* ------------------------------------------------------------ CBOR edits */

/* Rewrites the CBOR item [p, p+n) into `out`: the item at `path` (`depth`
 * steps, each an unsigned map key or an array index) is replaced by the
 * `with_n` bytes at `with`; with `add`, the map at `path` gets one more
 * pair instead (key `add_key`, value `with`).  False when the path is not
 * there.  For making records no writer of envlog would write. */
bool tu_cbor_edit(const uint8_t *p, size_t n, const uint64_t *path, size_t depth,
                  const uint8_t *with, size_t with_n, bool add, uint64_t add_key,
                  envlog_buf *out);

/* tu_cbor_edit() inside the detail of a format 2 record (key 23: envlog(5),
 * "The detail (format 2)"), the byte string written back around the edited
 * map; with no detail, inside the record's own map (format 1).  False when
 * the path is not there. */
bool tu_detail_edit(const uint8_t *p, size_t n, const uint64_t *path, size_t depth,
                    const uint8_t *with, size_t with_n, bool add, uint64_t add_key,
                    envlog_buf *out);
/* The bytes of key 23 of a record (false when it has none). */
bool tu_detail_bytes(const uint8_t *p, size_t n, envlog_buf *detail);

/* Calls fn(m, what, ctx) for `b` with each bit of each byte flipped in
 * turn, then for `b` cut short at every length: a damage catalogue of one
 * encoded item. */
void tu_each_damage(const envlog_buf *b, const char *label,
                    void (*fn)(const envlog_buf *, const char *what, void *ctx), void *ctx);

/* A catalogue of CBOR items of every head: every width of every integer
 * head at its bounds, the simple values, floats of each width, texts and
 * byte strings of each length form, bad UTF-8, arrays, maps, a tag, and
 * items cut short; for putting in place of a value. */
typedef struct tu_head_alt {
    const char *name;
    uint8_t b[20];
    size_t n;
} tu_head_alt;
extern const tu_head_alt tu_head_alts[];
extern const size_t tu_n_head_alts;

/* A session of `env` written segment by segment, bypassing the recorder:
 * a session record (seq 0), then records[i] (whose seqs must be i + 1),
 * sealed when `seal`.  For records the recorder would refuse. */
envlog_id128 tu_raw_session(envlog_env *env, const uint8_t *const *recs,
                            const size_t *lens, size_t n, bool seal);
/* Encodes a record of `kind` with seq `seq` and the effect its kind gives. */
void tu_record_with_seq(envlog_buf *b, envlog_kind kind, uint64_t seq, uint64_t offset,
                        const void *body);

/* An assertion for hot loops: Check's own ck_assert_* write a mark to the
 * runner on every success, which costs a system call each. */
#define tu_check(cond, ...)                                                    \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_abort_msg(__VA_ARGS__);                                         \
    } while (0)

#define ck_assert_err(got, want)                                               \
    do {                                                                       \
        envlog_err g_ = (got), w_ = (want);                                    \
        ck_assert_msg(g_ == w_, "%s: got %s (%d), want %s (%d): %s", #got,     \
                      envlog_strerror(g_), (int)g_, envlog_strerror(w_),       \
                      (int)w_, envlog_errmsg());                               \
    } while (0)
#define ck_assert_ok(expr) ck_assert_err((expr), ENVLOG_OK)

#endif /* ENVLOG_TESTUTIL_H */
