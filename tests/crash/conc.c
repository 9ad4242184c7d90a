/* SPDX-License-Identifier: MIT */
/*
 * conc.c - the concurrency run.
 *
 *   crash-conc [-d DIR] [-t SECONDS] [-w WRITERS] [-s SEED]
 *
 * On one environment, for SECONDS (default 10): WRITERS processes (default
 * 16) recording session after session (generated records, some of them
 * shared between writers, so which one stands depends on the total order),
 * a compaction loop (all evidence kept), a reader loop folding the
 * environment again and again, and the automatic compactions the writers'
 * session ends start (every 4 sessions here), which a killer loop kills
 * with SIGKILL at random moments (this process is their subreaper, so it
 * sees and reaps them).  Then, with nothing running:
 *  - every acknowledged record is there, field for field (verify.c);
 *  - the fold of the environment (its snapshot and what is left of the
 *    sessions) is byte for byte the fold of the acknowledged records
 *    themselves, in the total order, with nothing running beside it;
 *  - no fold of the reader loop met damage, and none saw fewer entries
 *    than one before it (entries are never removed in this run).
 * Exit 0 when all held.  Timing is never asserted.
 */
#include "replay_int.h"
#include "verify.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SHARED_SEED 7 /* records every writer may record */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    nanosleep(&ts, NULL);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void send_msg(int fd, const crash_ack *a)
{
    ssize_t w;
    do
        w = write(fd, a, sizeof *a);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof *a)
        _exit(3);
}

/* The start time a session wrote in its session record (seq 0). */
static uint64_t session_start(envlog_env *env, const envlog_id128 *id)
{
    envlog_reader *r;
    if (envlog_reader_open(env, id, &r))
        return 0;
    const envlog_record *rec;
    uint64_t start = 0;
    if (envlog_reader_next(r, &rec) == ENVLOG_OK && rec->kind == ENVLOG_KIND_SESSION)
        start = rec->u.session.start_unix_ns;
    envlog_reader_close(r);
    return start;
}

/* ------------------------------------------------------------- writers */

static int writer(const char *dir, int w, uint64_t seed, uint64_t deadline, int out)
{
    envlog_env *env;
    if (envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env))
        return 2;
    uint64_t rng = seed ^ (uint64_t)w << 32;
    static const uint64_t segsizes[] = {2 * 32768, 4 * 32768, 1u << 20, 0};
    for (uint64_t si = 0; now_ns() < deadline; si++) {
        envlog_session_opts o;
        envlog_session_opts_init(&o);
        o.label = "conc";
        o.level = crash_mix(&rng) % 4 == 0 ? ENVLOG_LEVEL_FULL : ENVLOG_LEVEL_BASIC;
        o.sync = crash_mix(&rng) % 3 ? ENVLOG_SYNC_NONE : ENVLOG_SYNC_CLOSE;
        o.segment_size = segsizes[crash_mix(&rng) % 4];
        o.pending_budget = 64u << 20;
        envlog_session *s;
        envlog_err e = envlog_session_begin(env, &o, &s);
        if (e) {
            fprintf(stderr, "crash-conc: writer %d: %s\n", w, envlog_errmsg());
            return 2;
        }
        uint64_t wseed = 1000000u * (uint64_t)(w + 1) + si;
        unsigned count = 20 + (unsigned)(crash_mix(&rng) % 300);
        envlog_id128 sid = {{0}};
        bool any = false;
        for (unsigned i = 0; i < count && now_ns() < deadline; i++) {
            bool shared = crash_mix(&rng) % 8 == 0;
            uint64_t rs = shared ? SHARED_SEED : wseed;
            uint64_t rn = shared ? crash_mix(&rng) % 64 : i;
            int lvl = shared ? ENVLOG_LEVEL_BASIC : (int)o.level;
            crash_rec r;
            crash_make(&r, rs, rn, lvl, false);
            envlog_stamp st;
            if ((e = crash_record(s, &r, &st))) {
                fprintf(stderr, "crash-conc: writer %d: recording: %s\n", w, envlog_errmsg());
                return 2;
            }
            envlog_session_stats ss;
            envlog_session_stats_get(s, &ss);
            crash_ack a = {.seq = st.seq, .seed = rs, .n = rn,
                           .hash = crash_hash_made(&r, lvl), .kind = (uint8_t)r.kind,
                           .level = (uint8_t)lvl, .on_disk = ss.on_disk,
                           .offset_ns = st.offset_ns};
            memcpy(a.session, st.session.b, 16);
            crash_rec_free(&r);
            send_msg(out, &a);
            sid = st.session;
            any = true;
            /* About 300 records a second per writer: the history stays a
             * size that all-evidence compaction folds in memory quickly. */
            sleep_us(crash_mix(&rng) % 6000);
        }
        envlog_session_stats ss;
        envlog_session_stats_get(s, &ss);
        /* The session's start, for the reference fold: read while the
         * session is live, so no compaction can have retired it. */
        uint64_t start = any && ss.on_disk ? session_start(env, &sid) : 0;
        if ((e = envlog_session_end(s))) {
            fprintf(stderr, "crash-conc: writer %d: ending: %s\n", w, envlog_errmsg());
            return 2;
        }
        if (start) {
            crash_ack a = {.kind = 0, .seq = start};
            memcpy(a.session, sid.b, 16);
            send_msg(out, &a);
        }
    }
    envlog_env_close(env);
    return 0;
}

