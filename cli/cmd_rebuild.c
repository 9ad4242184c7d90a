/* SPDX-License-Identifier: MIT */
/*
 * cmd_rebuild.c - `envlog rebuild [--verify]`: is every recorded kernel
 * reproducible from what was recorded?
 *
 * A compile recorded at FULL carries its source, options, compiler version
 * and arch.  Rebuilding compiles them again with this machine's NVRTC and
 * compares the binary's hash with the recorded one, so a build can be
 * audited from its log alone.  Without --verify, a rebuilt kernel that the
 * state no longer holds (forgotten, or never stored) is recorded again in a
 * new session; --verify only compares and never writes.
 */
#include "cli.h"
#include "envlog_cuda.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { ST_REPRODUCIBLE, ST_DIFFERS, ST_UNAVAILABLE } status;
static const char *const status_names[] = {"reproducible", "differs", "unavailable"};

/* One kernel to rebuild: the first FULL compile record of its key. */
typedef struct item {
    char *ns, *name, *options, *compiler_version, *arch, *source;
    envlog_hash128 kernel_key, binary_hash, source_hash;
    uint64_t binary_size;
    envlog_outcome outcome;
    envlog_stamp stamp;
    /* the rebuild */
    status st;
    envlog_cuda_binary *bin;
    char reason[320];
} item;

typedef struct gather {
    item *items;
    size_t n, cap;
    uint64_t skipped; /* compile records without a source */
    int err;
} gather;

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

static int on_record(void *ctx, const envlog_replay_rec *r)
{
    gather *g = ctx;
    const envlog_record *rec = r->rec;
    if (rec->kind != ENVLOG_KIND_COMPILE)
        return 0;
    const envlog_compile *cp = &rec->u.compile;
    if (cp->outcome == ENVLOG_LOADED)
        return 0;
    if (!cp->source || !cp->arch || !cp->ns || !cp->name) {
        g->skipped++;
        return 0;
    }
    for (size_t i = 0; i < g->n; i++)
        if (!memcmp(g->items[i].kernel_key.b, cp->kernel_key.b, 16) &&
            !strcmp(g->items[i].ns, cp->ns))
            return 0;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 32;
        item *p = realloc(g->items, cap * sizeof *p);
        if (!p) {
            g->err = 1;
            return 1;
        }
        g->items = p;
        g->cap = cap;
    }
    item *it = &g->items[g->n];
    memset(it, 0, sizeof *it);
    it->ns = dup_or_empty(cp->ns);
    it->name = dup_or_empty(cp->name);
    it->options = dup_or_empty(cp->options);
    it->compiler_version = dup_or_empty(cp->compiler_version);
    it->arch = dup_or_empty(cp->arch);
    it->source = dup_or_empty(cp->source);
    if (!it->ns || !it->name || !it->options || !it->compiler_version || !it->arch ||
        !it->source) {
        g->err = 1;
        return 1;
    }
    it->kernel_key = cp->kernel_key;
    it->binary_hash = cp->binary_hash;
    it->source_hash = cp->source_hash;
    it->binary_size = cp->binary_size;
    it->outcome = cp->outcome;
    it->stamp = rec->stamp;
    g->n++;
    return 0;
}

static void item_free(item *it)
{
    free(it->ns);
    free(it->name);
    free(it->options);
    free(it->compiler_version);
    free(it->arch);
    free(it->source);
    envlog_cuda_binary_free(it->bin);
}

/* The first line of a compiler log, for a reason. */
static void log_line(const char *log, char *out, size_t size)
{
    while (*log == '\n' || *log == ' ')
        log++;
    size_t len = strcspn(log, "\n");
    if (len >= size)
        len = size - 1;
    memcpy(out, log, len);
    out[len] = 0;
}

