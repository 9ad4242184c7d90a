/* SPDX-License-Identifier: MIT */
/*
 * b_remote.c - sharing through a remote: push and pull throughput and a
 * fresh machine's warm start, against a real redis-server on the loopback,
 * beside redis-cli copying the same bytes and the link's own limit.
 *
 * The section starts its own redis-server (Debian's) on a free 127.0.0.1
 * port, kept in memory only (no RDB, no AOF: the network and the server
 * are measured, not its disk), and stops it at the end.  Without
 * redis-server, redis-cli or hiredis it says it did not run, and why.
 *
 * The data is built once (untimed): N sealed sessions (1,000; 200 with
 * --quick), each 8 tunes and one compile of a 32 KiB kernel, as a runtime
 * records them, pushed once into database 1 for the pulls; the same
 * environment compacted and pushed with its snapshot into database 3.
 * Then, alternating:
 *  - envlog push: envlog_remote_push() of the N sessions into database 0,
 *    emptied before each run (untimed);
 *  - envlog pull: envlog_remote_pull() of the N sessions from database 1
 *    into a new, empty environment (every object checked, each session
 *    read whole and renamed into place);
 *  - warm start: a fresh machine with only the config (a remote naming
 *    database 1): envlog_env_open() with ENVLOG_OPEN_PULL, then the state
 *    and the lookup of a key of the last session: pull + open + first
 *    lookup, as a runtime that never calls the command starts;
 *  - warm start from the remote's snapshot: the same against database 3;
 *  - redis-cli: `redis-cli --pipe` of one SET per object envlog wrote
 *    (segments and manifests, byte for byte the values database 1 holds)
 *    and one HSET per session index entry, into database 2, emptied
 *    before each run; and of one GET per object (and the index's HGETALL)
 *    from database 1, whose replies it reads and drops: the same bytes up
 *    and down with the server's own client, process start included;
 *  - the limit: the same number of bytes over one TCP connection on
 *    127.0.0.1, written by one thread and read by another (64 KiB writes),
 *    until the reader has them all.
 * The sqlite column of these rows is redis-cli; ratio = envlog/redis-cli,
 * share = envlog's fraction of the loopback limit.  Nothing is asserted
 * about a time; every run checks what it moved.
 */
#include "bench.h"
#include "envlog_remote.h"
#include "remote_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RB_TUNES 8            /* tunes a session */
#define RB_KERNEL 32768       /* its kernel's bytes */
#define RB_NS "autotune/bench/1.0/h100"

/* ------------------------------------------------------------ the server */

static pid_t rb_server_pid;

static void rb_server_kill(void)
{
    if (rb_server_pid > 0) {
        kill(rb_server_pid, SIGKILL);
        while (waitpid(rb_server_pid, NULL, 0) < 0 && errno == EINTR)
            ;
        rb_server_pid = 0;
    }
}

/* Whether `prog` is an executable file in a directory of $PATH. */
static bool rb_on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char dir[4096], file[4200];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s", (int)n, n ? path : ".");
        snprintf(file, sizeof file, "%s/%s", dir, prog);
        if (!access(file, X_OK))
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

static int rb_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Whether a server answers PING on `port`. */
static bool rb_ping(int port)
{
    int fd = rb_connect(port);
    if (fd < 0)
        return false;
    char buf[16] = {0};
    bool ok = write(fd, "PING\r\n", 6) == 6 && read(fd, buf, sizeof buf - 1) >= 5 &&
              !strncmp(buf, "+PONG", 5);
    close(fd);
    return ok;
}

