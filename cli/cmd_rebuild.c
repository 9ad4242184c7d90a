/* SPDX-License-Identifier: MIT */
/*
 * cmd_rebuild.c - `envlog rebuild [--verify]`: is every recorded kernel
 * reproducible from what was recorded?
 *
 * A compile record carries its options, compiler version and arch, and its
 * source at FULL; at the default level the CUDA runtime records each source
 * once beside its compiles, content-addressed by its hash (an
 * "envlog-cuda/source" user record).  Rebuilding compiles them again with
 * this machine's NVRTC and compares the binary's hash with the recorded
 * one, so a build can be audited from its log alone.  It is green only when
 * it checked every kernel it found: a kernel it could not check (no source,
 * no matching compiler) is not a pass.  Without --verify, a rebuilt kernel
 * that the state no longer holds (forgotten, or never stored) is recorded
 * again in a new session; --verify only compares and never writes.
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

/* Why a kernel could not be checked. */
typedef enum { WHY_NONE, WHY_NO_COMPILER, WHY_OTHER_COMPILER, WHY_ERROR } why_not;
static const char *const why_names[] = {"", "no_compiler", "other_compiler", "error"};

/* The recorded inputs a differing kernel is compared on. */
enum { IN_SOURCE = 1, IN_KEY = 2 };

/* One kernel to rebuild: the first compile record of its key (its source
 * from that record, else from a later one or a source record). */
typedef struct item {
    char *ns, *name, *options, *compiler_version, *arch, *source;
    envlog_hash128 kernel_key, binary_hash, source_hash;
    uint64_t binary_size;
    envlog_outcome outcome;
    envlog_stamp stamp;
    /* the rebuild */
    status st;
    why_not why;
    unsigned inputs_differ; /* IN_* */
    envlog_cuda_binary *bin;
    char reason[320];
    char cause[400];        /* for a kernel that differs: which input */
} item;

/* A source recorded on its own (ENVLOG_CUDA_SOURCE_KIND). */
typedef struct source {
    envlog_hash128 hash;
    char *text;
} source;

typedef struct gather {
    item *items;
    size_t n, cap;
    source *sources;
    size_t n_sources, cap_sources;
    uint64_t skipped; /* kernels without a recorded source */
} gather;

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

/* The body of a source record: [bytes(16) hash, text source].  Returns
 * false for a body that is not one (left out, as a reader ignores what it
 * does not know). */
static bool source_body(const uint8_t *b, size_t n, envlog_hash128 *hash, const char **text,
                        size_t *len)
{
    if (n < 19 || b[0] != 0x82 || b[1] != 0x50 || (b[18] >> 5) != 3)
        return false;
    memcpy(hash->b, b + 2, 16);
    unsigned ai = b[18] & 31;
    size_t hl = ai < 24 ? 1 : ai == 24 ? 2 : ai == 25 ? 3 : ai == 26 ? 5 : ai == 27 ? 9 : 0;
    if (!hl || n < 18 + hl)
        return false;
    uint64_t v = ai < 24 ? ai : 0;
    for (size_t i = 1; i < hl; i++)
        v = v << 8 | b[18 + i];
    if (v != n - 18 - hl)
        return false;
    *text = (const char *)b + 18 + hl;
    *len = (size_t)v;
    return !memchr(*text, 0, *len);
}

static envlog_err add_source(gather *g, const envlog_user *u)
{
    envlog_hash128 h;
    const char *text;
    size_t len;
    if (!source_body(u->body.data, u->body.size, &h, &text, &len))
        return ENVLOG_OK;
    envlog_hash128 want = envlog_hash128_bytes(text, len);
    if (memcmp(want.b, h.b, 16))
        return ENVLOG_OK; /* not the source its hash names: never used */
    for (size_t i = 0; i < g->n_sources; i++)
        if (!memcmp(g->sources[i].hash.b, h.b, 16))
            return ENVLOG_OK;
    if (g->n_sources == g->cap_sources) {
        size_t cap = g->cap_sources ? g->cap_sources * 2 : 16;
        source *p = realloc(g->sources, cap * sizeof *p);
        if (!p)
            return ENVLOG_NOMEM;
        g->sources = p;
        g->cap_sources = cap;
    }
    char *t = malloc(len + 1);
    if (!t)
        return ENVLOG_NOMEM;
    memcpy(t, text, len);
    t[len] = 0;
    g->sources[g->n_sources].hash = h;
    g->sources[g->n_sources++].text = t;
    return ENVLOG_OK;
}