/* ----------------------------------------------------- compaction loop */

static int compactor(const char *dir, uint64_t seed, uint64_t deadline)
{
    uint64_t rng = seed ^ 0xc0ffee;
    int bad = 0, done = 0;
    uint64_t removed = 0;
    while (now_ns() < deadline) {
        envlog_env *env;
        envlog_err e = envlog_env_open(dir, 0, &env);
        if (!e) {
            envlog_compact_report rep;
            e = envlog_compact(env, ENVLOG_EVIDENCE_ALL, &rep);
            envlog_env_close(env);
            done += e == ENVLOG_OK;
            removed += e == ENVLOG_OK ? rep.sessions_removed : 0;
        }
        if (e && e != ENVLOG_BUSY) {
            fprintf(stderr, "crash-conc: compaction: %s (%s)\n", envlog_strerror(e),
                    envlog_errmsg());
            bad++;
        }
        sleep_us(20000 + crash_mix(&rng) % 200000);
    }
    printf("crash-conc: %d compactions, %llu sessions retired\n", done,
           (unsigned long long)removed);
    return bad ? 1 : 0;
}

/* --------------------------------------------------------- killer loop */

/* The automatic compactors: children of `parent` (their subreaper) that are
 * none of the processes it started. */
static size_t find_compactors(pid_t parent, const pid_t *known, int n_known, pid_t *out,
                              size_t cap)
{
    DIR *d = opendir("/proc");
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) && n < cap) {
        pid_t pid = (pid_t)atoi(de->d_name);
        if (pid <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        /* pid (comm) state ppid ...: comm may hold spaces, so from its ')'. */
        char *rp = strrchr(buf, ')');
        char state;
        int ppid;
        if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2 || ppid != (int)parent ||
            state == 'Z')
            continue;
        bool mine = pid == getpid();
        for (int i = 0; i < n_known && !mine; i++)
            mine = known[i] == pid;
        if (!mine)
            out[n++] = pid;
    }
    if (d)
        closedir(d);
    return n;
}

static int killer(pid_t parent, const pid_t *known, int n_known, uint64_t seed,
                  uint64_t deadline)
{
    uint64_t rng = seed ^ 0xdead;
    unsigned kills = 0;
    while (now_ns() < deadline) {
        pid_t v[64];
        size_t n = find_compactors(parent, known, n_known, v, 64);
        /* Some run to the end, some die at a random moment of their work. */
        if (n && crash_mix(&rng) % 2) {
            sleep_us(crash_mix(&rng) % 30000);
            if (!kill(v[crash_mix(&rng) % n], SIGKILL))
                kills++;
        }
        sleep_us(2000 + crash_mix(&rng) % 20000);
    }
    printf("crash-conc: %u automatic compactions killed\n", kills);
    return 0;
}

