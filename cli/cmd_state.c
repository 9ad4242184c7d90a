/* SPDX-License-Identifier: MIT */
/*
 * cmd_state.c - `envlog status`, `envlog replay` and `envlog forget`: the
 * folded cache state, summarized, dumped, and edited by tombstone.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- status */

typedef struct ns_count {
    envlog_table table;
    const char *ns;
    uint64_t n;
    uint64_t bytes; /* kernel binaries */
} ns_count;

typedef struct count_ctx {
    ns_count *v;
    size_t n, cap;
} count_ctx;

static envlog_err count_entry(void *ctx, const envlog_entry *e)
{
    count_ctx *c = ctx;
    const char *ns = e->tune ? e->tune->ns : e->kernel->ns;
    if (!c->n || c->v[c->n - 1].table != e->table || strcmp(c->v[c->n - 1].ns, ns)) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 16;
            ns_count *p = realloc(c->v, c->cap * sizeof *p);
            if (!p)
                return ENVLOG_NOMEM;
            c->v = p;
        }
        c->v[c->n++] = (ns_count){e->table, ns, 0, 0};
    }
    c->v[c->n - 1].n++;
    if (e->kernel)
        c->v[c->n - 1].bytes += e->kernel->binary.size;
    return ENVLOG_OK;
}

static void size_text(uint64_t b, char out[32])
{
    if (b >= (1u << 30) && !(b % (1u << 20)))
        snprintf(out, 32, "%.1f GiB", (double)b / (1u << 30));
    else if (b >= (1u << 20))
        snprintf(out, 32, "%.1f MiB", (double)b / (1u << 20));
    else if (b >= 1024)
        snprintf(out, 32, "%.1f KiB", (double)b / 1024);
    else
        snprintf(out, 32, "%" PRIu64 " bytes", b);
}

static void print_upkeep(const envlog_upkeep *u)
{
    const envlog_config *c = &u->config;
    char a[32], b[32], t[32];
    if (!u->config_ok)
        printf("config       not applied (the defaults are shown): %s\n", u->config_error);
    size_text(c->compact_bytes, a);
    size_text(u->pending_bytes, b);
    printf("upkeep       automatic compaction %s: at %" PRIu64 " %s or %s not "
           "compacted (now %" PRIu64 ", %s)%s\n", c->auto_compact ? "on" : "off",
           c->compact_sessions, cli_plural(c->compact_sessions, "session", "sessions"), a,
           u->pending_sessions, b,
           u->due ? "; due at the next session end" : "");
    char age[48] = "";
    if (c->history_age_ns)
        snprintf(age, sizeof age, ", younger than %" PRIu64 " s", c->history_age_ns / 1000000000u);
    if (c->history_sessions)
        printf("             history of the newest %" PRIu64 " %s%s; ", c->history_sessions,
               cli_plural(c->history_sessions, "session", "sessions"), age);
    else
        printf("             history of every session%s; ", age);
    if (c->max_size) {
        size_text(c->max_size, a);
        size_text(u->bytes, b);
        printf("max size %s (now %s)\n", a, b);
    } else {
        printf("no size bound\n");
    }
    if (u->last_compaction_unix_ns) {
        cli_time(u->last_compaction_unix_ns, t);
        printf("compacted    %s (%s)\n", t, u->last_reason[0] ? u->last_reason : "-");
    } else {
        printf("compacted    never\n");
    }
}