/* Starts redis-server on a free port, memory only; returns the port. */
static int rb_server_start(const char *dir)
{
    char log[4300];
    snprintf(log, sizeof log, "%s/redis.log", dir);
    for (int attempt = 0; attempt < 10; attempt++) {
        int port = 30000 + (int)((bench_now_ns() / 1000 + (uint64_t)attempt * 7919) % 20000);
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        pid_t pid = fork();
        if (pid < 0)
            bench_die("fork: %s", strerror(errno));
        if (pid == 0) {
            /* The server never outlives the benchmark. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int null = open("/dev/null", O_RDWR);
            if (null >= 0) {
                dup2(null, 0);
                dup2(null, 1);
                dup2(null, 2);
            }
            execlp("redis-server", "redis-server", "--port", ps, "--bind", "127.0.0.1",
                   "--dir", dir, "--save", "", "--appendonly", "no", "--logfile", log,
                   (char *)NULL);
            _exit(127);
        }
        rb_server_pid = pid;
        for (int i = 0; i < 200; i++) {
            if (rb_ping(port))
                return port;
            if (waitpid(pid, NULL, WNOHANG) == pid) {
                rb_server_pid = 0;
                break;
            }
            usleep(25000);
        }
        rb_server_kill();
    }
    bench_die("redis-server did not start (see %s)", log);
}

/* ----------------------------------------------------- the server's client */

/* A connection to database `db` through envlog's own hiredis glue. */
static envlog_rconn *rb_conn(int port, int db)
{
    envlog_remote_cfg c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "bench");
    snprintf(c.host, sizeof c.host, "127.0.0.1");
    snprintf(c.url, sizeof c.url, "redis://127.0.0.1:%d/%d", port, db);
    snprintf(c.prefix, sizeof c.prefix, "envlog");
    c.port = port;
    c.db = db;
    envlog_rconn *rc;
    bench_check(envlog_rconn_open(&c, 60000000000ull, &rc), "connecting to redis-server");
    return rc;
}

/* One command; the reply (up to 1 GiB) for the caller to free. */
static envlog_rreply *rb_call(envlog_rconn *rc, int argc, const char **argv, const size_t *lens)
{
    size_t l[8];
    for (int i = 0; !lens && i < argc; i++)
        l[i] = strlen(argv[i]);
    envlog_rreply *r;
    bench_check(envlog_rconn_call(rc, (size_t)1 << 30, &r, argc, argv, lens ? lens : l),
                "calling redis-server");
    bench_expect(r->type != ENVLOG_R_ERROR, "redis-server: %.*s", (int)r->len,
                 r->str ? r->str : "");
    return r;
}

static void rb_flush(int port, int db)
{
    envlog_rconn *rc = rb_conn(port, db);
    const char *argv[] = {"FLUSHDB"};
    envlog_rreply_free(rb_call(rc, 1, argv, NULL));
    envlog_rconn_close(rc);
}

/* Appends one command in RESP to `f`. */
static void rb_resp(FILE *f, int argc, const char **argv, const size_t *lens)
{
    fprintf(f, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        fprintf(f, "$%zu\r\n", lens[i]);
        fwrite(argv[i], 1, lens[i], f);
        fputs("\r\n", f);
    }
}

/* Writes what redis-cli sends: SETs of every object of database `db` and
 * HSETs of its index (`up`), and GETs of the same (`down`).  Returns the
 * objects' bytes; sets *objects. */
static uint64_t rb_cli_files(int port, int db, const char *up, const char *down,
                             uint64_t *objects)
{
    envlog_rconn *rc = rb_conn(port, db);
    FILE *fu = fopen(up, "w"), *fd = fopen(down, "w");
    bench_expect(fu && fd, "creating %s", up);
    const char *keys[] = {"KEYS", "envlog:obj:*"};
    envlog_rreply *k = rb_call(rc, 2, keys, NULL);
    uint64_t bytes = 0;
    *objects = k->n;
    for (size_t i = 0; i < k->n; i++) {
        const char *get[] = {"GET", k->el[i].str};
        size_t gl[] = {3, k->el[i].len};
        envlog_rreply *v = rb_call(rc, 2, get, gl);
        bench_expect(v->type == ENVLOG_R_STRING, "object %.*s", (int)gl[1], get[1]);
        const char *set[] = {"SET", k->el[i].str, v->str};
        size_t sl[] = {3, k->el[i].len, v->len};
        rb_resp(fu, 3, set, sl);
        rb_resp(fd, 2, get, gl);
        bytes += v->len;
        envlog_rreply_free(v);
    }
    envlog_rreply_free(k);
    const char *all[] = {"HGETALL", "envlog:sessions"};
    envlog_rreply *h = rb_call(rc, 2, all, NULL);
    for (size_t i = 0; i + 1 < h->n; i += 2) {
        const char *hset[] = {"HSET", "envlog:sessions", h->el[i].str, h->el[i + 1].str};
        size_t hl[] = {4, 15, h->el[i].len, h->el[i + 1].len};
        rb_resp(fu, 4, hset, hl);
    }
    size_t al[] = {7, 15};
    rb_resp(fd, 2, all, al);
    envlog_rreply_free(h);
    bench_expect(!fclose(fu) && !fclose(fd), "writing %s", up);
    envlog_rconn_close(rc);
    return bytes;
}

/* `redis-cli -p PORT -n DB --pipe < in`, its summary to `out`; checks it
 * saw no error. */
static void rb_cli_pipe(int port, int db, const char *in, const char *out)
{
    char ps[16], ds[16];
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(ds, sizeof ds, "%d", db);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (pid == 0) {
        int i = open(in, O_RDONLY), o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (i < 0 || o < 0)
            _exit(126);
        dup2(i, 0);
        dup2(o, 1);
        dup2(o, 2);
        execlp("redis-cli", "redis-cli", "-p", ps, "-n", ds, "--pipe", (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            bench_die("waitpid: %s", strerror(errno));
    FILE *f = fopen(out, "r");
    char line[512], all[2048] = "";
    while (f && fgets(line, sizeof line, f))
        if (strlen(all) + strlen(line) < sizeof all)
            strcat(all, line);
    if (f)
        fclose(f);
    bench_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(all, "errors: 0,"),
                 "redis-cli --pipe < %s: %s", in, all);
}

/* ------------------------------------------------------------ the limit */

typedef struct rb_sink {
    int lfd;
    uint64_t bytes;
} rb_sink;

static void *rb_sink_main(void *arg)
{
    rb_sink *s = arg;
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    static char buf[1 << 16];
    uint64_t got = 0;
    ssize_t n;
    while (got < s->bytes && ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
        got += n > 0 ? (uint64_t)n : 0;
    if (got == s->bytes)
        (void)!write(fd, "k", 1);
    close(fd);
    return NULL;
}

/* Seconds to move `bytes` over one loopback TCP connection, connect to the
 * reader's acknowledgement. */
static double rb_loopback(uint64_t bytes)
{
    rb_sink s = {socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), bytes};
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    bench_expect(s.lfd >= 0 && !bind(s.lfd, (struct sockaddr *)&a, sizeof a) &&
                     !listen(s.lfd, 1) && !getsockname(s.lfd, (struct sockaddr *)&a, &al),
                 "a loopback socket: %s", strerror(errno));
    pthread_t t;
    bench_expect(!pthread_create(&t, NULL, rb_sink_main, &s), "a thread");
    static char buf[1 << 16];
    memset(buf, 0x5a, sizeof buf);
    uint64_t t0 = bench_now_ns();
    int fd = rb_connect(ntohs(a.sin_port));
    bench_expect(fd >= 0, "connecting over the loopback: %s", strerror(errno));
    for (uint64_t sent = 0; sent < bytes;) {
        size_t n = bytes - sent < sizeof buf ? (size_t)(bytes - sent) : sizeof buf;
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        bench_expect(w > 0, "writing over the loopback: %s", strerror(errno));
        sent += (uint64_t)w;
    }
    char ack;
    bench_expect(read(fd, &ack, 1) == 1, "the loopback reader did not get every byte");
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    close(fd);
    pthread_join(t, NULL);
    close(s.lfd);
    return secs;
}

/* --------------------------------------------------------------- the data */

/* N sessions of a runtime into a new environment at `path`. */
static void rb_record(const char *path, uint64_t n)
{
    envlog_env *env;
    bench_tune bt;
    bench_compile bc;
    bench_tune_init(&bt);
    bt.t.ns = RB_NS;
    bench_compile_init(&bc, RB_KERNEL);
    bench_check(envlog_env_open(path, ENVLOG_OPEN_CREATE | ENVLOG_OPEN_NO_UPKEEP, &env),
                "creating the environment");
    for (uint64_t i = 0; i < n; i++) {
        envlog_session_opts o;
        envlog_session_opts_init(&o);
        o.label = "remote";
        o.auto_compact = -1;
        o.auto_push = -1;
        envlog_session *s;
        bench_check(envlog_session_begin(env, &o, &s), "beginning a session");
        for (uint64_t j = 0; j < RB_TUNES; j++) {
            bench_tune_fill(&bt, RB_TUNES * i + j);
            bench_check(envlog_record_tune(s, &bt.t, NULL), "recording a tune");
        }
        bench_compile_fill(&bc, i);
        bench_check(envlog_record_compile(s, &bc.c, NULL), "recording a compile");
        bench_check(envlog_session_end(s), "ending a session");
    }
    envlog_env_close(env);
    bench_compile_free(&bc);
}

/* Adds remote "bench" (database `db`) to the environment at `path`,
 * creating it; the pull at open may take a minute. */
static void rb_config(const char *path, int port, int db)
{
    envlog_env *env;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/%d", port, db);
    bench_check(envlog_env_open(path, ENVLOG_OPEN_CREATE | ENVLOG_OPEN_NO_UPKEEP, &env),
                "creating an environment");
    bench_check(envlog_remote_add(env, "bench", url, NULL), "adding the remote");
    bench_check(envlog_remote_set(env, "bench", "timeout", "1m"), "setting its timeout");
    envlog_env_close(env);
}

static uint64_t rb_count_sessions(const char *path)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/sessions", path);
    DIR *d = opendir(dir);
    uint64_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* ----------------------------------------------------------- the variants */

typedef enum rb_side {
    RB_PUSH,
    RB_PUSH_CLI,
    RB_PULL,
    RB_PULL_CLI,
    RB_WARM,
    RB_WARM_SNAP,
    RB_LOOP,
    RB_SIDES
} rb_side;

typedef struct rb_ctx {
    rb_side side;
    int port;
    const char *src;         /* the recorded environment */
    const char *up, *down;   /* redis-cli's input */
    const char *cli_out;
    uint64_t sessions, bytes;
    bench_tune last;         /* a key of the last session */
} rb_ctx;

static void rb_opts(envlog_remote_opts *o, const char *remote)
{
    memset(o, 0, sizeof *o);
    o->remote = remote;
    o->timeout_ns = 60000000000ull;
}

/* envlog push or pull of the environment at `path` with `remote`, opening
 * and closing it as the command does; checks the report. */
static double rb_move(const char *path, bool push, const char *remote, uint64_t sessions)
{
    envlog_env *env;
    envlog_remote_opts o;
    envlog_remote_report rep;
    rb_opts(&o, remote);
    uint64_t t0 = bench_now_ns();
    bench_check(envlog_env_open(path, ENVLOG_OPEN_NO_UPKEEP, &env), "opening");
    bench_check(push ? envlog_remote_push(env, &o, &rep) : envlog_remote_pull(env, &o, &rep),
                push ? "pushing" : "pulling");
    envlog_env_close(env);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    bench_expect(rep.sessions == sessions && !rep.refused && !rep.skipped,
                 "%s moved %" PRIu64 " of %" PRIu64 " sessions (%" PRIu64 " refused, %" PRIu64
                 " skipped)", push ? "push" : "pull", rep.sessions, sessions, rep.refused,
                 rep.skipped);
    return secs;
}

/* A fresh machine's start: the open that pulls, then a runtime's first
 * lookup (its own open, the state, the key of the last session). */
static double rb_warm(rb_ctx *c, int db, uint64_t want_sessions)
{
    char dir[4096];
    bench_fresh_dir(dir, sizeof dir, "warm");
    rb_config(dir, c->port, db);
    envlog_env *env;
    uint64_t t0 = bench_now_ns();
    bench_check(envlog_env_open(dir, ENVLOG_OPEN_PULL, &env), "opening with a pull");
    envlog_env_close(env);
    uint64_t pulled = bench_now_ns() - t0;
    double secs = (double)(pulled + bench_first_lookup(dir, &c->last, NULL)) / 1e9;
    uint64_t got = rb_count_sessions(dir);
    bench_expect(got == want_sessions, "the warm start pulled %" PRIu64 " of %" PRIu64
                 " sessions", got, want_sessions);
    bench_rmtree(dir);
    return secs;
}

static void run_remote(void *vctx, double scale, bench_run *out)
{
    rb_ctx *c = vctx;
    (void)scale; /* every run moves the whole remote, warm-up included */
    double secs = 0;
    char dir[4096];
    uint64_t t0;
    switch (c->side) {
    case RB_PUSH:
        rb_flush(c->port, 0);
        secs = rb_move(c->src, true, "bench", c->sessions);
        break;
    case RB_PULL:
        bench_fresh_dir(dir, sizeof dir, "pull");
        rb_config(dir, c->port, 1);
        secs = rb_move(dir, false, "bench", c->sessions);
        bench_rmtree(dir);
        break;
    case RB_PUSH_CLI:
    case RB_PULL_CLI:
        if (c->side == RB_PUSH_CLI)
            rb_flush(c->port, 2);
        t0 = bench_now_ns();
        rb_cli_pipe(c->port, c->side == RB_PUSH_CLI ? 2 : 1,
                    c->side == RB_PUSH_CLI ? c->up : c->down, c->cli_out);
        secs = (double)(bench_now_ns() - t0) / 1e9;
        break;
    case RB_WARM:
        secs = rb_warm(c, 1, c->sessions);
        break;
    case RB_WARM_SNAP:
        secs = rb_warm(c, 3, 0);
        break;
    case RB_LOOP:
        secs = rb_loopback(c->bytes);
        break;
    case RB_SIDES:
        break;
    }
    *out = (bench_run){secs, (double)c->sessions, (double)c->bytes, 0};
}

/* Why the section cannot run here, or NULL. */
static const char *rb_missing(void)
{
    static char why[400];
    if (!rb_on_path("redis-server") || !rb_on_path("redis-cli"))
        return "redis-server or redis-cli is not installed (make deps installs redis-server)";
    if (envlog_remote_available()) {
        snprintf(why, sizeof why, "%s", envlog_errmsg());
        return why;
    }
    return NULL;
}

static void rb_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rb_note(const char *fmt, ...)
{
    FILE *f = bench_o.json ? stderr : bench_out;
    va_list ap;
    va_start(ap, fmt);
    fputs("# remote: ", f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    va_end(ap);
}

void bench_section_remote(void)
{
    const char *why = rb_missing();
    if (why) {
        rb_note("did not run: %s", why);
        return;
    }
    uint64_t n = BENCH_SIZE(1000, 200, 4);
    char dir[4096], src[4200], snap[4200], up[4200], down[4200], cli_out[4200];
    bench_new_dir(dir, sizeof dir, "remote");
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(snap, sizeof snap, "%s/snap", dir);
    snprintf(up, sizeof up, "%s/up.resp", dir);
    snprintf(down, sizeof down, "%s/down.resp", dir);
    snprintf(cli_out, sizeof cli_out, "%s/cli.out", dir);
    static bool registered;
    if (!registered && !atexit(rb_server_kill))
        registered = true;
    int port = rb_server_start(dir);

    /* The data, untimed: the sessions; database 1 holding them; the
     * snapshot of the same sessions alone in database 3. */
    rb_record(src, n);
    rb_config(src, port, 0);
    envlog_env *env;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/1", port);
    bench_check(envlog_env_open(src, ENVLOG_OPEN_NO_UPKEEP, &env), "opening");
    bench_check(envlog_remote_add(env, "store", url, NULL), "adding a remote");
    envlog_env_close(env);
    rb_move(src, true, "store", n);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", src, snap);
    bench_expect(system(cmd) == 0, "copying %s", src);
    bench_check(envlog_env_open(snap, ENVLOG_OPEN_NO_UPKEEP, &env), "opening the copy");
    for (int i = 0; i < 2; i++)
        bench_check(envlog_compact(env, ENVLOG_EVIDENCE_WINNERS, NULL), "compacting");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", port);
    bench_check(envlog_remote_set(env, "bench", "url", url), "pointing at database 3");
    envlog_remote_opts o;
    envlog_remote_report rep;
    rb_opts(&o, "bench");
    o.snapshot = true;
    bench_check(envlog_remote_push(env, &o, &rep), "pushing the snapshot");
    bench_expect(rep.snapshot_moved, "the snapshot was not pushed: %s", rep.snapshot_note);
    uint64_t snap_bytes = rep.snapshot_bytes;
    envlog_env_close(env);
    uint64_t objects;
    uint64_t bytes = rb_cli_files(port, 1, up, down, &objects);

    rb_ctx ctx[RB_SIDES];
    bench_variant v[RB_SIDES];
    static const char *const names[RB_SIDES] = {"push",  "push-cli", "pull",    "pull-cli",
                                                "warm", "warm-snap", "loopback"};
    for (int i = 0; i < RB_SIDES; i++) {
        ctx[i] = (rb_ctx){.side = (rb_side)i, .port = port, .src = src, .up = up,
                          .down = down, .cli_out = cli_out, .sessions = n, .bytes = bytes};
        bench_tune_init(&ctx[i].last);
        ctx[i].last.t.ns = RB_NS;
        bench_tune_fill(&ctx[i].last, RB_TUNES * (n - 1));
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = names[i];
        v[i].fn = run_remote;
        v[i].ctx = &ctx[i];
    }
    rb_note("%" PRIu64 " sessions, %" PRIu64 " objects, %.1f MB on a redis-server of "
            "127.0.0.1 (memory only); the sqlite column is redis-cli --pipe copying the same "
            "objects, the limit one TCP stream of the same bytes over 127.0.0.1",
            n, objects, (double)bytes / 1e6);
    bench_alternate(v, RB_SIDES);
    double lim_rate = bench_variant_stat(&v[RB_LOOP], BENCH_RATE).median;
    double lim_mbps = bench_variant_stat(&v[RB_LOOP], BENCH_MBPS).median;
    double lim_ms = bench_variant_stat(&v[RB_LOOP], BENCH_SECS_MS).median;
    static const struct {
        rb_side envlog, cli;
        const char *what;
    } moves[] = {{RB_PUSH, RB_PUSH_CLI, "push"}, {RB_PULL, RB_PULL_CLI, "pull"}};
    for (size_t k = 0; k < 2; k++) {
        bench_row r = bench_row_make("remote", "sess/s", BENCH_RATE, &v[moves[k].envlog],
                                     &v[moves[k].cli], "%s %" PRIu64 " sessions",
                                     moves[k].what, n);
        r.baseline = "redis-cli";
        bench_row_limit(&r, lim_rate, "loopback");
        bench_emit(&r);
        r = bench_row_make("remote", "MB/s", BENCH_MBPS, &v[moves[k].envlog], &v[moves[k].cli],
                           "%s %" PRIu64 " sessions (%.1f MB)", moves[k].what, n,
                           (double)bytes / 1e6);
        r.baseline = "redis-cli";
        bench_row_limit(&r, lim_mbps, "loopback");
        bench_emit(&r);
    }
    bench_row r = bench_row_make("remote", "ms", BENCH_SECS_MS, &v[RB_WARM], &v[RB_PULL_CLI],
                                 "warm start: pull %" PRIu64 " + open + first lookup", n);
    r.baseline = "redis-cli";
    bench_row_limit(&r, lim_ms, "loopback");
    bench_emit(&r);
    r = bench_row_make("remote", "ms", BENCH_SECS_MS, &v[RB_WARM_SNAP], NULL,
                       "warm start from a snapshot of %.1f MB",
                       (double)snap_bytes / 1e6);
    bench_emit(&r);
    r = bench_row_make("remote", "MB/s", BENCH_MBPS, NULL, NULL,
                       "loopback: one TCP stream, %.1f MB", (double)bytes / 1e6);
    r.has_limit_stat = true;
    r.limit_stat = bench_variant_stat(&v[RB_LOOP], BENCH_MBPS);
    bench_row_limit(&r, lim_mbps, "tcp");
    bench_emit(&r);
    rb_server_kill();
    bench_rmtree(dir);
}