/* --------------------------------------------------------- reader loop */

typedef struct rctx {
    int damage;
    char first[200];
} rctx;

static void reader_damage(void *ctx, const envlog_damage *d, bool torn)
{
    rctx *c = ctx;
    if (!c->damage++)
        snprintf(c->first, sizeof c->first, "%s%s", torn ? "torn tail: " : "", d->reason);
}

static int reader(const char *dir, uint64_t deadline)
{
    uint64_t best = 0;
    int bad = 0, folds = 0;
    while (now_ns() < deadline) {
        envlog_env *env;
        if (envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env)) {
            sleep_us(10000);
            continue;
        }
        rctx c = {0};
        envlog_replay_opts o = {.on_damage = reader_damage, .ctx = &c};
        envlog_state *st;
        envlog_err e = envlog_state_open(env, &o, &st);
        if (!e) {
            envlog_state_stats ss;
            envlog_state_stats_get(st, &ss);
            uint64_t n = ss.tunes + ss.kernels;
            if (n < best && bad++ < 10)
                fprintf(stderr, "crash-conc: a fold found %llu entries after one found %llu\n",
                        (unsigned long long)n, (unsigned long long)best);
            if (n > best)
                best = n;
            envlog_state_close(st);
            folds++;
        } else if (bad++ < 10) {
            fprintf(stderr, "crash-conc: a fold failed: %s (%s)\n", envlog_strerror(e),
                    envlog_errmsg());
        }
        if (c.damage && bad++ < 10)
            fprintf(stderr, "crash-conc: a fold met %d damaged regions: %s\n", c.damage,
                    c.first);
        envlog_env_close(env);
    }
    printf("crash-conc: %d folds by the reader loop\n", folds);
    return bad ? 1 : 0;
}

/* --------------------------------------------------- the reference fold */

typedef struct start_of {
    uint8_t session[16];
    uint64_t start;
} start_of;

typedef struct timed {
    const crash_ack *a;
    uint64_t unix_ns;
} timed;

static int timed_cmp(const void *x, const void *y)
{
    const timed *a = x, *b = y;
    envlog_id128 ia, ib;
    memcpy(ia.b, a->a->session, 16);
    memcpy(ib.b, b->a->session, 16);
    return envlog_order_cmp(a->unix_ns, &ia, a->a->seq, b->unix_ns, &ib, b->a->seq);
}

static envlog_err mem_write(void *ctx, const char *text, size_t len)
{
    return envlog_buf_append(ctx, text, len);
}