static void print_upkeep_json(const envlog_upkeep *u)
{
    const envlog_config *c = &u->config;
    printf(",\"upkeep\":{\"config_ok\":%s,\"config_error\":", u->config_ok ? "true" : "false");
    cli_jstr(u->config_error);
    printf(",\"auto_compact\":%s,\"compact_sessions\":%" PRIu64 ",\"compact_bytes\":%" PRIu64
           ",\"history_sessions\":%" PRIu64 ",\"history_age_ns\":%" PRIu64
           ",\"max_size\":%" PRIu64 ",\"pending_sessions\":%" PRIu64 ",\"pending_bytes\":%"
           PRIu64 ",\"bytes\":%" PRIu64 ",\"due\":%s,\"last_compaction_unix_ns\":%" PRIu64
           ",\"last_reason\":", c->auto_compact ? "true" : "false", c->compact_sessions,
           c->compact_bytes, c->history_sessions, c->history_age_ns, c->max_size,
           u->pending_sessions, u->pending_bytes, u->bytes, u->due ? "true" : "false",
           u->last_compaction_unix_ns);
    cli_jstr(u->last_reason);
    printf("}");
}

static int status_run(cli *c)
{
    envlog_env *env;
    int rc = cli_json_only(c);
    if (rc || (rc = cli_open_env(c, CLI_READ, &env)))
        return rc;
    envlog_session_info *in = NULL;
    size_t n = 0;
    envlog_err e = envlog_sessions_list(env, &in, &n);
    int worst = EXIT_OK;
    envlog_replay_opts o = {.on_damage = cli_damage, .on_progress = cli_progress,
                            .check_snapshot = true, .ctx = &worst};
    envlog_state *st = NULL;
    if (!e)
        e = envlog_state_open(env, &o, &st);
    cli_progress_done();
    if (e) {
        envlog_sessions_free(in, n);
        envlog_env_close(env);
        return cli_fail(e, "reading the environment");
    }
    uint64_t bytes = 0, by_state[5] = {0}, damaged_bytes = 0, strays = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += in[i].bytes;
        by_state[in[i].state]++;
        damaged_bytes += in[i].dropped_bytes;
        strays += in[i].strays;
    }
    envlog_state_stats ss;
    envlog_state_stats_get(st, &ss);
    count_ctx cc = {0};
    if (envlog_state_each(st, count_entry, &cc)) {
        rc = cli_error(EXIT_USAGE, "status: out of memory");
        goto done;
    }
    envlog_upkeep up;
    if ((e = envlog_upkeep_get(env, &up))) {
        rc = cli_fail(e, "reading the environment's upkeep");
        goto done;
    }
    /* The counts below are read after every entry was (status reads the
     * snapshot whole), so they add up whatever was damaged. */
    envlog_state_stats_get(st, &ss);
    bool snap_damage = ss.snapshot_damaged || ss.snapshot_lost;
    bool damage = by_state[ENVLOG_STATE_TORN] || by_state[ENVLOG_STATE_DAMAGED] ||
                  snap_damage || strays;
    static const char *const gens[] = {"none", "current", "previous"};
    const char *gen = gens[ss.snapshot_generation >= 0 && ss.snapshot_generation < 3
                               ? ss.snapshot_generation : 0];
    char last[32] = "-";
    if (ss.last_change_unix_ns)
        cli_time(ss.last_change_unix_ns, last);
    if (c->json) {
        cli_jbegin("status");
        printf(",\"environment\":");
        cli_jstr(envlog_env_path(env));
        printf(",\"format\":%d,\"sessions\":%zu", envlog_env_format(env), n);
        for (int s = 0; s < 5; s++)
            printf(",\"%s\":%" PRIu64, envlog_session_state_name((envlog_session_state)s),
                   by_state[s]);
        printf(",\"bytes\":%" PRIu64 ",\"records\":%" PRIu64 ",\"tunes\":%" PRIu64
               ",\"kernels\":%" PRIu64 ",\"user_records\":%" PRIu64
               ",\"snapshot_bytes\":%" PRIu64 ",\"snapshot_entries\":%" PRIu64
               ",\"snapshot_generation\":\"%s\",\"snapshot_damaged\":%" PRIu64
               ",\"snapshot_lost\":%" PRIu64 ",\"stray_entries\":%" PRIu64,
               bytes + ss.snapshot_bytes, ss.records, ss.tunes, ss.kernels, ss.user_records,
               ss.snapshot_bytes, ss.snapshot_entries, gen, ss.snapshot_damaged,
               ss.snapshot_lost, strays);
        printf(",\"namespaces\":[");
        for (size_t i = 0; i < cc.n; i++) {
            printf("%s{\"table\":\"%s\",\"namespace\":", i ? "," : "",
                   cc.v[i].table == ENVLOG_TABLE_TUNE ? "tune" : "kernel");
            cli_jstr(cc.v[i].ns);
            printf(",\"entries\":%" PRIu64 ",\"binary_bytes\":%" PRIu64 "}", cc.v[i].n,
                   cc.v[i].bytes);
        }
        printf("],\"last_change_unix_ns\":%" PRIu64 ",\"last_change\":\"%s\""
               ",\"damaged_regions\":%" PRIu64 ",\"damaged_bytes\":%" PRIu64,
               ss.last_change_unix_ns, last, ss.damaged, damaged_bytes);
        print_upkeep_json(&up);
        printf("}\n");
    } else {
        printf("environment  %s (format %d)\n", envlog_env_path(env), envlog_env_format(env));
        printf("sessions     %zu", n);
        const char *sep = " (";
        for (int s = 0; s < 5; s++)
            if (by_state[s]) {
                printf("%s%" PRIu64 " %s", sep, by_state[s],
                       envlog_session_state_name((envlog_session_state)s));
                sep = ", ";
            }
        printf("%s\n", n ? ")" : "");
        printf("on disk      %" PRIu64 " %s in %" PRIu64 " %s\n", bytes + ss.snapshot_bytes,
               cli_plural(bytes + ss.snapshot_bytes, "byte", "bytes"), ss.records,
               cli_plural(ss.records, "record", "records"));
        if (ss.snapshot_bytes)
            printf("snapshot     %" PRIu64 " %s from %" PRIu64 " %s, %" PRIu64
                   " bytes%s\n", ss.snapshot_entries,
                   cli_plural(ss.snapshot_entries, "entry", "entries"), ss.snapshot_sessions,
                   cli_plural(ss.snapshot_sessions, "session", "sessions"), ss.snapshot_bytes,
                   ss.snapshot_generation == 2 ? " (snapshot/previous: the current one is "
                                                 "damaged or missing)" : "");
        printf("entries      %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64 " user %s\n", ss.tunes,
               cli_plural(ss.tunes, "tune", "tunes"), ss.kernels,
               cli_plural(ss.kernels, "kernel", "kernels"), ss.user_records,
               cli_plural(ss.user_records, "record", "records"));
        for (size_t i = 0; i < cc.n; i++)
            printf("  %-6s %6" PRIu64 "  %s\n",
                   cc.v[i].table == ENVLOG_TABLE_TUNE ? "tune" : "kernel", cc.v[i].n,
                   cc.v[i].ns);
        printf("last change  %s\n", last);
        print_upkeep(&up);
        if (damage) {
            printf("damage       %" PRIu64 " %s, %" PRIu64 " %s: run `envlog verify` for "
                   "details\n", ss.damaged, cli_plural(ss.damaged, "region", "regions"),
                   damaged_bytes, cli_plural(damaged_bytes, "byte", "bytes"));
            if (snap_damage)
                printf("             the snapshot: %" PRIu64 " damaged, %" PRIu64
                       " entries lost%s\n", ss.snapshot_damaged, ss.snapshot_lost,
                       ss.snapshot_generation == 2
                           ? "; the generation before stands in (nothing lost): "
                             "`envlog verify --fix` puts it back"
                           : "");
            if (strays)
                printf("             %" PRIu64 " stray entr%s inside session directories\n",
                       strays, strays == 1 ? "y" : "ies");
        } else {
            printf("damage       none\n");
        }
    }
    if (damage)
        worst = EXIT_DAMAGE;
    if (!up.config_ok)
        worst = EXIT_INPUT;