static envlog_err on_record(void *ctx, const envlog_replay_rec *r)
{
    gather *g = ctx;
    const envlog_record *rec = r->rec;
    if (rec->kind == ENVLOG_KIND_USER && !strcmp(rec->u.user.kind, ENVLOG_CUDA_SOURCE_KIND))
        return add_source(g, &rec->u.user);
    if (rec->kind != ENVLOG_KIND_COMPILE)
        return ENVLOG_OK;
    const envlog_compile *cp = &rec->u.compile;
    if (cp->outcome == ENVLOG_LOADED || !cp->arch || !cp->ns || !cp->name)
        return ENVLOG_OK;
    for (size_t i = 0; i < g->n; i++)
        if (!memcmp(g->items[i].kernel_key.b, cp->kernel_key.b, 16) &&
            !strcmp(g->items[i].ns, cp->ns)) {
            /* A later record of the key may carry the source the first
             * did not. */
            if (!g->items[i].source && cp->source && !(g->items[i].source = strdup(cp->source)))
                return ENVLOG_NOMEM;
            return ENVLOG_OK;
        }
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 32;
        item *p = realloc(g->items, cap * sizeof *p);
        if (!p)
            return ENVLOG_NOMEM;
        g->items = p;
        g->cap = cap;
    }
    item *it = &g->items[g->n];
    memset(it, 0, sizeof *it);
    g->n++;
    it->ns = dup_or_empty(cp->ns);
    it->name = dup_or_empty(cp->name);
    it->options = dup_or_empty(cp->options);
    it->compiler_version = dup_or_empty(cp->compiler_version);
    it->arch = dup_or_empty(cp->arch);
    it->source = cp->source ? strdup(cp->source) : NULL;
    if (!it->ns || !it->name || !it->options || !it->compiler_version || !it->arch ||
        (cp->source && !it->source))
        return ENVLOG_NOMEM;
    it->kernel_key = cp->kernel_key;
    it->binary_hash = cp->binary_hash;
    it->source_hash = cp->source_hash;
    it->binary_size = cp->binary_size;
    it->outcome = cp->outcome;
    it->stamp = rec->stamp;
    return ENVLOG_OK;
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

/* For a kernel that differs: which recorded input is not what was used. */
static void compare_inputs(item *it, const char *nvrtc)
{
    char want[33], got[33];
    envlog_hash128 h = envlog_hash128_bytes(it->source, strlen(it->source));
    size_t used = 0;
    if (memcmp(h.b, it->source_hash.b, 16)) {
        it->inputs_differ |= IN_SOURCE;
        envlog_id_format(&it->source_hash, want);
        envlog_id_format(&h, got);
        used += (size_t)snprintf(it->cause + used, sizeof it->cause - used,
                                 "source hash: recorded %.16s, the source used hashes to "
                                 "%.16s; ",
                                 want, got);
    }
    envlog_cuda_kernel_desc d = {it->name, it->source, it->options, it->arch};
    envlog_hash128 k;
    if (envlog_cuda_kernel_key(&d, it->compiler_version, &k) == ENVLOG_OK &&
        memcmp(k.b, it->kernel_key.b, 16)) {
        it->inputs_differ |= IN_KEY;
        envlog_id_format(&it->kernel_key, want);
        envlog_id_format(&k, got);
        used += (size_t)snprintf(it->cause + used, sizeof it->cause - used,
                                 "kernel key: recorded %.16s, the source, options, compiler "
                                 "version and arch used give %.16s (the record does not "
                                 "hold the inputs its key was made from); ",
                                 want, got);
    }
    if (!it->inputs_differ)
        snprintf(it->cause, sizeof it->cause,
                 "every recorded input is what was used (source hash, options \"%s\", "
                 "NVRTC %s, arch %s): the compiler gave other output for the same inputs",
                 it->options, nvrtc, it->arch);
    else if (used >= 2 && used < sizeof it->cause)
        it->cause[used - 2] = 0;
}

