/* SPDX-License-Identifier: MIT */
/*
 * log_int.h - the log module: block framing, segment writer and reader, the
 * environment directory and the session recorder.
 *
 * The framing follows LevelDB's log format: 32 KiB blocks, 7-byte fragment
 * headers (checksum u32, length u16, type u8), zero-padded block tails.  The
 * same framing carries session segments, snapshots and bundles, so one reader
 * serves them all.  log knows files; it does not know what a tune means.
 */
#ifndef ENVLOG_LOG_INT_H
#define ENVLOG_LOG_INT_H

#include "core_int.h"

#include <pthread.h>

#define ENVLOG_BLOCK 32768u
#define ENVLOG_FRAG_HDR 7u
#define ENVLOG_SEGMENT_DEFAULT (16u << 20)
#define ENVLOG_SEGMENT_MAX (1u << 30)
#define ENVLOG_RECORD_MAX (256u << 20)
#define ENVLOG_PREALLOC_STEP (1u << 20)
/* A batched segment writer's batch (a multiple of ENVLOG_BLOCK). */
#define ENVLOG_SEGW_BATCH (256u << 10)
#define ENVLOG_MAGIC "envlog-log"
/* The log format written (segments, snapshots and bundles: the HEADER's
 * version, envlog(5) FORMAT VERSIONS); readers take every version from
 * ENVLOG_LOG_VERSION_MIN on. */
#define ENVLOG_LOG_VERSION 2
#define ENVLOG_LOG_VERSION_MIN 1

enum { ENVLOG_FRAG_FULL = 1, ENVLOG_FRAG_FIRST = 2, ENVLOG_FRAG_MIDDLE = 3,
       ENVLOG_FRAG_LAST = 4 };

/* The HEADER record: the first record of every segment. */
typedef struct envlog_seg_header {
    uint64_t kind;          /* ENVLOG_KIND_HEADER */
    const char *magic;      /* ENVLOG_MAGIC */
    uint64_t version;       /* ENVLOG_LOG_VERSION when written */
    envlog_id128 id;        /* session (or snapshot) id */
    uint64_t segment;       /* segment seq */
    uint64_t first_seq;     /* seq of the first event record */
    uint64_t prev_chain;    /* chain value at the end of the previous segment */
    const char *content;    /* "session", "snapshot" or "bundle" */
} envlog_seg_header;

/* The SEAL record: the last record of a cleanly closed segment. */
typedef struct envlog_seg_seal {
    uint64_t kind;          /* ENVLOG_KIND_SEAL */
    uint64_t count;         /* event records in the segment */
    uint64_t last_seq;
    uint64_t chain;
} envlog_seg_seal;

extern const envlog_schema envlog_seg_header_schema;
extern const envlog_schema envlog_seg_seal_schema;

/* The checksum seed of a segment: XXH3-64 of its id and segment seq. */
uint64_t envlog_seg_seed(const envlog_id128 *id, uint32_t segment);
/* Bytes a record of `n` bytes takes when framed starting at `pos`. */
uint64_t envlog_framed_size(uint64_t pos, uint64_t n);
/* The chain value after a fragment with checksum `csum`. */
uint64_t envlog_chain_next(uint64_t chain, uint32_t csum);
/* The kind of an encoded record (its first key), or -1. */
int envlog_payload_kind(const uint8_t *p, size_t n);
/* The same, each head read in turn (what the usual shape's shortcut must
 * agree with: check_log). */
int envlog_payload_kind_by_heads(const uint8_t *p, size_t n);

/* The chain value after a record of `n` bytes framed at `pos`, without
 * framing it (what envlog_frame_write() would leave in *chain). */
uint64_t envlog_frame_chain(uint64_t pos, uint64_t seed, const uint8_t *p, size_t n,
                           uint64_t chain);
/* Frames `n` bytes at `*pos` into `dst` (zeroed beyond what was written
 * before); updates *pos and *chain (when chain is not NULL). */