done:
    free(cc.v);
    envlog_state_close(st);
    envlog_sessions_free(in, n);
    envlog_env_close(env);
    return rc ? rc : worst;
}

/* ---------------------------------------------------------------- replay */

/* True when session `id` is still a directory of its own (not compacted). */
static bool session_kept(envlog_env *env, const envlog_id128 *id)
{
    envlog_id128 *ids = NULL;
    size_t n = 0;
    bool kept = false;
    if (envlog_sessions_ids(env, &ids, &n) == ENVLOG_OK)
        for (size_t i = 0; i < n && !kept; i++)
            kept = !memcmp(ids[i].b, id->b, 16);
    envlog_ids_free(ids);
    return kept;
}

/* A point in time inside what a compaction folded: the state there is what
 * its snapshot kept of that history, and what it dropped is said, with the
 * compaction that dropped it (envlog(1), replay). */
static void until_note(envlog_env *env, const envlog_replay_opts *o)
{
    envlog_compaction cp;
    if (envlog_compaction_get(env, &cp) || !cp.present || cp.evidence == ENVLOG_EVIDENCE_ALL)
        return;
    bool inside = o->until_time ? o->until_unix_ns < cp.last_unix_ns
                                : !session_kept(env, &o->until_session);
    if (!inside)
        return;
    char t[32];
    cli_time(cp.created_unix_ns, t);
    fprintf(stderr,
            "envlog: note: that point is before the compaction of %s (%s), which kept %s "
            "of the history before it: %s are no longer recorded, so the state there is "
            "as far as those records tell (compact with --evidence all to keep every "
            "record)\n",
            t, cp.reason[0] ? cp.reason : "no reason recorded",
            cp.evidence == ENVLOG_EVIDENCE_NONE ? "no record" : "the record behind each "
                                                                "standing entry",
            cp.evidence == ENVLOG_EVIDENCE_NONE
                ? "every record of the sessions it folded"
                : "the values replaced or forgotten before it, and the tunes that lost");
}

