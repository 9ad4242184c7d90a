/* SPDX-License-Identifier: MIT */
/*
 * crash_driver.c - the kill -9 loop.
 *
 *   crash-driver -e ENVLOG -w WRITER -n KILLS [-s SEED] [-d DIR] [-r RESET]
 *
 * Starts WRITER (tests/crash/writer.c) on an environment under DIR, reads
 * its acknowledgements from a pipe, and kills it with SIGKILL at a random
 * moment: after a random number of acknowledgements, or after a random
 * delay (from at once to 50 ms).  After each kill:
 *  - `envlog verify --json` exits 0, or 1 with nothing but torn tails, and
 *    says so for each torn session; no session is "damaged";
 *  - `envlog replay` exits 0, or 1 reporting torn tails only;
 *  - a replay in process hands out only records that are, field for field,
 *    what the writer recorded, and every acknowledged record is there;
 *  - now and then `envlog verify --fix` cuts the torn tails, after which
 *    verify is clean and every acknowledged record is still there.
 * The environment is shared by RESET runs in a row (default 5), so later
 * writers meet the torn sessions and snapshots of earlier ones.  Exit 0 when
 * every check held, 1 otherwise.  Timing is never asserted.
 */
#include "verify.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char *envlog_bin, *writer_bin;
static char work[4096], envdir[4200], outf[4200], errf[4200], werrf[4200];
static int failures;

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "crash-driver: FAIL: " __VA_ARGS__);                   \
        fputc('\n', stderr);                                                   \
        failures++;                                                            \
    } while (0)

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void rmrf(const char *p)
{
    nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n)
        abort();
    p[n] = 0;
    fclose(f);
    return p;
}

/* Runs `envlog -C envdir ARGS...` with stdout and stderr to files; returns
 * its exit status (or 128 + signal). */
static int run_envlog(const char *a1, const char *a2)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char c_opt[] = "-C", b1[32] = "", b2[32] = "";
    snprintf(b1, sizeof b1, "%s", a1);
    if (a2)
        snprintf(b2, sizeof b2, "%s", a2);
    char *argv[] = {envlog_bin, c_opt, envdir, b1, a2 ? b2 : NULL, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, envlog_bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        fprintf(stderr, "crash-driver: cannot run %s: %s\n", envlog_bin, strerror(rc));
        exit(2);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* True when the environment directory holds nothing but what an
 * interrupted creation leaves (at most FORMAT.tmp), and the command says it
 * is not an environment: nothing was acknowledged, so nothing is lost. */
static bool unborn(void)
{
    struct stat st;
    char path[4300];
    if (stat(envdir, &st))
        return true;
    snprintf(path, sizeof path, "%s/FORMAT", envdir);
    if (stat(path, &st) == 0)
        return false;
    int rc = run_envlog("verify", NULL);
    char *err = slurp(errf);
    bool ok = rc == 3 && strstr(err, "no FORMAT marker");
    free(err);
    return ok;
}

/* `envlog verify --json`: the number of torn sessions, or -1 when the
 * output breaks a rule. */
static int check_verify(int iter, const char *when)
{
    int rc = run_envlog("verify", "--json");
    char *out = slurp(outf), *err = slurp(errf);
    int torn = 0, bad = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "\"state\":\"torn\""))
            torn++;
        else if (strstr(line, "\"snapshot\":") && strstr(line, "\"intact\":true"))
            continue;
        else if (!strstr(line, "\"state\":\"sealed\"") &&
                 !strstr(line, "\"state\":\"unsealed\"") &&
                 /* a detached compactor from a session end the kill did
                  * not reach folded this session into the snapshot while
                  * verify read it: envlog(1) says so, it is not damage */
                 !strstr(line, "\"state\":\"retired\"")) {
            FAIL("run %d %s: verify reports %.300s", iter, when, line);
            bad = 1;
        }
        if (strstr(line, "\"torn\":false")) {
            FAIL("run %d %s: verify reports damage that is not a torn tail: %.300s", iter,
                 when, line);
            bad = 1;
        }
    }
    if (rc != (torn ? 1 : 0)) {
        FAIL("run %d %s: verify exited %d with %d torn sessions: %.300s", iter, when, rc,
             torn, err);
        bad = 1;
    }
    free(out);
    free(err);
    return bad ? -1 : torn;
}