void envlog_frame_write(uint8_t *dst, uint64_t *pos, uint64_t seed,
                        const uint8_t *p, size_t n, uint64_t *chain);

/* --------------------------------------------------------- segment writer */

typedef struct envlog_segw {
    int fd;
    uint8_t *map;
    uint64_t map_len;     /* mapped (rotation size, or more for a huge record) */
    uint64_t alloc_len;   /* preallocated so far (the file's size) */
    uint64_t wb_len;      /* writeback started up to here */
    uint64_t unmapped;    /* map's first bytes unmapped, written back (sync=close) */
    uint64_t pos;         /* next byte to write */
    uint64_t seed;
    uint64_t chain;
    uint32_t segment;
    uint64_t first_seq;
    uint64_t count;
    uint64_t last_seq;
    envlog_sync sync;
    /* Batched (no map): the records framed into `stage` and written a
     * batch at a time; the stage holds the file's bytes from stage_off (a
     * multiple of ENVLOG_BLOCK), those before `written` are in the file. */
    uint8_t *stage;
    size_t stage_cap;
    uint64_t stage_off;
    uint64_t written;
    bool failed;          /* a batch's write failed: every later call fails */
    char name[40];
} envlog_segw;

/* Creates segment `segment` in `dirfd`, writes its HEADER and (unless the
 * policy is NONE) syncs the file and the directory.  Mapped, each record is
 * in the page cache when its append returns; `batched`, records are framed
 * into memory of the writer's and written ENVLOG_SEGW_BATCH bytes at a time
 * (and at every sync and at the seal): for a writer whose records count
 * only once it ends (an import), the file's fresh pages are then never
 * faulted in one by one. */
envlog_err envlog_segw_create(envlog_segw *w, int dirfd, const envlog_id128 *id,
                              uint32_t segment, uint64_t first_seq,
                              uint64_t prev_chain, uint64_t size,
                              const char *content, envlog_sync sync, bool batched);
/* True when a record of `n` bytes and the SEAL after it fit. */
bool envlog_segw_fits(const envlog_segw *w, size_t n);
/* Appends an event record.  @return ENVLOG_OK, ENVLOG_NOSPACE or ENVLOG_IO;
 * on failure nothing was written (batched: a failed write of a batch takes
 * the records of that batch with it, as a failed sync at the policy
 * record leaves its record written, and every later call fails: the
 * segment is to be given up). */
envlog_err envlog_segw_append(envlog_segw *w, const uint8_t *p, size_t n,
                              uint64_t seq);
envlog_err envlog_segw_sync(envlog_segw *w);
/* Writes the SEAL, syncs (unless NONE), trims the preallocation, closes. */
envlog_err envlog_segw_seal(envlog_segw *w);
/* Unmaps what of the segment is still mapped, by `unmap` (munmap itself in
 * a forked child, the I/O table's otherwise). */
void envlog_segw_unmap(envlog_segw *w, int (*unmap)(void *, size_t));
/* Forgets the segment without writing (a forked child's copy). */
void envlog_segw_abandon(envlog_segw *w);
/* The mapping size for a segment that must hold a record of `n` bytes. */
uint64_t envlog_segw_size_for(uint64_t rotation, size_t n);

/* --------------------------------------------------------- frame reader */

typedef enum envlog_fr_status {
    ENVLOG_FR_RECORD,  /* a whole record */
    ENVLOG_FR_END,     /* clean end: end of file or zero fill */
    ENVLOG_FR_BAD,     /* damage skipped: [bad_off, bad_off + bad_len) */
    ENVLOG_FR_TAIL,    /* nothing valid after bad_off: a torn or damaged end */
    ENVLOG_FR_NOMEM    /* no memory to reassemble the record at rec_off
                          (nothing skipped: pos is back at its start) */
} envlog_fr_status;