static int replay_run(cli *c)
{
    const char *out = NULL, *until = NULL;
    unsigned of = 0;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (!strcmp(a, "--until") && i + 1 < c->argc)
            until = c->argv[++i];
        else if (!strncmp(a, "--until=", 8))
            until = a + 8;
        else if ((!strcmp(a, "--out") || !strcmp(a, "-o")) && i + 1 < c->argc)
            out = c->argv[++i];
        else if (!strncmp(a, "--out=", 6))
            out = a + 6;
        else if (cli_out_flag(a, &of))
            ;
        else if (!strcmp(a, "--json"))
            ; /* the dump is JSON already */
        else
            return cli_bad_arg(c, "replay", a);
    }
    envlog_env *env;
    int rc = cli_open_env(c, CLI_READ, &env);
    if (rc)
        return rc;
    int worst = EXIT_OK;
    envlog_replay_opts o = {.on_damage = cli_damage, .on_progress = cli_progress,
                            .ctx = &worst, .check_snapshot = true};
    if (until && (rc = cli_parse_until(env, until, &o))) {
        envlog_env_close(env);
        return rc;
    }
    if (until)
        until_note(env, &o);
    /* Refused before the work, not after. */
    cli_out o_f;
    if ((rc = cli_out_begin("replay", out, of, &o_f))) {
        envlog_env_close(env);
        return rc;
    }
    envlog_state *st;
    envlog_err e = envlog_state_open(env, &o, &st);
    if (e) {
        cli_out_end("replay", &o_f, false);
        envlog_env_close(env);
        return cli_fail(e, "replaying");
    }
    cli_progress_done();
    e = envlog_state_dump(st, cli_out_write, &o_f);
    rc = cli_out_end("replay", &o_f, !e);
    if (e && !rc)
        rc = cli_fail(e, "writing the dump");
    envlog_state_close(st);
    envlog_env_close(env);
    return rc ? rc : worst;
}

/* ---------------------------------------------------------------- forget */

