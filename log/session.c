/* SPDX-License-Identifier: MIT */
/*
 * session.c - the session recorder.
 *
 * A session is one process's use of one environment.  Records are encoded
 * under the session's mutex (so seq is the order of acceptance), then either
 * held in memory - until the first CHANGED record, within a byte budget, the
 * oldest dropped first - or framed straight into the mapped segment.  The
 * first CHANGED record creates the session directory and writes the session
 * record, the held records in order, then itself: a session that only
 * observes leaves no byte behind.  A forked child never writes into its
 * parent's session: at its first record it starts one of its own.
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#define BUDGET_DEFAULT (1u << 20)
#define HELD_HDR 12

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

/* ---------------------------------------------------------- fork safety */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static envlog_session *live_head;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Every session's mutex is taken across fork, so the child never inherits
 * one locked mid-record by a thread that does not exist in it. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&live_mu);
    for (envlog_session *s = live_head; s; s = s->next_live)
        pthread_mutex_lock(&s->mu);
}

static void fork_parent(void)
{
    for (envlog_session *s = live_head; s; s = s->next_live)
        pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&live_mu);
}

/* The child lets go of its copies of the parents' segments and directory
 * locks at once (close and munmap are safe here), so a parent that exits is
 * not kept "live" by a child that never records. */
