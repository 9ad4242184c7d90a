/* SPDX-License-Identifier: MIT */
/*
 * envlog.h - the public API of envlog.
 *
 * envlog records how a GPU compute environment was built: every autotune,
 * kernel compile and timed span is appended as a CBOR event to a per-session,
 * segmented, append-only log inside an environment directory.  This header is
 * the whole API; what is not declared here is not API.
 *
 * Conventions:
 *  - Every function that can fail returns an envlog_err; ENVLOG_OK is 0.
 *    envlog_strerror() names a code; envlog_errmsg() gives the detail of the
 *    calling thread's last failure (file, offset, cause).
 *  - Handles are opaque and come in open/close pairs; every close or free
 *    accepts NULL.
 *  - A callback that a call runs for each item of a walk or for each piece
 *    of output (envlog_replay_each(), envlog_state_each(), an
 *    envlog_write_fn) returns an envlog_err: ENVLOG_OK goes on; any other
 *    code stops the walk, and the call returns that same code.  A callback
 *    that has what it wanted returns ENVLOG_STOPPED, which no call returns
 *    for any other reason.  Callbacks that only tell (on_damage,
 *    on_progress, ...) return nothing.
 *  - Strings passed in are NUL-terminated UTF-8 and are copied before the
 *    call returns: the caller keeps ownership.  Strings and arrays handed out
 *    in a decoded record live until the next call on the handle that gave it.
 */
#ifndef ENVLOG_H
#define ENVLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is what the shared library exports (it is
 * built with -fvisibility=hidden); nothing else is. */
#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

#define ENVLOG_VERSION_MAJOR 0
#define ENVLOG_VERSION_MINOR 1
#define ENVLOG_VERSION_PATCH 0
#define ENVLOG_VERSION_STRING "0.1.0"
/* One number that compares: 10000 * major + 100 * minor + patch. */
#define ENVLOG_VERSION_NUMBER \
    (ENVLOG_VERSION_MAJOR * 10000 + ENVLOG_VERSION_MINOR * 100 + ENVLOG_VERSION_PATCH)

/* The environment directory format this library writes: 2, whose
 * segments and snapshots may hold format 2 records (envlog(5), FORMAT
 * VERSIONS).  It reads format 1 as well, and marks a format 1
 * environment 2 before it first writes there. */
#define ENVLOG_FORMAT_VERSION 2

/*! envlog_version() :
 *  @return ENVLOG_VERSION_NUMBER of the library the program runs with,
 *  which may be newer than the header it was compiled against. */
unsigned envlog_version(void);

/*! envlog_version_string() :
 *  @return ENVLOG_VERSION_STRING of the library the program runs with;
 *  never NULL. */
const char *envlog_version_string(void);

/* ------------------------------------------------------------------ errors */

typedef enum envlog_err {
    ENVLOG_OK = 0,
    ENVLOG_END = 1,          /* no more records: not an error */
    ENVLOG_TRUNCATED = 2,    /* a torn tail: good data ends at an offset */
    ENVLOG_CORRUPT = 3,      /* damage found; see envlog_reader_damage() */
    ENVLOG_INVALID_ARG = 4,  /* a bad argument from the caller */
    ENVLOG_NOMEM = 5,        /* memory could not be allocated */
    ENVLOG_IO = 6,           /* a system call failed */
    ENVLOG_NOSPACE = 7,      /* the file system is full */
    ENVLOG_FORMAT = 8,       /* not an environment, or an unknown format */
    ENVLOG_BAD_DATA = 9,     /* malformed input data (CBOR, names) */
    ENVLOG_NOT_FOUND = 10,   /* no such session, entry or file */
    ENVLOG_BUSY = 11,        /* a lock is held by another writer */
    ENVLOG_TOO_BIG = 12,     /* a length beyond a documented limit */
    ENVLOG_UNAVAILABLE = 13, /* an optional component is missing */
    ENVLOG_PERMISSION = 14,  /* access denied, or a symbolic link refused */
    ENVLOG_WRONG_STATE = 15, /* the call does not fit the handle's state
                                (read-only, not in force, never begun) */
    ENVLOG_STOPPED = 16      /* a callback stopped the walk: not an error */
} envlog_err;

/* Deprecated: ENVLOG_WRONG_STATE's name before 0.1.0 (it read too much like
 * envlog_state and ENVLOG_STATE_SEALED, and also meant that a callback
 * stopped a walk, which is ENVLOG_STOPPED now).  Kept for one release. */
#define ENVLOG_STATE ENVLOG_WRONG_STATE

/*! envlog_strerror() :
 *  @return a static string naming `err`; never NULL. */
const char *envlog_strerror(envlog_err err);

/*! envlog_errmsg() :
 *  @return the detail of the calling thread's most recent failure, such as
 *  "sessions/0191.../00000000-0000000000000000.log: No space left on device".
 *  The text is overwritten by the next failing call on the same thread. */
const char *envlog_errmsg(void);

/* ------------------------------------------------------------ small types */

/* A 128-bit hash (XXH3-128, big-endian bytes) or session id. */
typedef struct envlog_id128 {
    uint8_t b[16];
} envlog_id128;
typedef envlog_id128 envlog_hash128;

/* Bytes owned by someone else: a binary, an IR, a CBOR body. */
typedef struct envlog_bytes {
    const void *data;
    size_t size;
} envlog_bytes;

/* Where a record stands in the history of its environment. */
typedef struct envlog_stamp {
    envlog_id128 session;
    uint64_t seq;       /* per session, from 0, across all kinds */
    uint64_t offset_ns; /* on the session's monotonic clock */
} envlog_stamp;

/*! envlog_id_format() : writes 32 lower-case hex digits and a NUL to `out`. */
void envlog_id_format(const envlog_id128 *id, char out[33]);

/*! envlog_id_parse() : parses 32 hex digits.
 *  @return ENVLOG_OK, or ENVLOG_INVALID_ARG when `text` is not 32 hex digits. */
envlog_err envlog_id_parse(const char *text, envlog_id128 *id);

/*! envlog_hash128_bytes() : XXH3-128 of `size` bytes (the hash envlog uses for
 *  sources, binaries and contents). */
envlog_hash128 envlog_hash128_bytes(const void *data, size_t size);

/* ---------------------------------------------------------- record model */

/* The kinds of records a reader hands out.  Kinds 1 and 2 are a segment's
 * framing (envlog(5)), which no reader hands out and no call takes; their
 * names, ENVLOG_KIND_HEADER and ENVLOG_KIND_SEAL before 0.1.0, left this
 * enum without aliases, since no public caller could use them. */
typedef enum envlog_kind {
    ENVLOG_KIND_SESSION = 16,
    ENVLOG_KIND_TUNE = 17,
    ENVLOG_KIND_COMPILE = 18,
    ENVLOG_KIND_SPAN = 19,
    ENVLOG_KIND_MARK = 20,
    ENVLOG_KIND_IMPORT = 21,
    ENVLOG_KIND_FORGET = 22,
    ENVLOG_KIND_USER = 23
} envlog_kind;

/*! envlog_kind_name() : "session", "tune", ...; "unknown" for others. */
const char *envlog_kind_name(envlog_kind kind);

/* CHANGED records change the cache state; OBSERVED ones only describe. */
typedef enum envlog_effect {
    ENVLOG_OBSERVED = 0,
    ENVLOG_CHANGED = 1
} envlog_effect;

typedef enum envlog_level {
    ENVLOG_LEVEL_OFF = 0,   /* nothing recorded; caches still work */
    ENVLOG_LEVEL_BASIC = 1, /* the default */
    ENVLOG_LEVEL_FULL = 2   /* also sources, IR and every sample */
} envlog_level;

/* A named parameter of a selection policy. */
typedef struct envlog_param {
    const char *name;
    double value;
} envlog_param;

/* A key/value attribute of a span. */
typedef struct envlog_attr {
    const char *key;
    const char *value;
} envlog_attr;

