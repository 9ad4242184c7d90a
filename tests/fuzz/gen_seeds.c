/* SPDX-License-Identifier: MIT */
/*
 * gen_seeds.c - seeds the fuzz corpora from an environment (fixtures/):
 * its segments (frames), each record's payload (event), a snapshot of it
 * (snapshot), a bundle format 1 of it (bundle) and a bundle format 2 with
 * its column image (bundle2).  Run by `make fuzz-seeds`.
 *
 * usage: gen_seeds ENV CORPUS_DIR
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static int copy_tree(const char *src, const char *dst)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", dst, src, dst);
    return system(cmd);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_seeds ENV CORPUS_DIR\n");
        return 2;
    }
    char dirs[5][4096];
    const char *names[] = {"frames", "event", "snapshot", "bundle", "bundle2"};
    mkdir(argv[2], 0755);
    for (int i = 0; i < 5; i++)
        snprintf(dirs[i], sizeof dirs[i], "%s/%s", argv[2], names[i]);
    char tmp[] = "/tmp/envlog-seeds-XXXXXX";
    if (!mkdtemp(tmp))
        return 1;
    char work[4200];
    snprintf(work, sizeof work, "%s/env", tmp);
    if (copy_tree(argv[1], work))
        return 1;
    envlog_env *env;
    if (envlog_env_open(work, 0, &env)) {
        fprintf(stderr, "%s\n", envlog_errmsg());
        return 1;
    }
    envlog_session_info *in;
    size_t n;
    if (envlog_sessions_list(env, &in, &n))
        return 1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        envlog_reader *r;
        if (envlog_reader_open(env, &in[i].id, &r))
            continue;
        const envlog_record *rec;
        envlog_err e;
        while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
            if (e)
                continue;
            char name[64];
            snprintf(name, sizeof name, "%s-%llu", envlog_kind_name(rec->kind),
                     (unsigned long long)k++);
            put(dirs[1], name, rec->payload.data, rec->payload.size);
        }
        envlog_reader_close(r);
        /* The segments themselves. */
        char sdir[8192];
        snprintf(sdir, sizeof sdir, "%s/sessions/%s", work, in[i].id_hex);
        DIR *d = opendir(sdir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char path[8500];
            snprintf(path, sizeof path, "%s/%s", sdir, de->d_name);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            static uint8_t buf[1 << 22];
            size_t len = fread(buf, 1, sizeof buf, f);
            fclose(f);
            char name[300];
            snprintf(name, sizeof name, "%s-%s", in[i].id_hex, de->d_name);
            put(dirs[0], name, buf, len);
        }
        if (d)
            closedir(d);
    }
    envlog_sessions_free(in, n);
    char bundle[4300];
    snprintf(bundle, sizeof bundle, "%s/seed.bundle", tmp);
    for (int format = 1; format <= 2; format++) {
        envlog_bundle_opts bo = {.name = "seed", .evidence = ENVLOG_EVIDENCE_ALL,
                                 .zstd_level = 3, .format = format};
        if (envlog_bundle_export(env, &bo, bundle, NULL) != ENVLOG_OK)
            continue;
        FILE *f = fopen(bundle, "rb");
        static uint8_t buf[1 << 22];
        size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f)
            fclose(f);
        put(dirs[format + 2], "seed.bundle", buf, len);
        /* The column image, which the format 2 target reads first. */
        uint8_t *img;
        size_t img_len;
        if (format == 2 && len > 24 && !fuzz_inflate(buf + 24, len - 24, &img, &img_len)) {
            put(dirs[4], "seed.image", img, img_len);
            free(img);
        }
    }
    if (envlog_compact(env, ENVLOG_EVIDENCE_ALL, NULL) == ENVLOG_OK) {
        char snap[4300];
        snprintf(snap, sizeof snap, "%s/snapshot/current", work);
        FILE *f = fopen(snap, "rb");
        static uint8_t buf[1 << 22];
        size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f)
            fclose(f);
        put(dirs[2], "seed.snapshot", buf, len);
    }
    envlog_env_close(env);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) ? 1 : 0;
}
