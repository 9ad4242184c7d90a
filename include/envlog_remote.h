/* SPDX-License-Identifier: MIT */
/*
 * envlog_remote.h - one environment for a fleet of machines: remotes, and
 * pushing and pulling sealed sessions through a Redis server.
 *
 * A remote is a Redis server named in the environment's config
 * (`remote.NAME.url = redis://[user[:password]@]host:port[/db]`).  Sealed
 * sessions are immutable and their ids never collide, so environments on
 * many machines merge as the union of their sessions: a push uploads the
 * sessions the remote lacks, a pull downloads those the environment lacks.
 * Objects on the remote are content-addressed and checked after download;
 * a session becomes visible on the remote only once all of it is there.
 * The layout is in envlog(5), REMOTES.
 *
 * Automatic sharing needs no call here: the config's auto_pull and
 * auto_push, or a program's ENVLOG_OPEN_PULL (envlog_env_open) and session
 * option auto_push (envlog_session_opts), pull at open, bounded by the
 * remote's timeout, and push at session end, in a detached process.  A
 * remote that is down or slow never fails or holds up recording: it is
 * said once on stderr, and the next push catches up.
 *
 * hiredis (libhiredis.so.0.14, or $ENVLOG_HIREDIS) is loaded at run time:
 * without it every call here returns ENVLOG_UNAVAILABLE saying why, and
 * every local feature works as before.
 */
#ifndef ENVLOG_REMOTE_H
#define ENVLOG_REMOTE_H

#include "envlog.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

/* One remote as the config names it.  `url` never holds a password: one
 * given in the config is shown as "****". */
typedef struct envlog_remote_info {
    char name[33];
    char url[600];            /* redis://user:****@host:port/db */
    char prefix[65];          /* the prefix of its keys ("envlog") */
    char password_env[65];    /* the variable the password comes from, or "" */
    char ns[256];             /* the namespace filter of automatic sharing */
    bool auto_pull;           /* pull at envlog_env_open() (without
                                 it, only ENVLOG_OPEN_PULL does) */
    bool auto_push;           /* push when a session ends (without it,
                                 only a session's auto_push 1 does) */
    bool push_snapshot;       /* and the snapshot with it (envlog(5)) */
    uint64_t timeout_ns;      /* bound of automatic sharing (2 s) */
    char last_auto[200];      /* the last automatic push or pull, in words */
} envlog_remote_info;

/*! envlog_remote_available() : whether remotes can be used here.
 *  @return ENVLOG_OK, or ENVLOG_UNAVAILABLE with envlog_errmsg() saying why
 *  (no hiredis library, or a build without its headers). */
envlog_err envlog_remote_available(void);

/*! envlog_remote_add() : adds remote `name` (1 to 32 of A-Z a-z 0-9 _ -)
 *  with `url` to `env`'s config; `password_env` (may be NULL) names the
 *  variable the password comes from at connect time.
 *  @return ENVLOG_OK; ENVLOG_INVALID_ARG (a bad name or URL, a name
 *  already there); ENVLOG_BAD_DATA (the config does not apply); ENVLOG_IO. */
envlog_err envlog_remote_add(envlog_env *env, const char *name, const char *url,
                             const char *password_env);

/*! envlog_remote_set() : sets one setting of remote `name`: url,
 *  password_env, prefix, namespace, auto_pull, auto_push (on, off) or
 *  timeout (an age: 2s).  @return as envlog_remote_add(); ENVLOG_NOT_FOUND
 *  for an unknown remote. */
envlog_err envlog_remote_set(envlog_env *env, const char *name, const char *key,
                             const char *value);

/*! envlog_remote_remove() : removes remote `name` from the config (the
 *  remote itself is not touched).  @return ENVLOG_OK, ENVLOG_NOT_FOUND,
 *  ENVLOG_BAD_DATA, ENVLOG_IO. */
envlog_err envlog_remote_remove(envlog_env *env, const char *name);

/*! envlog_remote_list() : the remotes of `env`'s config, in the order of
 *  the file.  Free *out with envlog_remote_list_free().
 *  @return ENVLOG_OK, ENVLOG_BAD_DATA (a remote line is wrong: which),
 *  ENVLOG_NOMEM, ENVLOG_IO. */
envlog_err envlog_remote_list(envlog_env *env, envlog_remote_info **out, size_t *n);
void envlog_remote_list_free(envlog_remote_info *v);

