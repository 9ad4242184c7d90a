/* SPDX-License-Identifier: MIT */
/*
 * cmd_upkeep.c - `envlog config`, `envlog prune` and `envlog gc`: the
 * environment's settings for its own upkeep, and the upkeep on demand
 * (history dropped by a retention policy, entries evicted to a size bound),
 * each removal said.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- config */

static int config_run(cli *c)
{
    const char *key = NULL, *value = NULL;
    bool check = false;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (i == c->dashdash)
            continue;
        if (!cli_operand(c, i) && !strcmp(a, "--check"))
            check = true;
        else if (!cli_operand(c, i) && a[0] == '-' && a[1])
            return cli_bad_arg(c, "config", a);
        else if (!key)
            key = a;
        else if (!value)
            value = a;
        else
            return cli_error(EXIT_USAGE, "config: KEY VALUE, no more");
    }
    if (key && !value)
        return cli_error(EXIT_USAGE, "config: %s needs a value (envlog config KEY VALUE)", key);
    envlog_env *env;
    envlog_config cfg;
    int rc = cli_open_config(c, key ? CLI_WRITE : CLI_READ, "reading the config", NULL, 0,
                             &env, &cfg);
    if (rc)
        return rc;
    envlog_err e;
    if (check) {
        envlog_env_close(env);
        return EXIT_OK;
    }
    if (key) {
        if ((e = envlog_config_set(&cfg, key, value))) {
            envlog_env_close(env);
            return cli_fail(e, "config");
        }
        e = envlog_config_write(env, &cfg);
        envlog_env_close(env);
        return e ? cli_fail(e, "writing the config") : EXIT_OK;
    }
    e = envlog_config_text(&cfg, cli_fwrite, stdout);
    envlog_env_close(env);
    return e ? cli_fail(e, "printing the config") : EXIT_OK;
}

const cli_cmd cli_cmd_config = {
    "config", "show or change the environment's upkeep settings",
    "usage: envlog [-C DIR] config [--check] [KEY VALUE]\n"
    "\n"
    "Prints the settings the environment keeps in DIR/config (the defaults for\n"
    "those not set): when it compacts itself (auto_compact, compact_sessions,\n"
    "compact_bytes), what a compaction keeps (evidence, history_sessions,\n"
    "history_age) and how large it may grow (max_size).  With KEY VALUE,\n"
    "changes one and writes the file again; --check only reads it.  A file\n"
    "with an unknown key or a bad value applies not at all: exit status 3.\n",
    config_run,
};

/* ------------------------------------------------------- prune and gc */

typedef struct removals {
    cli *c;
    bool history_shown;
    uint64_t history, evicted;
    envlog_id128 last_session;
    uint64_t last_count;
    bool have_last;
} removals;

static void flush_session(removals *r)
{
    if (r->have_last && !r->c->json) {
        char id[33];
        envlog_id_format(&r->last_session, id);
        printf("  history of session %s: %" PRIu64 " record%s\n", id, r->last_count,
               r->last_count == 1 ? "" : "s");
    }
    r->have_last = false;
    r->last_count = 0;
}

static void on_removal(void *ctx, const envlog_removal *m)
{
    removals *r = ctx;
    char id[33], t[32];
    envlog_id_format(&m->stamp.session, id);
    if (m->kind == ENVLOG_REMOVED_HISTORY) {
        r->history++;
        if (r->c->json) {
            cli_jbegin("removed");
            printf(",\"removed\":\"history\",\"session\":\"%s\",\"seq\":%" PRIu64
                   ",\"kind\":\"%s\",\"bytes\":%" PRIu64 "}\n", id, m->stamp.seq,
                   envlog_kind_name(m->record_kind), m->bytes);
            return;
        }
        if (!r->have_last || memcmp(r->last_session.b, m->stamp.session.b, 16)) {
            flush_session(r);
            r->last_session = m->stamp.session;
            r->have_last = true;
        }
        r->last_count++;
        return;
    }
    flush_session(r);
    r->evicted++;
    cli_time(m->unix_ns, t);
    if (r->c->json) {
        cli_jbegin("removed");
        printf(",\"removed\":\"evicted\",\"table\":\"%s\",\"namespace\":",
               m->table == ENVLOG_TABLE_TUNE ? "tune" : "kernel");
        cli_jstr(m->ns);
        printf(",\"key\":");
        cli_jstr(m->key);
        printf(",\"set_unix_ns\":%" PRIu64 ",\"set_by\":{\"session\":\"%s\",\"seq\":%" PRIu64
               "},\"bytes\":%" PRIu64 "}\n", m->unix_ns, id, m->stamp.seq, m->bytes);
    } else {
        printf("  evicted %s %s %s (set %s by %s:%" PRIu64 ", %" PRIu64 " bytes)\n",
               m->table == ENVLOG_TABLE_TUNE ? "tune" : "kernel", m->ns, m->key, t, id,
               m->stamp.seq, m->bytes);
    }
}

