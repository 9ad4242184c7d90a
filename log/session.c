/* SPDX-License-Identifier: MIT */
/*
 * session.c - the session recorder: a session, its identity, its hook and
 * its safety across fork.
 *
 * A session is one process's use of one environment.  Records are encoded
 * under the session's mutex (so seq is the order of acceptance), then either
 * held in memory - until the first CHANGED record, within a byte budget, the
 * oldest dropped first (held.c) - or framed straight into the mapped segment
 * (sessdisk.c); submit.c is the path every record takes, span.c the spans.
 * The first CHANGED record creates the session directory and writes the
 * session record, the held records in order, then itself: a session that
 * only observes leaves no byte behind.  A forked child never writes into its
 * parent's session: at its first record it starts one of its own.
 */
#include "session_int.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------- lifecycle */

void envlog_session_opts_init(envlog_session_opts *o)
{
    memset(o, 0, sizeof *o);
    o->level = ENVLOG_LEVEL_BASIC;
    o->pending_budget = ENVLOG_BUDGET_DEFAULT;
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

envlog_err envlog_session_identity_new(envlog_session *s)
{
    envlog_err e = envlog_id_new(&s->id);
    if (e)
        return e;
    s->pid = getpid();
    s->start_mono = envlog_clock_mono_ns();
    s->start_unix = envlog_clock_unix_ns();
    s->next_seq = 1;
    s->next_span = 1;
    envlog_held_clear(s);
    s->dropped = 0;
    s->on_disk = false;
    s->dirfd = -1;
    s->flushed_seg = 0;
    memset(&s->st, 0, sizeof s->st);
    return ENVLOG_OK;
}

void envlog_session_free(envlog_session *s)
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
    s->budget = opts->pending_budget ? opts->pending_budget : ENVLOG_BUDGET_DEFAULT;
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
    if ((e = envlog_session_identity_new(s)))
        goto fail;
    envlog_session_live_add(s);
    *out = s;
    return ENVLOG_OK;
fail:
    envlog_session_free(s);
    return e;
}

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
            envlog_segw_unmap(&s->seg, munmap);
            if (s->seg.fd >= 0)
                close(s->seg.fd);
            close(s->dirfd);
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

void envlog_session_live_add(envlog_session *s)
{
    pthread_once(&atfork_once, atfork_register);
    pthread_mutex_lock(&live_mu);
    s->next_live = live_head;
    if (live_head)
        live_head->prev_live = s;
    live_head = s;
    pthread_mutex_unlock(&live_mu);
}

void envlog_session_live_remove(envlog_session *s)
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

static void pid_watch_register(void)
{
    pthread_atfork(NULL, NULL, pid_forget);
}

void envlog_pid_watch(void)
{
    pthread_once(&pid_once, pid_watch_register);
}

pid_t envlog_pid_now(void)
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
    envlog_pid_watch();
    pid_t p = envlog_pid_now();
    if (!tid || tid_pid != p) {
        tid = (uint64_t)syscall(SYS_gettid);
        tid_pid = p;
    }
    return tid;
}

/* The parent's directory lock stays with the parent's descriptor. */
envlog_err envlog_session_fork_check(envlog_session *s)
{
    if (s->pid == getpid())
        return ENVLOG_OK;
    if (s->on_disk) {
        envlog_segw_abandon(&s->seg);
        close(s->dirfd);
    }
    return envlog_session_identity_new(s);
}

/* ----------------------------------------------------------- accessors */

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

/* ---------------------------------------------------------------- hook */

void envlog_session_set_hook(envlog_session *s, envlog_session_hook fn, void *ctx)
{
    pthread_mutex_lock(&s->mu);
    s->hook = fn;
    s->hook_ctx = ctx;
    pthread_mutex_unlock(&s->mu);
}

void envlog_session_batch(envlog_session *s)
{
    pthread_mutex_lock(&s->mu);
    s->batched = true;
    pthread_mutex_unlock(&s->mu);
}

void envlog_session_hand_out(envlog_session *s, envlog_kind kind, const envlog_stamp *st,
                             envlog_effect effect, const void *body,
                             const envlog_buf *payload)
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

