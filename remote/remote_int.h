/* SPDX-License-Identifier: MIT */
/*
 * remote_int.h - the remote module: what it keeps in the environment, remotes
 * in the config, the hiredis glue, the objects a remote holds, push, pull
 * and automatic sharing.
 *
 * Its files call one way, in the order of the sections below: ledger.c and
 * objects.c call no other file of it; remotecfg.c and install.c call
 * ledger.c, redis.c remotecfg.c; index.c (what push, pull and the remote's
 * snapshot share) calls those; snapshots.c calls index.c, pull.c and push.c
 * call both; and auto.c, automatic sharing, is on top.  None calls back up.
 *
 * It sits above replay (it reads sessions, snapshots and the config) and
 * hooks into what lies below only through the pointers log and replay call
 * (envlog_env_open_hook, envlog_session_end_hook, envlog_retire_hook,
 * envlog_config_remote_check), which auto.c sets.
 */
#ifndef ENVLOG_REMOTE_INT_H
#define ENVLOG_REMOTE_INT_H

#include "envlog_remote.h"
#include "replay_int.h"

/* Limits a remote must keep (envlog(5), REMOTES). */
#define ENVLOG_REMOTE_MANIFEST_MAX ((size_t)1 << 20)   /* a manifest's bytes */
#define ENVLOG_REMOTE_SEGMENTS_MAX 4096                /* segments a session */
#define ENVLOG_REMOTE_OBJECT_MAX ((uint64_t)512 << 20) /* an object's bytes */
#define ENVLOG_REMOTE_SESSION_MAX ((uint64_t)4 << 30)  /* a session's bytes */
#define ENVLOG_REMOTE_INDEX_MAX ((size_t)256 << 20)    /* the index reply */
#define ENVLOG_REMOTE_DEFAULT_TIMEOUT_NS 2000000000ull /* automatic sharing */
#define ENVLOG_REMOTE_CALL_TIMEOUT_NS 10000000000ull   /* push, pull */
#define ENVLOG_REMOTE_RETIRED_NS_MAX 4000  /* a retired session's namespaces */

/* ---------------------------- what is kept in ENV/remotes/ (ledger.c) */

/* The sessions a remote is known to hold, ENV/remotes/NAME.sent (one id a
 * line): what a push sent or found there, what a pull took.  Compaction
 * keeps a sealed session it does not list while automatic push is on. */
envlog_err envlog_ledger_read(envlog_env *env, const char *name, envlog_id128 **ids,
                              size_t *n);
/* Notes that remote `name` holds `id`, unless `known` (its ledger as read,
 * sorted) lists it already. */
void envlog_ledger_note(envlog_env *env, const char *name, const envlog_id128 *known,
                        size_t n_known, const envlog_id128 *id);
/* The sessions whose auto_push option asked for a push to every remote
 * (ENV/remotes/asked), sorted; and noting one more. */
envlog_err envlog_asked_read(envlog_env *env, envlog_id128 **ids, size_t *n);
void envlog_asked_note(envlog_env *env, const envlog_id128 *id);
/* The result of the last automatic `kind` ("push" or "pull") with remote
 * `name` (ENV/remotes/NAME.KIND); returns whether it differs from the one
 * before (so a failure is said once). */
bool envlog_remote_status_set(envlog_env *env, const char *name, const char *kind,
                              const char *text);
void envlog_remote_status_get(envlog_env *env, const char *name, const char *kind, char *out,
                              size_t size);
/* Whether `id` is in the sorted array `sorted` of `n` ids. */
bool envlog_id_in(const envlog_id128 *sorted, size_t n, const envlog_id128 *id);
/* Opens ENV/remotes (made first if `make`).  ENVLOG_NOT_FOUND without it. */
envlog_err envlog_remotes_dir(envlog_env *env, bool make, int *fd);

/* ------------------------------------------------ remotes (remotecfg.c) */