/* Runs a compaction with `o` and says what it removed. */
static int upkeep_compact(cli *c, const char *what, envlog_env *env, envlog_compact_opts *o)
{
    removals r = {.c = c};
    o->on_removal = on_removal;
    o->ctx = &r;
    envlog_compact_report rep;
    o->on_progress = cli_progress_step;
    envlog_err e = envlog_compact_x(env, o, &rep);
    cli_progress_done();
    flush_session(&r);
    if (e)
        return cli_fail(e, what);
    /* Two generations share the bound; what is left when every tune and
     * kernel entry is gone (the head, user records) cannot be evicted. */
    bool fits = !o->max_size || rep.snapshot_bytes <= o->max_size / 2;
    if (c->json) {
        cli_jbegin(what);
        printf(",\"%s\":{\"dry_run\":%s,\"history_dropped\":%" PRIu64 ",\"evicted\":%" PRIu64
               ",\"evicted_bytes\":%" PRIu64 ",\"entries\":%" PRIu64 ",\"snapshot_bytes\":%"
               PRIu64 ",\"sessions_removed\":%" PRIu64 ",\"fits\":%s}}\n", what,
               o->dry_run ? "true" : "false", rep.history_dropped, rep.evicted,
               rep.evicted_bytes, rep.entries, rep.snapshot_bytes, rep.sessions_removed,
               fits ? "true" : "false");
    } else
        printf("%s%s: %" PRIu64 " record%s of history %s, %" PRIu64 " entr%s %s (%" PRIu64
               " bytes); the snapshot holds %" PRIu64 " entries in %" PRIu64 " bytes\n",
               what, o->dry_run ? " (dry run: nothing changed)" : "", rep.history_dropped,
               rep.history_dropped == 1 ? "" : "s", o->dry_run ? "would go" : "dropped",
               rep.evicted, rep.evicted == 1 ? "y" : "ies",
               o->dry_run ? "would be evicted" : "evicted", rep.evicted_bytes, rep.entries,
               rep.snapshot_bytes);
    if (!fits)
        fprintf(stderr, "envlog: %s: the snapshot %s %" PRIu64 " bytes, more than half of the "
                "bound (%" PRIu64 " bytes): what is left besides tune and kernel entries "
                "cannot be evicted\n", what, o->dry_run ? "would take" : "takes",
                rep.snapshot_bytes, o->max_size);
    return EXIT_OK;
}

static int prune_run(cli *c)
{
    const char *age = NULL, *keep = NULL;
    bool dry = false;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (!strcmp(a, "--older-than") && i + 1 < c->argc)
            age = c->argv[++i];
        else if (!strcmp(a, "--keep-sessions") && i + 1 < c->argc)
            keep = c->argv[++i];
        else if (!strcmp(a, "--dry-run"))
            dry = true;
        else if (!strcmp(a, "--json"))
            c->json = true;
        else
            return cli_bad_arg(c, "prune", a);
    }
    if (!age && !keep)
        return cli_error(EXIT_USAGE, "prune: --older-than DURATION or --keep-sessions N");
    /* The retention asked for, checked as a config line would be. */
    const char *const set[][2] = {{"history_age", age}, {"history_sessions", keep}};
    envlog_env *env;
    envlog_config cfg;
    int rc = cli_open_config(c, CLI_WRITE, "prune", set, 2, &env, &cfg);
    if (rc)
        return rc;
    if (!age)
        cfg.history_age_ns = 0;
    if (!keep)
        cfg.history_sessions = 0;
    envlog_compact_opts o;
    envlog_compact_opts_from(&o, &cfg);
    o.max_size = 0; /* history only: `envlog gc` evicts */
    o.dry_run = dry;
    o.reason = "envlog prune";
    rc = upkeep_compact(c, "prune", env, &o);
    envlog_env_close(env);
    return rc;
}

static int gc_run(cli *c)
{
    const char *size = NULL;
    bool dry = false;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (!strcmp(a, "--max-size") && i + 1 < c->argc)
            size = c->argv[++i];
        else if (!strcmp(a, "--dry-run"))
            dry = true;
        else if (!strcmp(a, "--json"))
            c->json = true;
        else
            return cli_bad_arg(c, "gc", a);
    }
    const char *const set[][2] = {{"max_size", size}};
    envlog_env *env;
    envlog_config cfg;
    int rc = cli_open_config(c, CLI_WRITE, "gc", set, 1, &env, &cfg);
    if (rc)
        return rc;
    if (!cfg.max_size) {
        envlog_env_close(env);
        return cli_error(EXIT_USAGE, "gc: no size bound (give --max-size SIZE, or set max_size "
                         "with envlog config)");
    }
    envlog_compact_opts o;
    envlog_compact_opts_from(&o, &cfg);
    o.dry_run = dry;
    o.reason = "envlog gc";
    rc = upkeep_compact(c, "gc", env, &o);
    envlog_env_close(env);
    return rc;
}

const cli_cmd cli_cmd_prune = {
    "prune", "drop history older than an age or beyond a number of sessions",
    "usage: envlog [-C DIR] prune (--older-than DURATION | --keep-sessions N) [--dry-run]\n"
    "                            [--json]\n"
    "\n"
    "Compacts, keeping in the snapshot the history of the newest N sessions only\n"
    "and/or of sessions younger than DURATION (30d, 12h, 90m, 45s; no unit:\n"
    "seconds).  The standing entries, the record that set each and its session's\n"
    "record always stay, so `why` still answers.  Prints each session whose\n"
    "history goes and how many records; --dry-run changes nothing.\n",
    prune_run,
};

const cli_cmd cli_cmd_gc = {
    "gc", "keep the environment under a size: drop history, then evict",
    "usage: envlog [-C DIR] gc [--max-size SIZE] [--dry-run] [--json]\n"
    "\n"
    "Compacts so that the new snapshot takes at most half of SIZE (64MiB, 10GiB;\n"
    "default: max_size of the config; two generations are kept): first the\n"
    "history of the oldest sessions goes, then, if the entries alone do not fit,\n"
    "entries are evicted, least recently set first, each by a forget record of\n"
    "an \"evict\" session, so `why` says when and why.  Prints each entry\n"
    "evicted; --dry-run changes nothing.\n",
    gc_run,
};