typedef struct envlog_frame_reader {
    const uint8_t *p;
    size_t n;
    uint64_t seed;
    size_t pos;
    envlog_buf rec;         /* reassembly of fragmented records */
    uint64_t chain;         /* over every fragment read */
    uint64_t chain_start;   /* chain before the last record's fragments */
    /* out */
    const uint8_t *out;
    size_t out_len;
    size_t rec_off;         /* offset of the record's first fragment */
    size_t bad_off, bad_len;
    size_t bad_at;          /* the first bad fragment (bad_off: its record) */
    bool bad_confined;      /* damage as an append cut short leaves it: a bad
                               fragment after good ones of its record, and
                               only zeros after its block (see envlog(5),
                               torn tails) */
    char why[64];
} envlog_frame_reader;

void envlog_frame_reader_init(envlog_frame_reader *fr, const uint8_t *p,
                              size_t n, uint64_t seed, uint64_t chain);
envlog_fr_status envlog_frame_reader_next(envlog_frame_reader *fr);
void envlog_frame_reader_free(envlog_frame_reader *fr);
/* True when [p, p+n) ends in a whole, well-checksummed SEAL: the file was
 * closed cleanly, so damage inside it is corruption, never a torn tail (a
 * sealed file is trimmed to end at its SEAL: a FULL fragment of at most 64
 * bytes, or a FIRST and a LAST that meet at the start of its last block). */
bool envlog_frames_end_in_seal(const uint8_t *p, size_t n, uint64_t seed);
/* The same from the last `tail_len` bytes of a file of `n` bytes. */
#define ENVLOG_SEAL_TAIL (64 + ENVLOG_FRAG_HDR)
bool envlog_tail_is_seal(const uint8_t *tail, size_t tail_len, uint64_t n, uint64_t seed);
/* The fragment at `at` when it is whole and passes its checksum: its type
 * (ENVLOG_FRAG_*) and payload length; 0 otherwise. */
int envlog_frag_check(const envlog_frame_reader *fr, size_t at, size_t *len);
/* The shape of the fragment at `at` of [p, p+n), its checksum not checked:
 * its type and payload length when its header names a type and it lies
 * whole inside its block and the file; 0 otherwise.  For readers that
 * check checksums elsewhere or later (a snapshot's index in place). */
int envlog_frag_peek(const uint8_t *p, size_t n, size_t at, size_t *len);
/* The same from the fragment's header alone (its ENVLOG_FRAG_HDR bytes at
 * `h`), for a reader that reads headers by pread: `at` is the header's
 * offset in a file of `n` bytes. */
int envlog_frag_head(const uint8_t *h, size_t at, size_t n, size_t *len);
/* `chain` advanced over the checksums of the fragments from `from` (a
 * fragment's start) whose headers lie before `to`, walking block by block
 * as envlog_frag_peek() reads them, checksums not checked; the walk stops
 * at a header that is not one. */
uint64_t envlog_frags_chain(const uint8_t *p, size_t n, size_t from, size_t to,
                            uint64_t chain);

/* --------------------------------------------------------- environment */

/* The environment's live state hook (set by replay, see log/session.c):
 * each record a session accepts, built once (its payload the bytes
 * written, or none at level OFF or for a span's closing folded into its
 * opening), at `unix_ns` on the common time axis (the session's start plus
 * its offset, as a reader places it). */
typedef void (*envlog_session_hook)(void *ctx, const envlog_record *rec, uint64_t unix_ns);

struct envlog_env {
    char *path;
    int dirfd;
    int sessions_fd;
    bool sessions_unread;  /* nobody has listed through sessions_fd yet */
    /* The reader lock held shared through dirfd (envlog_env_lock): by how
     * many of this handle's readers, taken by the first, released by the
     * last. */
    pthread_mutex_t lock_mu;
    unsigned readers;
    bool readonly;
    bool no_upkeep;        /* ENVLOG_OPEN_NO_UPKEEP */
    int format;            /* what its FORMAT marker says (1 or 2) */
    /* The live state replay keeps for this handle: folded once, then fed by
     * every session's records through state_hook. */
    pthread_mutex_t state_mu;
    void *state;
    envlog_session_hook state_hook;
    void (*state_free)(void *state);
};

