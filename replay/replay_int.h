/* SPDX-License-Identifier: MIT */
/*
 * replay_int.h - the replay module: the total order over all sessions, the
 * fold into the cache state, lookups and the canonical dump.  replay reads
 * the log through log's reader; log never calls replay except through the
 * environment's state hook.
 */
#ifndef ENVLOG_REPLAY_INT_H
#define ENVLOG_REPLAY_INT_H

#include "log_int.h"

typedef struct envlog_snap envlog_snap;

/* Folds one record into `st` (the state's lock must be held for writing).
 * `unix_ns` is the record's time on the common axis. */
envlog_err envlog_state_fold(envlog_state *st, const envlog_record *rec,
                             uint64_t unix_ns);

/* Takes the bytes a reader is done with, for the state's entries to point
 * into (an envlog_keep_fn; ctx is the state). */
void envlog_state_keep(void *st, void *p, size_t n, bool mapped);

/* A standing entry (or user record) with the record that set it, for
 * writing snapshots. */
typedef struct envlog_state_item {
    int table;             /* envlog_table or ENVLOG_TABLE_USER */
    int origin, rule;
    envlog_stamp stamp;
    uint64_t unix_ns;
    const char *ns;
    uint64_t key_hash;
    envlog_bytes payload;
} envlog_state_item;

/* Every standing entry in canonical order, then the user records; `fn`
 * returns as envlog_state_each()'s does, and a code other than ENVLOG_OK
 * stops the walk and is what it returns. */
envlog_err envlog_state_items(envlog_state *st,
                              envlog_err (*fn)(void *ctx, const envlog_state_item *it),
                              void *ctx);
/* The same, the entries in no order but the table's when not `canonical`
 * (a caller that sorts them its own way). */
envlog_err envlog_state_items_x(envlog_state *st, bool canonical,
                                envlog_err (*fn)(void *ctx, const envlog_state_item *it),
                                void *ctx);

/* envlog_state_open() standing on snapshot/`base` ("current" or
 * "previous", read whole and used as far as it reads: ENVLOG_CORRUPT when
 * not even its HEADER, MANIFEST and INDEX do), or, with `base` NULL, on
 * the generation readers pick. */
envlog_err envlog_state_open_on(envlog_env *env, const envlog_replay_opts *opts,
                                const char *base, envlog_state **out);

/* Whether `st` holds a live entry for a tune key (ns, key, checksum) or,
 * with `table` ENVLOG_TABLE_KERNEL, a kernel key (ns, kernel_key) into
 * *held, with no view made and no message for a miss: what the public
 * lookups do without their NOT_FOUND.  ENVLOG_OK, or what asking the
 * snapshot for the key met (*held false). */
envlog_err envlog_state_holds(envlog_state *st, envlog_table table, const char *ns,
                              const char *key, uint64_t checksum,
                              const envlog_hash128 *kernel_key, bool *held);

/* Makes room in `st` for `more` keys about to be folded into it (an
 * import's entries), so that its table grows once, not at every doubling.
 * ENVLOG_NOMEM leaves it as it was. */
envlog_err envlog_state_expect(envlog_state *st, size_t more);

/* A state with nothing folded yet. */
envlog_err envlog_state_new(envlog_state **st);
/* A state over a snapshot held in memory (a bundle); `owned` (may be NULL)
 * is freed with the state.  The state takes `snap` and `owned` whatever
 * happens: on failure both are freed. */
envlog_err envlog_state_from_snap(envlog_snap *snap, void *owned, envlog_state **st);

/* Removes the directory of session `id`, which this process wrote and
 * ended and whose records must not stand (an import that failed half way):
 * renamed to <id>.removing first, so no reader lists it half deleted (a
 * crash leaves the .removing for the next compaction to clear); the
 * environment's live state, which took its records as they were made, is
 * then folded again without them (envlog_env_state_refold()). */
envlog_err envlog_session_discard(envlog_env *env, const envlog_id128 *id);

/* Folds the environment's live state (if it has one) again from what is
 * on disk, after records it took were taken back: the new fold replaces
 * its contents under its lock, the old contents kept until the environment
 * closes (lookups gave out their strings).  A record another thread of
 * this process makes while the new fold reads may be missed by it until
 * the environment is opened again.  On failure the state is left as it
 * was. */
envlog_err envlog_env_state_refold(envlog_env *env);

/* ------------------------------------------------- building snapshots */

/* Where a snapshot file goes: `begin` hears its size first (before any
 * byte; may be NULL), `write` then takes it in order. */
typedef struct envlog_sink {
    envlog_err (*begin)(void *ctx, uint64_t size);
    envlog_err (*write)(void *ctx, const uint8_t *p, size_t n);
    void *ctx;
} envlog_sink;

typedef struct envlog_build_session {
    envlog_id128 id;
    uint64_t last_seq;
    bool complete;
} envlog_build_session;