/* What a push or pull moved, session by session (on_session). */
typedef enum envlog_remote_what {
    ENVLOG_REMOTE_SENT = 0,      /* pushed: now visible on the remote */
    ENVLOG_REMOTE_RECEIVED = 1,  /* pulled: checked and now a local session */
    ENVLOG_REMOTE_PRESENT = 2,   /* already on the other side */
    ENVLOG_REMOTE_FILTERED = 3,  /* outside the namespace filter */
    ENVLOG_REMOTE_REFUSED = 4,   /* failed a check: not imported (why says) */
    ENVLOG_REMOTE_SKIPPED = 5    /* not pushed: live, unsealed, torn, damaged */
} envlog_remote_what;

typedef struct envlog_remote_item {
    envlog_remote_what what;
    envlog_id128 session;
    uint64_t bytes;            /* the session's segment bytes */
    const char *why;           /* REFUSED and SKIPPED: why */
} envlog_remote_item;

typedef struct envlog_remote_opts {
    const char *remote;            /* NULL: the only remote (or "origin") */
    const char *const *prefixes;   /* only sessions with records under one */
    size_t n_prefixes;             /* of these namespaces; none: all */
    bool dry_run;                  /* say what would move; move nothing */
    uint64_t timeout_ns;           /* per network call (0: 10 s) */
    uint64_t deadline_ns;          /* for the whole call (0: none): past it
                                      the rest waits for the next one */
    bool snapshot;                 /* push: the snapshot too, retiring from
                                      the remote the sessions it holds */
    bool no_snapshot;              /* pull: never take the remote's snapshot */
    void (*on_session)(void *ctx, const envlog_remote_item *it);
    void (*on_progress)(void *ctx, uint64_t done, uint64_t total);
    void *ctx;
} envlog_remote_opts;

typedef struct envlog_remote_report {
    uint64_t sessions;         /* sent or received */
    uint64_t bytes;            /* their segment bytes */
    uint64_t present;          /* already on the other side */
    uint64_t filtered;
    uint64_t refused;          /* failed a check (pull) */
    uint64_t skipped;          /* not sealed (push) */
    uint64_t remote_sessions;  /* sessions the remote lists */
    bool deadline_hit;         /* stopped at the deadline */
    char first_problem[240];   /* the first refusal, in words */
    bool snapshot_moved;       /* the snapshot was pushed, or taken (pull) */
    uint64_t snapshot_bytes;
    uint64_t retired;          /* push: sessions the remote's index gave up,
                                  its new snapshot holding them */
    char snapshot_note[240];   /* what became of the snapshot, in words
                                  ("" when nothing was to be done) */
} envlog_remote_report;

/*! envlog_remote_push() : uploads every sealed session of `env` the remote
 *  lacks (within the namespace filter): its segments and a manifest as
 *  content-addressed objects, then, in one atomic step that checks every
 *  object is there, its entry in the remote's session index.  Pushing twice
 *  changes nothing; two pushes at once are safe.
 *  @return ENVLOG_OK; ENVLOG_UNAVAILABLE (no hiredis); ENVLOG_NOT_FOUND
 *  (no such remote); ENVLOG_IO (unreachable, the connection lost);
 *  ENVLOG_PERMISSION (authentication refused); ENVLOG_NOSPACE (the server
 *  is full: maxmemory); ENVLOG_BAD_DATA (the remote holds something that is
 *  not envlog's).  On an error the session being pushed is not visible and
 *  the environment is as it was. */
envlog_err envlog_remote_push(envlog_env *env, const envlog_remote_opts *opts,
                              envlog_remote_report *report);

/*! envlog_remote_pull() : downloads every session the remote lists that
 *  `env` lacks (within the namespace filter), checks its manifest's hash,
 *  each segment's hash and size, and reads it whole as a sealed session
 *  before it becomes a session directory (renamed into place, so never
 *  half there).  A session that fails a check is refused alone (report:
 *  refused, first_problem).  @return as envlog_remote_push(); ENVLOG_OK
 *  also when sessions were refused. */
envlog_err envlog_remote_pull(envlog_env *env, const envlog_remote_opts *opts,
                              envlog_remote_report *report);

/*! envlog_remote_enable_auto() : automatic sharing (the config's
 *  auto_pull and auto_push, ENVLOG_OPEN_PULL, the session option
 *  auto_push) is on by itself in the shared library; a program linked with
 *  the static library calls this once (or links with
 *  -Wl,-u,envlog_remote_enable_auto), else those do nothing. */
void envlog_remote_enable_auto(void);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* ENVLOG_REMOTE_H */