static void rebuild_one(item *it, const char *nvrtc)
{
    if (strcmp(it->compiler_version, nvrtc)) {
        it->st = ST_UNAVAILABLE;
        snprintf(it->reason, sizeof it->reason,
                 "recorded with NVRTC %s; this machine has NVRTC %s", it->compiler_version,
                 nvrtc);
        return;
    }
    envlog_cuda_kernel_desc d = {it->name, it->source, it->options, it->arch};
    envlog_err e = envlog_cuda_nvrtc_compile(&d, &it->bin);
    bool refused = e == ENVLOG_BAD_DATA && it->bin;
    if (e && !refused) {
        it->st = ST_UNAVAILABLE;
        snprintf(it->reason, sizeof it->reason, "%s (%s)", envlog_errmsg(),
                 envlog_strerror(e));
        return;
    }
    if (it->outcome == ENVLOG_FAILED) {
        it->st = refused ? ST_REPRODUCIBLE : ST_DIFFERS;
        snprintf(it->reason, sizeof it->reason, "%s",
                 refused ? "refused again, as recorded" : "recorded as refused, compiles now");
        return;
    }
    if (refused) {
        char line[200];
        log_line(it->bin->log, line, sizeof line);
        it->st = ST_DIFFERS;
        snprintf(it->reason, sizeof it->reason, "compiled when recorded, refused now: %s",
                 line);
        return;
    }
    it->st = !memcmp(it->bin->binary_hash.b, it->binary_hash.b, 16) &&
                     it->bin->size == it->binary_size
                 ? ST_REPRODUCIBLE
                 : ST_DIFFERS;
}

typedef struct pool {
    item *items;
    size_t n;
    const char *nvrtc;
    pthread_mutex_t mu;
    size_t next;
    size_t done; /* rebuilt, for the progress line */
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n)
            return NULL;
        rebuild_one(&p->items[i], p->nvrtc);
        pthread_mutex_lock(&p->mu);
        p->done++;
        cli_progress_count(p->done, p->n, "kernels");
        pthread_mutex_unlock(&p->mu);
    }
}

static void print_item(const cli *c, const item *it, bool restored)
{
    char key[33], want[33], got[33] = "";
    envlog_id_format(&it->kernel_key, key);
    envlog_id_format(&it->binary_hash, want);
    bool have = it->bin && it->bin->outcome == ENVLOG_COMPILED;
    if (have)
        envlog_id_format(&it->bin->binary_hash, got);
    if (c->json) {
        cli_jbegin("rebuild");
        fputs(",\"status\":", stdout);
        envlog_json_string(status_names[it->st], cli_fwrite, stdout);
        fputs(",\"name\":", stdout);
        envlog_json_string(it->name, cli_fwrite, stdout);
        fputs(",\"namespace\":", stdout);
        envlog_json_string(it->ns, cli_fwrite, stdout);
        fputs(",\"arch\":", stdout);
        envlog_json_string(it->arch, cli_fwrite, stdout);
        fputs(",\"options\":", stdout);
        envlog_json_string(it->options, cli_fwrite, stdout);
        printf(",\"kernel_key\":\"%s\",\"recorded_outcome\":\"%s\"", key,
               it->outcome == ENVLOG_FAILED ? "failed" : "compiled");
        if (it->outcome != ENVLOG_FAILED)
            printf(",\"recorded_hash\":\"%s\",\"recorded_size\":%" PRIu64, want,
                   it->binary_size);
        if (have)
            printf(",\"rebuilt_hash\":\"%s\",\"rebuilt_size\":%zu", got, it->bin->size);
        if (it->reason[0]) {
            fputs(",\"reason\":", stdout);
            envlog_json_string(it->reason, cli_fwrite, stdout);
        }
        printf(",\"restored\":%s}\n", restored ? "true" : "false");
        return;
    }
    printf("%-12s  %-10s  %-24s  %.16s", status_names[it->st], it->arch, it->name, key);
    if (it->options[0])
        printf("  [%s]", it->options);
    if (it->st == ST_DIFFERS && have && it->outcome != ENVLOG_FAILED)
        printf("\n              recorded %.16s (%" PRIu64 " bytes), rebuilt %.16s (%zu bytes)",
               want, it->binary_size, got, it->bin->size);
    if (it->reason[0])
        printf("\n              %s", it->reason);
    if (restored)
        printf("\n              recorded again: the state no longer held it");
    putchar('\n');
}