typedef struct envlog_build_opts {
    envlog_evidence evidence;
    const char *name;              /* manifest name ("" for a snapshot) */
    const char *const *prefixes;   /* namespaces to take; none: all */
    size_t n_prefixes;
    const char *content;           /* "snapshot" or "bundle" */
    bool anonymous;                /* no session records, no hosts or labels
                                      in the manifest (envlog_bundle_opts) */
    bool no_index;                 /* an empty INDEX (bundles: readers
                                      rebuild it, see envlog(5)) */
    bool no_digest;                /* r->digest not wanted (bundles) */
    bool hold_encodings;           /* the writer may hold each record's
                                      encoding (ENVLOG_SNAPW_HOLD bytes) */
    /* More environments folded with the one built from, in one total order
     * (a bundle of several); with list_sources the MANIFEST names them all
     * (key 19). */
    envlog_env *const *more;
    size_t n_more;
    bool list_sources;
    /* The base: with `strict` (compaction) snapshot/current must be whole
     * (ENVLOG_CORRUPT otherwise: nothing is built on a snapshot that does
     * not read completely); without, the one readers use, its damage
     * reported through on_damage. */
    bool strict;
    void (*on_damage)(void *ctx, const envlog_damage *d, bool torn);
    void *ctx;
    /* "reading": bytes of log folded (may be NULL; the same ctx). */
    void (*on_progress)(void *ctx, const char *step, uint64_t done, uint64_t total);
    /* Sessions known sealed, with their last seq: a watermark that
     * reaches it is complete. */
    const envlog_build_session *sealed;
    size_t n_sealed;
    /* Where the file goes, piece by piece (r->file stays empty); NULL: into
     * r->file. */
    const envlog_sink *sink;
    /* Retention: history of the newest history_sessions sessions (0: all)
     * younger than history_age_ns (0: any); sessions whose directories are
     * there (present, sorted) keep their watermarks whatever it says. */
    uint64_t history_sessions, history_age_ns;
    const envlog_id128 *present;
    size_t n_present;
    /* The size bound: entries are evicted until the new snapshot takes at
     * most half of it (two generations are kept). */
    uint64_t max_size;
    bool dry_run;            /* evict nothing: only say what would go */
    void (*on_removal)(void *ctx, const envlog_removal *r);
    void *ctx_removal;
    const char *reason;      /* the MANIFEST's compacted_by */
} envlog_build_opts;

typedef struct envlog_build_result {
    envlog_buf file;               /* the snapshot, framed */
    uint64_t entries, evidence;
    envlog_build_session *sessions;  /* the watermarks written */
    size_t n_sessions;
    envlog_hash128 digest;         /* envlog_state_digest() of the fold */
    int base_gen;                  /* the generation it was built on */
    envlog_id128 base_id;          /* and that snapshot's id */
    envlog_build_session *base_wms; /* and its watermarks */
    size_t n_base_wms;
    uint64_t history_dropped;      /* history records the retention left out */
    uint64_t evicted, evicted_bytes;
    bool damage;                   /* damage was met (and reported) */
    uint64_t *ns_entries;          /* tune and kernel entries under each of
                                      the MANIFEST's namespaces, in its order */
    size_t n_ns_entries;
} envlog_build_result;

/* Folds the environment (its snapshot and sessions) and lays out a new
 * snapshot of its standing entries. */
envlog_err envlog_snapshot_build(envlog_env *env, const envlog_build_opts *o,
                                 envlog_build_result *r);

/* ------------------------------------------------ bundles (bundle.c) */

#define ENVLOG_BUNDLE_NAME_MAX 256   /* bytes of a bundle's or candidate's name */

/* A bundle decompressed and opened as a snapshot. */
typedef struct envlog_bundle_opened {
    uint8_t *raw;    /* decompressed: the snapshot */
    size_t n;
    envlog_snap *snap;
    int format;      /* the bundle's format: 1 or 2 */
    bool sparse;     /* raw is envlog_reserve()d, holding the head and the
                        tail only (an export's read-back) */
} envlog_bundle_opened;

/* Decompresses `data` (sizes checked before memory is taken) and opens it;
 * `check_all` reads every record.  Close with envlog_bundle_close(). */
envlog_err envlog_bundle_open_mem(const void *data, size_t size, bool check_all,
                                  envlog_bundle_opened *o);
/* envlog_bundle_open_mem() for a reader that walks every record next: a
 * format 1 bundle with the full check, a format 2 one (whose whole snapshot
 * its hash has checked) without, the walk then checking each record and,
 * at its end, the SEAL and the content hash (envlog_snap_content_ok()). */