/* Marks the environment ENVLOG_FORMAT_VERSION before anything of that
 * format is written into it (a session directory, a snapshot): a format 1
 * marker is replaced (atomically), so a reader of format 1 only refuses
 * the environment instead of taking format 2 files for damage.  Nothing
 * is done when the marker says so already. */
envlog_err envlog_env_mark_format(envlog_env *env);

/* Called at the end of every envlog_env_open() that may write and keeps
 * upkeep on, or that was given ENVLOG_OPEN_PULL (`asked`) (set by remote/:
 * the automatic pull). */
extern void (*envlog_env_open_hook)(envlog_env *env, bool asked);

/* Opens `name` under `dirfd` as a directory: ENVLOG_PERMISSION for a
 * symbolic link, ENVLOG_BAD_DATA for anything else that is not a
 * directory, ENVLOG_NOT_FOUND. */
envlog_err envlog_open_dir(int dirfd, const char *name, int *fd);
/* Syncs a directory (unless policy is NONE). */
envlog_err envlog_dir_sync(int fd, const char *what);
/* ------------------------------------------------ files (log/files.c) */

/* Reads exactly `n` bytes at `off` through the I/O table: 0, or -1 with
 * errno (EIO when the file ends first). */
int envlog_pread_full(int fd, void *buf, size_t n, off_t off);

/* Opens `name` under `dirfd` with `flags` (and `mode`, for O_CREAT) only
 * when it is a regular file: never through a symbolic link (then
 * ENVLOG_PERMISSION), never blocking on a FIFO or opening it as data (any
 * other type is ENVLOG_BAD_DATA, "... is a FIFO, not a regular file");
 * ENVLOG_NOT_FOUND when absent.  `st` (may be NULL) gets its stat. */
envlog_err envlog_open_regular(int dirfd, const char *name, int flags, mode_t mode,
                               int *fd, struct stat *st);
/* "a FIFO", "a directory", ... for a st_mode. */
const char *envlog_file_type_name(mode_t mode);
/* Reads a whole regular file under `dirfd` of at most `max` bytes. */
envlog_err envlog_read_file(int dirfd, const char *name, uint64_t max,
                            envlog_buf *out);
/* The same for a file of a few bytes, in one read and no stat: what is not
 * a regular file is found by what the read gets (an fstat then says what
 * it is).  out->p has room for a NUL after the bytes. */
envlog_err envlog_read_small(int dirfd, const char *name, size_t max, envlog_buf *out);
/* A new file written piece by piece: made with O_EXCL (mode 0600), written
 * in order, then synced and kept, or removed (envlog_out_close(o, false),
 * or any failure): it is either whole or absent. */
typedef struct envlog_out {
    int dirfd;
    int fd;
    uint64_t off;
    char name[4200];
} envlog_out;
envlog_err envlog_out_open(envlog_out *o, int dirfd, const char *name);
/* The same with the file's `mode` (less the umask): 0666 for a file made to
 * leave the environment (a bundle), where files inside are 0600. */
envlog_err envlog_out_open_mode(envlog_out *o, int dirfd, const char *name, unsigned mode);
envlog_err envlog_out_write(envlog_out *o, const void *p, size_t n);
/* Writes all `n` bytes at `off` of `fd` (short writes and EINTR retried);
 * a failure names `name`. */
envlog_err envlog_pwrite_all(int fd, const void *p, size_t n, uint64_t off, const char *name);
envlog_err envlog_out_close(envlog_out *o, bool keep);
/* Writes `n` bytes to a new file `name` under `dirfd` (AT_FDCWD: a path),
 * syncs it and closes it; on any failure the file is removed again, so it
 * is either whole or absent. */
