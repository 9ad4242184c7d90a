/* SPDX-License-Identifier: MIT */
/*
 * core_int.h - what the core module offers the rest of envlog.
 *
 * core knows nothing of files: it holds errors, allocation (with a failure
 * hook for tests), the I/O function table every file access goes through,
 * hashing, ids and clocks, a growable buffer, and the event model with its
 * table-driven CBOR codec and renderers.
 */
#ifndef ENVLOG_CORE_INT_H
#define ENVLOG_CORE_INT_H

#include "envlog.h"

#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ------------------------------------------------------------- errors */

/* Records `err` with a printf-style detail for envlog_errmsg(); returns err. */
envlog_err envlog__fail(envlog_err err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The envlog_err that an errno value stands for. */
envlog_err envlog__errno_code(int errnum);
/* envlog__fail() with the errno's text appended: "what: strerror(errnum)". */
envlog_err envlog__fail_errno(int errnum, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------ allocation */

void *envlog_malloc(size_t size);
void *envlog_calloc(size_t n, size_t size);
/* envlog_malloc() of a large table that will be touched all over: from
 * ENVLOG_BIG_MIN bytes on, whole huge pages where the kernel has them
 * (envlog_big_size() bytes, all of them usable), zeroed (written in order)
 * when `zero`.  Freed with envlog_free(). */
#define ENVLOG_BIG_MIN ((size_t)256 << 10)
void *envlog_malloc_big(size_t size, bool zero);
/* The bytes envlog_malloc_big(size) takes: `size`, or rounded up to whole
 * huge pages. */
size_t envlog_big_size(size_t size);
/* envlog_realloc() of a block that grows to be large: from ENVLOG_BIG_MIN
 * bytes on, moved (its first `used` bytes) to envlog_malloc_big() memory,
 * envlog_big_size(size) bytes of it usable.  NULL (p kept): no memory. */
void *envlog_realloc_big(void *p, size_t used, size_t size);
void *envlog_realloc(void *p, size_t size);
void envlog_free(void *p);
/* Address space for a block of `size` bytes whose address must not move
 * while it fills: zero pages, taken from the system only where written
 * (whole huge pages where the kernel has them), so memory grows with what
 * is written, not with `size`.  NULL: none.  Given back with
 * envlog_unreserve(p, size). */
void *envlog_reserve(size_t size);
void envlog_unreserve(void *p, size_t size);
char *envlog_strdup(const char *s);

/* Test hook: the next `n`-th allocation (1 = the next one) and every one after
 * it fail until envlog_alloc_fail_reset(); returns how many allocations were
 * made since the last reset. */
void envlog_alloc_fail_after(long n);
long envlog_alloc_fail_reset(void);

/* -------------------------------------------------------------- I/O table */

/* Every file access of envlog goes through this table, so tests can fail any
 * call (fault injection) or simulate power loss.  Each entry behaves like the
 * POSIX call it names: -1 and errno on failure. */
typedef struct envlog_io {
    int (*open)(const char *path, int flags, mode_t mode);
    /* Never follows a symbolic link: a relative name of several
     * components under a directory (not AT_FDCWD) is resolved beneath it,
     * none of them a link or "..": ELOOP, EXDEV (openat2's RESOLVE_BENEATH
     * | RESOLVE_NO_SYMLINKS, or a walk of its components without it). */
    int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
    int (*close)(int fd);
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
    int (*fsync)(int fd);          /* fdatasync */
    int (*ftruncate)(int fd, off_t len);
    int (*fallocate)(int fd, off_t off, off_t len); /* returns an errno */
    void *(*mmap)(size_t len, int prot, int fd); /* MAP_FAILED on error */
    int (*munmap)(void *p, size_t len);
    int (*msync)(void *p, size_t len);
    int (*mkdirat)(int dirfd, const char *path, mode_t mode);
    int (*renameat)(int olddir, const char *oldp, int newdir, const char *newp);
    /* A second name for a file (never replaces one: EEXIST). */
    int (*linkat)(int olddir, const char *oldp, int newdir, const char *newp);
    int (*unlinkat)(int dirfd, const char *path, int flags);
    int (*flock)(int fd, int op);
    int (*fstat)(int fd, struct stat *st);
    /* Starts writing [off, off+len) back to the disk and returns at once
     * (sync_file_range, SYNC_FILE_RANGE_WRITE): a hint that makes a later
     * fsync shorter, never a promise.  May be NULL; errors are ignored. */
    int (*writeback)(int fd, off_t off, off_t len);
    /* stat of `path` under `dirfd`, never following a symbolic link. */
    int (*fstatat)(int dirfd, const char *path, struct stat *st);
    /* A listing of the directory `dirfd`: `through` it, from its offset
     * (the descriptor stays open and its offset moves), else from its
     * start on a descriptor of its own.  NULL and errno on failure. */
    void *(*opendir)(int dirfd, bool through);
    /* The next entry's name (never "." or ".."): 1, 0 at the end, -1 and
     * errno on failure.  *name is valid until the next call. */
    int (*readdir)(void *dir, const char **name);
    void (*closedir)(void *dir);
} envlog_io;

/* The table's openat of a name of several components without openat2: a
 * walk of its components (each opened O_NOFOLLOW; ".." refused, EXDEV). */
int envlog_openat_walk(int dirfd, const char *path, int flags, mode_t mode);

/* Calls fn(ctx, name) for each entry of the directory `dirfd` (but . and
 * ..), through the table, until fn returns other than ENVLOG_OK: ENVLOG_END
 * stops the listing without an error; any other error is returned.  A
 * failed listing is ENVLOG_IO (or as errno says) "listing WHAT". */
envlog_err envlog_dir_each(int dirfd, const char *what,
                           envlog_err (*fn)(void *ctx, const char *name), void *ctx);
/* The same, read through `fd` itself (io->opendir's `through`): for a
 * descriptor nobody has listed yet, two system calls fewer. */
envlog_err envlog_dir_each_through(int fd, const char *what,
                                   envlog_err (*fn)(void *ctx, const char *name), void *ctx);

/* The system's page size (sysconf, read once). */
uint64_t envlog_page_size(void);

/* The table in force (never NULL). */
const envlog_io *envlog_io_get(void);
/* Replaces the table; NULL restores the POSIX one.  Not thread-safe: set it
 * before any handle is opened. */
void envlog_io_set(const envlog_io *io);
/* The POSIX table. */
const envlog_io *envlog_io_posix(void);

/* --------------------------------- hashes (hash.c), ids (ids.c), clocks.c */

uint64_t envlog_xxh64(const void *data, size_t n, uint64_t seed);
/* envlog_xxh64() of the `na` bytes at `a` followed by the `nb` at `b`. */
uint64_t envlog_xxh64_2(const void *a, size_t na, const void *b, size_t nb, uint64_t seed);
/* XXH3-128 over pieces: begin (ENVLOG_NOMEM), update, end (which frees;
 * free alone when abandoned). */
typedef struct envlog_h128 {
    void *st;
} envlog_h128;
envlog_err envlog_h128_begin(envlog_h128 *h);
void envlog_h128_update(envlog_h128 *h, const void *data, size_t n);
envlog_hash128 envlog_h128_end(envlog_h128 *h);
void envlog_h128_free(envlog_h128 *h);

/* A new time-ordered id: 48-bit Unix milliseconds then 80 random bits. */
envlog_err envlog_id_new(envlog_id128 *id);
uint64_t envlog_clock_mono_ns(void);
uint64_t envlog_clock_unix_ns(void);

/* Little-endian helpers for framing. */
static inline void envlog_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void envlog_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t envlog_get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t envlog_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* The big-endian number of the `n` bytes (at most 8) at `p`; for a
 * constant `n` the compiler makes it one load. */
static inline uint64_t envlog_get_be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* envlog_get_be() for `n` of 1, 2, 4 or 8 (the widths of a CBOR head's
 * argument): each width a constant, so each is one load. */
static inline uint64_t envlog_load_be(const uint8_t *p, size_t n)
{
    switch (n) {
    case 1: return p[0];
    case 2: return envlog_get_be(p, 2);
    case 4: return envlog_get_be(p, 4);
    default: return envlog_get_be(p, 8);
    }
}

/* The big-endian IEEE 754 single (`w` 4) or double (`w` 8) at `p`, as a
 * double (a CBOR float head's argument). */
static inline double envlog_load_float(const uint8_t *p, size_t w)
{
    if (w == 4) {
        uint32_t u = (uint32_t)envlog_load_be(p, 4);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    uint64_t u = envlog_load_be(p, 8);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* True when `s` (of `n` bytes) is valid UTF-8 without NUL bytes (utf8.c). */
bool envlog_utf8_valid(const char *s, size_t n);

/* ---------------------------------------------------------------- sort.c */

/* One of the unsigned numbers an element is sorted by. */
typedef uint64_t (*envlog_sort_key)(const void *elem);
/* Sorts `n` elements of `size` bytes at `base` as qsort(base, n, size, cmp)
 * would, in time linear in n where keys differ: by keys[0], elements of
 * equal keys[0] by keys[1], and so on, then, where all `n_keys` are equal,
 * by `cmp` (not at all when `exact`: elements equal in every key are equal
 * under cmp).  `cmp` must order elements as their keys are ordered, the
 * first that differs deciding.  Without memory for the keys (4 words an
 * element and a copy of the elements) it is qsort(), which needs none: it
 * never fails. */
void envlog_sort_keyed(void *base, size_t n, size_t size, const envlog_sort_key *keys,
                       size_t n_keys, int (*cmp)(const void *, const void *), bool exact);

/* --------------------------------------------------------------- buffers */

typedef struct envlog_buf {
    uint8_t *p;
    size_t len;
    size_t cap;
} envlog_buf;

/* Makes room for `extra` more bytes.  @return ENVLOG_OK or ENVLOG_NOMEM. */
envlog_err envlog_buf_reserve(envlog_buf *b, size_t extra);
envlog_err envlog_buf_append(envlog_buf *b, const void *p, size_t n);
void envlog_buf_free(envlog_buf *b);

/* An arena for decoded strings and arrays: reset per record, never shrunk. */
typedef struct envlog_arena {
    struct envlog_chunk *head; /* newest chunk first */
    size_t want;               /* bytes the last record needed in all */
} envlog_arena;

void *envlog_arena_alloc(envlog_arena *a, size_t n);
void envlog_arena_reset(envlog_arena *a);
void envlog_arena_free(envlog_arena *a);

/* ------------------------------------------------------------ CBOR pull */

typedef enum envlog_tok_type {
    ENVLOG_TOK_UINT,
    ENVLOG_TOK_NEGINT, /* value is -1 - u */
    ENVLOG_TOK_BYTES,
    ENVLOG_TOK_TEXT,
    ENVLOG_TOK_ARRAY,
    ENVLOG_TOK_MAP,
    ENVLOG_TOK_TAG,
    ENVLOG_TOK_FLOAT,
    ENVLOG_TOK_BOOL,
    ENVLOG_TOK_NULL,
    ENVLOG_TOK_UNDEF,
    ENVLOG_TOK_INDEF /* an indefinite-length item start or a break */
} envlog_tok_type;

typedef struct envlog_tok {
    envlog_tok_type type;
    uint64_t u;         /* integer value, tag, or container size */
    double f;
    bool b;
    const uint8_t *data; /* string bytes */
    size_t len;
} envlog_tok;

typedef struct envlog_pull {
    const uint8_t *p;
    size_t n;
    size_t pos;
} envlog_pull;

/* Reads the next item head.  Strings come whole.  Indefinite-length items are
 * refused (envlog writes none; envlog(5) says readers may refuse them).
 * @return ENVLOG_OK, or ENVLOG_BAD_DATA at malformed or truncated data. */
envlog_err envlog_pull_next(envlog_pull *p, envlog_tok *t);
/* The nesting rule of envlog(5), shared by the decoder and every renderer:
 * counting a record's own map as depth 0, no item of it lies at a depth over
 * ENVLOG_CBOR_MAX_DEPTH (each array, map or tag around it adds one).  A
 * record stored inline in another (the record of a snapshot ENTRY, the
 * manifest of an import) counts from its own map. */
#define ENVLOG_CBOR_MAX_DEPTH 64

/* Skips one whole item whose head `t`, at depth `depth`, was just read:
 * checks its nesting and that no map in it holds a key twice. */
envlog_err envlog_pull_skip_at(envlog_pull *p, const envlog_tok *t, int depth);
/* envlog_pull_skip_at() for an item at depth 0. */
envlog_err envlog_pull_skip_after(envlog_pull *p, const envlog_tok *t);
/* Checks that [data, data+n) is exactly one well-formed item, placed at
 * depth `depth` (0: counted from itself). */
envlog_err envlog_cbor_check_at(const void *data, size_t n, int depth);
envlog_err envlog_cbor_check_item(const void *data, size_t n);

/* One key of a map, for telling whether a map holds a key twice: integers
 * compare by value, strings by type and bytes, other keys by encoding. */
typedef struct envlog_key {
    envlog_tok_type type;
    uint64_t u;
    const uint8_t *data;
    size_t len;
} envlog_key;

/* The keys of one map seen so far.  Zero-initialize; free with
 * envlog_keyset_free() (memory is taken only past a few keys that are not
 * small integers). */
#define ENVLOG_KEYSET_INLINE 8
typedef struct envlog_keyset {
    uint64_t small;   /* unsigned keys below 64, one bit each */
    envlog_key *v;    /* the others: `in`, then the heap */
    size_t n, cap;
    uint32_t *slots;  /* a hash table of v's indexes + 1, once v is long */
    size_t n_slots;
    envlog_key in[ENVLOG_KEYSET_INLINE];
} envlog_keyset;

/* Makes `ks` empty (without touching its inline room: it is made for every
 * map a record holds). */
static inline void envlog_keyset_init(envlog_keyset *ks)
{
    ks->small = 0;
    ks->v = NULL;
    ks->n = ks->cap = 0;
    ks->slots = NULL;
    ks->n_slots = 0;
}
/* Adds `k`: ENVLOG_BAD_DATA when the map holds it already, ENVLOG_NOMEM. */
envlog_err envlog_keyset_add(envlog_keyset *ks, const envlog_key *k);
void envlog_keyset_free(envlog_keyset *ks);
/* The key whose head `t` was read at `start` (a key that is a container is
 * skipped, at `depth`, to take its bytes). */
envlog_err envlog_key_read(envlog_pull *p, const envlog_tok *t, size_t start,
                           int depth, envlog_key *k);

/* ------------------------------------------------------------ CBOR write */

envlog_err envlog_enc_uint(envlog_buf *b, uint64_t v);
envlog_err envlog_enc_int(envlog_buf *b, int64_t v);
envlog_err envlog_enc_double(envlog_buf *b, double v);
envlog_err envlog_enc_bool(envlog_buf *b, bool v);
envlog_err envlog_enc_text(envlog_buf *b, const char *s, size_t n);
envlog_err envlog_enc_bytes(envlog_buf *b, const void *s, size_t n);
envlog_err envlog_enc_map(envlog_buf *b, size_t n);
envlog_err envlog_enc_array(envlog_buf *b, size_t n);

/* ------------------------------------------------------- the event model */

/* Envelope keys shared by every event record's map. */
enum {
    ENVLOG_K_KIND = 0,
    ENVLOG_K_SEQ = 1,
    ENVLOG_K_OFFSET = 2,
    ENVLOG_K_EFFECT = 3,
    ENVLOG_K_BODY0 = 4, /* the first kind-specific key */
    /* Format 2: a byte string holding one map of the record's fields that
     * the fold does not read (envlog(5), RECORD ENCODING). */
    ENVLOG_K_DETAIL = 23
};

/* The record format written (envlog(5), FORMAT VERSIONS): 2 puts the
 * fields the fold does not read in the detail (key 23); 1 wrote every field
 * in the record's own map.  Readers take both. */
#define ENVLOG_RECORD_FORMAT 2

typedef enum envlog_fty {
    ENVLOG_F_U64,
    ENVLOG_F_U32,
    ENVLOG_F_I64,
    ENVLOG_F_ENUM,    /* an int-sized enum, stored as uint */
    ENVLOG_F_F64,
    ENVLOG_F_BOOL,
    ENVLOG_F_TEXT,    /* const char *; omitted when NULL */
    ENVLOG_F_BYTES,   /* envlog_bytes; omitted when empty */
    ENVLOG_F_RAW,     /* envlog_bytes holding one CBOR item, stored inline */
    ENVLOG_F_RECORD,  /* as RAW, for a record (a map) stored inline: its
                         depth counts from its own map */
    ENVLOG_F_H128,    /* envlog_id128 / envlog_hash128, 16-byte string */
    ENVLOG_F_TEXTS,   /* const char *const *, count at count_off */
    ENVLOG_F_F64S,    /* const double *, count at count_off */
    ENVLOG_F_OBJS,    /* array of sub-structs, count at count_off */
    ENVLOG_F_STAMP    /* envlog_stamp as [id, seq, offset] */
} envlog_fty;

typedef struct envlog_schema envlog_schema;

typedef struct envlog_field {
    uint8_t key;
    uint8_t type;          /* envlog_fty */
    uint8_t full_only;     /* written at ENVLOG_LEVEL_FULL only */
    const char *name;      /* the JSON name */
    size_t off;
    size_t count_off;      /* arrays: offset of the size_t count */
    size_t present_off;    /* optional presence flag (bool), or SIZE_MAX */
    const envlog_schema *sub;
    const char *const *enum_names; /* ENUM: names by value, NULL-ended */
    uint8_t fold;          /* the fold needs it: encoded first, see below */
    uint8_t candidate_index; /* an index into the record's candidates */
    uint8_t identity;      /* a 64-bit hash: JSON shows it as "0x" and 16 hex
                              digits, the text the plain output shows */
} envlog_field;

struct envlog_schema {
    const char *name;
    size_t size;
    const envlog_field *fields;
    size_t n_fields;
    /* An event kind whose format 2 records put the fields not marked fold
     * in a detail (key 23); 0 for kinds the fold reads whole (session,
     * forget, user) and for maps that are not records. */
    uint8_t detail;
    /* A hand-written encoder for the struct's common shape (envlog_enc_fast),
     * for the maps recorded most; 0: the walk of `fields` alone. */
    uint8_t fast;
};

enum { ENVLOG_FAST_NONE, ENVLOG_FAST_TRIAL };

/* Appends the map of `in`, a struct of schema `s`, when the struct has the
 * shape s->fast's encoder takes (a trial: a short ASCII name, no error, no
 * start, no samples at `level`), as the walk of s->fields would write it,
 * and returns true; otherwise, or out of memory, writes nothing and returns
 * false (the walk then encodes it, and says why it cannot). */
bool envlog_enc_fast(envlog_buf *b, const envlog_schema *s, const void *in,
                     envlog_level level);
/* envlog_struct_encode() by the walk of s->fields alone (no envlog_enc_fast),
 * which the fast encoders' test holds them to. */
envlog_err envlog_struct_encode_walk(envlog_buf *b, const envlog_schema *s,
                                     const void *in, envlog_level level);

/* The schema of an event kind, or NULL for framing and unknown kinds. */
const envlog_schema *envlog_schema_of(envlog_kind kind);
/* The field of `s` with key `key`, or NULL. */
const envlog_field *envlog_schema_field(const envlog_schema *s, uint64_t key);

/* Encodes an event record (envelope and body) into `b`, which is cleared
 * first, in ENVLOG_RECORD_FORMAT.  Fields marked full_only are left out
 * below ENVLOG_LEVEL_FULL. */
envlog_err envlog_event_encode(envlog_buf *b, envlog_kind kind,
                               const envlog_stamp *stamp, envlog_effect effect,
                               envlog_level level, const void *body);
/* envlog_event_encode() in record format `format` (1 or 2); format 1 is
 * written only by tests, which hold readers to it. */
envlog_err envlog_event_encode_as(envlog_buf *b, envlog_kind kind, const envlog_stamp *stamp,
                                  envlog_effect effect, envlog_level level, const void *body,
                                  int format);

/* Decodes an event payload into `rec` (kind, effect, stamp.seq/offset and the
 * union), with strings and arrays in `arena`.  The session id of the stamp is
 * left to the caller.  Unknown keys are skipped; a known key of the wrong type
 * is ENVLOG_BAD_DATA. */
envlog_err envlog_event_decode(const uint8_t *p, size_t n, envlog_record *rec,
                               envlog_arena *arena);

/* Like envlog_event_decode(), but for the fold: only the envelope and the
 * fields marked `fold` are stored; every other field is checked where it
 * lies, never copied, so the fold accepts exactly the records the full
 * reader accepts (envlog(5), "one reader").  rec->payload holds the record
 * whole for whoever needs more. */
envlog_err envlog_event_decode_fold(const uint8_t *p, size_t n, envlog_record *rec,
                                    envlog_arena *arena);

/* Text where it lies in a payload: `n` bytes at `p`, no NUL after them;
 * for an array of texts, `p` is where its first item's head begins and `n`
 * the number of items. */
typedef struct envlog_text {
    const char *p;
    size_t n;
} envlog_text;

/* The most fields a record's schema has (envlog_event_decode_slices). */
#define ENVLOG_FIELDS_MAX 32

/* The bytes of an array of texts that envlog_event_decode_slices() checked
 * last (a tune's candidates: the same list, byte for byte, in record after
 * record of a tune set).  The same bytes where such an array begins are the
 * same item with the same verdict, as a CBOR item delimits itself, so they
 * are taken without checking each text again.  Zeroed: empty.  One memo
 * serves one decoder at a time. */
#define ENVLOG_MEMO_MAX 512
typedef struct envlog_dec_memo {
    const void *field;       /* the schema field the run was the value of */
    size_t len, head, n;     /* the run's bytes, its array head's, its items */
    uint64_t fast;           /* records read in the encoder's shape by the
                                path for it (a count, for tests) */
    uint8_t run[ENVLOG_MEMO_MAX];
} envlog_dec_memo;

/* envlog_event_decode_fold() for the kinds with a detail (tune, compile,
 * ...): their text fields (namespace, key, candidates, name, options, ...)
 * are checked as ever and handed out as slices of the payload, indexed as
 * the kind's schema lists its fields, instead of copies: their members of
 * rec->u stay NULL.  Other kinds decode as envlog_event_decode_fold().
 * `memo` (NULL: none) is read and updated.  With `slices` NULL the texts
 * are copied, as envlog_event_decode_fold() copies them. */
envlog_err envlog_event_decode_slices(const uint8_t *p, size_t n, envlog_record *rec,
                                      envlog_arena *arena,
                                      envlog_text slices[ENVLOG_FIELDS_MAX],
                                      envlog_dec_memo *memo);

/* Decodes a map of `s`-described fields from `pull` into `out`, the map head
 * `t` having been read; used for framing records too. */
envlog_err envlog_struct_decode(envlog_pull *pull, const envlog_tok *t,
                                const envlog_schema *s, void *out,
                                envlog_arena *arena);
/* Test hook: every record read by the walk of its map alone (the fold's own
 * path for the encoder's shape unused), the reading the path is held to. */
void envlog_decode_walk_only(bool on);

/* The same for a map with an ENVLOG_F_RECORD field (a snapshot's ENTRY),
 * whose record is decoded where it lies into *rec, by
 * envlog_event_decode() (envlog_event_decode_fold() when `fold`), in the
 * same pass: the record is read once, its decode saying where it ends.
 * Accepts exactly what envlog_struct_decode() and that decode of the
 * field's bytes together accept. */
envlog_err envlog_struct_decode_with_record(envlog_pull *pull, const envlog_tok *t,
                                            const envlog_schema *s, void *out,
                                            envlog_arena *arena, envlog_record *rec,
                                            bool fold);
/* Appends `in` as a map of the fields `s` describes (text is checked to be
 * UTF-8; a RAW field to be one CBOR item): ENVLOG_INVALID_ARG otherwise. */
envlog_err envlog_struct_encode(envlog_buf *b, const envlog_schema *s,
                                const void *in, envlog_level level);
/* envlog_struct_encode() for fields of records a reader accepted (a
 * snapshot build's entries, which the fold or a snapshot walk read): an
 * ENVLOG_F_RECORD field is not walked again for its well-formedness (it
 * must still be a map), every other field is checked as ever. */
envlog_err envlog_struct_encode_trusted(envlog_buf *b, const envlog_schema *s,
                                        const void *in, envlog_level level);

/* The effect a built-in record of `kind` has. */
envlog_effect envlog_effect_of(envlog_kind kind, const void *body);

/* The record of `kind` whose body (an envlog_tune, envlog_compile, ...:
 * the member of envlog_record.u the kind names) is `body`, as a reader
 * would hand it out, less its payload and file position: the one record
 * a recorder builds of what it records.  An unknown kind has no body. */
void envlog_record_make(envlog_record *rec, envlog_kind kind, const envlog_stamp *stamp,
                        envlog_effect effect, const void *body);

/* The rules across fields that a record of `kind` must keep (envlog(5),
 * RECORD KINDS and EFFECTS), the same for the recorder, the encoder and
 * every reader: NULL when `body` with `effect` keeps them, else why not.  A
 * tune's winner indexes its candidates (or is -1; a stored tune has one),
 * so does every trial's index (the largest is `max_index`, -1 for no
 * trial, or ENVLOG_TRIALS_OF_BODY to take it from body's trials), and a
 * built-in kind other than user has the effect envlog_effect_of() gives.
 * Unknown kinds keep them. */
#define ENVLOG_TRIALS_OF_BODY (-2)
const char *envlog_record_problem(envlog_kind kind, envlog_effect effect,
                                  const void *body, int64_t max_index);

/* The framing kinds (envlog(5)): the first record of a segment, snapshot
 * or bundle, and the last of a closed one.  Readers never hand them out,
 * so they are no part of the public envlog_kind. */
#define ENVLOG_KIND_HEADER ((envlog_kind)1)
#define ENVLOG_KIND_SEAL ((envlog_kind)2)

/* Writes hex of `n` bytes through `fn`; returns ENVLOG_OK or what `fn`
 * returned that was not. */
envlog_err envlog__write_hex(envlog_write_fn fn, void *ctx, const uint8_t *p, size_t n);
/* The shortest decimal form of `v` that reads back as the same double. */
void envlog__fmt_double(double v, char *buf, size_t size);
/* Writes a JSON string literal; returns as envlog__write_hex(). */
envlog_err envlog__write_json_str(envlog_write_fn fn, void *ctx, const char *s, size_t n);

#endif /* ENVLOG_CORE_INT_H */