static void check_replay(int iter, int torn)
{
    int rc = run_envlog("replay", NULL);
    char *err = slurp(errf);
    if (rc != (torn ? 1 : 0))
        FAIL("run %d: replay exited %d with %d torn sessions: %.300s", iter, rc, torn, err);
    for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "envlog: torn tail: ", 19))
            FAIL("run %d: replay says %.300s", iter, line);
    free(err);
}

/* One read of the writer's acknowledgements from `fd`, a whole one added
 * to `acks` (counted in *got) once its last byte is in: false at the
 * pipe's end. */
static bool read_acks(int fd, crash_ack *a, size_t *part, crash_acks *acks, uint64_t *got)
{
    ssize_t r = read(fd, (char *)a + *part, sizeof *a - *part);
    if (r <= 0)
        return false;
    *part += (size_t)r;
    if (*part == sizeof *a) {
        crash_acks_add(acks, a);
        *part = 0;
        (*got)++;
    }
    return true;
}

static void check_records(int iter, crash_acks *acks, const char *when, uint64_t *records)
{
    crash_verdict v = {0};
    int p = crash_verify_env(envdir, acks, true, &v);
    if (p)
        FAIL("run %d %s: %d problems (%llu promised, %llu missing, %llu bad records)", iter,
             when, p, (unsigned long long)v.promised, (unsigned long long)v.missing,
             (unsigned long long)v.bad_records);
    *records += v.records;
}

