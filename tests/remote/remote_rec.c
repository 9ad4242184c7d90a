/* SPDX-License-Identifier: MIT */
/*
 * remote_rec.c - a runtime that records and never calls the remote API: the remote
 * tests' machines.  It is linked against the shared library, as a runtime
 * is, so automatic sharing (auto_pull at open, auto_push at session end)
 * comes from the library by itself.
 *
 * usage: rec [--push N] [--pull] [--readonly] [--wait] ENV SESSIONS
 *            NAMESPACE TAG [KERNEL_BYTES] [LOOKUP_KEY]
 *   records SESSIONS sessions into ENV, each with 3 tunes under NAMESPACE
 *   (keys TAG-<session>-<n>) and one kernel of KERNEL_BYTES (default 4096);
 *   with LOOKUP_KEY (and SESSIONS 0) opens ENV and looks that tune key up
 *   under NAMESPACE instead: exit 0 when it is there, 1 when not.
 *   --push N gives the sessions the auto_push option N (-1, 0, 1); --pull
 *   opens ENV with ENVLOG_OPEN_PULL, --readonly with ENVLOG_OPEN_READONLY
 *   (for a lookup); --wait adopts the detached processes
 *   the session ends start (pushers, compactors) and waits for them before
 *   it exits, so a test reads what they did, or that none ran, without
 *   polling.
 */
#include "envlog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static const char *const cands[] = {"a", "b", "c"};

static void die(envlog_err e, const char *what)
{
    fprintf(stderr, "rec: %s: %s (%s)\n", what, envlog_errmsg(), envlog_strerror(e));
    exit(2);
}

int main(int argc, char **argv)
{
    int push = 0;
    unsigned flags = ENVLOG_OPEN_CREATE;
    for (; argc > 1 && !strncmp(argv[1], "--", 2); argc--, argv++)
        if (!strcmp(argv[1], "--push") && argc > 2) {
            push = atoi(argv[2]);
            argc--, argv++;
        } else if (!strcmp(argv[1], "--pull")) {
            flags |= ENVLOG_OPEN_PULL;
        } else if (!strcmp(argv[1], "--readonly")) {
            flags = (flags & ~ENVLOG_OPEN_CREATE) | ENVLOG_OPEN_READONLY;
        } else if (!strcmp(argv[1], "--wait")) {
            /* The detached processes' double fork leaves them to us. */
            if (prctl(PR_SET_CHILD_SUBREAPER, 1))
                return 2;
        } else {
            argc = 0;
            break;
        }
    if (argc < 5) {
        fprintf(stderr, "usage: rec [--push N] [--pull] [--readonly] [--wait] ENV SESSIONS "
                "NAMESPACE TAG [KERNEL_BYTES] [LOOKUP_KEY]\n");
        return 2;
    }
    int sessions = atoi(argv[2]);
    const char *ns = argv[3], *tag = argv[4];
    size_t kb = argc > 5 ? (size_t)strtoul(argv[5], NULL, 10) : 4096;
    envlog_env *env;
    envlog_err e = envlog_env_open(argv[1], flags, &env);
    if (e)
        die(e, "opening");
    if (argc > 6) {
        envlog_state *st;
        envlog_tune_entry t;
        if ((e = envlog_env_state(env, &st)))
            die(e, "replaying");
        e = envlog_state_winner(st, ns, argv[6], envlog_tune_checksum(cands, 3), &t);
        envlog_env_close(env);
        return e == ENVLOG_OK ? 0 : 1;
    }
    unsigned char *bin = malloc(kb ? kb : 1);
    if (!bin)
        return 2;
    for (int s = 0; s < sessions; s++) {
        envlog_session *ses;
        envlog_session_opts o;
        envlog_session_opts_init(&o);
        o.auto_push = push;
        if ((e = envlog_session_begin(env, &o, &ses)))
            die(e, "beginning a session");
        for (int k = 0; k < 3; k++) {
            char key[128];
            snprintf(key, sizeof key, "%s-%d-%d", tag, s, k);
            envlog_trial tr[3];
            for (int i = 0; i < 3; i++)
                tr[i] = (envlog_trial){.name = cands[i], .index = (uint32_t)i, .samples = 3,
                                       .min_ns = 90 + i * 10 + k, .median_ns = 100 + i * 10 + k,
                                       .mean_ns = 100 + i * 10 + k, .max_ns = 110 + i * 10 + k};
            envlog_tune t = {.ns = ns, .key = key, .checksum = envlog_tune_checksum(cands, 3),
                             .candidates = cands, .n_candidates = 3, .trials = tr,
                             .n_trials = 3, .policy = "min", .winner = 0, .margin = 0.1,
                             .wall_ns = 1000, .stored = true};
            if ((e = envlog_record_tune(ses, &t, NULL)))
                die(e, "recording a tune");
        }
        char name[128];
        snprintf(name, sizeof name, "k_%s_%d", tag, s);
        for (size_t i = 0; i < kb; i++)
            bin[i] = (unsigned char)(i * 131 + (size_t)s * 7 + strlen(tag));
        envlog_compile c = {.ns = "kernels/test/1.0/sm_90", .name = name, .arch = "sm_90",
                            .compiler_version = "1.0", .options = "",
                            .outcome = ENVLOG_COMPILED, .duration_ns = 1000,
                            .binary = {bin, kb}, .binary_size = kb,
                            .binary_hash = envlog_hash128_bytes(bin, kb),
                            .source_hash = envlog_hash128_bytes(name, strlen(name)),
                            .kernel_key = envlog_hash128_bytes(name, strlen(name))};
        if (kb && (e = envlog_record_compile(ses, &c, NULL)))
            die(e, "recording a compile");
        if ((e = envlog_session_end(ses)))
            die(e, "ending a session");
    }
    free(bin);
    envlog_env_close(env);
    /* Without --wait there is no child: waitpid says so at once. */
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    return 0;
}