typedef struct forget_ctx {
    const char *key, *ns; /* no key: every entry under ns */
    const char *reason;   /* what the tombstones say */
    bool kernel, has_checksum;
    uint64_t checksum;
    envlog_forget *v;
    size_t n, cap;
} forget_ctx;

static envlog_err match_forget(void *ctx, const envlog_entry *e)
{
    forget_ctx *f = ctx;
    envlog_forget g = {0};
    char hex[33];
    if (!f->key) {
        const char *ns = e->tune ? e->tune->ns : e->kernel->ns;
        if (!envlog_ns_under(ns, f->ns))
            return ENVLOG_OK;
        if (e->tune)
            g = (envlog_forget){ENVLOG_TABLE_TUNE, ns, e->tune->key, e->tune->checksum,
                                f->reason, NULL};
        else {
            envlog_id_format(&e->kernel->kernel_key, hex);
            g = (envlog_forget){ENVLOG_TABLE_KERNEL, ns, strdup(hex), 0, f->reason, NULL};
            if (!g.key)
                return ENVLOG_NOMEM;
        }
    } else if (e->tune && !f->kernel) {
        if (strcmp(e->tune->key, f->key) || (f->ns && strcmp(e->tune->ns, f->ns)) ||
            (f->has_checksum && e->tune->checksum != f->checksum))
            return ENVLOG_OK;
        g = (envlog_forget){ENVLOG_TABLE_TUNE, e->tune->ns, e->tune->key,
                            e->tune->checksum, f->reason, NULL};
    } else if (e->kernel && f->kernel) {
        envlog_id_format(&e->kernel->kernel_key, hex);
        if ((strcmp(hex, f->key) && (!e->kernel->name || strcmp(e->kernel->name, f->key))) ||
            (f->ns && strcmp(e->kernel->ns, f->ns)))
            return ENVLOG_OK;
        g = (envlog_forget){ENVLOG_TABLE_KERNEL, e->kernel->ns, strdup(hex), 0, f->reason,
                            NULL};
        if (!g.key)
            return ENVLOG_NOMEM;
    } else {
        return ENVLOG_OK;
    }
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 8;
        envlog_forget *p = realloc(f->v, f->cap * sizeof *p);
        if (!p)
            return ENVLOG_NOMEM;
        f->v = p;
    }
    f->v[f->n++] = g;
    return ENVLOG_OK;
}

/* One entry forgotten (stamp: its tombstone) or, for a dry run, that would
 * be (stamp NULL). */
static void print_forget(const cli *c, const envlog_forget *f, const envlog_stamp *stamp)
{
    char id[33] = "";
    if (stamp)
        envlog_id_format(&stamp->session, id);
    const char *table = f->table == ENVLOG_TABLE_TUNE ? "tune" : "kernel";
    if (c->json) {
        cli_jbegin("forget");
        printf(",\"%s\":{\"table\":\"%s\",\"namespace\":", stamp ? "forgot" : "would_forget",
               table);
        cli_jstr(f->ns);
        printf(",\"key\":");
        cli_jstr(f->key);
        printf(",\"checksum\":\"0x%016" PRIx64 "\"}", f->checksum);
        if (stamp)
            printf(",\"session\":\"%s\",\"seq\":%" PRIu64, id, stamp->seq);
        printf("}\n");
    } else if (stamp) {
        printf("forgot %s %s in %s (tombstone %s:%" PRIu64 ")\n", table, f->key, f->ns, id,
               stamp->seq);
    } else {
        printf("would forget %s %s in %s\n", table, f->key, f->ns);
    }
}

