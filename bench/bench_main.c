/* SPDX-License-Identifier: MIT */
/*
 * bench_main.c - envlog-bench: options, the table of sections, and the run.
 *
 * One command measures envlog against SQLite and against the machine's own
 * limits in the same run.  The limits come first because the other sections
 * report envlog's share of them.  A section is a function; the sections the
 * later modules bring (replay fold, cold open plus first lookup, bundle
 * export and import) are added to the table below.
 */
#include "bench.h"
#include "envlog_remote.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zstd.h>

typedef struct section {
    const char *name;
    void (*run)(void);
    const char *what;
} section;

static const section sections[] = {
    {"limits", bench_section_limits, "memcpy, XXH3, zstd and fdatasync on this machine"},
    {"record-tune", bench_section_record_tune, "recording tune records, envlog vs SQLite"},
    {"record-compile", bench_section_record_compile,
     "recording compile records with 4 KiB, 64 KiB and 1 MiB binaries"},
    {"replay", bench_section_replay,
     "reading and folding everything back, envlog vs SQLite scan"},
    {"lookup", bench_section_lookup, "cold open plus first lookup at 1k, 100k and 1M entries"},
    {"upkeep", bench_section_upkeep,
     "first lookup after 1 to 10,000 sessions, self-maintained vs compacted by hand"},
    {"bundle", bench_section_bundle, "bundle export and import time and size vs a SQLite file"},
    {"remote", bench_section_remote,
     "push, pull and warm start through redis-server vs redis-cli and the loopback"},
    {"scale", bench_section_scale, "recording and reading 1k to 10M events"},
};
#define N_SECTIONS (sizeof sections / sizeof sections[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: envlog-bench [--quick] [--json] [--reps N] [--only SECTION] [--selftest]\n"
            "  --quick      smaller sizes (under a minute); 10M scaling is left out\n"
            "  --json       one JSON object per row on stdout\n"
            "  --reps N     timed repetitions per measurement (default 5; 7 without --quick)\n"
            "  --only NAME  run the sections whose name contains NAME\n"
            "  --selftest   a tiny run that checks the harness; prints one line\n"
            "Scratch files go under $ENVLOG_BENCH_DIR, else /tmp.\nSections:\n");
    for (size_t i = 0; i < N_SECTIONS; i++)
        fprintf(f, "  %-15s %s\n", sections[i].name, sections[i].what);
}

static void make_root(void)
{
    const char *base = getenv("ENVLOG_BENCH_DIR");
    if (!base || !*base)
        base = "/tmp";
    int n = snprintf(bench_o.root, sizeof bench_o.root, "%s/envlog-bench.XXXXXX", base);
    if (n < 0 || (size_t)n >= sizeof bench_o.root)
        bench_die("ENVLOG_BENCH_DIR is too long");
    if (!mkdtemp(bench_o.root)) {
        bench_o.root[0] = 0;
        bench_die("cannot create a directory under %s", base);
    }
}

/* The load average when the run starts: other work on the machine shows
 * in every number, so the output says how busy it was. */
static void load_of(char *out, size_t size)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l1 = 0;
    snprintf(out, size, "?");
    if (f) {
        if (fscanf(f, "%lf", &l1) == 1)
            snprintf(out, size, "%.2f", l1);
        fclose(f);
    }
}

static void header(void)
{
    struct utsname u;
    char load[32];
    if (uname(&u)) {
        strcpy(u.sysname, "?");
        strcpy(u.release, "?");
    }
    load_of(load, sizeof load);
    FILE *f = bench_o.json ? stderr : bench_out;
    fprintf(f,
            "# envlog-bench: envlog %s, SQLite %s, zstd %s; %s %s, %ld CPUs, load %s\n"
            "# mode %s, %d repetitions each, alternating; scratch %s\n"
            "# ratio = envlog/sqlite; share = envlog's fraction of the limit; "
            "spr = largest distance of a repetition from the median\n",
            ENVLOG_VERSION_STRING, sqlite3_libversion(), ZSTD_versionString(),
            u.sysname, u.release, sysconf(_SC_NPROCESSORS_ONLN), load,
            bench_o.selftest ? "selftest" : bench_o.quick ? "quick" : "full",
            bench_o.reps, bench_o.root);
}

int main(int argc, char **argv)
{
    int reps = 0;
    bench_out = stdout;
    /* Linked with the static library: the remote module's hooks (the warm
     * start's pull at open among them) are on as in the shared library that
     * runtimes load. */
    envlog_remote_enable_auto();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick"))
            bench_o.quick = true;
        else if (!strcmp(a, "--json"))
            bench_o.json = true;
        else if (!strcmp(a, "--selftest"))
            bench_o.selftest = true;
        else if (!strcmp(a, "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(a, "--only") && i + 1 < argc)
            bench_o.only = argv[++i];
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    bool known = !bench_o.only;
    for (size_t i = 0; !known && i < N_SECTIONS; i++)
        known = strstr(sections[i].name, bench_o.only) != NULL;
    if (!known) {
        fprintf(stderr, "envlog-bench: error: no section matches --only %s\n", bench_o.only);
        usage(stderr);
        return 2;
    }
    if (reps < 0 || reps > BENCH_REPS_MAX) {
        fprintf(stderr, "envlog-bench: error: --reps takes 1 to %d\n", BENCH_REPS_MAX);
        return 2;
    }
    bench_o.reps = reps ? reps : bench_o.selftest ? 2 : bench_o.quick ? 5 : 7;
    if (bench_o.selftest) {
        bench_out = fopen("/dev/null", "w");
        if (!bench_out)
            bench_die("cannot open /dev/null");
        bench_selftest_harness();
    }
    make_root();
    uint64_t t0 = bench_now_ns();
    header();
    bench_table_begin();
    int ran = 0;
    for (size_t i = 0; i < N_SECTIONS; i++) {
        if (bench_o.only && !strstr(sections[i].name, bench_o.only))
            continue;
        uint64_t s0 = bench_now_ns();
        sections[i].run();
        ran++;
        if (!bench_o.selftest)
            fprintf(bench_o.json ? stderr : bench_out, "# %s: %.1f s\n", sections[i].name,
                    (double)(bench_now_ns() - s0) / 1e9);
    }
    bench_rmtree(bench_o.root);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    if (bench_o.selftest) {
        bench_expect(ran > 0 && bench_rows_emitted() > ran, "selftest printed %d rows",
                     bench_rows_emitted());
        printf("envlog-bench: selftest ok: %d sections, %d rows, %.1f s\n", ran,
               bench_rows_emitted(), secs);
        return 0;
    }
    char load[32];
    load_of(load, sizeof load);
    fprintf(bench_o.json ? stderr : bench_out, "# %d sections, %d rows, %.1f s, load %s\n",
            ran, bench_rows_emitted(), secs, load);
    return 0;
}