envlog_err envlog_write_new_file(int dirfd, const char *name, const void *p, size_t n);
envlog_err envlog_write_new_file_mode(int dirfd, const char *name, const void *p, size_t n,
                                      unsigned mode);
/* A temporary name for `base` no other process or call makes:
 * base.tmp.PID.RANDOM. */
envlog_err envlog_tmp_name(char *out, size_t size, const char *base);
/* True when `name` under `dirfd` is a temporary name of `base` whose maker
 * is gone: a regular file, its process no longer running here, and older
 * than a minute. */
bool envlog_tmp_is_stale(int dirfd, const char *name, const char *base);
/* Removes the stale temporary files of `base` under `dirfd`. */
void envlog_tmp_clean(int dirfd, const char *base);
/* The environment's reader lock: a flock of the environment directory.
 * Whoever reads many sessions and the snapshot together (a replay, a
 * listing) holds it shared from before it maps the snapshot to its end,
 * so no session directory is removed under it; compaction holds it
 * exclusive only while it removes sessions it covers (and gives up after a
 * while rather than wait on a long reader).  Writers never take it.
 * Shared, it is held through the handle's own descriptor of the directory
 * (taken by its first reader, released by its last: *fd is
 * ENVLOG_LOCK_SHARED); exclusive, through a descriptor of its own (*fd),
 * which is never the handle's, so that no exclusive lock ever turns into
 * a shared one.  @return ENVLOG_OK and *fd; ENVLOG_BUSY when `exclusive`
 * and readers stayed; ENVLOG_IO. */
#define ENVLOG_LOCK_SHARED (-2)
envlog_err envlog_env_lock(envlog_env *env, bool exclusive, int *fd);
/* Lets go of what envlog_env_lock() gave (nothing when `fd` is -1). */
void envlog_env_unlock(envlog_env *env, int fd);
/* flock(fd, op) without waiting on a holder for longer than about `ms`
 * milliseconds: a reader that looks whether a session is live holds its
 * lock for an instant, and an instant must not fail a writer.
 * @return 0, or -1 with errno (EWOULDBLOCK: still held). */
int envlog_flock_within(int fd, int op, unsigned ms);
/* True while a writer holds the lock of session directory `fd` (it holds
 * the lock shared for an instant to see). */
bool envlog_session_dir_live(int fd);

/* The ids of the session directories of `env` (in no order); free *ids with
 * envlog_free().  Each call reads the directory through its own descriptor,
 * so callers on many threads do not disturb each other. */
envlog_err envlog_session_ids(envlog_env *env, envlog_id128 **ids, size_t *n);

/* The segments of a session directory, sorted by segment seq. */
typedef struct envlog_seg_name {
    uint32_t segment;
    uint64_t first_seq;
    char name[40];
} envlog_seg_name;
envlog_err envlog_list_segments(int dirfd, envlog_seg_name **out, size_t *n);
void envlog_seg_name_format(char out[40], uint32_t segment, uint64_t first_seq);

/* --------------------------------------------------------- session hook */

/* Called under the session's lock after each record is accepted (also at
 * level OFF, so caches still work), with the caller's body struct: the
 * replay module keeps a state current this way without log knowing it. */
void envlog_session_set_hook(envlog_session *s, envlog_session_hook fn, void *ctx);
/* Writes `s`'s segments a batch at a time (envlog_segw_create(), batched)
 * from its next segment on: for a session whose records count only once
 * it ends, which a killed process or a failed write leaves to be given up
 * whole (an import).  envlog_session_flush() and the end write every batch
 * as they sync. */
void envlog_session_batch(envlog_session *s);
/* Makes `r` decode only what the fold needs (envlog_event_decode_slices:
 * the text fields of tunes and compiles as slices, envlog_reader_slices). */
void envlog_reader_set_fold(envlog_reader *r, bool fold);
/* The slices of the last record's text fields, in fold mode
 * (envlog_event_decode_slices). */
const envlog_text *envlog_reader_slices(const envlog_reader *r);