/* Records the rebuilt kernels the state lacks in a new session. */
static int restore(cli *c, gather *g, bool *restored, size_t *n_restored)
{
    envlog_env *env;
    int rc = cli_open_env(c, CLI_WRITE, &env);
    if (rc)
        return rc;
    envlog_state *st;
    envlog_err e = envlog_env_state(env, &st);
    if (e) {
        envlog_env_close(env);
        return cli_fail(e, "reading the state");
    }
    envlog_session *s = NULL;
    for (size_t i = 0; i < g->n; i++) {
        item *it = &g->items[i];
        if (it->st == ST_UNAVAILABLE || !it->bin || it->bin->outcome != ENVLOG_COMPILED)
            continue;
        envlog_kernel_entry ent;
        if (envlog_state_kernel(st, it->ns, &it->kernel_key, &ent) == ENVLOG_OK)
            continue;
        if (!s) {
            envlog_session_opts o;
            envlog_session_opts_init(&o);
            o.label = "rebuild";
            o.runtime = "envlog-rebuild";
            o.runtime_version = ENVLOG_VERSION_STRING;
            o.level = ENVLOG_LEVEL_FULL;
            if ((e = envlog_session_begin(env, &o, &s)))
                break;
        }
        envlog_compile rec = {
            .ns = it->ns, .name = it->name, .kernel_key = it->kernel_key,
            .source_hash = it->source_hash, .options = it->options,
            .compiler_version = it->compiler_version, .arch = it->arch,
            .outcome = ENVLOG_COMPILED, .duration_ns = it->bin->duration_ns,
            .binary_hash = it->bin->binary_hash, .binary_size = it->bin->size,
            .binary = {it->bin->data, it->bin->size}, .log = it->bin->log,
            .source = it->source,
        };
        if ((e = envlog_record_compile(s, &rec, NULL)))
            break;
        restored[i] = true;
        (*n_restored)++;
    }
    envlog_err ee = envlog_session_end(s);
    envlog_env_close(env);
    if (e || ee)
        return cli_fail(e ? e : ee, "recording the rebuilt kernels");
    return EXIT_OK;
}

