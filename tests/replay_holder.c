/* SPDX-License-Identifier: MIT */
/*
 * replay_holder.c - a writer that stays alive, for tests/replay/live.sh:
 * `envlog verify --fix` must never touch a session whose writer still holds
 * its lock, even when its segment ends in what looks like a torn record.
 *
 *   replay_holder ENVDIR READYFILE [--garbage]
 *
 * Records a tune and a compile in a new session of ENVDIR (so the session is
 * on disk and locked); with --garbage, also writes a partial fragment just
 * after the last record in the session's own segment, as a writer killed
 * mid-record would leave it.  Then writes READYFILE ("SESSION SEGMENT-FILE
 * OFFSET", OFFSET being where good data ends) and sleeps until it is killed
 * (at most two minutes, so a broken test never leaves it behind).
 */
#include "envlog.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ok(envlog_err e, const char *what)
{
    if (e) {
        fprintf(stderr, "replay_holder: %s: %s (%s)\n", what, envlog_errmsg(),
                envlog_strerror(e));
        exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--garbage"))) {
        fprintf(stderr, "usage: replay_holder ENVDIR READYFILE [--garbage]\n");
        return 2;
    }
    alarm(120);
    envlog_env *env;
    ok(envlog_env_open(argv[1], ENVLOG_OPEN_CREATE, &env), "opening the environment");
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = "holder";
    o.runtime = "triton";
    o.runtime_version = "3.0.0";
    envlog_session *s;
    ok(envlog_session_begin(env, &o, &s), "beginning a session");
    static const char *const cands[] = {"x", "y"};
    envlog_tune t = {.ns = "autotune/triton/3.0.0/sm_90", .key = "held_key",
                     .checksum = envlog_tune_checksum(cands, 2), .candidates = cands,
                     .n_candidates = 2, .policy = "test", .winner = 1, .stored = true};
    ok(envlog_record_tune(s, &t, NULL), "recording a tune");
    static const uint8_t bin[32] = {1, 2, 3};
    envlog_compile c = {.ns = "nvrtc/12.4/sm_90", .name = "held_kernel",
                        .kernel_key = envlog_hash128_bytes("held", 4), .arch = "sm_90",
                        .outcome = ENVLOG_COMPILED, .binary = {bin, sizeof bin},
                        .binary_size = sizeof bin,
                        .binary_hash = envlog_hash128_bytes(bin, sizeof bin)};
    envlog_stamp st;
    ok(envlog_record_compile(s, &c, &st), "recording a compile");
    ok(envlog_session_flush(s), "flushing");

    /* Where the last record ends, read back through the public reader. */
    envlog_reader *r;
    ok(envlog_reader_open(env, &st.session, &r), "opening a reader");
    const envlog_record *rec;
    uint32_t seg = 0;
    uint64_t end = 0;
    envlog_err e;
    while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK) {
        seg = rec->segment;
        end = rec->file_end;
    }
    if (e != ENVLOG_END)
        ok(e, "reading the session back");
    envlog_reader_close(r);

    char hex[33], dir[4096], file[4400] = "", prefix[16];
    envlog_id_format(&st.session, hex);
    snprintf(dir, sizeof dir, "%s/sessions/%s", argv[1], hex);
    snprintf(prefix, sizeof prefix, "%08u-", seg);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix)))
            snprintf(file, sizeof file, "%s/%s", dir, de->d_name);
    if (d)
        closedir(d);
    if (!file[0]) {
        fprintf(stderr, "replay_holder: no segment %u in %s\n", seg, dir);
        return 2;
    }
    if (argc == 4) {
        /* A fragment header promising 500 bytes, a wrong checksum, and only
         * forty of them: a record cut short by a crash. */
        uint8_t junk[7 + 40];
        memset(junk, 0x41, sizeof junk);
        junk[0] = 0xde, junk[1] = 0xad, junk[2] = 0xbe, junk[3] = 0xef;
        junk[4] = 500 & 0xff, junk[5] = 500 >> 8, junk[6] = 1;
        int fd = open(file, O_WRONLY);
        if (fd < 0 || pwrite(fd, junk, sizeof junk, (off_t)end) != (ssize_t)sizeof junk) {
            perror("replay_holder: writing the partial record");
            return 2;
        }
        close(fd);
    }
    char tmp[4200], ready[8192];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    snprintf(ready, sizeof ready, "%s %s %llu\n", hex, file, (unsigned long long)end);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(ready, f) < 0 || fclose(f) || rename(tmp, argv[2])) {
        perror("replay_holder: writing the ready file");
        return 2;
    }
    for (;;)
        pause();
}