/* One candidate's measurement within a tune, in the order trials ran. */
typedef struct envlog_trial {
    const char *name;       /* the candidate's name */
    uint32_t index;         /* its index in the tune's candidate list */
    uint64_t samples;       /* how many samples were taken */
    const double *sample_ns; /* every sample (recorded at FULL only) */
    size_t n_sample_ns;
    double min_ns, median_ns, mean_ns, max_ns, stddev_ns;
    const char *error;      /* non-NULL when the candidate failed */
    bool has_start;         /* start_ns and wall_ns say when it ran */
    uint64_t start_ns;      /* session clock when it began
                               (envlog_session_clock_ns()) */
    uint64_t wall_ns;       /* its wall time, warm-up included */
} envlog_trial;

/* One autotune: how a winner was chosen for (namespace, key, checksum). */
typedef struct envlog_tune {
    const char *ns;            /* table/runtime/version/device/... */
    const char *key;           /* the tune key */
    uint64_t checksum;         /* tune-set checksum (envlog_tune_checksum) */
    const char *const *candidates; /* names the checksum was computed from */
    size_t n_candidates;
    const envlog_trial *trials; /* in the order they ran */
    size_t n_trials;
    const char *policy;        /* selection policy name */
    const envlog_param *params; /* its parameters */
    size_t n_params;
    int64_t winner;            /* index into candidates; -1 for none */
    double margin;             /* runner-up cost / winner cost - 1 */
    double winner_ns;          /* the winner's cost as the policy scored it;
                                  0: taken from its trial's median */
    bool within_noise;         /* the margin is within measurement noise */
    bool short_circuit;        /* picked without measuring every candidate */
    uint64_t wall_ns;          /* wall time of the whole tune */
    bool stored;               /* false: an unmeasured pick, never stored */
    bool imported;             /* copied from a bundle: set only by a bundle
                                  import (envlog_record_tune() refuses it) */
    bool has_start;            /* start_ns and thread say where it ran */
    uint64_t start_ns;         /* session clock when it began */
    uint64_t thread;           /* the thread that ran it (envlog_thread_id()) */
} envlog_tune;

/*! envlog_tune_checksum() : the tune-set checksum of `n` candidate names
 *  (XXH3-64 over each name and its terminating NUL, in order). */
uint64_t envlog_tune_checksum(const char *const *names, size_t n);

typedef enum envlog_outcome {
    ENVLOG_COMPILED = 0, /* compiled now */
    ENVLOG_LOADED = 1,   /* found in the cache */
    ENVLOG_FAILED = 2    /* the compiler refused it */
} envlog_outcome;

/* One kernel compile, load or failure. */
typedef struct envlog_compile {
    const char *ns;            /* compiler/version/arch/... */
    const char *name;          /* kernel name */
    envlog_hash128 kernel_key; /* hash of the four components below */
    envlog_hash128 source_hash;
    const char *options;       /* compiler options, space separated */
    const char *compiler_version;
    const char *arch;          /* e.g. sm_90, compute_90 */
    envlog_outcome outcome;
    uint64_t duration_ns;
    envlog_hash128 binary_hash;
    uint64_t binary_size;
    envlog_bytes binary;       /* the binary, when stored */
    const char *log;           /* the compiler's log */
    const char *source;        /* recorded at FULL only */
    envlog_bytes ir;           /* intermediate code, recorded at FULL only */
    bool has_tune;             /* the compile was asked for by a tune */
    envlog_stamp tune;         /* that tune's stamp */
    bool imported;             /* copied from a bundle: set only by a bundle
                                  import (envlog_record_compile() refuses it) */
    bool has_start;            /* start_ns and thread say where it ran */
    uint64_t start_ns;         /* session clock when the compile began */
    uint64_t thread;           /* the thread that ran it (envlog_thread_id()) */
} envlog_compile;

/* A timed stretch of the caller's work. */
typedef struct envlog_span_rec {
    const char *name;
    uint64_t id;        /* per session, from 1 */
    uint64_t parent;    /* the enclosing span's id; 0 for none */
    uint64_t open_ns;   /* session offset when it opened */
    uint64_t duration_ns;
    const envlog_attr *attrs;
    size_t n_attrs;
    bool has_thread;
    uint64_t thread;    /* the thread that opened and closed it */
    bool open;          /* the span's opening, written before its close
                           (envlog(5), SPANS); its close follows, same id */
} envlog_span_rec;

typedef struct envlog_mark {
    const char *label;
    uint64_t wall_unix_ns;
} envlog_mark;

typedef struct envlog_import {
    const char *bundle;      /* bundle name */
    envlog_hash128 bundle_hash;
    envlog_bytes manifest;   /* the bundle's manifest, one CBOR item */
    uint64_t taken, skipped, rejected;
} envlog_import;

typedef enum envlog_table {
    ENVLOG_TABLE_TUNE = 0,
    ENVLOG_TABLE_KERNEL = 1
} envlog_table;

/* A tombstone for one entry, or, with `under`, for every entry of either
 * table whose namespace lies under a prefix (envlog_ns_under()); such a
 * forget names no namespace and no key, and its table is not read. */
typedef struct envlog_forget {
    envlog_table table;
    const char *ns;
    const char *key;          /* tune key; hex kernel key for kernels */
    uint64_t checksum;        /* tune-set checksum; 0 for kernels */
    const char *reason;
    const char *under;        /* NULL: one entry; else a namespace prefix */
} envlog_forget;

/*! envlog_ns_under() : whether namespace `ns` is `prefix` or lies below it,
 *  comparing whole `/`-separated components ("nvrtc/12.4" covers
 *  "nvrtc/12.4/sm_90", not "nvrtc/12.40").
 *  envlog_ns_prefix_problem() : NULL when `prefix` can name namespaces (not
 *  empty, no empty component, no `/` at either end), else what is wrong. */
bool envlog_ns_under(const char *ns, const char *prefix);
const char *envlog_ns_prefix_problem(const char *prefix);

/* A record of a caller-defined kind: a name and one CBOR item. */
typedef struct envlog_user {
    const char *kind;
    envlog_bytes body;       /* exactly one well-formed CBOR item */
} envlog_user;

/* The session record: what a session says about itself. */
typedef struct envlog_session_rec {
    envlog_id128 id;
    uint64_t start_unix_ns;
    const char *envlog_version;
    const char *runtime;
    const char *runtime_version;
    const char *label;
    const char *host;
    uint64_t pid;
    const char *os;
    const char *arch;
    const char *const *devices; /* device fingerprints */
    size_t n_devices;
    const char *process_mode;
    envlog_level level;
    uint64_t dropped;          /* records dropped before the first flush */
} envlog_session_rec;

/* Output sink for the renderers: called with pieces of text in order.
 * Returns ENVLOG_OK to go on; any other code (ENVLOG_IO for a failed
 * write, ENVLOG_STOPPED for enough) ends the rendering, and the renderer
 * returns that code. */
typedef envlog_err (*envlog_write_fn)(void *ctx, const char *text, size_t len);

/* -------------------------------------------------------------- environment */

typedef struct envlog_env envlog_env;

/*! envlog_env_default_path() : the environment a NULL path opens:
 *  $ENVLOG_DIR, else $XDG_CACHE_HOME/envlog/default, else
 *  $HOME/.cache/envlog/default.
 *  @return ENVLOG_OK, ENVLOG_TOO_BIG when it does not fit in `size`, or
 *  ENVLOG_NOT_FOUND when none of the variables is set. */
envlog_err envlog_env_default_path(char *out, size_t size);

#define ENVLOG_OPEN_CREATE 1u   /* create the directory and its marker */
#define ENVLOG_OPEN_READONLY 2u /* never write: for inspection tools */
#define ENVLOG_OPEN_NO_UPKEEP 4u /* its sessions' ends never start an
                                    automatic compaction or push, and the
                                    open pulls only with ENVLOG_OPEN_PULL
                                    (tools that run one step at a time) */
#define ENVLOG_OPEN_PULL 8u     /* pull from every remote of the config
                                   (envlog_remote.h) as the open ends, even
                                   one whose auto_pull is off: bounded by
                                   the remote's timeout, and a remote that
                                   is down or refuses is said once on
                                   stderr, never an error of the open */