envlog_err envlog_bundle_open_to_walk(const void *data, size_t size, envlog_bundle_opened *o);
void envlog_bundle_close(envlog_bundle_opened *o);
/* Whether `data` begins as a format 2 bundle. */
bool envlog_bundle_is_format2(const void *data, size_t size);
/* A format 2 bundle's column image (its mark checked, its frames
 * decompressed into *img, free with envlog_free()). */
envlog_err envlog_bundle_image(const void *data, size_t size, uint8_t **img, size_t *n);

/* ---------------------------------------------- fed bundles (bundle_fed.c) */

/* A bundle opened to be walked once (as envlog_bundle_open_to_walk()),
 * a format 2 one's snapshot decoded from its columns on a thread of its
 * own while the walk reads what is decoded (envlog_snap_load_fed()). */
typedef struct envlog_bundle_fed envlog_bundle_fed;
typedef struct envlog_bundle_walk {
    envlog_bundle_opened o;  /* o.snap the snapshot to walk */
    envlog_bundle_fed *fed;  /* NULL: opened whole, as open_to_walk does */
} envlog_bundle_walk;
/* `fed`: decode on a thread of its own (a format 2 bundle; format 1 and a
 * thread that fails to start are opened whole). */
envlog_err envlog_bundle_walk_open(const void *data, size_t size, bool fed,
                                   envlog_bundle_walk *w);
/* The decode's verdict, after the walk: waits for it (its thread ended
 * when this returns), then checks what the walk could not (the SEAL).  @return ENVLOG_OK, or what envlog_cols_decode()
 * or the opening of the whole would have refused the bundle for: that
 * verdict comes before any of the walk's. */
envlog_err envlog_bundle_walk_settle(envlog_bundle_walk *w);
/* Waits for the decode (if any) and frees everything. */
void envlog_bundle_walk_close(envlog_bundle_walk *w);
/* The bytes of the regular file `path` (ENVLOG_FORMAT for anything else). */
envlog_err envlog_bundle_read_path(const char *path, envlog_buf *b);

/* ------------------------------------------------ config (replay/config.c) */

/* "64MiB", "10G" (binary units) and "30d", "12h" (s, m, h, d, w; no unit:
 * seconds): ENVLOG_INVALID_ARG otherwise. */
envlog_err envlog_parse_size(const char *s, uint64_t *out);
envlog_err envlog_parse_age(const char *s, uint64_t *ns);
/* Parses the text of a config file into `out` (whole or not at all). */
envlog_err envlog_config_parse(const char *text, size_t n, envlog_config *out);
/* The lines of a config file one by one (comments and blanks skipped):
 * `fn` gets each key and value with "config line N: " for its messages;
 * a line without `=` is ENVLOG_BAD_DATA.  The first error stops. */
typedef envlog_err (*envlog_config_line_fn)(void *ctx, const char *key, const char *value,
                                            const char *where);
envlog_err envlog_config_lines(const char *text, size_t n, envlog_config_line_fn fn,
                               void *ctx);
/* Keys under "remote." belong to the remote module (remote/): the parse
 * calls this check on them when that module set it (else takes them as
 * they are), and envlog_config_write() keeps them. */
#define ENVLOG_CONFIG_REMOTE "remote."
extern envlog_err (*envlog_config_remote_check)(const char *key, const char *value,
                                                const char *where);
/* Runs fn(env's path, arg) in a detached process of its own (forked
 * twice: it belongs to no one and keeps none of the caller's descriptors)
 * and returns at once; a failed fork runs nothing. */
void envlog_run_detached(envlog_env *env, void (*fn)(const char *path, void *arg), void *arg);
/* Called when a session that wrote ends, in the process that began it,
 * before upkeep, with its id and its auto_push option (set by remote/: the
 * automatic push). */
extern void (*envlog_session_end_hook)(envlog_env *env, const envlog_id128 *session,
                                       int auto_push);
/* envlog_session_end() short of upkeep (sessend.c): closes `s` (NULL is
 * fine) and calls envlog_session_end_hook when it wrote in the process that
 * began it.  *want is then the upkeep the session asks for (its
 * auto_compact), -1 for none.  @return envlog_session_close()'s code. */
envlog_err envlog_session_finish(envlog_session *s, int *want);
/* Called by compaction with the sealed sessions it may retire: sets
 * keep[i] for those that must stay (set by remote/: sessions automatic push
 * has not delivered yet). */
extern void (*envlog_retire_hook)(envlog_env *env, const envlog_session_info *in, size_t n,
                                  bool *keep);
/* Writes `c` followed by `extra` (the remote lines) as the config file. */
envlog_err envlog_config_write_x(envlog_env *env, const envlog_config *c, const char *extra,
                                 size_t n_extra);

/* Takes the compaction lock (ENV/LOCK, a regular file made if missing):
 * ENVLOG_BUSY when another compaction holds it. */