typedef struct envlog_remote_cfg {
    char name[33];
    char url[600];           /* as configured, password and all */
    char host[256];
    int port;
    int db;
    char user[128];
    char password[256];      /* from the URL, or password_env at connect */
    bool has_password;
    char password_env[65];
    char prefix[65];
    char ns[256];            /* comma-separated namespace prefixes */
    bool auto_pull, auto_push;
    bool push_snapshot;      /* automatic push: the snapshot too */
    uint64_t timeout_ns;
} envlog_remote_cfg;

typedef struct envlog_remotes {
    envlog_remote_cfg *v;
    size_t n;
} envlog_remotes;

/* The remotes of `env`'s config.  @return ENVLOG_OK, ENVLOG_BAD_DATA naming
 * the line, ENVLOG_NOMEM, ENVLOG_IO. */
envlog_err envlog_remotes_read(envlog_env *env, envlog_remotes *out);
void envlog_remotes_free(envlog_remotes *r);
/* Writes `r` as the remote lines of `env`'s config (the rest kept). */
envlog_err envlog_remotes_write(envlog_env *env, const envlog_remotes *r);
/* Remote `name`, or with NULL the only one, else "origin".
 * @return ENVLOG_OK or ENVLOG_NOT_FOUND (saying which are there). */
envlog_err envlog_remote_pick(envlog_remotes *r, const char *name, envlog_remote_cfg **out);
/* The URL with any password as "****". */
void envlog_remote_url_masked(const envlog_remote_cfg *c, char *out, size_t size);
/* Checks one `remote.` line of the config (the hook config.c calls). */
envlog_err envlog_remote_line_check(const char *key, const char *value, const char *where);
/* The namespace filter of automatic sharing as a list (pointers into c). */
size_t envlog_remote_ns_list(envlog_remote_cfg *c, const char **out, size_t max);

/* -------------------------------------------------- hiredis (redis.c) */

typedef enum envlog_rtype {
    ENVLOG_R_NIL,
    ENVLOG_R_STRING,
    ENVLOG_R_INTEGER,
    ENVLOG_R_ARRAY,
    ENVLOG_R_STATUS,
    ENVLOG_R_ERROR
} envlog_rtype;

/* A reply, as hiredis gave it. */
typedef struct envlog_rreply {
    envlog_rtype type;
    long long integer;
    const char *str;        /* STRING, STATUS, ERROR */
    size_t len;
    size_t n;               /* ARRAY */
    struct envlog_rreply *el;
    void *raw_;
} envlog_rreply;

typedef struct envlog_rconn envlog_rconn;

/* Loads hiredis.  @return ENVLOG_OK or ENVLOG_UNAVAILABLE saying why. */
envlog_err envlog_redis_load(void);
/* Connects to `c` (within `timeout_ns`, which also bounds every call
 * after), authenticates and selects its database.  Errors name the remote
 * and its masked URL: ENVLOG_IO (unreachable), ENVLOG_PERMISSION (refused). */
envlog_err envlog_rconn_open(const envlog_remote_cfg *c, uint64_t timeout_ns,
                             envlog_rconn **out);
void envlog_rconn_close(envlog_rconn *c);
/* Queues one command (pipelined until its reply is read). */
envlog_err envlog_rconn_append(envlog_rconn *c, int argc, const char **argv,
                               const size_t *lens);
/* The next reply, refusing one over `max` bytes (the connection is then
 * closed).  An error reply is returned as a reply, not an error. */
envlog_err envlog_rconn_reply(envlog_rconn *c, size_t max, envlog_rreply **out);
/* append + reply. */
envlog_err envlog_rconn_call(envlog_rconn *c, size_t max, envlog_rreply **out, int argc,
                             const char **argv, const size_t *lens);
void envlog_rreply_free(envlog_rreply *r);
/* The error an ERROR reply means (maxmemory: ENVLOG_NOSPACE; refused
 * credentials or commands: ENVLOG_PERMISSION), saying `what`. */
envlog_err envlog_rreply_fail(const envlog_rconn *c, const envlog_rreply *r, const char *what);
/* "remote NAME (URL)" for messages. */
const char *envlog_rconn_label(const envlog_rconn *c);
const envlog_remote_cfg *envlog_rconn_cfg(const envlog_rconn *c);