/*! envlog_env_open() : opens the environment at `path` (NULL: the default).
 *  With ENVLOG_OPEN_CREATE, missing directories are created (0700) and a
 *  format marker is written.
 *  With ENVLOG_OPEN_PULL, or a remote of the config with auto_pull on,
 *  the open ends with a pull (envlog_remote.h), each remote's bounded by
 *  its timeout (2 s by default); what a pull cannot reach waits for the
 *  next one, and the open succeeds as without it.
 *  @return ENVLOG_OK and `*env`; ENVLOG_NOT_FOUND when it does not exist and
 *  CREATE is not given; ENVLOG_FORMAT when the directory is not an
 *  environment or has a format version this library does not know;
 *  ENVLOG_INVALID_ARG for ENVLOG_OPEN_PULL with ENVLOG_OPEN_READONLY. */
envlog_err envlog_env_open(const char *path, unsigned flags, envlog_env **env);

/*! envlog_env_close() : closes `env`; its sessions must be ended first.
 *  Accepts NULL. */
void envlog_env_close(envlog_env *env);

/*! envlog_env_path() : the directory `env` was opened at. */
const char *envlog_env_path(const envlog_env *env);

/*! envlog_env_format() : the environment format its FORMAT marker states
 *  (1 or 2, envlog(5) FORMAT VERSIONS).  A format 1 environment becomes
 *  format 2 when this library first writes a session or a snapshot
 *  into it. */
int envlog_env_format(const envlog_env *env);

/* ----------------------------------------------------------------- sessions */

typedef enum envlog_sync {
    ENVLOG_SYNC_NONE = 0,   /* never fdatasync: survives a killed process */
    ENVLOG_SYNC_CLOSE = 1,  /* default: on rotation, seal, flush and close */
    ENVLOG_SYNC_RECORD = 2  /* after every record: survives power loss */
} envlog_sync;

typedef struct envlog_session_opts {
    envlog_level level;        /* default ENVLOG_LEVEL_BASIC */
    size_t pending_budget;     /* bytes held before the first CHANGED
                                  record; 0 means 1 MiB */
    const char *label;
    const char *runtime;
    const char *runtime_version;
    const char *const *devices; /* device fingerprints */
    size_t n_devices;
    const char *process_mode;
    envlog_sync sync;
    uint64_t segment_size;     /* rotation size, a multiple of 32 KiB;
                                  0 means 16 MiB */
    int auto_compact;          /* when it ends: 0 as the environment's config
                                  says, 1 check and compact (whatever the
                                  config), -1 never */
    int auto_push;             /* when it ends (having written): 0 push to
                                  the remotes whose auto_push is on (the
                                  config), 1 to every remote of the config
                                  whatever it says, -1 start no push; in a
                                  detached process, never waited for */
} envlog_session_opts;

/*! envlog_session_opts_init() : fills `opts` with the defaults. */
void envlog_session_opts_init(envlog_session_opts *opts);

typedef struct envlog_session envlog_session;

/*! envlog_session_begin() : begins a session of this process in `env`.
 *  Nothing touches the disk until the first CHANGED record.  `opts` may be
 *  NULL for the defaults.  The session may be used from many threads.
 *  @return ENVLOG_OK and `*s`; ENVLOG_INVALID_ARG for a bad option;
 *  ENVLOG_WRONG_STATE when `env` was opened read-only. */
envlog_err envlog_session_begin(envlog_env *env, const envlog_session_opts *opts,
                                envlog_session **s);

/*! envlog_session_end() : seals the last segment, syncs per the policy and
 *  frees `s`.  A span still open is written as opened, never closed
 *  (envlog(5), SPANS).  Accepts NULL.
 *  @return the first error met while sealing; `s` is freed regardless. */
envlog_err envlog_session_end(envlog_session *s);

/*! envlog_session_id() : the session's id.  A forked child gets a new id at
 *  its first record. */
envlog_id128 envlog_session_id(const envlog_session *s);

/*! envlog_session_flush() : syncs what was written (held OBSERVED records
 *  stay held).  @return ENVLOG_OK or ENVLOG_IO. */
envlog_err envlog_session_flush(envlog_session *s);

/* What envlog_session_stats() reports. */
typedef struct envlog_session_stats {
    uint64_t accepted;   /* records accepted (seq given) */
    uint64_t written;    /* records handed to the kernel */
    uint64_t held;       /* records waiting for a CHANGED record or for
                            an open span (its opening counts) */
    uint64_t dropped;    /* held records dropped over budget */
    uint64_t segments;   /* segments created */
    uint64_t bytes;      /* bytes of log written */
    bool on_disk;        /* the session directory exists */
} envlog_session_stats;

void envlog_session_stats_get(const envlog_session *s, envlog_session_stats *st);

/*! envlog_session_clock_ns() : the session's clock now: the offset_ns a
 *  record stamped now would carry.  A caller that times work on other
 *  threads reads it where the work starts and gives it as the record's
 *  start_ns, so the record is placed where the work ran. */
uint64_t envlog_session_clock_ns(const envlog_session *s);

/*! envlog_thread_id() : the calling thread's id as records carry it (its
 *  kernel thread id, as /proc and ps show it); never 0. */
uint64_t envlog_thread_id(void);

/*
 * Recording.  Each call assigns the next seq, stamps the record on the
 * session's clock and, once the session is on disk, hands it to the kernel
 * before returning, so a killed process loses nothing already recorded.
 * `stamp`, when not NULL, receives the record's stamp.
 *
 * The effect of each kind is fixed: a tune with `stored`, a compile with
 * outcome COMPILED and a binary, an import and a forget are CHANGED;
 * everything else is OBSERVED.  A user record states its own effect.
 *
 * Only a bundle import records imported values (they replace no local value
 * and yield to the next one): a tune or compile with `imported` set is
 * refused, so no caller can pass its own values off as a bundle's.
 *
 * @return ENVLOG_OK; ENVLOG_INVALID_ARG (a missing name or namespace, text
 * that is not UTF-8, a user body that is not one CBOR item, a winner out of
 * range, a stored tune without a winner, `imported` set); ENVLOG_TOO_BIG (a record over
 * 256 MiB); ENVLOG_NOSPACE or ENVLOG_IO from the file system: then the
 * record is not recorded and nothing recorded before it is lost.
 */
envlog_err envlog_record_tune(envlog_session *s, const envlog_tune *t,
                              envlog_stamp *stamp);
envlog_err envlog_record_compile(envlog_session *s, const envlog_compile *c,
                                 envlog_stamp *stamp);
envlog_err envlog_record_mark(envlog_session *s, const char *label,
                              envlog_stamp *stamp);
envlog_err envlog_record_import(envlog_session *s, const envlog_import *im,
                                envlog_stamp *stamp);
envlog_err envlog_record_forget(envlog_session *s, const envlog_forget *f,
                                envlog_stamp *stamp);
envlog_err envlog_record_user(envlog_session *s, const char *kind,
                              const void *cbor, size_t size,
                              envlog_effect effect, envlog_stamp *stamp);

/* A span in progress: caller-owned storage, opened and closed on one thread.
 * Its members are private. */
typedef struct envlog_span {
    envlog_session *session_;
    struct envlog_span *up_;
    const char *name_;
    uint64_t id_;
    uint64_t parent_;
    uint64_t open_ns_;
    uint64_t pid_;
    uint64_t seq_;
} envlog_span;

/*! envlog_span_open() : opens a span named `name` (it must stay valid until
 *  the span closes).  Its parent is the innermost span of the same session
 *  still open on this thread.  The span is stamped now: its seq comes before
 *  those of the records made while it is open, and it is written when it
 *  closes, the records after it held until then within the pending budget
 *  (a CHANGED record, or the budget, writes its opening first: envlog(5),
 *  SPANS).
 *  @return ENVLOG_OK or ENVLOG_INVALID_ARG. */
envlog_err envlog_span_open(envlog_session *s, const char *name, envlog_span *sp);

/*! envlog_span_close() : closes `sp` and records it with `n` attributes.
 *  @return as the recording calls above. */
envlog_err envlog_span_close(envlog_span *sp, const envlog_attr *attrs, size_t n,
                             envlog_stamp *stamp);

/* ------------------------------------------------------------------ reading */

typedef enum envlog_session_state {
    ENVLOG_STATE_SEALED = 0,   /* closed cleanly */
    ENVLOG_STATE_LIVE = 1,     /* its writer still holds the lock */
    ENVLOG_STATE_UNSEALED = 2, /* its writer is gone; every record whole */
    ENVLOG_STATE_TORN = 3,     /* its writer is gone mid-record: torn tail */
    ENVLOG_STATE_DAMAGED = 4   /* damage other than a torn tail */
} envlog_session_state;