envlog_err envlog_compact_lock(envlog_env *env, int *lockfd);
void envlog_compact_unlock(int lockfd);
/* Puts snapshot/current.tmp (synced) in place as current, keeping the
 * current before it as previous (an empty generation when there was none),
 * and syncs the directory.  The caller holds the compaction lock. */
envlog_err envlog_snap_rotate(int snapfd);
/* Reads snapshot/current.tmp back whole and folds it: ENVLOG_CORRUPT
 * unless it reads completely and its envlog_state_digest() is `want`. */
envlog_err envlog_snapshot_read_back(envlog_env *env, const envlog_hash128 *want);

/* ------------------------------------------------ eviction (evict.c) */

typedef struct envlog_evict_result {
    uint64_t evicted, bytes;
    bool wrote;              /* an evict session was recorded: */
    envlog_id128 session;    /* its id and last seq */
    uint64_t last_seq;
} envlog_evict_result;

/* The bytes the standing entries and user records of `st` would take in a
 * snapshot (their records, and a little for each). */
uint64_t envlog_state_bytes(envlog_state *st);
/* Evicts, least recently set first, the entries of `st` (which keeps
 * payloads) until they and `fixed` bytes fit in `budget`: each forgotten by
 * a record of an "evict" session of `env` (not with o->dry_run) and folded
 * into `st`; o->on_removal hears each. */
envlog_err envlog_evict(envlog_env *env, envlog_state *st, uint64_t budget, uint64_t fixed,
                        const envlog_build_opts *o, envlog_evict_result *r);

/* A digest of what a state answers: its canonical dump and, for every
 * standing entry, the rule that made it stand (what `why` says). */
envlog_err envlog_state_digest(envlog_state *st, envlog_hash128 *out);
void envlog_build_result_free(envlog_build_result *r);
/* The manifest record as stored. */
envlog_bytes envlog_snap_manifest_raw(const envlog_snap *s);

/* Write-locks / unlocks a state. */
void envlog_state_wrlock(envlog_state *st);
void envlog_state_unlock(envlog_state *st);

/* Compares two replay positions: (unix_ns, session id, seq). */
int envlog_order_cmp(uint64_t a_ns, const envlog_id128 *a_id, uint64_t a_seq,
                     uint64_t b_ns, const envlog_id128 *b_id, uint64_t b_seq);

/* The hash that keys entries in the state and in a snapshot's INDEX:
 * h = XXH3-64(namespace and its NUL, seed = table);
 * h = XXH3-64(key bytes, seed = h); h = XXH3-64(checksum as u64 LE, seed = h).
 * Kernel keys are their 16 bytes with checksum 0. */
uint64_t envlog_entry_key_hash(envlog_table table, const char *ns, const void *key,
                               size_t key_len, uint64_t checksum);
/* envlog_entry_key_hash() of a namespace given as `ns_len` bytes. */
uint64_t envlog_entry_key_hash_n(envlog_table table, const char *ns, size_t ns_len,
                                 const void *key, size_t key_len, uint64_t checksum);

/* ------------------------------------------------------------ snapshots */

enum {
    ENVLOG_KIND_MANIFEST = 32,
    ENVLOG_KIND_ENTRY = 33,
    ENVLOG_KIND_EVIDENCE = 34,
    ENVLOG_KIND_INDEX = 35
};
#define ENVLOG_TABLE_USER 2

typedef struct envlog_snap_env {
    const char *label, *host, *os, *arch;
    const char *const *devices;
    size_t n_devices;
} envlog_snap_env;

/* An environment a bundle was exported from (MANIFEST key 19). */
typedef struct envlog_snap_source {
    const char *path;     /* its directory ("" in an anonymous bundle) */
    uint64_t sessions;    /* session records read from it */
    uint64_t records;     /* records read from it, in all */
} envlog_snap_source;

typedef struct envlog_snap_wm {
    envlog_id128 session;
    uint64_t last_seq;    /* every record up to here is in the snapshot */
    bool complete;        /* and the session was sealed there: none of its
                             records lies past last_seq (readers need not
                             open its directory) */
} envlog_snap_wm;

typedef struct envlog_snap_manifest {
    uint64_t kind;        /* ENVLOG_KIND_MANIFEST */
    uint64_t schema;      /* ENVLOG_BUNDLE_SCHEMA */
    const char *name;
    const char *envlog_version;
    uint64_t created_unix_ns;
    const char *const *runtimes;
    size_t n_runtimes;
    const envlog_snap_env *envs;
    size_t n_envs;
    const envlog_snap_wm *wms;
    size_t n_wms;
    uint64_t tunes, kernels, users, evidence;
    envlog_hash128 content_hash;
    int evidence_level;   /* envlog_evidence */
    const char *const *namespaces;
    size_t n_namespaces;
    const char *compacted_by;  /* why it was written (absent in a bundle) */
    const envlog_snap_source *sources; /* a bundle's: where it was read */
    size_t n_sources;
} envlog_snap_manifest;