/* Takes bytes a reader is done with: a segment's mapping (`mapped`: free
 * it with munmap(p, n)) or the memory a segment was read into (free it
 * with envlog_free(p)). */
typedef void (*envlog_keep_fn)(void *ctx, void *p, size_t n, bool mapped);
/* From now on `r` hands the segments it read to `keep` instead of freeing
 * them, so records it handed out stay where they are for as long as the
 * keeper wants (envlog_reader_kept). */
void envlog_reader_set_keep(envlog_reader *r, envlog_keep_fn keep, void *ctx);
/* Where the last record's payload stays in a segment's bytes that go to
 * the keeper; NULL when it does not (a record reassembled from several
 * fragments).  Its bytes there are the payload's, at another address
 * unless the reader reads in place. */
const uint8_t *envlog_reader_kept(const envlog_reader *r);
/* Whether `r` reads a segment no writer changes from its mapping (`in_place`:
 * a record stays valid after the next is read, as long as the keeper holds
 * its segment) or from a copy it reuses (the default: a record is valid
 * until the next is read, and the keeper's copy of it is where
 * envlog_reader_kept says).  Set before the first read. */
void envlog_reader_set_in_place(envlog_reader *r, bool in_place);
/* How much of a segment a reader that does not read in place reads at a
 * time (rounded down to whole blocks, one at least): 1 MiB, which the
 * caches keep; tests set one block, so that records and damage lie across
 * windows. */
extern size_t envlog_reader_window;
/* At most `bytes` of a segment read at a time by `r` (never more than
 * envlog_reader_window; whole blocks, one at least): a merge of many
 * sessions holds a window of each.  Set before the first read. */
void envlog_reader_set_window(envlog_reader *r, size_t bytes);
/* Holds the record `r` returned last: its payload's bytes stay where they
 * are through any number of reads after it, until the next hold (a
 * reader reading windows reads the next ones into a second window; a
 * mapping a keeper takes, or a segment read whole, stays anyway).  False
 * when they cannot (a record put together from fragments, one with no
 * bytes, one read in place with no keeper to take its mapping).  Only
 * the bytes: the record's fields and text slices are the reader's, and
 * change with the next read. */
bool envlog_reader_hold(envlog_reader *r);

/* Where a record that spans several fragments of a segment lies, to be put
 * together again from the segment's bytes when it is asked for. */
typedef struct envlog_frag_loc {
    const uint8_t *seg;      /* the segment's bytes */
    size_t seg_len;
    uint64_t seed;           /* its checksum seed */
    uint64_t offset;         /* the record's first fragment */
    size_t size;             /* its payload's bytes */
} envlog_frag_loc;
/* The location of the last record when its payload was put together from
 * fragments of a segment whose bytes go to the keeper: true and *loc. */
bool envlog_reader_loc(const envlog_reader *r, envlog_frag_loc *loc);

/* Ends `s` (what envlog_session_end() does before the remotes' push and
 * the environment's upkeep: replay/sessend.c, replay/maintain.c). */
envlog_err envlog_session_close(envlog_session *s);
/* The session's auto_compact and auto_push options, and the process that
 * began it. */
int envlog_session_auto_compact(const envlog_session *s);
int envlog_session_auto_push(const envlog_session *s);
pid_t envlog_session_pid(const envlog_session *s);

/* The environment a session records into. */
envlog_env *envlog_session_env(const envlog_session *s);

/* envlog_record_tune() (`kind` ENVLOG_KIND_TUNE, `body` an envlog_tune) or
 * envlog_record_compile() (ENVLOG_KIND_COMPILE, an envlog_compile) of an
 * entry a bundle import takes, written with imported set: the public calls
 * refuse that flag, so a bundle import is the only writer of imported
 * records. */
envlog_err envlog_record_imported(envlog_session *s, envlog_kind kind, const void *body,
                                  envlog_stamp *stamp);

#endif /* ENVLOG_LOG_INT_H */