/* Folds the acknowledged records themselves, in the total order. */
static char *reference_dump(const crash_acks *acks, const start_of *starts, size_t n_starts)
{
    timed *t = calloc(acks->n + 1, sizeof *t);
    size_t n = 0;
    for (size_t i = 0; i < acks->n; i++) {
        const start_of *so = NULL;
        for (size_t k = 0; k < n_starts && !so; k++)
            if (!memcmp(starts[k].session, acks->a[i].session, 16))
                so = &starts[k];
        if (!so) {
            fprintf(stderr, "crash-conc: no start time for a session\n");
            exit(2);
        }
        t[n].a = &acks->a[i];
        t[n++].unix_ns = so->start + acks->a[i].offset_ns;
    }
    qsort(t, n, sizeof *t, timed_cmp);
    envlog_state *st;
    if (envlog_state_new(&st))
        exit(2);
    envlog_buf payload = {0};
    envlog_arena arena = {0};
    for (size_t i = 0; i < n; i++) {
        const crash_ack *a = t[i].a;
        crash_rec r;
        crash_make(&r, a->seed, a->n, a->level, false);
        envlog_stamp stamp;
        memcpy(stamp.session.b, a->session, 16);
        stamp.seq = a->seq;
        stamp.offset_ns = a->offset_ns;
        const void *body = r.kind == ENVLOG_KIND_TUNE      ? (const void *)&r.tune
                           : r.kind == ENVLOG_KIND_COMPILE ? (const void *)&r.compile
                                                           : (const void *)&r.mark;
        if (r.kind == ENVLOG_KIND_MARK) {
            crash_rec_free(&r);
            continue; /* the fold does not look at marks */
        }
        envlog_effect eff = envlog_effect_of(r.kind, body);
        envlog_record rec;
        memset(&rec, 0, sizeof rec);
        envlog_arena_reset(&arena);
        if (envlog_event_encode(&payload, r.kind, &stamp, eff, (envlog_level)a->level, body) ||
            envlog_event_decode(payload.p, payload.len, &rec, &arena)) {
            fprintf(stderr, "crash-conc: re-encoding a record: %s\n", envlog_errmsg());
            exit(2);
        }
        rec.stamp.session = stamp.session;
        envlog_state_wrlock(st);
        envlog_err e = envlog_state_fold(st, &rec, t[i].unix_ns);
        envlog_state_unlock(st);
        if (e)
            exit(2);
        crash_rec_free(&r);
    }
    envlog_buf out = {0};
    if (envlog_state_dump(st, mem_write, &out))
        exit(2);
    envlog_buf_append(&out, "", 1);
    envlog_state_close(st);
    envlog_buf_free(&payload);
    envlog_arena_free(&arena);
    free(t);
    return (char *)out.p;
}

static char *env_dump(const char *dir)
{
    envlog_env *env;
    envlog_state *st;
    envlog_buf out = {0};
    if (envlog_env_open(dir, ENVLOG_OPEN_READONLY, &env) ||
        envlog_state_open(env, NULL, &st) || envlog_state_dump(st, mem_write, &out)) {
        fprintf(stderr, "crash-conc: final fold: %s\n", envlog_errmsg());
        exit(2);
    }
    envlog_buf_append(&out, "", 1);
    envlog_state_close(st);
    envlog_env_close(env);
    return (char *)out.p;
}

/* The first line where two dumps differ. */
static void show_difference(const char *a, const char *b)
{
    size_t line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    fprintf(stderr, "crash-conc: line %zu:\n  final:     %.300s\n  reference: %.300s\n", line,
            la, lb);
}