static void fork_child(void)
{
    for (envlog_session *s = live_head; s; s = s->next_live) {
        if (s->on_disk) {
            if (s->seg.map)
                munmap(s->seg.map, (size_t)s->seg.map_len);
            if (s->seg.fd >= 0)
                close(s->seg.fd);
            close(s->dirfd);
            s->seg.map = NULL;
            s->seg.fd = -1;
            s->dirfd = -1;
            s->on_disk = false;
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&live_mu);
}

static void atfork_register(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void live_add(envlog_session *s)
{
    pthread_once(&atfork_once, atfork_register);
    pthread_mutex_lock(&live_mu);
    s->next_live = live_head;
    if (live_head)
        live_head->prev_live = s;
    live_head = s;
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(envlog_session *s)
{
    pthread_mutex_lock(&live_mu);
    if (s->prev_live)
        s->prev_live->next_live = s->next_live;
    else
        live_head = s->next_live;
    if (s->next_live)
        s->next_live->prev_live = s->prev_live;
    pthread_mutex_unlock(&live_mu);
}

/* ------------------------------------------------------------- lifecycle */

void envlog_session_opts_init(envlog_session_opts *o)
{
    memset(o, 0, sizeof *o);
    o->level = ENVLOG_LEVEL_BASIC;
    o->pending_budget = BUDGET_DEFAULT;
    o->sync = ENVLOG_SYNC_CLOSE;
    o->segment_size = ENVLOG_SEGMENT_DEFAULT;
}

static envlog_err dup_opt(char **dst, const char *src, const char *what)
{
    *dst = NULL;
    if (!src)
        return ENVLOG_OK;
    if (!envlog_utf8_valid(src, strlen(src)))
        return envlog__fail(ENVLOG_INVALID_ARG, "session %s is not valid UTF-8", what);
    if (!(*dst = envlog_strdup(src)))
        return envlog__fail(ENVLOG_NOMEM, "session %s", what);
    return ENVLOG_OK;
}

/* A fresh identity: new id, new clock origin, seq 0 reserved for the
 * session record. */
static envlog_err identity_new(envlog_session *s)
{
    envlog_err e = envlog_id_new(&s->id);
    if (e)
        return e;
    s->pid = getpid();
    s->start_mono = envlog_clock_mono_ns();
    s->start_unix = envlog_clock_unix_ns();
    s->next_seq = 1;
    s->next_span = 1;
    s->held.len = s->held_head = s->held_bytes = 0;
    s->held_count = s->dropped = 0;
    s->on_disk = false;
    s->dirfd = -1;
    s->flushed_seg = 0;
    memset(&s->st, 0, sizeof s->st);
    return ENVLOG_OK;
}

static void session_free(envlog_session *s)
{
    envlog_free(s->label);
    envlog_free(s->runtime);
    envlog_free(s->runtime_version);
    envlog_free(s->process_mode);
    for (size_t i = 0; i < s->n_devices; i++)
        envlog_free(s->devices[i]);
    envlog_free(s->devices);
    envlog_buf_free(&s->scratch);
    envlog_buf_free(&s->held);
    pthread_mutex_destroy(&s->mu);
    envlog_free(s);
}

envlog_err envlog_session_begin(envlog_env *env, const envlog_session_opts *opts,
                                envlog_session **out)
{
    envlog_session_opts def;
    envlog_err e;
    *out = NULL;
    if (!env)
        return envlog__fail(ENVLOG_INVALID_ARG, "no environment");
    if (env->readonly)
        return envlog__fail(ENVLOG_WRONG_STATE, "environment %s is open read-only",
                            env->path);
    if (!opts) {
        envlog_session_opts_init(&def);
        opts = &def;
    }
    if (opts->level > ENVLOG_LEVEL_FULL)
        return envlog__fail(ENVLOG_INVALID_ARG, "unknown level %d", (int)opts->level);
    if (opts->sync > ENVLOG_SYNC_RECORD)
        return envlog__fail(ENVLOG_INVALID_ARG, "unknown sync policy %d",
                            (int)opts->sync);
    uint64_t seg = opts->segment_size ? opts->segment_size : ENVLOG_SEGMENT_DEFAULT;
    if (seg % ENVLOG_BLOCK || seg > ENVLOG_SEGMENT_MAX)
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "segment size %llu is not a multiple of 32 KiB up to 1 GiB",
                            (unsigned long long)seg);
    if (opts->n_devices && !opts->devices)
        return envlog__fail(ENVLOG_INVALID_ARG, "n_devices without devices");
    if (opts->auto_compact < -1 || opts->auto_compact > 1)
        return envlog__fail(ENVLOG_INVALID_ARG, "auto_compact is -1, 0 or 1, not %d",
                            opts->auto_compact);
    if (opts->auto_push < -1 || opts->auto_push > 1)
        return envlog__fail(ENVLOG_INVALID_ARG, "auto_push is -1, 0 or 1, not %d",
                            opts->auto_push);
    envlog_session *s = envlog_calloc(1, sizeof *s);
    if (!s)
        return envlog__fail(ENVLOG_NOMEM, "beginning a session");
    pthread_mutex_init(&s->mu, NULL);
    s->env = env;
    s->level = opts->level;
    s->budget = opts->pending_budget ? opts->pending_budget : BUDGET_DEFAULT;
    s->sync = opts->sync;
    s->seg_size = seg;
    s->auto_compact = opts->auto_compact;
    s->auto_push = opts->auto_push;
    s->seg.fd = -1;
    if ((e = dup_opt(&s->label, opts->label, "label")) ||
        (e = dup_opt(&s->runtime, opts->runtime, "runtime")) ||
        (e = dup_opt(&s->runtime_version, opts->runtime_version, "runtime version")) ||
        (e = dup_opt(&s->process_mode, opts->process_mode, "process mode")))
        goto fail;
    if (opts->n_devices) {
        if (!(s->devices = envlog_calloc(opts->n_devices, sizeof(char *)))) {
            e = envlog__fail(ENVLOG_NOMEM, "session devices");
            goto fail;
        }
        for (; s->n_devices < opts->n_devices; s->n_devices++)
            if ((e = dup_opt(&s->devices[s->n_devices], opts->devices[s->n_devices],
                             "device")))
                goto fail;
            else if (!s->devices[s->n_devices]) {
                e = envlog__fail(ENVLOG_INVALID_ARG, "device %zu is NULL", s->n_devices);
                goto fail;
            }
    }
    if (gethostname(s->host, sizeof s->host - 1))
        strcpy(s->host, "unknown");
    if (!envlog_utf8_valid(s->host, strlen(s->host)))
        strcpy(s->host, "unknown");
    if (uname(&s->uts)) {
        strcpy(s->uts.sysname, "unknown");
        strcpy(s->uts.machine, "unknown");
    }
    if ((e = identity_new(s)))
        goto fail;
    live_add(s);
    *out = s;
    return ENVLOG_OK;
fail:
    session_free(s);
    return e;
}

/* The child of a fork drops its copy of the parent's state; the parent's
 * directory lock stays with the parent's descriptor. */
static envlog_err fork_check(envlog_session *s)
{
    if (s->pid == getpid())
        return ENVLOG_OK;
    if (s->on_disk) {
        envlog_segw_abandon(&s->seg);
        close(s->dirfd);
    }
    return identity_new(s);
}

static envlog_err held_write(envlog_session *s, bool all);

static envlog_err close_disk(envlog_session *s)
{
    if (!s->on_disk)
        return ENVLOG_OK;
    /* What waits behind spans never closed goes first, their openings
     * with it: they opened, and their seqs are taken. */
    envlog_err e = held_write(s, true);
    envlog_err se = envlog_segw_seal(&s->seg);
    e = e ? e : se;
    if (!e && s->sync != ENVLOG_SYNC_NONE)
        e = envlog_dir_sync(s->dirfd, "session directory");
    close(s->dirfd); /* releases the writer's lock */
    s->dirfd = -1;
    s->on_disk = false;
    return e;
}

int envlog_session_auto_compact(const envlog_session *s)
{
    return s->auto_compact;
}

int envlog_session_auto_push(const envlog_session *s)
{
    return s->auto_push;
}

pid_t envlog_session_pid(const envlog_session *s)
{
    return s->pid;
}

envlog_err envlog_session_close(envlog_session *s)
{
    if (!s)
        return ENVLOG_OK;
    live_remove(s);
    pthread_mutex_lock(&s->mu);
    envlog_err e = ENVLOG_OK;
    if (s->pid == getpid())
        e = close_disk(s);
    else if (s->on_disk) {
        envlog_segw_abandon(&s->seg);
        close(s->dirfd);
    }
    pthread_mutex_unlock(&s->mu);
    session_free(s);
    return e;
}

void envlog_session_set_hook(envlog_session *s, envlog_session_hook fn, void *ctx)
{
    pthread_mutex_lock(&s->mu);
    s->hook = fn;
    s->hook_ctx = ctx;
    pthread_mutex_unlock(&s->mu);
}

uint64_t envlog_session_clock_ns(const envlog_session *s)
{
    return envlog_clock_mono_ns() - s->start_mono;
}

envlog_env *envlog_session_env(const envlog_session *s)
{
    return s->env;
}

envlog_id128 envlog_session_id(const envlog_session *s)
{
    return s->id;
}

void envlog_session_stats_get(const envlog_session *s, envlog_session_stats *st)
{
    envlog_session *m = (envlog_session *)(uintptr_t)s;
    pthread_mutex_lock(&m->mu);
    *st = s->st;
    st->held = s->held_count;
    st->dropped = s->dropped;
    st->on_disk = s->on_disk;
    pthread_mutex_unlock(&m->mu);
}

/* Under ENVLOG_SYNC_NONE nothing was synced when earlier segments were
 * sealed, nor the session directory's entry when it was made: a flush must
 * sync them too, or it would promise records a power loss still takes. */
static envlog_err sync_unsynced(envlog_session *s)
{
    const envlog_io *io = envlog_io_get();
    envlog_seg_name *segs;
    size_t n;
    envlog_err e = envlog_list_segments(s->dirfd, &segs, &n);
    for (size_t i = 0; !e && i < n; i++) {
        /* The open segment is synced by the caller; with none open (a
         * rotation failed) the last one sealed needs it too. */
        uint32_t end = s->seg.fd >= 0 ? s->seg.segment : s->seg.segment + 1;
        if (segs[i].segment < s->flushed_seg || segs[i].segment >= end)
            continue;
        int fd;
        if (!(e = envlog_open_regular(s->dirfd, segs[i].name, O_RDONLY, 0, &fd, NULL))) {
            if (io->fsync(fd))
                e = envlog__fail_errno(errno, "syncing segment %s", segs[i].name);
            io->close(fd);
        }
    }
    envlog_free(segs);
    if (!e)
        e = envlog_dir_sync(s->env->sessions_fd, "sessions directory");
    return e;
}

envlog_err envlog_session_flush(envlog_session *s)
{
    pthread_mutex_lock(&s->mu);
    envlog_err e = fork_check(s);
    if (!e && s->on_disk) {
        if (s->sync == ENVLOG_SYNC_NONE)
            e = sync_unsynced(s);
        if (!e)
            e = envlog_segw_sync(&s->seg);
        if (!e)
            e = envlog_dir_sync(s->dirfd, "session directory");
        if (!e)
            s->flushed_seg = s->seg.fd >= 0 ? s->seg.segment : s->seg.segment + 1;
    }
    pthread_mutex_unlock(&s->mu);
    return e;
}

/* -------------------------------------------------------------- writing */

/* Writes one encoded record, rotating first when it does not fit.  A failed
 * rotation leaves no segment open; the next record tries again. */
static envlog_err put_record(envlog_session *s, const uint8_t *p, size_t n,
                             uint64_t seq)
{
    envlog_err e;
    if (s->seg.fd >= 0 && !envlog_segw_fits(&s->seg, n) &&
        (e = envlog_segw_seal(&s->seg)))
        return e;
    if (s->seg.fd < 0) {
        envlog_segw next;
        if ((e = envlog_segw_create(&next, s->dirfd, &s->id, s->seg.segment + 1,
                                    seq, s->seg.chain,
                                    envlog_segw_size_for(s->seg_size, n),
                                    "session", s->sync)))
            return e;
        s->seg = next;
        s->st.segments++;
    }
    uint64_t before = s->seg.pos;
    if ((e = envlog_segw_append(&s->seg, p, n, seq)))
        return e;
    s->st.written++;
    s->st.bytes += s->seg.pos - before;
    return ENVLOG_OK;
}

/* ------------------------------------------------------- held records
 *
 * Held records wait in memory, in seq order: before the session's first
 * CHANGED record, and behind a span still open, whose seq comes before
 * theirs (envlog(5), SPANS).  Each entry is [u32 len][u64 seq][payload];
 * an open span's entry holds its opening record, flagged in len, until the
 * span closes and its full record takes its place.  The budget counts
 * payload bytes. */
#define HELD_OPENING 0x80000000u

static uint32_t held_len(const envlog_session *s, size_t at)
{
    return envlog_get_le32(s->held.p + at) & ~HELD_OPENING;
}

static bool held_is_opening(const envlog_session *s, size_t at)
{
    return envlog_get_le32(s->held.p + at) & HELD_OPENING;
}

static uint64_t held_seq(const envlog_session *s, size_t at)
{
    uint64_t seq;
    memcpy(&seq, s->held.p + at + 4, 8);
    return seq;
}

static void held_pop(envlog_session *s)
{
    uint32_t len = held_len(s, s->held_head);
    s->held_head += HELD_HDR + len;
    s->held_bytes -= len;
    s->held_count--;
    if (s->held_head == s->held.len)
        s->held.len = s->held_head = 0;
}

static envlog_err held_push(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq,
                            uint32_t flag)
{
    if (s->held_head && s->held.cap - s->held.len < HELD_HDR + n) {
        memmove(s->held.p, s->held.p + s->held_head, s->held.len - s->held_head);
        s->held.len -= s->held_head;
        s->held_head = 0;
    }
    envlog_err e = envlog_buf_reserve(&s->held, HELD_HDR + n);
    if (e)
        return e;
    envlog_put_le32(s->held.p + s->held.len, (uint32_t)n | flag);
    memcpy(s->held.p + s->held.len + 4, &seq, 8);
    memcpy(s->held.p + s->held.len + HELD_HDR, p, n);
    s->held.len += HELD_HDR + n;
    s->held_bytes += n;
    s->held_count++;
    return ENVLOG_OK;
}

/* Before the disk: the oldest entries go over budget, counted as dropped
 * (an open span's opening too: the span is then dropped when it closes). */
static void held_trim(envlog_session *s, size_t n)
{
    while (s->held_count && s->held_bytes + n > s->budget) {
        held_pop(s);
        s->dropped++;
    }
}

/* Holds an OBSERVED record before the session's first CHANGED record. */
static envlog_err hold(envlog_session *s, const uint8_t *p, size_t n, uint64_t seq,
                       uint32_t flag)
{
    if (n > s->budget) {
        /* Oldest first: a record too big to hold drops everything held
         * before it too, so the dropped seqs stay one run after seq 0. */
        s->dropped += s->held_count + 1;
        s->held.len = s->held_head = s->held_bytes = 0;
        s->held_count = 0;
        return ENVLOG_OK;
    }
    held_trim(s, n);
    return held_push(s, p, n, seq, flag);
}

/* On disk: writes the held entries from the oldest up to the first open
 * span's opening, and that opening too (the span will close with a record
 * of its own) when `all` or when over budget.  An entry leaves the list
 * only once written. */
static envlog_err held_write(envlog_session *s, bool all)
{
    while (s->held_count) {
        size_t at = s->held_head;
        if (held_is_opening(s, at) && !all && s->held_bytes <= s->budget)
            return ENVLOG_OK;
        envlog_err e = put_record(s, s->held.p + at + HELD_HDR, held_len(s, at),
                                  held_seq(s, at));
        if (e)
            return e;
        held_pop(s);
    }
    return ENVLOG_OK;
}

/* The entry of seq `seq`, or SIZE_MAX. */
static size_t held_find(const envlog_session *s, uint64_t seq)
{
    for (size_t at = s->held_head; at < s->held.len; at += HELD_HDR + held_len(s, at)) {
        uint64_t q = held_seq(s, at);
        if (q == seq)
            return at;
        if (q > seq)
            break;
    }
    return SIZE_MAX;
}

/* Puts `p` in the place of the entry at `at` (an opening), keeping its
 * seq and so its place in the order. */
static envlog_err held_replace(envlog_session *s, size_t at, const uint8_t *p, size_t n)
{
    uint32_t old = held_len(s, at);
    size_t tail = at + HELD_HDR + old;
    if (n > old) {
        envlog_err e = envlog_buf_reserve(&s->held, n - old);
        if (e)
            return e;
    }
    memmove(s->held.p + at + HELD_HDR + n, s->held.p + tail, s->held.len - tail);
    s->held.len = s->held.len - old + n;
    envlog_put_le32(s->held.p + at, (uint32_t)n);
    memcpy(s->held.p + at + HELD_HDR, p, n);
    s->held_bytes = s->held_bytes - old + n;
    return ENVLOG_OK;
}

/* Hands the record a session accepted, built once as a reader of the log
 * will see it, to the session's hook and the environment's live state;
 * `payload` is what was written (NULL: nothing, at level OFF). */
static void hand_out(envlog_session *s, envlog_kind kind, const envlog_stamp *st,
                     envlog_effect effect, const void *body, const envlog_buf *payload)
{
    envlog_session_hook live = __atomic_load_n(&s->env->state_hook, __ATOMIC_ACQUIRE);
    if (!s->hook && !live)
        return;
    envlog_record rec;
    envlog_record_make(&rec, kind, st, effect, body);
    if (payload)
        rec.payload = (envlog_bytes){payload->p, payload->len};
    uint64_t unix_ns = s->start_unix + st->offset_ns;
    if (s->hook)
        s->hook(s->hook_ctx, &rec, unix_ns);
    if (live)
        live(s->env->state, &rec, unix_ns);
}

/* The session record as it stands now. */
static void session_rec_of(const envlog_session *s, envlog_session_rec *out)
{
    envlog_session_rec r = {
        .id = s->id,
        .start_unix_ns = s->start_unix,
        .envlog_version = ENVLOG_VERSION_STRING,
        .runtime = s->runtime,
        .runtime_version = s->runtime_version,
        .label = s->label,
        .host = s->host,
        .pid = (uint64_t)s->pid,
        .os = s->uts.sysname,
        .arch = s->uts.machine,
        .devices = (const char *const *)s->devices,
        .n_devices = s->n_devices,
        .process_mode = s->process_mode,
        .level = s->level,
        .dropped = s->dropped,
    };
    *out = r;
}

/* Encodes the session record into `b` (the caller frees it). */
static envlog_err encode_session_record(envlog_session *s, envlog_buf *b)
{
    envlog_session_rec r;
    session_rec_of(s, &r);
    envlog_stamp st = {s->id, 0, 0};
    return envlog_event_encode(b, ENVLOG_KIND_SESSION, &st,
                               envlog_effect_of(ENVLOG_KIND_SESSION, &r), s->level, &r);
}

/* The first CHANGED record: directory, lock, segment 0, session record and
 * the held records.  On failure everything created is removed again and the
 * held records stay held. */
static envlog_err go_disk(envlog_session *s)
{
    const envlog_io *io = envlog_io_get();
    char name[33];
    envlog_err e;
    envlog_buf srec = {0};
    envlog_id_format(&s->id, name);
    if (s->env->sessions_fd < 0)
        return envlog__fail(ENVLOG_WRONG_STATE, "environment has no sessions directory");
    /* Memory first: once the directory exists, a failure must undo it, and
     * an undo that itself runs out of memory would leave it behind. */
    if ((e = encode_session_record(s, &srec)) || (e = envlog_env_mark_format(s->env))) {
        envlog_buf_free(&srec);
        return e;
    }
    if (io->mkdirat(s->env->sessions_fd, name, 0700)) {
        envlog_buf_free(&srec);
        return envlog__fail_errno(errno, "creating session directory %s", name);
    }
    if ((e = envlog_open_dir(s->env->sessions_fd, name, &s->dirfd)))
        goto rmdir;
    /* The directory is this session's own (mkdir made it): only a reader
     * looking whether it is live can hold its lock, for an instant. */
    if (envlog_flock_within(s->dirfd, LOCK_EX, 1000)) {
        e = envlog__fail_errno(errno, "locking session %s", name);
        goto closedir;
    }
    if (s->sync != ENVLOG_SYNC_NONE &&
        (e = envlog_dir_sync(s->env->sessions_fd, name)))
        goto closedir;
    if ((e = envlog_segw_create(&s->seg, s->dirfd, &s->id, 0, 0, 0,
                                envlog_segw_size_for(s->seg_size, s->scratch.len),
                                "session", s->sync)))
        goto closedir;
    s->on_disk = true;
    s->st.segments = 1;
    if ((e = put_record(s, srec.p, srec.len, 0)))
        goto undo;
    /* Open spans' openings too: the spans will close with records of their
     * own, after the records that follow them here. */
    for (size_t at = s->held_head; at < s->held.len; at += HELD_HDR + held_len(s, at))
        if ((e = put_record(s, s->held.p + at + HELD_HDR, held_len(s, at),
                            held_seq(s, at))))
            goto undo;
    s->held.len = s->held_head = s->held_bytes = 0;
    s->held_count = 0;
    /* The records held until now reached the live state as they came;
     * their session record reaches it now, as it reached the log. */
    envlog_session_rec r;
    session_rec_of(s, &r);
    envlog_stamp st0 = {s->id, 0, 0};
    hand_out(s, ENVLOG_KIND_SESSION, &st0, envlog_effect_of(ENVLOG_KIND_SESSION, &r), &r,
             &srec);
    envlog_buf_free(&srec);
    return ENVLOG_OK;
undo:
    /* Remove every segment written so far: the session never reached the
     * disk as far as any reader is concerned. */
    {
        envlog_seg_name *segs;
        size_t n;
        envlog_segw_abandon(&s->seg);
        if (envlog_list_segments(s->dirfd, &segs, &n) == ENVLOG_OK) {
            for (size_t i = 0; i < n; i++)
                io->unlinkat(s->dirfd, segs[i].name, 0);
            envlog_free(segs);
        } else {
            io->unlinkat(s->dirfd, s->seg.name, 0); /* at least the last */
        }
        s->on_disk = false;
        s->st.segments = 0;
        s->st.written = s->st.bytes = 0;
    }
closedir:
    close(s->dirfd);
    s->dirfd = -1;
rmdir:
    envlog_buf_free(&srec);
    io->unlinkat(s->env->sessions_fd, name, AT_REMOVEDIR);
    return e;
}

/* getpid() is a system call (about 200 ns on a virtual machine, a fifth of
 * a record's budget) made on every record only to notice a fork.  The pid is
 * kept here instead and forgotten in the child of every fork(2) by an atfork
 * handler, registered before any pid is kept and never under a session's
 * mutex (fork_prepare takes those while fork holds the atfork lock). */
static _Atomic pid_t pid_known; /* 0: ask getpid() */
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_forget(void)
{
    atomic_store_explicit(&pid_known, 0, memory_order_relaxed);
}

static void pid_watch(void)
{
    pthread_atfork(NULL, NULL, pid_forget);
}

/* This process's pid; pid_watch must have run. */
static pid_t pid_now(void)
{
    pid_t p = atomic_load_explicit(&pid_known, memory_order_relaxed);
    if (!p) {
        p = getpid();
        atomic_store_explicit(&pid_known, p, memory_order_relaxed);
    }
    return p;
}

/* The kernel's id, not pthread_self(): the one ps -L, /proc and profilers
 * show, so a trace's threads can be matched with theirs.  Kept per thread
 * with the pid it was read under: a forked child's thread has another. */
uint64_t envlog_thread_id(void)
{
    static _Thread_local uint64_t tid;
    static _Thread_local pid_t tid_pid;
    pthread_once(&pid_once, pid_watch);
    pid_t p = pid_now();
    if (!tid || tid_pid != p) {
        tid = (uint64_t)syscall(SYS_gettid);
        tid_pid = p;
    }
    return tid;
}

/* The one path every record takes.  A span's record (`sp`) keeps the stamp
 * it took when it opened and the place of its opening among the held
 * records, or, when its opening was written already, is a record of its
 * own, stamped now. */
/* The effect a caller passes for a built-in kind: the one envlog_effect_of()
 * gives is taken (a user record's is its caller's). */
#define BUILT_IN ((envlog_effect)-1)

static envlog_err submit(envlog_session *s, envlog_kind kind, const void *body,
                         envlog_effect effect, const envlog_span *sp, envlog_stamp *stamp)
{
    if (!s)
        return envlog__fail(ENVLOG_INVALID_ARG, "no session");
    if (effect == BUILT_IN)
        effect = envlog_effect_of(kind, body);
    /* The rules every reader applies, at every level (OFF included: the
     * live state folds what is accepted here). */
    const char *why = envlog_record_problem(kind, effect, body, ENVLOG_TRIALS_OF_BODY);
    if (why)
        return envlog__fail(ENVLOG_INVALID_ARG, "%s record: %s", envlog_kind_name(kind), why);
    pthread_once(&pid_once, pid_watch);
    pthread_mutex_lock(&s->mu);
    envlog_err e = pid_now() == s->pid ? ENVLOG_OK : fork_check(s);
    if (e)
        goto out;
    envlog_stamp st = {s->id, s->next_seq, envlog_clock_mono_ns() - s->start_mono};
    size_t at = SIZE_MAX;
    bool fresh = true; /* it takes the next seq */
    if (sp && (s->level == ENVLOG_LEVEL_OFF || sp->seq_ <= s->dropped ||
               (at = held_find(s, sp->seq_)) != SIZE_MAX)) {
        st.seq = sp->seq_;
        st.offset_ns = sp->open_ns_;
        fresh = false;
    }
    bool encoded = false;
    if (s->level == ENVLOG_LEVEL_OFF || (!fresh && at == SIZE_MAX))
        goto accepted; /* OFF, or a span dropped with its opening */
    if ((e = envlog_event_encode(&s->scratch, kind, &st, effect, s->level, body)))
        goto out;
    encoded = true;
    if (s->scratch.len > ENVLOG_RECORD_MAX) {
        e = envlog__fail(ENVLOG_TOO_BIG, "a %s record of %zu bytes is over the %u limit",
                         envlog_kind_name(kind), s->scratch.len, ENVLOG_RECORD_MAX);
        goto out;
    }
    if (!fresh) {
        if ((e = held_replace(s, at, s->scratch.p, s->scratch.len)))
            goto out;
        if (!s->on_disk)
            held_trim(s, 0);
        else if ((e = held_write(s, false)))
            goto out;
        goto accepted;
    }
    if (!s->on_disk) {
        if (effect == ENVLOG_OBSERVED) {
            if ((e = hold(s, s->scratch.p, s->scratch.len, st.seq, 0)))
                goto out;
            goto accepted;
        }
        if ((e = go_disk(s)))
            goto out;
    } else if (s->held_count) {
        /* Behind an open span: an OBSERVED record waits with it, within the
         * budget; a CHANGED one writes what waits, openings included. */
        if (effect == ENVLOG_OBSERVED) {
            if ((e = held_push(s, s->scratch.p, s->scratch.len, st.seq, 0)))
                goto out;
            s->next_seq++;
            s->st.accepted++;
            if ((e = held_write(s, false)))
                goto out; /* it stays held, for the next record to write */
            goto stamped;
        }
        if ((e = held_write(s, true)))
            goto out;
    }
    if ((e = put_record(s, s->scratch.p, s->scratch.len, st.seq)))
        goto out;
accepted:
    if (fresh)
        s->next_seq++;
    s->st.accepted++;
stamped:
    hand_out(s, kind, &st, effect, body, encoded ? &s->scratch : NULL);
    if (stamp)
        *stamp = st;
out:
    pthread_mutex_unlock(&s->mu);
    return e;
}

static envlog_err record_tune(envlog_session *s, const envlog_tune *t, envlog_stamp *stamp)
{
    if (!t || !t->ns || !t->key)
        return envlog__fail(ENVLOG_INVALID_ARG, "a tune needs a namespace and a key");
    if (t->winner_ns == 0 && t->winner >= 0) {
        /* The winner's cost, so the fold and diff need not walk the trials. */
        envlog_tune c = *t;
        for (size_t i = 0; i < t->n_trials; i++)
            if (t->trials && (int64_t)t->trials[i].index == t->winner && !t->trials[i].error)
                c.winner_ns = t->trials[i].median_ns;
        return submit(s, ENVLOG_KIND_TUNE, &c, BUILT_IN, NULL, stamp);
    }
    return submit(s, ENVLOG_KIND_TUNE, t, BUILT_IN, NULL, stamp);
}

static envlog_err record_compile(envlog_session *s, const envlog_compile *c,
                                 envlog_stamp *stamp)
{
    if (!c || !c->ns || !c->name)
        return envlog__fail(ENVLOG_INVALID_ARG, "a compile needs a namespace and a name");
    return submit(s, ENVLOG_KIND_COMPILE, c, BUILT_IN, NULL, stamp);
}

/* An imported value replaces no local one and yields to the next
 * (envlog_replay_each's rules): a caller that could mark its own records
 * imported could pass its values off as a bundle's.  Only a bundle import
 * writes them, through envlog_record_imported(). */
static envlog_err imported_refused(const char *what, const char *name)
{
    return envlog__fail(ENVLOG_INVALID_ARG, "%s %s: imported is set, and only a bundle "
                        "import records imported values", what, name ? name : "?");
}

envlog_err envlog_record_tune(envlog_session *s, const envlog_tune *t,
                              envlog_stamp *stamp)
{
    return t && t->imported ? imported_refused("tune", t->key) : record_tune(s, t, stamp);
}

envlog_err envlog_record_compile(envlog_session *s, const envlog_compile *c,
                                 envlog_stamp *stamp)
{
    return c && c->imported ? imported_refused("compile of", c->name)
                            : record_compile(s, c, stamp);
}

envlog_err envlog_record_imported(envlog_session *s, envlog_kind kind, const void *body,
                                  envlog_stamp *stamp)
{
    if (kind == ENVLOG_KIND_TUNE) {
        envlog_tune t = *(const envlog_tune *)body;
        t.imported = true;
        return record_tune(s, &t, stamp);
    }
    if (kind == ENVLOG_KIND_COMPILE) {
        envlog_compile c = *(const envlog_compile *)body;
        c.imported = true;
        return record_compile(s, &c, stamp);
    }
    return envlog__fail(ENVLOG_INVALID_ARG, "only tunes and compiles are imported");
}

envlog_err envlog_record_mark(envlog_session *s, const char *label,
                              envlog_stamp *stamp)
{
    if (!label)
        return envlog__fail(ENVLOG_INVALID_ARG, "a mark needs a label");
    envlog_mark m = {label, envlog_clock_unix_ns()};
    return submit(s, ENVLOG_KIND_MARK, &m, BUILT_IN, NULL, stamp);
}

envlog_err envlog_record_import(envlog_session *s, const envlog_import *im,
                                envlog_stamp *stamp)
{
    if (!im || !im->bundle)
        return envlog__fail(ENVLOG_INVALID_ARG, "an import needs a bundle name");
    return submit(s, ENVLOG_KIND_IMPORT, im, BUILT_IN, NULL, stamp);
}

envlog_err envlog_record_forget(envlog_session *s, const envlog_forget *f,
                                envlog_stamp *stamp)
{
    if (f && f->under) {
        const char *why = envlog_ns_prefix_problem(f->under);
        if (why)
            return envlog__fail(ENVLOG_INVALID_ARG, "forget under '%s': %s", f->under, why);
        if (f->ns || f->key)
            return envlog__fail(ENVLOG_INVALID_ARG,
                                "a forget under a prefix names no namespace and no key");
    } else if (!f || !f->ns || !f->key) {
        return envlog__fail(ENVLOG_INVALID_ARG, "a forget needs a namespace and a key");
    }
    return submit(s, ENVLOG_KIND_FORGET, f, BUILT_IN, NULL, stamp);
}

envlog_err envlog_record_user(envlog_session *s, const char *kind,
                              const void *cbor, size_t size,
                              envlog_effect effect, envlog_stamp *stamp)
{
    if (!kind || !*kind)
        return envlog__fail(ENVLOG_INVALID_ARG, "a user record needs a kind name");
    if (!cbor || !size)
        return envlog__fail(ENVLOG_INVALID_ARG, "a user record needs a CBOR body");
    if (effect != ENVLOG_OBSERVED && effect != ENVLOG_CHANGED)
        return envlog__fail(ENVLOG_INVALID_ARG, "unknown effect %d", (int)effect);
    envlog_user u = {kind, {cbor, size}};
    return submit(s, ENVLOG_KIND_USER, &u, effect, NULL, stamp);
}

/* ----------------------------------------------------------------- spans */

static _Thread_local envlog_span *span_top;

envlog_err envlog_span_open(envlog_session *s, const char *name, envlog_span *sp)
{
    if (!s || !name || !sp)
        return envlog__fail(ENVLOG_INVALID_ARG, "a span needs a session and a name");
    sp->parent_ = 0;
    for (envlog_span *p = span_top; p; p = p->up_)
        if (p->session_ == s) {
            sp->parent_ = p->id_;
            break;
        }
    /* Stamped now (envlog(5), SPANS): the seq it takes orders it before
     * everything recorded while it is open.  Its opening record waits in
     * its place among the held records until the span closes, or is
     * written as it is when what follows cannot wait. */
    pthread_mutex_lock(&s->mu);
    envlog_err e = fork_check(s);
    if (!e) {
        sp->id_ = s->next_span++;
        sp->open_ns_ = envlog_clock_mono_ns() - s->start_mono;
        sp->pid_ = (uint64_t)s->pid;
        sp->seq_ = s->next_seq;
    }
    if (!e && s->level != ENVLOG_LEVEL_OFF) {
        envlog_span_rec r = {name, sp->id_, sp->parent_, sp->open_ns_, 0, NULL, 0,
                             true, envlog_thread_id(), true};
        envlog_stamp st = {s->id, sp->seq_, sp->open_ns_};
        e = envlog_event_encode(&s->scratch, ENVLOG_KIND_SPAN, &st, ENVLOG_OBSERVED,
                                s->level, &r);
        if (!e)
            e = s->on_disk ? held_push(s, s->scratch.p, s->scratch.len, sp->seq_, HELD_OPENING)
                           : hold(s, s->scratch.p, s->scratch.len, sp->seq_, HELD_OPENING);
        if (!e)
            s->next_seq++;
        if (!e && s->on_disk)
            e = held_write(s, false); /* over budget: written at once */
    } else if (!e) {
        s->next_seq++;
    }
    pthread_mutex_unlock(&s->mu);
    if (e)
        return e;
    sp->session_ = s;
    sp->name_ = name;
    sp->up_ = span_top;
    span_top = sp;
    return ENVLOG_OK;
}

envlog_err envlog_span_close(envlog_span *sp, const envlog_attr *attrs, size_t n,
                             envlog_stamp *stamp)
{
    if (!sp || !sp->session_)
        return envlog__fail(ENVLOG_INVALID_ARG, "span is not open");
    for (envlog_span **pp = &span_top; *pp; pp = &(*pp)->up_)
        if (*pp == sp) {
            *pp = sp->up_;
            break;
        }
    envlog_session *s = sp->session_;
    sp->session_ = NULL;
    if (sp->pid_ != (uint64_t)getpid())
        return envlog__fail(ENVLOG_WRONG_STATE,
                            "span %s was opened by the parent process", sp->name_);
    if (n && !attrs)
        return envlog__fail(ENVLOG_INVALID_ARG, "span attributes missing");
    for (size_t i = 0; i < n; i++)
        if (!attrs[i].key || !attrs[i].value)
            return envlog__fail(ENVLOG_INVALID_ARG, "span attribute %zu is NULL", i);
    uint64_t now = envlog_clock_mono_ns() - s->start_mono;
    envlog_span_rec r = {sp->name_, sp->id_, sp->parent_, sp->open_ns_,
                         now - sp->open_ns_, attrs, n, true, envlog_thread_id(), false};
    return submit(s, ENVLOG_KIND_SPAN, &r, BUILT_IN, sp, stamp);
}