/* The tombstones, in a session of their own. */
static int record_forgets(cli *c, envlog_env *env, const forget_ctx *f, const char *under)
{
    envlog_session_opts so;
    envlog_session_opts_init(&so);
    so.label = "forget";
    so.runtime = "envlog";
    so.runtime_version = ENVLOG_VERSION_STRING;
    envlog_session *s;
    envlog_err e = envlog_session_begin(env, &so, &s);
    if (e)
        return cli_fail(e, "beginning a session");
    int rc = EXIT_OK;
    envlog_stamp stamp;
    if (under) {
        envlog_forget g = {ENVLOG_TABLE_TUNE, NULL, NULL, 0, f->reason, under};
        if ((e = envlog_record_forget(s, &g, &stamp)))
            rc = cli_fail(e, "recording the tombstone");
        for (size_t i = 0; i < f->n && !rc; i++)
            print_forget(c, &f->v[i], &stamp);
        if (!rc && !c->json)
            printf("%zu entr%s under %s, one tombstone\n", f->n, f->n == 1 ? "y" : "ies",
                   under);
    }
    for (size_t i = 0; i < f->n && !rc && !under; i++) {
        if ((e = envlog_record_forget(s, &f->v[i], &stamp)))
            rc = cli_fail(e, "recording the tombstone");
        else
            print_forget(c, &f->v[i], &stamp);
    }
    envlog_err end = envlog_session_end(s);
    if (end && !rc)
        rc = cli_fail(end, "ending the session");
    return rc;
}

static int forget_run(cli *c)
{
    forget_ctx f = {.reason = "envlog forget"};
    bool all = false, dry = false;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (i == c->dashdash)
            continue;
        if (cli_operand(c, i)) {
            if (f.key)
                return cli_error(EXIT_USAGE, "forget: one KEY at a time");
            f.key = a;
        } else if ((!strcmp(a, "--namespace") || !strcmp(a, "-n")) && i + 1 < c->argc)
            f.ns = c->argv[++i];
        else if (!strcmp(a, "--checksum") && i + 1 < c->argc) {
            f.has_checksum = true;
            if (cli_parse_checksum("forget --checksum", c->argv[++i], &f.checksum))
                return EXIT_USAGE;
        } else if ((!strcmp(a, "--reason") || !strcmp(a, "-r")) && i + 1 < c->argc) {
            f.reason = c->argv[++i];
            if (!*f.reason || strlen(f.reason) > 1024)
                return cli_error(EXIT_USAGE, "forget --reason: 1 to 1024 bytes of text");
        } else if (!strcmp(a, "--kernel"))
            f.kernel = true;
        else if (!strcmp(a, "--all"))
            all = true;
        else if (!strcmp(a, "--dry-run"))
            dry = true;
        else if (!strcmp(a, "--json"))
            c->json = true;
        else if (a[0] == '-')
            return cli_bad_arg(c, "forget", a);
        else if (!f.key)
            f.key = a;
        else
            return cli_error(EXIT_USAGE, "forget: one KEY at a time");
    }
    if (!f.key && !f.ns)
        return cli_error(EXIT_USAGE, "forget: which KEY, or --namespace PREFIX? (see envlog "
                         "forget --help)");
    if (!f.key && (f.kernel || f.has_checksum || all))
        return cli_error(EXIT_USAGE, "forget --namespace PREFIX takes every entry under it: "
                         "--kernel, --checksum and --all need a KEY");
    const char *bad = f.key ? NULL : envlog_ns_prefix_problem(f.ns);
    if (bad)
        return cli_error(EXIT_USAGE, "forget --namespace '%s': %s", f.ns, bad);
    envlog_env *env;
    envlog_state *st;
    int rc = cli_open_state(c, dry ? CLI_READ : CLI_WRITE, "replaying", &env, &st);
    if (rc)
        return rc;
    if (envlog_state_each(st, match_forget, &f)) {
        rc = cli_error(EXIT_USAGE, "forget: out of memory");
        goto done;
    }
    if (f.n == 0) {
        if (f.key)
            rc = cli_error(EXIT_DAMAGE, "forget: no standing entry matches '%s'%s%s", f.key,
                           f.ns ? " in " : "", f.ns ? f.ns : "");
        else
            rc = cli_error(EXIT_DAMAGE, "forget: no standing entry under %s", f.ns);
        goto done;
    }
    if (f.key && f.n > 1 && !all) {
        cli_error(EXIT_USAGE, "forget: %zu entries match '%s'; name one with --namespace "
                  "(and --checksum), or give --all:", f.n, f.key);
        for (size_t i = 0; i < f.n; i++)
            fprintf(stderr, "  %s %s checksum %" PRIu64 "\n", f.v[i].ns, f.v[i].key,
                    f.v[i].checksum);
        rc = EXIT_USAGE;
        goto done;
    }
    if (dry) {
        for (size_t i = 0; i < f.n; i++)
            print_forget(c, &f.v[i], NULL);
        if (!c->json)
            printf("%zu entr%s would be forgotten%s%s (dry run: nothing recorded)\n", f.n,
                   f.n == 1 ? "y" : "ies", f.key ? "" : " under ", f.key ? "" : f.ns);
    } else {
        rc = record_forgets(c, env, &f, f.key ? NULL : f.ns);
    }