/* An ENTRY or EVIDENCE record: a record of the history, with where it came
 * from. */
typedef struct envlog_snap_item {
    uint64_t kind;        /* ENVLOG_KIND_ENTRY or ENVLOG_KIND_EVIDENCE */
    int table;            /* entries: envlog_table or ENVLOG_TABLE_USER */
    int origin;           /* entries: envlog_origin */
    envlog_stamp stamp;   /* the record's own stamp */
    uint64_t unix_ns;     /* its place on the common time axis */
    envlog_bytes record;  /* the record's CBOR map */
    int rule;             /* entries: the envlog_rule that made it stand */
} envlog_snap_item;

/* The INDEX record. */
typedef struct envlog_snap_index {
    uint64_t kind;
    uint64_t count;
    envlog_bytes pairs;  /* count x (u64 BE hash, u64 BE offset), sorted */
} envlog_snap_index;

/* The schemas of the snapshot records (snapfmt.c). */
extern const envlog_schema envlog_snap_manifest_schema;
extern const envlog_schema envlog_snap_item_schema;
extern const envlog_schema envlog_snap_index_schema;
void envlog_put_be64(uint8_t *p, uint64_t v);
static inline uint64_t envlog_get_be64(const uint8_t *p) { return envlog_get_be(p, 8); }
/* INDEX pairs compare as 16-byte strings: by key hash, then offset. */
int envlog_snap_pair_cmp(const void *a, const void *b);
/* Sorts `n` INDEX pairs at `pairs` so (by their hashes first, in linear
 * time: envlog_sort_keyed()). */
void envlog_snap_pairs_sort(uint8_t *pairs, size_t n);

/* Builds a snapshot: items are added in the total order, then the file is
 * laid out and handed to a sink piece by piece, so memory stays within a
 * few records beyond what the items reference. */
typedef struct envlog_snapw_rec {
    envlog_snap_item item;   /* item.record: by reference, or a copy in mem */
    const uint8_t *enc;      /* its encoding, held in mem (NULL: not held) */
    uint32_t len;            /* its encoded ENTRY or EVIDENCE record */
    bool indexed;
    uint64_t hash;
} envlog_snapw_rec;

typedef struct envlog_snapw {
    envlog_snapw_rec *v;
    size_t n, cap;
    envlog_arena mem;        /* the records of items added with a copy, and
                                the encodings held */
    size_t held;             /* bytes of encodings held */
    size_t hold;             /* bytes of encodings it may hold (0: none) */
    envlog_buf scratch;      /* one record encoded or framed */
} envlog_snapw;
#define ENVLOG_SNAPW_HOLD (256u << 20)

/* Makes room for `more` items at once (a writer told how many it will
 * take moves its table of them no more). */
envlog_err envlog_snapw_expect(envlog_snapw *w, size_t more);
/* Adds an item, copying its record. */
envlog_err envlog_snapw_add(envlog_snapw *w, const envlog_snap_item *it, bool indexed,
                            uint64_t key_hash);
/* Adds an item whose record stays where it is until the file is written. */
envlog_err envlog_snapw_add_ref(envlog_snapw *w, const envlog_snap_item *it, bool indexed,
                                uint64_t key_hash);
/* Lays out the whole file and hands it to `sink`; fills m->content_hash. */
envlog_err envlog_snapw_finish_to(envlog_snapw *w, envlog_snap_manifest *m,
                                  const envlog_id128 *id, const char *content,
                                  const envlog_sink *sink);
/* The same into `out`. */
envlog_err envlog_snapw_finish(envlog_snapw *w, envlog_snap_manifest *m,
                               const envlog_id128 *id, const char *content,
                               envlog_buf *out);
void envlog_snapw_free(envlog_snapw *w);

/* Parses a snapshot held in [p, p+n) (which must outlive it).  With
 * `check_all` every record is read and checked now (bad ones counted);
 * otherwise only HEADER, MANIFEST and INDEX are. */
envlog_err envlog_snap_load(const uint8_t *p, size_t n, bool check_all,
                            envlog_snap **out);
/* The same for a file mapped at [p, p+n) and open as `fd` (or -1), which
 * the snapshot takes (closed by envlog_snap_free(), at once with
 * `check_all`): lookups read by pread, walks the mapping. */
envlog_err envlog_snap_load_fd(const uint8_t *p, size_t n, int fd, bool check_all,
                               envlog_snap **out);
/* A snapshot read while it is being written, in order, into memory that
 * holds all of it at a fixed address: `wait` blocks until more than `have`
 * of its bytes are written (all of them when `all`), says how many are
 * (*now, always at the end of a record) and whether that is all (*done),
 * and returns what failed the writing (then nothing more comes). */