const char *envlog_session_state_name(envlog_session_state st);

/* A summary of one session directory, from a full read of its segments. */
typedef struct envlog_session_info {
    envlog_id128 id;
    char id_hex[33];
    uint64_t start_unix_ns;   /* 0 when the session record is unreadable */
    char *label;              /* "" when unknown */
    char *host;
    char *runtime;
    uint64_t records;         /* event records read back */
    uint64_t segments;
    uint64_t bytes;           /* bytes on disk */
    uint64_t last_seq;
    uint64_t dropped_bytes;   /* bytes lost to damage or a torn tail */
    envlog_session_state state;
    uint64_t strays;          /* entries of its directory that are neither
                                 segments nor the .broken copies a repair
                                 keeps (reported as damage; never removed) */
} envlog_session_info;

/*! envlog_sessions_list() : reads every session of `env`, sorted by id (that
 *  is, by creation).  Free the array with envlog_sessions_free().
 *  @return ENVLOG_OK, ENVLOG_IO or ENVLOG_NOMEM. */
envlog_err envlog_sessions_list(envlog_env *env, envlog_session_info **out,
                                size_t *n);
void envlog_sessions_free(envlog_session_info *infos, size_t n);

/* What envlog_session_repair() did. */
typedef struct envlog_repair {
    bool repaired;            /* a torn tail was cut */
    uint32_t segment;         /* the segment cut */
    uint64_t cut_at;          /* its new size */
    uint64_t bytes_removed;
    char broken[64];          /* name of the byte-identical copy kept */
    char why[128];            /* why nothing was done, when nothing was */
} envlog_repair;

/*! envlog_session_repair() : cuts the torn tail of session `id`, whose
 *  writer must be gone, after keeping a byte-identical `<segment>.broken`
 *  copy of the segment beside it.  A live session, a session without a torn
 *  tail and damage other than a torn tail are left alone (`why` says so).
 *  @return ENVLOG_OK (see out->repaired); ENVLOG_BUSY for a live session;
 *  ENVLOG_IO, ENVLOG_NOSPACE, ENVLOG_NOMEM. */
envlog_err envlog_session_repair(envlog_env *env, const envlog_id128 *id,
                                 envlog_repair *out);

/*! envlog_sessions_ids() : the ids of every session of `env`, sorted (that
 *  is, by creation), without reading any of them.  Free with envlog_ids_free().
 *  @return ENVLOG_OK, ENVLOG_IO or ENVLOG_NOMEM. */
envlog_err envlog_sessions_ids(envlog_env *env, envlog_id128 **ids, size_t *n);
void envlog_ids_free(envlog_id128 *ids);

/* Which file a damage report is about. */
typedef enum envlog_damage_file {
    ENVLOG_DAMAGE_SEGMENT = 0,   /* a session's segment */
    ENVLOG_DAMAGE_SNAPSHOT = 1,  /* snapshot/current */
    ENVLOG_DAMAGE_PREVIOUS = 2,  /* snapshot/previous, the generation before */
    ENVLOG_DAMAGE_STRAY = 3      /* something inside the environment that is
                                    not what its name says (reason: what) */
} envlog_damage_file;

/* A damaged region found while reading. */
typedef struct envlog_damage {
    envlog_id128 session;   /* the session, or the snapshot's own id */
    uint32_t segment;       /* segment seq (0 for a snapshot) */
    uint64_t offset;        /* where good data ends */
    uint64_t bytes;         /* bytes dropped */
    char reason[96];
    envlog_damage_file file;
} envlog_damage;

/* One record read back.  Valid until the next envlog_reader_next(). */
typedef struct envlog_record {
    envlog_kind kind;
    envlog_effect effect;
    envlog_stamp stamp;
    uint32_t segment;         /* segment seq it was read from */
    uint64_t file_offset;     /* offset of its first fragment */
    uint64_t file_end;        /* offset just past its last fragment */
    envlog_bytes payload;     /* the CBOR map as stored */
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
    /* Format 2 (envlog(5), RECORD ENCODING): why the record's detail (key
     * 23: the fields the fold does not read) could not be read, or NULL.
     * The record stands all the same, as it does for the fold; the fields
     * of its detail are then absent. */
    const char *detail_problem;
} envlog_record;

typedef struct envlog_reader envlog_reader;

/*! envlog_reader_open() : opens session `id` of `env` for reading.
 *  @return ENVLOG_OK, ENVLOG_NOT_FOUND, ENVLOG_PERMISSION (the session
 *  directory is a symbolic link) or ENVLOG_IO. */
envlog_err envlog_reader_open(envlog_env *env, const envlog_id128 *id,
                              envlog_reader **r);

/*! envlog_reader_next() : the next record of the session, in seq order.
 *  @return ENVLOG_OK and `*rec`;
 *    ENVLOG_CORRUPT: damage was skipped; envlog_reader_damage() says where;
 *      calling again resumes after it;
 *    ENVLOG_TRUNCATED: a torn tail; envlog_reader_damage() gives the offset
 *      where good data ends; the next call returns ENVLOG_END;
 *    ENVLOG_END: no more records;
 *    ENVLOG_IO or ENVLOG_NOMEM. */
envlog_err envlog_reader_next(envlog_reader *r, const envlog_record **rec);

/*! envlog_reader_damage() : the damage behind the last ENVLOG_CORRUPT or
 *  ENVLOG_TRUNCATED. */
const envlog_damage *envlog_reader_damage(const envlog_reader *r);

/*! envlog_reader_state() : after ENVLOG_END, how the session ended. */
envlog_session_state envlog_reader_state(const envlog_reader *r);

void envlog_reader_close(envlog_reader *r);

/* ------------------------------------------------------------------- replay */

/*
 * Replay folds every session of an environment, in one total order, into the
 * cache state: a winner per (namespace, key, tune-set checksum) and a binary
 * per (namespace, kernel key).  The order is (session start + offset,
 * session id, seq), independent of how files are listed, so the same logs
 * always fold to the same state.  Rules: between two local values the first
 * stands; a local value replaces an imported one; an imported value never
 * replaces anything; a forget removes one entry; a tune with stored = false
 * makes no entry.  Every entry keeps the stamp of the record that set it.
 */

typedef enum envlog_origin {
    ENVLOG_LOCAL = 0,
    ENVLOG_IMPORTED = 1
} envlog_origin;

/* Why an entry stands (or does not). */
typedef enum envlog_rule {
    ENVLOG_RULE_FIRST_LOCAL = 0,      /* the first local value */
    ENVLOG_RULE_LOCAL_OVER_IMPORTED = 1, /* a local value replaced an imported one */
    ENVLOG_RULE_IMPORTED = 2,         /* imported, nothing local since */
    ENVLOG_RULE_FORGOTTEN = 3,        /* removed by a forget */
    ENVLOG_RULE_NOT_STORED = 4,       /* a tune whose pick was not stored */
    ENVLOG_RULE_KEPT_FIRST = 5,       /* a later local value that lost to the first */
    ENVLOG_RULE_IMPORT_IGNORED = 6    /* an imported value that replaced nothing */
} envlog_rule;

const char *envlog_rule_name(envlog_rule rule);

typedef struct envlog_replay_opts {
    /* Fold only records up to a point: by time (session start + offset at
     * most until_unix_ns), or up to and including a stamp in the total
     * order. */
    bool until_time;
    uint64_t until_unix_ns;
    bool until_stamp;
    envlog_id128 until_session;
    uint64_t until_seq;
    /* Called for each damaged region or torn tail met; replay goes on. */
    void (*on_damage)(void *ctx, const envlog_damage *d, bool torn);
    /* Called now and then with records folded so far and the total bytes of
     * log to read (for a progress bar). */
    void (*on_progress)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);
    void *ctx;
    /* Read the snapshot whole and check every record of it first, instead
     * of only what lookups need (envlog(1)'s commands do).  Its damage is
     * reported through on_damage, and when snapshot/current is damaged and
     * the generation before it is whole, that one is used: the state is
     * then exactly the state of the logs.  Without it a damaged current
     * snapshot is used as far as it reads (a damaged entry is a miss). */
    bool check_snapshot;
    /* How many threads read and check the sessions ahead of the fold: 0 as
     * the machine allows (its CPUs less one, at most 8, on 4 CPUs or more;
     * the calling thread alone on fewer), 1 the calling thread alone, N the
     * calling thread and N - 1 more.  The result is the same whatever it
     * says. */
    int threads;
} envlog_replay_opts;