done:
    for (size_t i = 0; i < f.n; i++)
        if (f.v[i].table == ENVLOG_TABLE_KERNEL)
            free((void *)(uintptr_t)f.v[i].key);
    free(f.v);
    envlog_env_close(env);
    return rc;
}

const cli_cmd cli_cmd_status = {
    "status", "summarize sessions, entries, bytes and damage",
    "usage: envlog [-C DIR] status [--json]\n"
    "\n"
    "Summarizes the environment: sessions by state, bytes on disk, standing\n"
    "entries per table and namespace, the time of the last change, and any\n"
    "damage.  Exit status 1 when damage was found.\n",
    status_run,
};

const cli_cmd cli_cmd_replay = {
    "replay", "print the folded state as a canonical dump",
    "usage: envlog [-C DIR] replay [--until TIME|SESSION:SEQ] [--out FILE]\n"
    "                     [--force] [--follow]\n"
    "\n"
    "Folds every session in the total order (session start + offset, session\n"
    "id, seq) and prints the state: one JSON object per standing entry, in\n"
    "canonical order, then the user records.  The same logs always give\n"
    "byte-identical output.\n"
    "\n"
    "  --until TIME         fold only records up to TIME (Unix ns, or\n"
    "                       YYYY-MM-DDTHH:MM:SS[.fff]Z): the environment as it was\n"
    "  --until SESSION:SEQ  fold up to and including that record\n"
    "  --out FILE, -o FILE  write the dump to FILE (- is stdout): a new file is\n"
    "                       written whole or not at all; a FIFO or device is\n"
    "                       written through\n"
    "  --force, -f          replace FILE if it exists (atomically)\n"
    "  --follow             write to what FILE points to if it is a symbolic link\n"
    "\n"
    "Damage is reported on stderr and the fold goes on; exit status 1 then.\n",
    replay_run,
};

const cli_cmd cli_cmd_forget = {
    "forget", "record a tombstone for an entry in a new session",
    "usage: envlog [-C DIR] forget KEY [--namespace NS] [--checksum N] [--kernel] [--all]\n"
    "                              [--reason TEXT] [--dry-run] [--json]\n"
    "       envlog [-C DIR] forget --namespace PREFIX [--reason TEXT] [--dry-run] [--json]\n"
    "\n"
    "Removes the standing tune entry for KEY (or, with --kernel, the kernel\n"
    "whose key in hex or whose name is KEY) by recording a forget record in a\n"
    "new session; the history stays.  When several entries match, name one with\n"
    "--namespace and --checksum, or give --all.  Without KEY, one tombstone\n"
    "retires every entry, tune or kernel, whose namespace is PREFIX or lies\n"
    "under it (whole '/'-separated components: nvrtc/12.4 is not nvrtc/12.40).\n"
    "The tombstone says why (--reason; default \"envlog forget\"), and `why`\n"
    "and `diff` repeat it.  --dry-run lists what would go and records nothing.\n"
    "Exit status 1 when nothing matches.\n",
    forget_run,
};