typedef struct envlog_snap_feed {
    envlog_err (*wait)(void *ctx, size_t have, bool all, size_t *now, bool *done);
    void *ctx;
} envlog_snap_feed;
/* envlog_snap_load() (without `check_all`) of a snapshot `feed` writes at
 * `p`: opened once its first bytes are written, each walk then reading a
 * record once it is written whole.  Nothing is read past what is written:
 * where a part would be refused or found damaged, the whole is waited for
 * and read instead, so every verdict is the one on the whole.  The SEAL at
 * the end is checked by envlog_snap_fed_end(), after the writing. */
envlog_err envlog_snap_load_fed(const uint8_t *p, const envlog_snap_feed *feed,
                                envlog_snap **out);
/* Waits for the rest of a fed snapshot and checks what its opening left
 * for its end (a no-op for one not fed).  @return the writing's failure, or
 * ENVLOG_BAD_DATA when no SEAL ends it. */
envlog_err envlog_snap_fed_end(envlog_snap *s);
void envlog_snap_free(envlog_snap *s);
const envlog_snap_manifest *envlog_snap_manifest_get(const envlog_snap *s);
/* The snapshot's size in bytes. */
uint64_t envlog_snap_size(const envlog_snap *s);
/* Damaged regions and records that fail their checks, found by walks
 * (the full check is one); each place counted once. */
uint64_t envlog_snap_bad_records(const envlog_snap *s);
/* Damaged entries lookups met (a lookup of such a key misses). */
uint64_t envlog_snap_lookup_damage(const envlog_snap *s);
/* The first damage found by anyone, or NULL: session holds the snapshot's
 * id, offset and bytes the place, reason what was wrong. */
const envlog_damage *envlog_snap_first_damage(const envlog_snap *s);
bool envlog_snap_content_ok(const envlog_snap *s);
envlog_id128 envlog_snap_id(const envlog_snap *s);

/* What the last walk of every record found (the full check is one). */
typedef struct envlog_snap_counts {
    uint64_t tunes, kernels, users, evidence; /* records read whole */
    uint64_t lost;      /* entries the MANIFEST counts that were not */
    bool sealed;        /* a SEAL with the right count and chain ends it */
    bool content_ok;    /* the content hash matches */
    bool intact;        /* all of the above, nothing damaged */
} envlog_snap_counts;
/* False when no walk has read everything yet. */
bool envlog_snap_read_counts(const envlog_snap *s, envlog_snap_counts *c);
/* The watermark of `session`, or false; *complete (may be NULL): the
 * session was sealed at it, so nothing of it lies past the watermark. */
bool envlog_snap_watermark(envlog_snap *s, const envlog_id128 *session, uint64_t *last_seq);
bool envlog_snap_watermark_x(envlog_snap *s, const envlog_id128 *session,
                             uint64_t *last_seq, bool *complete);

/* Finds the ENTRY of a key through the INDEX, decoding only candidates with
 * that hash.  `rec` and `item` are valid until the next call on `s`.
 * @return ENVLOG_OK, ENVLOG_NOT_FOUND, or ENVLOG_CORRUPT. */
envlog_err envlog_snap_find(envlog_snap *s, envlog_table table, const char *ns,
                            const char *key, const envlog_hash128 *kkey,
                            uint64_t checksum, envlog_snap_item *item,
                            envlog_record *rec);

/* ENTRY and EVIDENCE records one by one in file order (the total order),
 * from the start after envlog_snap_rewind().  Records that fail their
 * checks are skipped and counted.  `it` and `rec` are valid until the next
 * call on `s`.  @return ENVLOG_OK, ENVLOG_END, or ENVLOG_NOMEM (then the
 * record was not skipped: calling again after freeing memory retries it
 * only after envlog_snap_rewind()). */
void envlog_snap_rewind(envlog_snap *s);
/* The same for a walk whose records go to the fold, or are counted: each
 * record decodes as envlog_event_decode_fold() gives it, its detail skipped
 * by length (the same records stand, envlog(5)); full readers (why,
 * import) rewind with envlog_snap_rewind(). */
void envlog_snap_rewind_fold(envlog_snap *s);
envlog_err envlog_snap_next(envlog_snap *s, envlog_snap_item *it, envlog_record *rec);
/* The same, the strings of `it` and `rec` in `a` (reset first), and with
 * `copy` (may be NULL) a record gathered from its fragments copied into
 * it: what it hands out then stays valid until `a` or `copy` is used
 * again, whatever else reads `s` (snap_ahead.c). */
envlog_err envlog_snap_next_in(envlog_snap *s, envlog_arena *a, envlog_buf *copy,
                               envlog_snap_item *it, envlog_record *rec);

/* A walk of a snapshot read ahead of its taker on a thread of its own
 * (snap_ahead.c): envlog_snap_next() on that thread, its records handed
 * out in the same order, each valid until the next call.  `threads` as
 * envlog_import_opts says: 0 a thread when the machine has four CPUs or
 * more, 1 none (the taker reads itself), more: a thread.  The snapshot,
 * rewound before, belongs to the walk until envlog_snap_ahead_stop(),
 * which ends it wherever it is; read its counts (damage, content hash)
 * after that. */
