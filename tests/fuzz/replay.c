/* SPDX-License-Identifier: MIT */
/*
 * replay.c - runs a fuzz target over files (a stored corpus) without
 * libFuzzer, so `make check` replays every input ever kept, with whatever
 * sanitizers the build has.
 */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *p = realloc(buf, cap);
            if (!p) {
                fclose(f);
                free(buf);
                return 1;
            }
            buf = p;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (!r)
            break;
        n += r;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    size_t files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st))
            continue;
        if (!S_ISDIR(st.st_mode)) {
            files++;
            if (run_file(argv[i]))
                return 1;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
            files++;
            if (run_file(path))
                return 1;
        }
        if (d)
            closedir(d);
    }
    printf("%s: %zu inputs replayed\n", argv[0], files);
    return files ? 0 : 1;
}
