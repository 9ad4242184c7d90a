/* SPDX-License-Identifier: MIT */
/*
 * session_int.h - what the files of the session recorder share; nothing
 * else includes it.
 *
 * From the ground up: the session itself, its fork safety and the hook
 * (session.c), the records held in memory (held.c), the session on disk
 * (sessdisk.c), the path every record takes (submit.c), and spans
 * (span.c).  Every function here expects the session's mutex held unless
 * it says otherwise.
 */
#ifndef ENVLOG_SESSION_INT_H
#define ENVLOG_SESSION_INT_H

#include "log_int.h"

#include <sys/utsname.h>

#define ENVLOG_BUDGET_DEFAULT (1u << 20)
/* A held entry: [u32 len][u64 seq][payload]; an open span's opening is
 * flagged in len. */
#define ENVLOG_HELD_HDR 12
#define ENVLOG_HELD_OPENING 0x80000000u

struct envlog_session {
    envlog_env *env;
    pthread_mutex_t mu;
    /* options, owned copies */
    envlog_level level;
    size_t budget;
    envlog_sync sync;
    uint64_t seg_size;
    char *label, *runtime, *runtime_version, *process_mode;
    char **devices;
    size_t n_devices;
    char host[256];
    struct utsname uts;
    /* identity */
    pid_t pid;
    envlog_id128 id;
    uint64_t start_mono, start_unix;
    uint64_t next_seq;
    uint64_t next_span;
    /* disk */
    bool on_disk;
    int dirfd;
    envlog_segw seg;
    bool batched;          /* segments written a batch at a time */
    uint32_t flushed_seg;  /* segments below this one are synced */
    envlog_buf scratch;
    /* held records: [u32 len][payload] from held_head to held.len */
    envlog_buf held;
    size_t held_head;
    size_t held_bytes;
    uint64_t held_count;
    uint64_t dropped;
    envlog_session_stats st;
    envlog_session_hook hook;
    void *hook_ctx;
    int auto_compact;      /* the option: -1 never, 0 per config, 1 check */
    int auto_push;         /* the option: -1 never, 0 per config, 1 every remote */
    /* the process's list of sessions, for fork handling */
    struct envlog_session *next_live, *prev_live;
};

/* ------------------------------------------------------------ session.c */

/* A fresh identity: new id, new clock origin, seq 0 reserved for the
 * session record, nothing held, nothing on disk. */
envlog_err envlog_session_identity_new(envlog_session *s);
/* The process's list of sessions, whose mutexes fork takes (not under the
 * session's mutex). */
void envlog_session_live_add(envlog_session *s);
void envlog_session_live_remove(envlog_session *s);
/* The child of a fork drops its copy of the parent's state and takes a new
 * identity; in the process that began the session, nothing. */
envlog_err envlog_session_fork_check(envlog_session *s);
/* This process's pid, kept instead of a getpid() per record and forgotten
 * in the child of every fork.  envlog_pid_watch() must have run first, and
 * never under a session's mutex. */
void envlog_pid_watch(void);
pid_t envlog_pid_now(void);
/* Hands the record a session accepted, built once as a reader of the log
 * will see it, to the session's hook and the environment's live state;
 * `payload` is what was written (NULL: nothing, at level OFF). */
void envlog_session_hand_out(envlog_session *s, envlog_kind kind, const envlog_stamp *st,
                             envlog_effect effect, const void *body,
                             const envlog_buf *payload);
/* Frees the session's memory (its disk side is closed already). */
void envlog_session_free(envlog_session *s);

/* --------------------------------------------------------------- held.c */

/* The payload length, opening flag and seq of the held entry at `at`. */
uint32_t envlog_held_len(const envlog_session *s, size_t at);
bool envlog_held_is_opening(const envlog_session *s, size_t at);
uint64_t envlog_held_seq(const envlog_session *s, size_t at);
/* Drops the oldest entry. */
void envlog_held_pop(envlog_session *s);
/* Forgets every entry (not counted as dropped). */
void envlog_held_clear(envlog_session *s);
/* Appends an entry; `flag` is 0 or ENVLOG_HELD_OPENING. */
envlog_err envlog_held_push(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq,
                            uint32_t flag);
/* Before the disk: the oldest entries go while `n` more bytes would put the
 * held ones over budget, counted as dropped. */
void envlog_held_trim(envlog_session *s, size_t n);
/* Holds an OBSERVED record before the session's first CHANGED record,
 * within the budget. */
envlog_err envlog_held_hold(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq,
                            uint32_t flag);
/* The entry of seq `seq`, or SIZE_MAX. */
size_t envlog_held_find(const envlog_session *s, uint64_t seq);
/* Puts `p` in the place of the entry at `at` (an opening), keeping its
 * seq and so its place in the order. */
envlog_err envlog_held_replace(envlog_session *s, size_t at, const uint8_t *p, size_t n);

/* ----------------------------------------------------------- sessdisk.c */

/* Writes one encoded record, rotating first when it does not fit. */
envlog_err envlog_session_put(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq);
/* On disk: writes the held entries from the oldest up to the first open
 * span's opening, and that opening too when `all` or when over budget. */
envlog_err envlog_session_write_held(envlog_session *s, bool all);
/* The first CHANGED record: directory, lock, segment 0, session record and
 * the held records; on failure nothing of it is left and the held records
 * stay held. */
envlog_err envlog_session_go_disk(envlog_session *s);
/* Writes what is held, seals the segment and lets go of the directory. */
envlog_err envlog_session_close_disk(envlog_session *s);

/* ------------------------------------------------------------- submit.c */

/* The effect a caller passes for a built-in kind: the one envlog_effect_of()
 * gives is taken (a user record's is its caller's). */
#define ENVLOG_BUILT_IN ((envlog_effect)-1)
/* The one path every record takes (the session's mutex not held).  A
 * span's record (`sp`) keeps the stamp it took when it opened and the place
 * of its opening among the held records, or, when its opening was written
 * already, is a record of its own, stamped now. */
envlog_err envlog_session_submit(envlog_session *s, envlog_kind kind, const void *body,
                                 envlog_effect effect, const envlog_span *sp,
                                 envlog_stamp *stamp);

#endif /* ENVLOG_SESSION_INT_H */