typedef struct envlog_snap_ahead envlog_snap_ahead;
envlog_err envlog_snap_ahead_start(envlog_snap *s, int threads, envlog_snap_ahead **out);
/* As envlog_snap_next(): ENVLOG_OK, ENVLOG_END, or the walk's failure. */
envlog_err envlog_snap_ahead_next(envlog_snap_ahead *a, const envlog_snap_item **it,
                                  const envlog_record **rec);
void envlog_snap_ahead_stop(envlog_snap_ahead *a);

/* The damaged places walks found, the first ENVLOG_SNAP_DAMAGE_KEPT of them
 * (envlog_snap_bad_records() counts them all). */
#define ENVLOG_SNAP_DAMAGE_KEPT 16
size_t envlog_snap_damages(const envlog_snap *s, const envlog_damage **v);

/* Hands the mapping [map, map+len) the snapshot was loaded from to it:
 * envlog_snap_unmap() unmaps it. */
void envlog_snap_own_map(envlog_snap *s, void *map, size_t len);
/* A snapshot opened for lookups (by pread, from its descriptor) mapped,
 * once, for the walks that read it whole: ENVLOG_OK when it is. */
envlog_err envlog_snap_mapped(envlog_snap *s);
void envlog_snap_unmap(envlog_snap *s);
/* `p` when [p, p+n) lies in the bytes the snapshot was read from (which
 * stay until it is unmapped), else NULL (always for a NULL snapshot). */
const uint8_t *envlog_snap_holds(const envlog_snap *s, const void *p, size_t n);

/* -------------------------------------- generations (replay/generations.c)
 *
 * snapshot/current is the newest generation; snapshot/previous, the one it
 * was built on, stays with every session directory it does not cover, so
 * losing current loses nothing (envlog(5), "Generations"). */

enum {
    ENVLOG_GEN_NONE = 0,
    ENVLOG_GEN_CURRENT = 1,
    ENVLOG_GEN_PREVIOUS = 2
};

/* Maps snapshot/`name` (current or previous) and loads it, reading every
 * record with `check_all`.  @return ENVLOG_OK and the snapshot (NULL when
 * there is none); ENVLOG_PERMISSION (a symbolic link), ENVLOG_CORRUPT (not a
 * regular file, or its HEADER, MANIFEST or INDEX damaged), ENVLOG_NOMEM,
 * ENVLOG_IO. */
envlog_err envlog_snap_map_file(envlog_env *env, const char *name, bool check_all,
                                envlog_snap **out);
/* envlog_snap_map_file(env, "current", false, out). */
envlog_err envlog_snap_map(envlog_env *env, envlog_snap **out);

/* The snapshot readers stand on (envlog(5), "Using a snapshot"): current
 * when it reads (and, with `check_all`, is whole), else previous when it
 * does, else what is left of current, else none; every damage met is
 * reported through `on_damage` (may be NULL).  *gen says which
 * (ENVLOG_GEN_*).  Errors: ENVLOG_NOMEM, ENVLOG_IO. */
envlog_err envlog_snap_pick(envlog_env *env, bool check_all,
                            void (*on_damage)(void *ctx, const envlog_damage *d, bool torn),
                            void *ctx, envlog_snap **out, int *gen);

/* What the merge hands out: a record; when it comes from a snapshot the
 * ENTRY or EVIDENCE record around it (else NULL); the index of the
 * environment it was read from; in fold mode its text fields as slices
 * (envlog_event_decode_slices); and whether its bytes stay where they are
 * (kept: in a segment that goes to the keeper, or in the mapping of a
 * snapshot the caller holds), or where a kept segment holds them in
 * fragments (loc).  A code other than ENVLOG_OK stops the merge, which
 * returns it. */
typedef struct envlog_merge_rec {
    envlog_replay_rec r;
    const envlog_snap_item *item;
    size_t source;
    const envlog_text *slices;
    const uint8_t *kept; /* where the payload's bytes stay (NULL: nowhere) */
    const envlog_frag_loc *loc;
    uint64_t hinted;     /* what the hint gave for it (has_hinted) */
    bool has_hinted;
} envlog_merge_rec;
typedef envlog_err (*envlog_merge_fn)(void *ctx, const envlog_merge_rec *m);
/* A record the merge will hand out later, told as soon as it is read (its
 * payload stays where it is until handed out; its fields may be handed
 * out from a copy, envlog_ahead_hold): a fold asks for the memory it will
 * touch then, while the records before it are folded.  A value it gives
 * (true, *value) comes back with the record (hinted): what it worked out
 * to ask is not worked out again. */