static void rebuild_one(item *it, const char *nvrtc)
{
    if (strcmp(it->compiler_version, nvrtc)) {
        it->st = ST_UNAVAILABLE;
        it->why = WHY_OTHER_COMPILER;
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
        it->why = WHY_ERROR;
        snprintf(it->reason, sizeof it->reason, "%s (%s)", envlog_errmsg(),
                 envlog_strerror(e));
        return;
    }
    if (it->outcome == ENVLOG_FAILED) {
        it->st = refused ? ST_REPRODUCIBLE : ST_DIFFERS;
        snprintf(it->reason, sizeof it->reason, "%s",
                 refused ? "refused again, as recorded" : "recorded as refused, compiles now");
    } else if (refused) {
        char line[200];
        log_line(it->bin->log, line, sizeof line);
        it->st = ST_DIFFERS;
        snprintf(it->reason, sizeof it->reason, "compiled when recorded, refused now: %s",
                 line);
    } else
        it->st = !memcmp(it->bin->binary_hash.b, it->binary_hash.b, 16) &&
                         it->bin->size == it->binary_size
                     ? ST_REPRODUCIBLE
                     : ST_DIFFERS;
    if (it->st == ST_DIFFERS)
        compare_inputs(it, nvrtc);
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
        if (it->why)
            printf(",\"unavailable_because\":\"%s\"", why_names[it->why]);
        if (it->st == ST_DIFFERS) {
            printf(",\"inputs_differ\":[%s%s%s]",
                   it->inputs_differ & IN_SOURCE ? "\"source_hash\"" : "",
                   it->inputs_differ == (IN_SOURCE | IN_KEY) ? "," : "",
                   it->inputs_differ & IN_KEY ? "\"kernel_key\"" : "");
            fputs(",\"cause\":", stdout);
            envlog_json_string(it->cause, cli_fwrite, stdout);
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
    if (it->st == ST_DIFFERS)
        printf("\n              %s", it->cause);
    if (restored)
        printf("\n              recorded again: the state no longer held it");
    putchar('\n');
}

/* Records the rebuilt kernels the state lacks in a new session. */
static int restore(cli *c, gather *g, bool *restored, size_t *n_restored)
{
    envlog_env *env;
    envlog_state *st;
    int rc = cli_open_state(c, CLI_WRITE, "reading the state", &env, &st);
    if (rc)
        return rc;
    envlog_err e = ENVLOG_OK;
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

static void gather_free(gather *g)
{
    for (size_t i = 0; i < g->n; i++)
        item_free(&g->items[i]);
    free(g->items);
    for (size_t i = 0; i < g->n_sources; i++)
        free(g->sources[i].text);
    free(g->sources);
}

/* Gives each kernel without a source of its own the one recorded under its
 * source hash; a kernel with none is left out, counted as skipped. */
static int resolve_sources(gather *g)
{
    size_t kept = 0;
    for (size_t i = 0; i < g->n; i++) {
        item *it = &g->items[i];
        for (size_t j = 0; !it->source && j < g->n_sources; j++)
            if (!memcmp(g->sources[j].hash.b, it->source_hash.b, 16) &&
                !(it->source = strdup(g->sources[j].text)))
                return 1;
        if (!it->source) {
            g->skipped++;
            item_free(it);
            continue;
        }
        g->items[kept++] = *it;
    }
    g->n = kept;
    return 0;
}

/* What a run that was not green lacked, in words, on standard error. */
static void say_unchecked(const size_t why[4], uint64_t skipped, size_t checked,
                          size_t total, const char *nvrtc)
{
    fflush(stdout); /* after the summary, where both go to one place */
    fprintf(stderr, "envlog: rebuild: %zu of %zu kernel%s checked", checked, total,
            total == 1 ? "" : "s");
    const char *sep = ": not checked: ";
    if (why[WHY_NO_COMPILER]) {
        fprintf(stderr, "%s%zu (no NVRTC here)", sep, why[WHY_NO_COMPILER]);
        sep = ", ";
    }
    if (why[WHY_OTHER_COMPILER]) {
        fprintf(stderr, "%s%zu (recorded with another NVRTC than %s)", sep,
                why[WHY_OTHER_COMPILER], nvrtc);
        sep = ", ";
    }
    if (why[WHY_ERROR]) {
        fprintf(stderr, "%s%zu (the compile could not run)", sep, why[WHY_ERROR]);
        sep = ", ";
    }
    if (skipped)
        fprintf(stderr, "%s%" PRIu64 " (no source recorded)", sep, skipped);
    if (!total)
        fputs(": no kernel compile is recorded", stderr);
    fputc('\n', stderr);
}

static int rebuild_run(cli *c)
{
    bool verify = false, partial = false;
    long jobs = 0;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (i == c->dashdash)
            continue;
        if (cli_operand(c, i))
            return cli_bad_arg(c, "rebuild", a);
        if (!strcmp(a, "--verify"))
            verify = true;
        else if (!strcmp(a, "--partial"))
            partial = true;
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
    if (e == ENVLOG_NOMEM || (!e && resolve_sources(&g))) {
        gather_free(&g);
        return cli_error(EXIT_USAGE, "rebuild: out of memory");
    }
    if (e) {
        gather_free(&g);
        return cli_fail(e, "reading the compile records");
    }

    char nvrtc[32] = "";
    e = envlog_cuda_nvrtc_version(nvrtc, sizeof nvrtc);
    if (e) {
        for (size_t i = 0; i < g.n; i++) {
            g.items[i].st = ST_UNAVAILABLE;
            g.items[i].why = WHY_NO_COMPILER;
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
    size_t count[3] = {0, 0, 0}, why[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < g.n; i++) {
        count[g.items[i].st]++;
        why[g.items[i].why]++;
        print_item(c, &g.items[i], restored && restored[i]);
    }
    size_t checked = count[ST_REPRODUCIBLE] + count[ST_DIFFERS];
    size_t total = g.n + (size_t)g.skipped;
    /* Green only when it checked what it found: every kernel, or with
     * --partial at least one. */
    bool unchecked = checked < total;
    const char *verdict = count[ST_DIFFERS] ? "differs"
                          : !checked        ? "unverified"
                          : unchecked       ? "partial"
                                            : "reproducible";
    if (c->json) {
        cli_jbegin("rebuild.summary");
        printf(",\"summary\":true,\"reproducible\":%zu,\"differs\":%zu,\"unavailable\":%zu,"
               "\"skipped_without_source\":%" PRIu64 ",\"restored\":%zu,\"kernels\":%zu,"
               "\"checked\":%zu,\"no_compiler\":%zu,\"other_compiler\":%zu,"
               "\"compile_error\":%zu,\"verdict\":\"%s\"}\n",
               count[0], count[1], count[2], g.skipped, n_restored, total, checked,
               why[WHY_NO_COMPILER], why[WHY_OTHER_COMPILER], why[WHY_ERROR], verdict);
    } else
        printf("%zu reproducible, %zu differ, %zu unavailable, %" PRIu64
               " without a recorded source: %zu of %zu kernel%s checked%s\n",
               count[0], count[1], count[2], g.skipped, checked, total,
               total == 1 ? "" : "s", n_restored ? "; some kernels recorded again" : "");
    if (!rc && (!checked || (unchecked && !partial)))
        say_unchecked(why, g.skipped, checked, total, nvrtc);
    gather_free(&g);
    free(restored);
    if (rc)
        return rc;
    if (count[ST_DIFFERS] || !checked || (unchecked && !partial))
        return EXIT_DAMAGE;
    return EXIT_OK;
}

const cli_cmd cli_cmd_rebuild = {
    "rebuild",
    "recompile recorded kernels; say if each is reproducible",
    "usage: envlog [-C DIR] rebuild [--verify] [--partial] [-j N] [--json]\n"
    "\n"
    "Recompiles every recorded kernel compile from its recorded source, options\n"
    "and arch with this machine's NVRTC, and compares the binary's hash with the\n"
    "recorded one.  The source is the compile record's (level FULL) or the one\n"
    "the CUDA runtime records once beside its compiles (every level but OFF).\n"
    "Each kernel key is rebuilt once and reported as:\n"
    "  reproducible  the same bytes (or, for a recorded failure, refused again)\n"
    "  differs       other bytes, or it compiles or fails where it did not; the\n"
    "                line under it says which recorded input differs from what\n"
    "                was used, or that none does\n"
    "  unavailable   it cannot be rebuilt here; the reason says why (no NVRTC,\n"
    "                another NVRTC version than the one recorded, ...)\n"
    "Kernels with no recorded source are counted as not checked.\n"
    "\n"
    "Without --verify, a rebuilt kernel the state no longer holds is recorded\n"
    "again in a new session (label \"rebuild\"); --verify never writes.\n"
    "\n"
    "options:\n"
    "  --verify   compare only; open the environment read-only\n"
    "  --partial  succeed when some kernels could not be checked, as long as\n"
    "             one was and none differs\n"
    "  -j N       compile on N threads (default: online CPUs)\n"
    "  --json     one JSON object per kernel, then a summary object\n"
    "\n"
    "exit status: 0 when every kernel found was checked and none differs; 1\n"
    "when any differs, when none could be checked (nothing recorded, no source,\n"
    "no matching NVRTC), or, without --partial, when any could not be; 2 on\n"
    "usage or system error.\n",
    rebuild_run,
};