/* A record as replay hands it out: the record and its session's summary. */
typedef struct envlog_replay_rec {
    const envlog_record *rec;
    const envlog_session_rec *session; /* NULL when unreadable */
    uint64_t unix_ns;                  /* session start + offset */
    bool compacted;                    /* read from the snapshot, not from a
                                          session's log (envlog_compaction_get()
                                          says what that snapshot kept) */
} envlog_replay_rec;

/*! envlog_replay_each() : calls `fn` for every record of `env` in the total
 *  order (within the limits of `opts`, which may be NULL).  `fn` returns
 *  ENVLOG_OK to go on; any other code stops the walk (ENVLOG_STOPPED when
 *  it has what it wanted).
 *  @return ENVLOG_OK (damage is reported through opts->on_damage, not as an
 *  error); ENVLOG_IO, ENVLOG_NOMEM; when `fn` stopped it, exactly the code
 *  `fn` returned. */
envlog_err envlog_replay_each(envlog_env *env, const envlog_replay_opts *opts,
                              envlog_err (*fn)(void *ctx, const envlog_replay_rec *r),
                              void *ctx);

typedef struct envlog_state envlog_state;

/* A standing autotune entry. */
typedef struct envlog_tune_entry {
    const char *ns;
    const char *key;
    uint64_t checksum;
    const char *winner;         /* the winning candidate's name */
    int64_t winner_index;
    const char *const *candidates;
    size_t n_candidates;
    double margin;
    bool within_noise;
    double winner_cost_ns;      /* the winner's median, when measured */
    envlog_origin origin;
    envlog_rule rule;
    envlog_stamp stamp;         /* the record that set it */
} envlog_tune_entry;

/* A standing kernel entry. */
typedef struct envlog_kernel_entry {
    const char *ns;
    const char *name;
    envlog_hash128 kernel_key;
    envlog_hash128 source_hash;
    const char *options;
    const char *compiler_version;
    const char *arch;
    envlog_hash128 binary_hash;
    envlog_bytes binary;
    envlog_origin origin;
    envlog_rule rule;
    envlog_stamp stamp;
} envlog_kernel_entry;

/*! envlog_state_open() : folds `env` (up to opts' limits; opts may be NULL)
 *  into a new state owned by the caller.  It does not follow later records.
 *  @return ENVLOG_OK; ENVLOG_IO, ENVLOG_NOMEM. */
envlog_err envlog_state_open(envlog_env *env, const envlog_replay_opts *opts,
                             envlog_state **st);
void envlog_state_close(envlog_state *st);

/*! envlog_env_state() : the environment's live state: folded at the first
 *  call, then kept current by every session begun on `env`, so a lookup sees
 *  this process's records at once.  Owned by `env`; valid until
 *  envlog_env_close().  Safe to use from many threads. */
envlog_err envlog_env_state(envlog_env *env, envlog_state **st);

/*! envlog_state_winner() : the standing winner of (ns, key, checksum).
 *  Strings in `out` stay valid until the state is closed.
 *  @return ENVLOG_OK or ENVLOG_NOT_FOUND. */
envlog_err envlog_state_winner(envlog_state *st, const char *ns, const char *key,
                               uint64_t checksum, envlog_tune_entry *out);

/*! envlog_state_kernel() : the standing binary of (ns, kernel key).
 *  @return ENVLOG_OK or ENVLOG_NOT_FOUND. */
envlog_err envlog_state_kernel(envlog_state *st, const char *ns,
                               const envlog_hash128 *kernel_key,
                               envlog_kernel_entry *out);

/* An entry near a missed lookup, and how it differs. */
typedef struct envlog_near {
    envlog_table table;
    const char *ns;
    const char *key;
    uint64_t checksum;
    envlog_origin origin;
    envlog_stamp stamp;
    char differs[256];  /* e.g. "namespace component 4: sm_80 here, sm_90 asked" */
} envlog_near;

/*! envlog_state_explain() : for a lookup of (table, ns, key, checksum) that
 *  missed, the standing entries with the same key under another namespace or
 *  checksum, each saying which components differ (for kernels `key` is the
 *  kernel key in hex and entries with the same kernel name also count).
 *  Free with envlog_near_free().  @return ENVLOG_OK or ENVLOG_NOMEM. */
envlog_err envlog_state_explain(envlog_state *st, envlog_table table,
                                const char *ns, const char *key,
                                uint64_t checksum, const char *const *candidates,
                                size_t n_candidates, envlog_near **out, size_t *n);
void envlog_near_free(envlog_near *near);

/* Why a candidate's sampling stopped, as its tune's policy parameters tell
 * it (envlog_tune_rank()). */
typedef enum envlog_stop {
    ENVLOG_STOP_UNKNOWN = 0,      /* the policy records no rule that explains it */
    ENVLOG_STOP_CONVERGED = 1,    /* stddev / sqrt(n) <= rel_tol x median */
    ENVLOG_STOP_DROPPED = 2,      /* median above drop_factor x the best
                                     median of the candidates run before it */
    ENVLOG_STOP_SAMPLE_LIMIT = 3, /* max_samples taken */
    ENVLOG_STOP_ERROR = 4         /* the candidate failed */
} envlog_stop;

/*! envlog_stop_name() : "unknown", "converged", "dropped", "sample-limit",
 *  "error". */
const char *envlog_stop_name(envlog_stop stop);

/* One trial of a tune in its place in the ranking. */
typedef struct envlog_rank {
    size_t trial;       /* index into the tune's trials */
    double cost_ns;     /* its score, the median (0 when it failed) */
    double percent;     /* cost / the winner's cost x 100 (0 when it failed
                           or the winner's cost is not known) */
    envlog_stop stop;
} envlog_rank;

/*! envlog_tune_rank() : ranks the trials of `t` into `out`, which holds
 *  t->n_trials entries: measured trials by cost, lowest first (ties to the
 *  lower candidate index), then failed ones in the order they ran.  The
 *  winner's cost is t->winner_ns, else its trial's median.  Each trial's
 *  stop is read from the policy parameters min_samples, max_samples,
 *  rel_tol and drop_factor as far as the tune recorded them, in the order
 *  the adaptive policy applies them (envlog-cuda(3)): dropped, converged,
 *  then the sample limit.  `*runner_up` (may be NULL) is the candidate
 *  index of the best measured trial other than the winner's, or -1.
 *  @return ENVLOG_OK; ENVLOG_INVALID_ARG when t or out is NULL. */
envlog_err envlog_tune_rank(const envlog_tune *t, envlog_rank *out, int64_t *runner_up);

/* What envlog_state_each() hands out: exactly one of tune or kernel. */
typedef struct envlog_entry {
    envlog_table table;
    const envlog_tune_entry *tune;
    const envlog_kernel_entry *kernel;
} envlog_entry;

/*! envlog_state_each() : every standing entry in canonical order (table,
 *  namespace, key, checksum), for dumps and diffs.  `fn` returns ENVLOG_OK
 *  to go on; any other code stops the walk (ENVLOG_STOPPED when it has what
 *  it wanted).  The first walk of a state over a snapshot maps the
 *  snapshot (lookups read it by pread).
 *  @return ENVLOG_OK, ENVLOG_NOMEM, ENVLOG_IO (the snapshot could not be
 *  mapped), or, when `fn` stopped it, exactly the code `fn` returned. */
envlog_err envlog_state_each(envlog_state *st,
                             envlog_err (*fn)(void *ctx, const envlog_entry *e),
                             void *ctx);