static int rebuild_run(cli *c)
{
    bool verify = false;
    long jobs = 0;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (!strcmp(a, "--verify"))
            verify = true;
        else if (!strcmp(a, "--json"))
            c->json = true;
        else if (!strcmp(a, "-j") && i + 1 < c->argc)
            jobs = strtol(c->argv[++i], NULL, 10);
        else if (!strncmp(a, "-j", 2) && a[2])
            jobs = strtol(a + 2, NULL, 10);
        else
            return cli_bad_arg(c, "rebuild", a);
    }
    if (jobs < 0 || jobs > 256)
        return cli_error(EXIT_USAGE, "rebuild: -j takes 1 to 256");
    envlog_env *env;
    int rc = cli_open_env(c, CLI_READ, &env);
    if (rc)
        return rc;
    gather g = {0};
    envlog_replay_opts o = {.on_damage = cli_damage, .check_snapshot = true};
    envlog_err e = envlog_replay_each(env, &o, on_record, &g);
    envlog_env_close(env);
    if (g.err) {
        for (size_t i = 0; i < g.n; i++)
            item_free(&g.items[i]);
        free(g.items);
        return cli_error(EXIT_USAGE, "rebuild: out of memory");
    }
    if (e) {
        for (size_t i = 0; i < g.n; i++)
            item_free(&g.items[i]);
        free(g.items);
        return cli_fail(e, "reading the compile records");
    }

    char nvrtc[32];
    e = envlog_cuda_nvrtc_version(nvrtc, sizeof nvrtc);
    if (e) {
        for (size_t i = 0; i < g.n; i++) {
            g.items[i].st = ST_UNAVAILABLE;
            snprintf(g.items[i].reason, sizeof g.items[i].reason, "%s", envlog_errmsg());
        }
    } else if (g.n) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        size_t nt = (size_t)(jobs ? jobs : (ncpu > 0 ? ncpu : 1));
        if (nt > g.n)
            nt = g.n;
        pool p = {g.items, g.n, nvrtc, PTHREAD_MUTEX_INITIALIZER, 0, 0};
        pthread_t *tid = calloc(nt, sizeof *tid);
        size_t started = 0;
        for (size_t t = 1; tid && t < nt; t++)
            if (pthread_create(&tid[started], NULL, worker, &p) == 0)
                started++;
        worker(&p);
        for (size_t t = 0; t < started; t++)
            pthread_join(tid[t], NULL);
        free(tid);
        cli_progress_done();
    }

    bool *restored = calloc(g.n ? g.n : 1, sizeof *restored);
    size_t n_restored = 0;
    if (!restored)
        rc = cli_error(EXIT_USAGE, "rebuild: out of memory");
    else if (!verify && g.n)
        rc = restore(c, &g, restored, &n_restored);
    size_t count[3] = {0, 0, 0};
    for (size_t i = 0; i < g.n; i++) {
        count[g.items[i].st]++;
        print_item(c, &g.items[i], restored && restored[i]);
    }
    if (c->json) {
        cli_jbegin("rebuild.summary");
        printf(",\"summary\":true,\"reproducible\":%zu,\"differs\":%zu,\"unavailable\":%zu,"
               "\"skipped_without_source\":%" PRIu64 ",\"restored\":%zu}\n",
               count[0], count[1], count[2], g.skipped, n_restored);
    } else if (g.n || g.skipped)
        printf("%zu reproducible, %zu differ, %zu unavailable; %" PRIu64
               " compile record%s without a source (recorded below FULL) skipped%s\n",
               count[0], count[1], count[2], g.skipped, g.skipped == 1 ? "" : "s",
               n_restored ? "; some kernels recorded again" : "");
    else
        printf("no compile recorded at FULL: nothing to rebuild\n");
    for (size_t i = 0; i < g.n; i++)
        item_free(&g.items[i]);
    free(g.items);
    free(restored);
    if (rc)
        return rc;
    return count[ST_DIFFERS] ? EXIT_DAMAGE : EXIT_OK;
}

const cli_cmd cli_cmd_rebuild = {
    "rebuild",
    "recompile recorded kernels; say if each is reproducible",
    "usage: envlog [-C DIR] rebuild [--verify] [-j N] [--json]\n"
    "\n"
    "Recompiles every kernel compile recorded at FULL (which carries its source)\n"
    "from its recorded source, options and arch with this machine's NVRTC, and\n"
    "compares the binary's hash with the recorded one.  Each kernel key is\n"
    "rebuilt once and reported as:\n"
    "  reproducible  the same bytes (or, for a recorded failure, refused again)\n"
    "  differs       other bytes, or it compiles or fails where it did not\n"
    "  unavailable   it cannot be rebuilt here; the reason says why (no NVRTC,\n"
    "                another NVRTC version than the one recorded, ...)\n"
    "Compiles recorded below FULL have no source and are counted as skipped.\n"
    "\n"
    "Without --verify, a rebuilt kernel the state no longer holds is recorded\n"
    "again in a new session (label \"rebuild\"); --verify never writes.\n"
    "\n"
    "options:\n"
    "  --verify   compare only; open the environment read-only\n"
    "  -j N       compile on N threads (default: online CPUs)\n"
    "  --json     one JSON object per kernel, then a summary object\n"
    "\n"
    "exit status: 0 when nothing differs, 1 when any kernel differs, 2 on\n"
    "usage or system error.\n",
    rebuild_run,
};