int main(int argc, char **argv)
{
    int writers = 16;
    double seconds = 10;
    uint64_t seed = (uint64_t)time(NULL);
    const char *base = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "d:t:w:s:")) != -1) {
        switch (opt) {
        case 'd': base = optarg; break;
        case 't': seconds = atof(optarg); break;
        case 'w': writers = atoi(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        default:
            fprintf(stderr, "usage: crash-conc [-d DIR] [-t SECONDS] [-w WRITERS] [-s SEED]\n");
            return 2;
        }
    }
    const char *tmp = getenv("TMPDIR");
    char work[4096], dir[4200];
    snprintf(work, sizeof work, "%s/envlog-conc-XXXXXX", base ? base : tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work)) {
        perror("crash-conc: mkdtemp");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s/env", work);
    envlog_env *env;
    if (envlog_env_open(dir, ENVLOG_OPEN_CREATE, &env)) {
        fprintf(stderr, "crash-conc: %s\n", envlog_errmsg());
        return 2;
    }
    /* Every record must read back: the compactions the writers start on
     * their own (at 4 sessions here) keep all of the history too. */
    envlog_config cfg;
    envlog_config_defaults(&cfg);
    cfg.evidence = ENVLOG_EVIDENCE_ALL;
    cfg.history_sessions = 0;
    cfg.compact_sessions = 4;
    if (envlog_config_write(env, &cfg)) {
        fprintf(stderr, "crash-conc: %s\n", envlog_errmsg());
        return 2;
    }
    envlog_env_close(env);
    printf("crash-conc: %d writers, a compaction loop, a reader loop and automatic compactions "
           "killed at random for %.0f s, seed %llu\n", writers, seconds,
           (unsigned long long)seed);
    fflush(stdout);
    signal(SIGPIPE, SIG_IGN);
    /* The writers' automatic compactors are detached: orphaned, they come
     * to this process, which the killer loop looks under and which reaps
     * them at the end. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1)) {
        perror("crash-conc: prctl");
        return 2;
    }
    pid_t self = getpid();
    int p[2];
    if (pipe(p))
        return 2;
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    pid_t pids[259];
    int np = 0;
    for (int i = 0; i < writers + 3 && i < 259; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("crash-conc: fork");
            return 2;
        }
        if (pid == 0) {
            close(p[0]);
            alarm((unsigned)seconds + 120);
            int rc = i < writers       ? writer(dir, i, seed, deadline, p[1])
                     : i == writers     ? compactor(dir, seed, deadline)
                     : i == writers + 1 ? reader(dir, deadline)
                                        : killer(self, pids, np, seed, deadline);
            fflush(stdout);
            _exit(rc);
        }
        pids[np++] = pid;
    }
    close(p[1]);
    crash_acks acks = {0};
    start_of *starts = NULL;
    size_t n_starts = 0, cap_starts = 0;
    crash_ack a;
    size_t part = 0;
    for (;;) {
        ssize_t r = read(p[0], (char *)&a + part, sizeof a - part);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        part += (size_t)r;
        if (part < sizeof a)
            continue;
        part = 0;
        if (a.kind == 0) {
            if (n_starts == cap_starts) {
                cap_starts = cap_starts ? 2 * cap_starts : 256;
                starts = realloc(starts, cap_starts * sizeof *starts);
            }
            memcpy(starts[n_starts].session, a.session, 16);
            starts[n_starts++].start = a.seq;
        } else {
            crash_acks_add(&acks, &a);
        }
    }
    close(p[0]);
    int failures = 0;
    for (int i = 0; i < np; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "crash-conc: %s %d ended with status %d\n",
                    i < writers         ? "writer"
                    : i == writers      ? "the compaction loop"
                    : i == writers + 1  ? "the reader loop"
                                        : "the killer loop",
                    i, st);
            failures++;
        }
    }
    /* The automatic compactions still running finish (or were killed). */
    unsigned autos = 0;
    for (int st; waitpid(-1, &st, 0) > 0 || errno == EINTR;)
        autos++;
    printf("crash-conc: %u automatic compactions started\n", autos);
    /* Held records of sessions that never reached the disk leave nothing:
     * those acknowledgements promise nothing and have no start time. */
    crash_acks kept = {0};
    for (size_t i = 0; i < acks.n; i++) {
        bool started = false;
        for (size_t k = 0; k < n_starts && !started; k++)
            started = !memcmp(starts[k].session, acks.a[i].session, 16);
        if (started)
            crash_acks_add(&kept, &acks.a[i]);
    }
    crash_verdict v = {0};
    int problems = crash_verify_env(dir, &kept, false, &v);
    if (problems) {
        fprintf(stderr, "crash-conc: %d problems: %llu of %llu acknowledged records missing\n",
                problems, (unsigned long long)v.missing, (unsigned long long)v.promised);
        failures++;
    }
    char *final = env_dump(dir), *ref = reference_dump(&kept, starts, n_starts);
    size_t lines = 0;
    for (const char *q = ref; *q; q++)
        lines += *q == '\n';
    if (strcmp(final, ref)) {
        fprintf(stderr, "crash-conc: the final fold differs from the fold of the "
                        "acknowledged records\n");
        show_difference(final, ref);
        failures++;
    }
    printf("crash-conc: %zu records acknowledged in %zu sessions, %llu read back, "
           "%zu entries in the final fold: %s\n",
           kept.n, n_starts, (unsigned long long)v.records, lines, failures ? "FAILED" : "ok");
    free(final);
    free(ref);
    free(starts);
    crash_acks_free(&acks);
    crash_acks_free(&kept);
    if (!failures)
        nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    else
        fprintf(stderr, "crash-conc: environment kept in %s\n", dir);
    return failures ? 1 : 0;
}