int main(int argc, char **argv)
{
    long kills = 200, reset = 5;
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    const char *dir = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "e:w:n:s:d:r:")) != -1) {
        switch (opt) {
        case 'e': envlog_bin = optarg; break;
        case 'w': writer_bin = optarg; break;
        case 'n': kills = atol(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        case 'd': dir = optarg; break;
        case 'r': reset = atol(optarg); break;
        default:
            fprintf(stderr, "usage: crash-driver -e ENVLOG -w WRITER -n KILLS [-s SEED] "
                            "[-d DIR] [-r RESET]\n");
            return 2;
        }
    }
    if (!envlog_bin || !writer_bin || kills < 1 || reset < 1) {
        fprintf(stderr, "crash-driver: -e ENVLOG, -w WRITER and -n KILLS are needed\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(work, sizeof work, "%s/envlog-crash-XXXXXX", dir ? dir : tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work)) {
        perror("crash-driver: mkdtemp");
        return 2;
    }
    snprintf(envdir, sizeof envdir, "%s/env", work);
    snprintf(outf, sizeof outf, "%s/out", work);
    snprintf(errf, sizeof errf, "%s/err", work);
    snprintf(werrf, sizeof werrf, "%s/writer.err", work);
    signal(SIGPIPE, SIG_IGN);
    /* A writer's session end may start a compaction in a detached process:
     * adopted here, it is waited for before the environment is removed (a
     * compactor still at work would otherwise put files back into the new
     * one, and it would not be an environment). */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    printf("crash loop: %ld kills, seed %llu\n", kills, (unsigned long long)seed);
    fflush(stdout);

    uint64_t rng = seed;
    crash_acks acks = {0};
    uint64_t total_acks = 0, records = 0, torn_seen = 0, fixes = 0, finished = 0;
    uint64_t unborn_envs = 0;
    long runs = 0, killed = 0;
    uint64_t t_writer = 0, t_cli = 0, t_check = 0;
    for (long iter = 0; killed < kills && failures == 0; iter++, runs++) {
        if (iter % reset == 0) {
            while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
            rmrf(envdir);
            crash_acks_free(&acks);
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC)) {
            perror("crash-driver: pipe");
            return 2;
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], 3);
        posix_spawn_file_actions_addopen(&fa, 2, werrf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        char sbuf[32], mbuf[32];
        uint64_t wseed = crash_mix(&rng);
        snprintf(sbuf, sizeof sbuf, "%llu", (unsigned long long)(wseed % 1000000000u));
        snprintf(mbuf, sizeof mbuf, "%llu", (unsigned long long)(200 + crash_mix(&rng) % 3000));
        char *wargv[] = {writer_bin, envdir, sbuf, mbuf, NULL};
        pid_t pid;
        int rc = posix_spawn(&pid, writer_bin, &fa, NULL, wargv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (rc) {
            fprintf(stderr, "crash-driver: cannot run %s: %s\n", writer_bin, strerror(rc));
            return 2;
        }
        /* When to kill: after so many acknowledgements, or so much time. */
        uint64_t mode = crash_mix(&rng) % 10;
        uint64_t want_acks = mode < 4 ? crash_mix(&rng) % 600 : UINT64_MAX;
        uint64_t delay = mode < 4 ? 300000u
                         : mode < 5 ? crash_mix(&rng) % 3000
                                    : crash_mix(&rng) % 50000;
        uint64_t start = now_us(), got = 0;
        crash_ack a;
        size_t part = 0;
        bool eof = false;
        while (!eof && got < want_acks) {
            uint64_t el = now_us() - start;
            if (el >= delay)
                break;
            struct pollfd pf = {p[0], POLLIN, 0};
            uint64_t left = delay - el;
            int pr = poll(&pf, 1, (int)(left / 1000) + 1);
            if (pr <= 0)
                continue;
            eof = !read_acks(p[0], &a, &part, &acks, &got);
        }
        kill(pid, SIGKILL);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        /* What was written before the kill is still in the pipe. */
        while (read_acks(p[0], &a, &part, &acks, &got))
            ;
        close(p[0]);
        total_acks += got;
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
            killed++;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            finished++;
        } else {
            char *e = slurp(werrf);
            FAIL("run %ld: the writer (seed %s) ended with status %d: %s", iter, sbuf, st, e);
            free(e);
            break;
        }
        uint64_t t1 = now_us();
        t_writer += t1 - start;
        if (!acks.n && unborn()) {
            unborn_envs++; /* killed while creating the environment */
            continue;
        }
        int torn = check_verify((int)iter, "after the kill");
        if (torn < 0)
            break;
        torn_seen += (uint64_t)torn;
        uint64_t t2 = now_us();
        check_replay((int)iter, torn);
        uint64_t t3 = now_us();
        check_records((int)iter, &acks, "after the kill", &records);
        uint64_t t4 = now_us();
        t_cli += t3 - t1;
        t_check += t4 - t3;
        (void)t2;
        if (torn && crash_mix(&rng) % 3 == 0) {
            /* Cutting torn tails loses nothing that was acknowledged. */
            rc = run_envlog("verify", "--fix");
            if (rc != 1) {
                char *o = slurp(outf);
                FAIL("run %ld: verify --fix exited %d: %.400s", iter, rc, o);
                free(o);
            }
            if (check_verify((int)iter, "after --fix") != 0)
                FAIL("run %ld: torn tails left after verify --fix", iter);
            check_records((int)iter, &acks, "after --fix", &records);
            fixes++;
        }
        if (failures)
            fprintf(stderr, "crash-driver: run %ld: writer seed %s; environment kept in %s\n",
                    iter, sbuf, envdir);
    }
    crash_acks_free(&acks);
    if (getenv("CRASH_VERBOSE"))
        printf("crash loop: %.1f s writing, %.1f s in verify and replay, %.1f s checking\n",
               t_writer / 1e6, t_cli / 1e6, t_check / 1e6);
    printf("crash loop: %ld runs, %ld killed, %llu finished, %llu acknowledged, "
           "%llu records checked, %llu torn tails (%llu cut by --fix), %llu killed while "
           "creating the environment: %s\n",
           runs, killed, (unsigned long long)finished, (unsigned long long)total_acks,
           (unsigned long long)records, (unsigned long long)torn_seen,
           (unsigned long long)fixes, (unsigned long long)unborn_envs,
           failures ? "FAILED" : "ok");
    if (!failures)
        rmrf(work);
    return failures ? 1 : 0;
}