typedef struct envlog_state_stats {
    uint64_t tunes;        /* standing tune entries */
    uint64_t kernels;      /* standing kernel entries */
    uint64_t user_records; /* user records carried through */
    uint64_t records;      /* records folded */
    uint64_t sessions;     /* sessions folded */
    uint64_t damaged;      /* damaged regions and torn tails met */
    uint64_t last_change_unix_ns; /* time of the last CHANGED record */
    uint64_t snapshot_bytes;   /* the checkpoint under the sessions (0: none) */
    uint64_t snapshot_entries; /* entries it holds */
    uint64_t snapshot_sessions; /* sessions it compacts */
    /* Which snapshot generation the state stands on: 0 none, 1
     * snapshot/current, 2 snapshot/previous (current is damaged or
     * missing). */
    int snapshot_generation;
    uint64_t snapshot_damaged; /* damaged records met in the snapshots read */
    uint64_t snapshot_lost;    /* entries the snapshot used counts but could
                                  not give (known once all of it was read) */
} envlog_state_stats;

void envlog_state_stats_get(envlog_state *st, envlog_state_stats *out);

/*! envlog_state_dump() : the canonical dump of the state: one JSON object
 *  per line, entries in canonical order, then user records in total order.
 *  The same logs always give byte-identical output.
 *  @return ENVLOG_OK, ENVLOG_NOMEM, ENVLOG_IO (the snapshot could not be
 *  mapped), or what `fn` returned when that is not ENVLOG_OK. */
envlog_err envlog_state_dump(envlog_state *st, envlog_write_fn fn, void *ctx);

/* ------------------------------------------------ snapshots and bundles */

/*
 * A snapshot is one file in the log's own framing: HEADER, MANIFEST, INDEX
 * (sorted key hashes to offsets), one ENTRY per standing entry, optional
 * EVIDENCE, SEAL.  Compaction writes one as the environment's checkpoint; a
 * bundle is a snapshot for shipping, compressed as standard zstd frames.
 * See envlog(5).
 */

typedef enum envlog_evidence {
    ENVLOG_EVIDENCE_NONE = 0,    /* entries only; tune trials left out */
    ENVLOG_EVIDENCE_WINNERS = 1, /* each entry with the record that set it */
    ENVLOG_EVIDENCE_ALL = 2      /* and every record of the history */
} envlog_evidence;

typedef struct envlog_compact_report {
    uint64_t entries;          /* standing entries in the new snapshot */
    uint64_t evidence;         /* evidence records kept */
    uint64_t sessions_folded;  /* sessions whose records it holds */
    uint64_t sessions_removed; /* session directories it made redundant */
    uint64_t sessions_live;    /* kept: their writers still run */
    uint64_t sessions_damaged; /* kept: damaged or torn, for `envlog verify` */
    uint64_t bytes_before;     /* session and snapshot bytes before */
    uint64_t bytes_after;
    uint64_t sessions_kept;    /* kept: the generation before the new one,
                                  snapshot/previous, does not cover them yet */
    uint64_t sessions_stray;   /* kept: something else lies in their
                                  directory (see envlog_session_info.strays) */
    uint64_t previous_bytes;   /* snapshot/previous, the generation kept */
    uint64_t history_dropped;  /* history records the retention left out */
    uint64_t evicted;          /* entries evicted to keep under max_size */
    uint64_t evicted_bytes;
    uint64_t snapshot_bytes;   /* the new snapshot (with dry_run: would be) */
} envlog_compact_report;

/*! envlog_compact() : folds the snapshot and every session into a new
 *  snapshot (written to snapshot/current.tmp, synced, renamed over
 *  snapshot/current, directory synced), then removes the session directories
 *  it fully covers, never one whose writer still holds its lock.  A crash at
 *  any step leaves the same replayed state.
 *  @return ENVLOG_OK; ENVLOG_BUSY when another compaction runs; ENVLOG_IO,
 *  ENVLOG_NOSPACE, ENVLOG_NOMEM (the environment is then as it was). */
envlog_err envlog_compact(envlog_env *env, envlog_evidence evidence,
                          envlog_compact_report *report);

/* The compaction whose snapshot stands under an environment's sessions. */
typedef struct envlog_compaction {
    bool present;              /* false: never compacted (the rest is 0) */
    uint64_t created_unix_ns;  /* when the snapshot was written */
    char reason[160];          /* why ("envlog compact", "automatic: ...") */
    envlog_evidence evidence;  /* what of the history it kept */
    uint64_t sessions;         /* sessions it compacts */
    uint64_t entries;          /* standing entries it holds */
    uint64_t records;          /* records it holds, entries and evidence */
    uint64_t last_unix_ns;     /* the time of the newest record it holds */
} envlog_compaction;

/*! envlog_compaction_get() : the compaction of the snapshot readers of `env`
 *  use now (current, or previous when current is damaged).  Reads the
 *  snapshot's records, not the sessions.
 *  @return ENVLOG_OK; ENVLOG_IO, ENVLOG_NOMEM. */
envlog_err envlog_compaction_get(envlog_env *env, envlog_compaction *out);

/* ----------------------------------------------------------- maintenance */

/*
 * An environment maintains itself (envlog(5), CONFIG and MAINTENANCE): past
 * a number or a size of sessions not yet compacted it compacts itself when
 * a session ends, in a process of its own, without holding up the caller;
 * its snapshot keeps history by a retention policy; and it stays under a
 * size bound by evicting, least recently set first, what it must.  The
 * settings live in ENV/config, lines of `key = value`.
 */
#define ENVLOG_DEFAULT_COMPACT_SESSIONS 4
/* Past compact_sessions, an automatic compaction waits until the sessions
 * it folds hold 1/64 of the snapshot's bytes, or 16 x compact_sessions of
 * them are pending. */
#define ENVLOG_COMPACT_SHARE 64
#define ENVLOG_DEFAULT_COMPACT_BYTES ((uint64_t)64 << 20)
#define ENVLOG_DEFAULT_HISTORY_SESSIONS 1000

typedef struct envlog_config {
    bool auto_compact;          /* compact by itself (default on) */
    uint64_t compact_sessions;  /* at this many sessions not compacted (4) */
    uint64_t compact_bytes;     /* or this many bytes of their segments (64 MiB) */
    envlog_evidence evidence;   /* what a compaction keeps (winners) */
    uint64_t history_sessions;  /* history of the newest this many sessions
                                   only (1000; 0: all) */
    uint64_t history_age_ns;    /* history younger than this only (0: any) */
    uint64_t max_size;          /* bytes the environment may take (0: any) */
} envlog_config;

/*! envlog_config_defaults() : the settings of an environment without a
 *  config file. */
void envlog_config_defaults(envlog_config *c);

/*! envlog_config_read() : the settings of `env` (the defaults when it has
 *  no config file).  The file applies whole or not at all.
 *  @return ENVLOG_OK; ENVLOG_BAD_DATA naming the line and key that is
 *  wrong (an unknown key, a value of the wrong kind or out of range, a key
 *  given twice, a file over 64 KiB); ENVLOG_PERMISSION, ENVLOG_IO. */
envlog_err envlog_config_read(envlog_env *env, envlog_config *c);

/*! envlog_config_set() : sets the setting named `key` from its text
 *  `value` ("64MiB", "30d", "on"...), as a config line would.
 *  @return ENVLOG_OK, or ENVLOG_BAD_DATA (then `c` is unchanged). */
envlog_err envlog_config_set(envlog_config *c, const char *key, const char *value);

/*! envlog_config_write() : writes `c` as `env`'s config file (under a
 *  temporary name, synced, renamed).  @return ENVLOG_OK, ENVLOG_WRONG_STATE
 *  (read-only), ENVLOG_IO, ENVLOG_NOSPACE. */
envlog_err envlog_config_write(envlog_env *env, const envlog_config *c);

/*! envlog_config_text() : writes `c` as the text of a config file, in one
 *  call of `fn`.  @return ENVLOG_OK, ENVLOG_NOMEM, or what `fn` returned. */
envlog_err envlog_config_text(const envlog_config *c, envlog_write_fn fn, void *ctx);