/* ------------------------------------------------ objects (objects.c) */

/* One segment of a session, as a manifest lists it. */
typedef struct envlog_robj_seg {
    char name[40];
    uint64_t size;
    envlog_hash128 hash;
} envlog_robj_seg;

/* A session manifest (envlog(5), REMOTES). */
typedef struct envlog_rmanifest {
    envlog_id128 session;
    uint64_t start_unix_ns;
    uint64_t records;
    envlog_robj_seg *segs;
    size_t n_segs;
    char **ns;              /* namespaces its records name */
    size_t n_ns;
    char host[256];
} envlog_rmanifest;

void envlog_rmanifest_free(envlog_rmanifest *m);
envlog_err envlog_rmanifest_encode(const envlog_rmanifest *m, envlog_buf *out);
/* Decodes and checks a manifest (limits, names, sizes).  ENVLOG_BAD_DATA
 * saying what is wrong. */
envlog_err envlog_rmanifest_decode(const uint8_t *p, size_t n, envlog_rmanifest *m);
/* Whether the manifest names a namespace under (or above) one of `prefixes`. */
bool envlog_rmanifest_matches(const envlog_rmanifest *m, const char *const *prefixes,
                              size_t n);

/* A local sealed session read for pushing: its manifest and segment bytes.
 * @return ENVLOG_OK; ENVLOG_WRONG_STATE with *why when it is not to be pushed
 * (live, unsealed, torn, damaged, strays); ENVLOG_NOT_FOUND (retired
 * meanwhile); ENVLOG_NOMEM, ENVLOG_IO. */
typedef struct envlog_local_session {
    envlog_rmanifest m;
    envlog_buf *data;       /* one per segment */
} envlog_local_session;
envlog_err envlog_local_session_read(envlog_env *env, const envlog_id128 *id,
                                     envlog_local_session *out, const char **why);
void envlog_local_session_free(envlog_local_session *s);

/* Lower-case hex of a 128-bit hash. */
void envlog_hash_hex(const envlog_hash128 *h, char out[33]);

/* ------------------------------------- downloaded sessions (install.c) */

/* Sessions a pull puts in place at once, at the most. */
#define ENVLOG_REMOTE_INSTALL_BATCH 256

/* A session staged: checked, not yet in place. */
typedef struct envlog_staged {
    envlog_id128 id;
    uint64_t bytes;
} envlog_staged;

/* A pull's sessions on their way in (ENV/remotes/incoming/PID.RANDOM/). */
typedef struct envlog_install {
    envlog_env *env;
    int infd, stagefd;
    char stage[48];
    envlog_staged *v;
    size_t n, cap;
} envlog_install;

void envlog_install_begin(envlog_env *env, envlog_install *in);
/* Writes the segments of a downloaded session into the staging directory,
 * unsynced, and reads them back as a session (every checksum, the chain,
 * the SEAL).  @return ENVLOG_OK (staged: in->n grows); ENVLOG_BAD_DATA (it
 * does not read as a whole sealed session: why; nothing of it is kept);
 * ENVLOG_IO, ENVLOG_NOSPACE, ENVLOG_NOMEM. */
envlog_err envlog_install_stage(envlog_install *in, const envlog_rmanifest *m,
                                const envlog_buf *data);
/* Called once for each staged session the commit put in place (`placed`)
 * or found there already (another pull put it there meanwhile). */
typedef void (*envlog_install_fn)(void *ctx, const envlog_staged *s, bool placed);
/* Syncs every staged file, then every staged directory, renames each
 * session into sessions/ and syncs that once; then calls `fn`.  Nothing is
 * renamed unless all is synced.  @return ENVLOG_OK or the first error
 * (ENVLOG_IO, ENVLOG_NOSPACE, ENVLOG_NOMEM); staging starts afresh after. */
envlog_err envlog_install_commit(envlog_install *in, envlog_install_fn fn, void *ctx);
/* Removes the staging directory with what was staged and not committed. */
void envlog_install_end(envlog_install *in);
/* Whether `env` holds session `id`: its directory, or a snapshot watermark. */
bool envlog_session_known(envlog_env *env, envlog_snap *snap, envlog_snap *prev,
                          const envlog_id128 *id);