typedef bool (*envlog_merge_hint_fn)(void *ctx, const envlog_merge_rec *m, uint64_t *value);

/* Folds the record the merge handed out into `st` (write lock held): its
 * bytes referred to where they stay (kept, loc), else copied. */
envlog_err envlog_state_fold_merged(envlog_state *st, const envlog_merge_rec *m);
/* Asks for the memory the fold of `m` will touch, ahead of it (an
 * envlog_merge_hint_fn's work), and gives the hash of the key it sets (true)
 * for the fold of `m` to take. */
bool envlog_state_fold_hint(const envlog_state *st, const envlog_merge_rec *m, uint64_t *hash);

/* Who takes the segments' bytes the merge's readers are done with, so the
 * records handed out stay where they are (envlog_reader_set_keep). */
typedef struct envlog_keeper {
    envlog_keep_fn fn;
    void *ctx;
    /* The taker reads a record the keeper's segments hold in fragments
     * from its loc, not from its payload: of such a compile record only the
     * part holding its text fields needs to come along (the payload then
     * ends there; its size is the loc's). */
    bool by_loc;
} envlog_keeper;

/* An environment of a merge, with the snapshot its sessions are read past
 * (NULL: none). */
typedef struct envlog_merge_src {
    envlog_env *env;
    envlog_snap *snap;
} envlog_merge_src;

/* ------------------------------------ reading ahead (replay/ahead.c) */

/* One thing read from a session: a record (code ENVLOG_OK), a damaged
 * region or torn tail (ENVLOG_CORRUPT, ENVLOG_TRUNCATED: dmg), its end
 * (ENVLOG_END) or an error. */
typedef struct envlog_ahead_item {
    envlog_err code;
    const envlog_record *r;       /* the record: rec, or the reader's own */
    const envlog_text *sl;        /* fold mode: its text fields (slices, or
                                     the reader's own) */
    envlog_record rec;            /* read ahead: the record and its text */
    envlog_text slices[ENVLOG_FIELDS_MAX]; /* fields, standing on their own */
    const uint8_t *kept;          /* where the keeper has rec's bytes */
    bool has_loc;                 /* else a kept segment has them at loc */
    envlog_frag_loc loc;
    envlog_damage dmg;
    envlog_buf copy;              /* rec's bytes when nothing else holds them */
    envlog_arena arena;           /* rec's strings */
} envlog_ahead_item;

typedef struct envlog_ahead envlog_ahead;

/* The item session `i` handed out last, made to stand through that
 * session's next reads until its next hold, or NULL when it cannot (worker
 * threads read ahead, the merge is not a fold, a kind decoded whole, a
 * record put together from fragments): the fold of a record read alone
 * can then wait until its session's next record is read, whose key's
 * memory the fold's hint asks for meanwhile. */
const envlog_ahead_item *envlog_ahead_hold(envlog_ahead *a, size_t i);
/* How many threads read ahead for `sessions` sessions when `asked` (the
 * replay option `threads`: 0 as the machine allows, 1 none, N: N - 1). */
size_t envlog_ahead_threads(size_t sessions, int asked);
/* Starts reading the sessions of `readers` (which it owns from now on,
 * whatever it returns), on `threads` threads (0: each record is read
 * when asked for), as the fold reads them with `fold`; the segments read
 * go to `keep` (may be NULL). */
envlog_err envlog_ahead_start(envlog_reader *const *readers, size_t n, size_t threads,
                              bool fold, const envlog_keeper *keep, envlog_ahead **out);
/* The next item of session `i`, waiting for it; valid until the next call
 * for `i`. */
envlog_err envlog_ahead_next(envlog_ahead *a, size_t i, const envlog_ahead_item **out);
/* Stops the threads and closes the readers.  Accepts NULL. */
void envlog_ahead_stop(envlog_ahead *a);

/* Every record of the environments of `src` in one total order: each
 * one's sessions past its snapshot's watermarks, and, when `with_snap`, the
 * snapshots' own records merged in; with `fold`, records are stored only as
 * far as the fold needs (all of them checked).  A record that more than one
 * environment holds (the same session and seq, a session shared through a
 * remote) is handed out once, from the first.  `keep` (may be NULL) takes
 * the segments read. */
envlog_err envlog_replay_merge(const envlog_merge_src *src, size_t n_src,
                               const envlog_replay_opts *opts, bool with_snap, bool fold,
                               const envlog_keeper *keep, envlog_merge_fn fn,
                               envlog_merge_hint_fn hint, void *ctx);

/* envlog_state_fold() of a record the merge took from a snapshot: an ENTRY
 * (`item`) that finds its key empty stands by the rule it was written
 * with. */
envlog_err envlog_state_fold_item(envlog_state *st, const envlog_record *rec,
                                  uint64_t unix_ns, const envlog_snap_item *item);

#endif /* ENVLOG_REPLAY_INT_H */