/* Where an environment stands with its upkeep. */
typedef struct envlog_upkeep {
    envlog_config config;       /* its settings (the defaults when the
                                   file does not apply) */
    bool config_ok;             /* ENV/config applies (or is absent) */
    char config_error[160];     /* else why not */
    uint64_t sessions;          /* session directories */
    uint64_t pending_sessions;  /* of those, not compacted to their end */
    uint64_t pending_bytes;     /* and their bytes */
    uint64_t bytes;             /* the environment's files: sessions and
                                   both snapshot generations */
    uint64_t last_compaction_unix_ns; /* when the snapshot was written (0:
                                         never) */
    char last_reason[160];      /* and why ("envlog compact", "automatic:
                                   ...") */
    bool due;                   /* past a threshold: the next session end
                                   compacts (auto_compact on) */
} envlog_upkeep;

/*! envlog_upkeep_get() : where `env` stands with its upkeep (lists the
 *  session directories and reads the snapshot's head; reads no segment).
 *  @return ENVLOG_OK (a config that does not apply is in u->config_error),
 *  ENVLOG_IO, ENVLOG_NOMEM. */
envlog_err envlog_upkeep_get(envlog_env *env, envlog_upkeep *u);

/* What a compaction with a policy removes (envlog_compact_opts.on_removal);
 * its strings are valid during the call only. */
typedef enum envlog_removal_kind {
    ENVLOG_REMOVED_HISTORY = 0, /* a record of the history (retention) */
    ENVLOG_REMOVED_EVICTED = 1  /* a standing entry (max_size): a forget
                                   record says so in the environment */
} envlog_removal_kind;

typedef struct envlog_removal {
    envlog_removal_kind kind;
    envlog_stamp stamp;         /* the record removed, or that set the entry */
    uint64_t unix_ns;           /* its time */
    envlog_kind record_kind;    /* history: the kind of the record */
    envlog_table table;         /* evicted: which table, and */
    const char *ns;             /* its namespace and key (a kernel's key in */
    const char *key;            /* hexadecimal) */
    uint64_t checksum;
    uint64_t bytes;             /* bytes of the record */
} envlog_removal;

typedef struct envlog_compact_opts {
    envlog_evidence evidence;
    uint64_t history_sessions;  /* retention, as envlog_config: history of */
    uint64_t history_age_ns;    /* the newest sessions, younger than this */
    uint64_t max_size;          /* the size bound (0: none) */
    bool dry_run;               /* report what it would do; change nothing */
    const char *reason;         /* kept in the snapshot: why it ran */
    void (*on_removal)(void *ctx, const envlog_removal *r);
    void *ctx;
    /* How far it is (for a progress bar; may be NULL): `step` "reading"
     * (bytes of log folded of the total) or "writing" (bytes of the new
     * snapshot).  Called often; the caller decides what to show. */
    void (*on_progress)(void *ctx, const char *step, uint64_t done, uint64_t total);
} envlog_compact_opts;

/*! envlog_compact_opts_from() : compaction options from the settings `c`
 *  (evidence, retention and size bound). */
void envlog_compact_opts_from(envlog_compact_opts *o, const envlog_config *c);

/*! envlog_compact_x() : envlog_compact() with a policy: history beyond the
 *  retention is left out of the new snapshot (the standing entries, the
 *  record that set each and its session's record are always kept), and past
 *  max_size entries are evicted, least recently set first, each by a forget
 *  record of a session of its own ("evict"), so `why` says so.  With
 *  dry_run nothing changes and on_removal hears what would go.
 *  @return as envlog_compact(). */
envlog_err envlog_compact_x(envlog_env *env, const envlog_compact_opts *o,
                            envlog_compact_report *report);

/* What envlog_snapshot_check() found in one snapshot generation. */
typedef struct envlog_snapshot_file {
    bool present;            /* something is there under that name */
    bool readable;           /* its HEADER, MANIFEST and INDEX read */
    bool intact;             /* and every record, its SEAL and content hash */
    envlog_id128 id;         /* the snapshot's own id (when readable) */
    uint64_t bytes;
    uint64_t entries;        /* entries its MANIFEST counts */
    uint64_t entries_read;   /* of those, the ones that read whole */
    uint64_t evidence, evidence_read;
    uint64_t sessions;       /* sessions it compacts (its watermarks) */
    uint64_t damaged;        /* damaged places found */
    char problem[160];       /* the first problem, in words ("" if none) */
} envlog_snapshot_file;

typedef struct envlog_snapshot_report {
    envlog_snapshot_file current;   /* snapshot/current */
    envlog_snapshot_file previous;  /* snapshot/previous, the one before */
    /* When current is not whole but previous is: the entries of the
     * state (previous and the sessions it does not cover) that current
     * and the sessions do not give, or give otherwise. */
    bool lost_known;
    uint64_t lost;
} envlog_snapshot_report;

/*! envlog_snapshot_check() : reads both snapshot generations of `env` whole
 *  and checks every record (envlog(5), "Generations").  `on_damage` (may be
 *  NULL) is called for each damaged place, `on_lost` (may be NULL) for each
 *  entry current lost, with `ctx`.
 *  @return ENVLOG_OK (see out: damage is not an error); ENVLOG_NOMEM,
 *  ENVLOG_IO. */
envlog_err envlog_snapshot_check(envlog_env *env,
                                 void (*on_damage)(void *ctx, const envlog_damage *d,
                                                   bool torn),
                                 void (*on_lost)(void *ctx, const envlog_entry *e),
                                 void *ctx, envlog_snapshot_report *out);

/* What envlog_snapshot_repair() did. */
typedef struct envlog_snapshot_fix {
    bool repaired;           /* a file was put back or set aside */
    bool restored;           /* the generation before is current again */
    bool salvaged;           /* no whole generation: a new current was made
                                from what reads (`lost` entries lost) */
    uint64_t lost;
    char kept[64];           /* where the damaged file was set aside
                                (snapshot/current.broken, ...), or "" */
    char what[192];          /* what was done, or why nothing was */
} envlog_snapshot_fix;

/*! envlog_snapshot_repair() : puts a whole snapshot back (`envlog verify
 *  --fix`): when snapshot/current is damaged or missing and snapshot/previous
 *  is whole, current is set aside as snapshot/current.broken (never deleted)
 *  and previous becomes current again, which with the sessions it does not
 *  cover is the whole state; when no generation is whole, a new current is
 *  made from what reads and the damaged file set aside; a damaged previous
 *  is set aside as snapshot/previous.broken.  Takes the compaction lock.
 *  @return ENVLOG_OK (see out); ENVLOG_BUSY (a compaction runs),
 *  ENVLOG_WRONG_STATE (read-only), ENVLOG_IO, ENVLOG_NOSPACE, ENVLOG_NOMEM. */
envlog_err envlog_snapshot_repair(envlog_env *env, envlog_snapshot_fix *out);

/* Limits a bundle must keep to be read at all (see envlog(5)). */
#define ENVLOG_BUNDLE_MAX_SIZE ((uint64_t)1 << 30)  /* decompressed bytes */
#define ENVLOG_BUNDLE_SCHEMA 1

typedef struct envlog_bundle_opts {
    const char *name;              /* e.g. "H100 Linux" */
    const char *const *prefixes;   /* namespaces to take (whole components,
                                      as envlog_ns_under()); */
    size_t n_prefixes;             /* none: all */
    envlog_evidence evidence;
    int zstd_level;                /* 0: the default (3 in format 2, 19 in
                                      format 1) */
    /* Damage met reading the environment (the export goes on with what
     * reads, as envlog_state_open() with check_snapshot does); may be NULL. */
    void (*on_damage)(void *ctx, const envlog_damage *d, bool torn);
    void *ctx;
    /* How far it is, as envlog_compact_opts.on_progress: "reading", then
     * "compressing" (bytes of the snapshot compressed of its size). */
    void (*on_progress)(void *ctx, const char *step, uint64_t done, uint64_t total);
    /* For a bundle shipped outside the team: no session record (host, pid,
     * label) goes in, and the manifest's environments keep their OS,
     * architecture and devices but not their host or label. */
    bool anonymous;
    /* More environments whose entries go into the same bundle: all of them
     * fold as one, in one total order (duplicated keys merged by the fold
     * rules, a record several of them hold taken once), and the manifest
     * lists each (envlog_bundle_info.sources). */
    envlog_env *const *more;
    size_t n_more;
    /* The bundle format written (envlog(5), BUNDLES): 0 or 2 (the
     * default): the records laid out in columns, for readers from envlog
     * 0.2.0 on; 1: the snapshot file as it is, which every envlog reads. */
    int format;
} envlog_bundle_opts;