/* --------------------------------------- what push and pull share (index.c) */

/* One entry of the remote's session index. */
typedef struct envlog_rentry {
    envlog_id128 id;
    envlog_hash128 manifest;
} envlog_rentry;

typedef struct envlog_rsync {
    envlog_remotes remotes;
    envlog_remote_cfg *cfg;     /* the remote used */
    envlog_rconn *c;
    uint64_t start_ns, timeout_ns, deadline_ns;
    envlog_rentry *ent;         /* the index, sorted by id */
    size_t n;
    uint64_t bad_entries;       /* index fields that are not an id and a hash */
    envlog_id128 *retired;      /* sessions the remote holds in its snapshot
                                   only (PREFIX:retired), sorted */
    char **retired_ns;          /* each one's namespaces, "a,b" or "*" */
    size_t n_retired;
    envlog_id128 *ledger;       /* ENV/remotes/NAME.sent, sorted */
    size_t n_ledger;
} envlog_rsync;

/* Reads the remotes, picks the one `o` names and connects to it. */
envlog_err envlog_rsync_begin(envlog_env *env, const envlog_remote_opts *o, envlog_rsync *s);
void envlog_rsync_end(envlog_rsync *s);
bool envlog_rsync_past_deadline(const envlog_rsync *s);
/* Reads the remote's session index into s->ent, and its retired sessions
 * into s->retired. */
envlog_err envlog_rsync_index(envlog_rsync *s);
/* Whether the index lists `id`; whether the remote retired it. */
bool envlog_rsync_has(const envlog_rsync *s, const envlog_id128 *id);
bool envlog_rsync_retired(const envlog_rsync *s, const envlog_id128 *id);
/* 32 lower-case hex digits as 16 bytes. */
bool envlog_hex_hash(const char *p, size_t n, envlog_hash128 *out);

/* GETs object `key` of `size` bytes (0: at most `max`) checked against
 * `hash`.  ENVLOG_BAD_DATA (refused: why) or a link error. */
envlog_err envlog_rsync_get(envlog_rsync *s, const char *key, uint64_t size, size_t max,
                            const envlog_hash128 *hash, envlog_buf *out);
/* STRLEN of `key`, so nothing larger than allowed is asked for. */
envlog_err envlog_rsync_strlen(envlog_rsync *s, const char *key, long long *out);
/* The manifest of index entry `ent`, read with its bound, checked against
 * the hash that names it and decoded.  ENVLOG_BAD_DATA saying why. */
envlog_err envlog_rsync_manifest(envlog_rsync *s, const envlog_rentry *ent,
                                 envlog_rmanifest *m);

/* "PREFIX:sessions", "PREFIX:WHAT", "PREFIX:obj:HASH". */
void envlog_rkey_index(const envlog_remote_cfg *c, char *out, size_t size);
void envlog_rkey(const envlog_remote_cfg *c, const char *what, char *out, size_t size);
void envlog_rkey_obj(const envlog_remote_cfg *c, const envlog_hash128 *h, char *out,
                     size_t size);
/* ---------------------------------------- the remote's snapshot (snapshots.c) */

/* Pushes the environment's current snapshot if it holds every session the
 * remote retired, then retires from the remote the sessions of s->ent (the
 * index, read) it holds whole.  Fills rep's snapshot fields. */
envlog_err envlog_rsnap_push(envlog_env *env, envlog_rsync *s, const envlog_remote_opts *o,
                             envlog_remote_report *rep);
/* Takes the remote's snapshot when the environment has none (`mine`
 * NULL) or lacks sessions only the remote's snapshot holds, unless taking
 * it would lose what `mine` alone holds.  A snapshot that fails a check is
 * refused (rep->refused) and ENVLOG_OK returned. */
envlog_err envlog_rsnap_pull(envlog_env *env, envlog_rsync *s, const envlog_remote_opts *o,
                             envlog_snap *mine, envlog_snap *prev, envlog_remote_report *rep);

#endif /* ENVLOG_REMOTE_INT_H */
