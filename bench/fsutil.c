/* SPDX-License-Identifier: MIT */
/*
 * fsutil.c - the benchmark's scratch directories, and its one way out.
 *
 * Every run works in a private directory (bench_o.root) made under
 * $ENVLOG_BENCH_DIR (else /tmp), on the disk being measured, and removes it
 * at the end; each measured run gets a fresh subdirectory so no run reads
 * another's files.  A run that dies (bench_die) removes it too.
 */
#include "bench.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bench_opts bench_o;

void bench_die(const char *fmt, ...)
{
    va_list ap;
    fputs("envlog-bench: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (bench_o.root[0])
        bench_rmtree(bench_o.root);
    exit(2);
}

void bench_check(envlog_err e, const char *what)
{
    if (e)
        bench_die("%s: %s (%s)", what, envlog_errmsg(), envlog_strerror(e));
}

void bench_expect(bool ok, const char *what, ...)
{
    if (ok)
        return;
    char text[512];
    va_list ap;
    va_start(ap, what);
    vsnprintf(text, sizeof text, what, ap);
    va_end(ap);
    bench_die("check failed: %s", text);
}

static unsigned long dir_counter;

void bench_fresh_dir(char *out, size_t size, const char *tag)
{
    int n = snprintf(out, size, "%s/%s-%lu", bench_o.root, tag, ++dir_counter);
    if (n < 0 || (size_t)n >= size)
        bench_die("scratch path too long");
    bench_rmtree(out);
}

void bench_new_dir(char *out, size_t size, const char *tag)
{
    bench_fresh_dir(out, size, tag);
    if (mkdir(out, 0700))
        bench_die("creating %s: %s", out, strerror(errno));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    if (flag == FTW_DP ? rmdir(path) : unlink(path))
        if (errno != ENOENT)
            fprintf(stderr, "envlog-bench: warning: removing %s failed\n", path);
    return 0;
}

void bench_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st))
        return;
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static uint64_t du_total;

static int du_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)path;
    (void)f;
    if (flag == FTW_F && S_ISREG(st->st_mode))
        du_total += (uint64_t)st->st_size;
    return 0;
}

uint64_t bench_du(const char *path)
{
    du_total = 0;
    nftw(path, du_one, 16, FTW_PHYS);
    return du_total;
}