/* An environment a bundle was exported from. */
typedef struct envlog_bundle_source {
    char *path;               /* its directory ("" in an anonymous bundle) */
    uint64_t sessions;        /* session records taken from it */
    uint64_t records;         /* records taken from it (a record several
                                 sources hold counts for the first) */
} envlog_bundle_source;

/* A bundle's manifest and a full check of its contents. */
typedef struct envlog_bundle_info {
    uint64_t schema;
    char *name;
    char *envlog_version;
    uint64_t created_unix_ns;
    char **runtimes;          /* "name version" */
    size_t n_runtimes;
    char **environments;      /* "label host os arch [devices]" */
    size_t n_environments;
    char **namespaces;
    uint64_t *namespace_entries; /* entries per namespace */
    size_t n_namespaces;
    uint64_t sessions;        /* sessions it compacts */
    uint64_t tunes, kernels, users, evidence;
    envlog_hash128 content_hash;
    bool content_ok;          /* the content hash matches */
    uint64_t compressed_size, size;
    uint64_t bad_records;     /* records that failed their checks */
    envlog_bundle_source *sources; /* the environments it was exported from
                                      (none in a bundle of envlog 0.1.0) */
    size_t n_sources;
    int format;               /* the bundle format: 1 or 2 */
} envlog_bundle_info;

void envlog_bundle_info_free(envlog_bundle_info *info);

/*! envlog_bundle_export() : writes the environment's standing entries (those
 *  whose namespace lies under one of `opts->prefixes`, comparing whole
 *  components as envlog_ns_under() does) as a bundle to `path`: under a
 *  temporary name beside it, then renamed over it; the file is 0666 less the
 *  umask (made to leave the environment).  `info` may be NULL.
 *  @return ENVLOG_OK; ENVLOG_NOT_FOUND when the selection holds no tune and
 *  no kernel (nothing is written); ENVLOG_INVALID_ARG (no name, a prefix
 *  envlog_ns_prefix_problem() refuses); ENVLOG_IO, ENVLOG_NOSPACE,
 *  ENVLOG_NOMEM. */
envlog_err envlog_bundle_export(envlog_env *env, const envlog_bundle_opts *opts,
                                const char *path, envlog_bundle_info **info);

/*! envlog_bundle_export_to() : the same bundle handed to `fn` (with `ctx`)
 *  in one call once it is made and checked, instead of written to a path
 *  (a pipe, a socket, memory).  @return as envlog_bundle_export(), and
 *  what `fn` returned when that is not ENVLOG_OK. */
envlog_err envlog_bundle_export_to(envlog_env *env, const envlog_bundle_opts *opts,
                                   envlog_write_fn fn, void *ctx, envlog_bundle_info **info);

/*! envlog_bundle_inspect() / _memory() : reads a bundle, checks its manifest,
 *  every record's checksum and the content hash, and describes it.
 *  @return ENVLOG_OK (check info->bad_records and content_ok);
 *  ENVLOG_FORMAT (not a bundle, or an unknown schema); ENVLOG_TOO_BIG (it
 *  inflates past ENVLOG_BUNDLE_MAX_SIZE); ENVLOG_BAD_DATA (unreadable). */
envlog_err envlog_bundle_inspect(const char *path, envlog_bundle_info **info);
envlog_err envlog_bundle_inspect_memory(const void *data, size_t size,
                                        envlog_bundle_info **info);

typedef struct envlog_import_report {
    uint64_t taken;     /* entries written as IMPORTED */
    uint64_t skipped;   /* already present (a local or imported value) */
    uint64_t rejected;  /* failed a check; see first_reject */
    char first_reject[160];
    envlog_id128 session; /* the import session (when taken > 0) */
    uint64_t foreign;   /* entries under namespaces with no local entry */
    /* Entries of a runtime version (the table/runtime/version part of their
     * namespace) the environment held no entry of before the import, counted
     * whatever it holds, an empty environment too; and the first of those
     * versions, separated by ','. */
    uint64_t other_version;
    char other_versions[160];
} envlog_import_report;

/*! envlog_bundle_import() / _memory() : checks the bundle's manifest and each
 *  entry, and records the entries not yet present as IMPORTED in a new import
 *  session (nothing is written when none is taken), so the bundle may then be
 *  deleted.  Entries are rejected one by one, never all or nothing; importing
 *  the same bundle twice changes nothing.
 *  @return ENVLOG_OK; ENVLOG_FORMAT, ENVLOG_TOO_BIG, ENVLOG_BAD_DATA for a
 *  bundle that cannot be read at all (then nothing is imported); ENVLOG_IO,
 *  ENVLOG_NOSPACE, ENVLOG_NOMEM. */
envlog_err envlog_bundle_import(envlog_env *env, const char *path,
                                envlog_import_report *report);
envlog_err envlog_bundle_import_memory(envlog_env *env, const void *data,
                                       size_t size, envlog_import_report *report);

/* How far an import is (may be NULL): `step` "importing", `done` of
 * `total` entries checked and taken or skipped. */
typedef struct envlog_import_opts {
    void (*on_progress)(void *ctx, const char *step, uint64_t done, uint64_t total);
    void *ctx;
    /* How many threads the import may use, the calling one included.
     * With 2 or more, a format 2 bundle's snapshot is decoded from its
     * columns on a thread of its own while the calling thread checks and
     * records the entries decoded so far (a format 1 bundle's records
     * are read and decoded on one); with 3 or more, a format 2 bundle's
     * records are also read on one.  0: as the machine's CPUs allow (the
     * decoding with two or more, the reading with four or more); 1: the
     * calling thread alone.  The import, its report and its errors are
     * the same whatever it says. */
    int threads;
} envlog_import_opts;

/*! envlog_bundle_import_x() : envlog_bundle_import_memory() with options.
 *  @return as envlog_bundle_import(). */
envlog_err envlog_bundle_import_x(envlog_env *env, const void *data, size_t size,
                                  const envlog_import_opts *opts,
                                  envlog_import_report *report);

/*! envlog_bundle_state() / _memory() : the state a bundle holds, for
 *  comparing (diff).
 *  @return as envlog_bundle_inspect(). */
envlog_err envlog_bundle_state(const char *path, envlog_state **st);
envlog_err envlog_bundle_state_memory(const void *data, size_t size, envlog_state **st);

/* --------------------------------------------------------------- rendering */

/*! envlog_record_json() : writes `rec` as one compact JSON object (no
 *  newline): its stamp, kind, effect and every known field by name; unknown
 *  keys appear as "k<N>".  Byte strings and hashes are lower-case hex, a
 *  tune's 64-bit checksum as "0x" and 16 hex digits (a string).
 *  @return ENVLOG_OK, ENVLOG_BAD_DATA, or what `fn` returned when that is
 *  not ENVLOG_OK (nothing more is written after it). */
envlog_err envlog_record_json(const envlog_record *rec, envlog_write_fn fn,
                              void *ctx);

/*! envlog_record_text() : writes a one-line human summary of `rec`.
 *  @return as envlog_record_json(). */
envlog_err envlog_record_text(const envlog_record *rec, envlog_write_fn fn,
                              void *ctx);

/*! envlog_json_string() : writes `s` as a JSON string literal.
 *  @return ENVLOG_OK, or what `fn` returned when that is not ENVLOG_OK. */
envlog_err envlog_json_string(const char *s, envlog_write_fn fn, void *ctx);

/*! envlog_record_diag() : writes the record `rec` as stored, in diagnostic
 *  notation (as envlog_cbor_diag() does its payload, with the depth of a
 *  record stored inline in it counted from that record, as its reader
 *  counts it).  @return as envlog_cbor_diag(). */
envlog_err envlog_record_diag(const envlog_record *rec, envlog_write_fn fn, void *ctx);

/*! envlog_cbor_diag() : writes the CBOR item in `data` in diagnostic
 *  notation (RFC 8949 section 8).
 *  @return ENVLOG_OK, ENVLOG_BAD_DATA for malformed or trailing data, or
 *  what `fn` returned when that is not ENVLOG_OK. */
envlog_err envlog_cbor_diag(const void *data, size_t size, envlog_write_fn fn,
                            void *ctx);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* ENVLOG_H */
