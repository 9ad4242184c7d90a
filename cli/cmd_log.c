/* SPDX-License-Identifier: MIT */
/*
 * cmd_log.c - `envlog sessions` and `envlog cat`: what was recorded, as it
 * was recorded, session by session.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int sessions_run(cli *c)
{
    envlog_env *env;
    int rc = cli_json_only(c);
    if (rc || (rc = cli_open_env(c, CLI_READ, &env)))
        return rc;
    envlog_session_info *in;
    size_t n;
    if ((rc = cli_sessions_list(env, &in, &n)))
        return rc;
    if (!c->json && n)
        printf("%-32s  %-24s  %-16s  %-12s  %7s  %4s  %-8s  %s\n", "SESSION",
               "START", "LABEL", "HOST", "RECORDS", "SEGS", "STATE", "BYTES");
    for (size_t i = 0; i < n; i++) {
        char t[32];
        cli_time(in[i].start_unix_ns, t);
        const char *st = envlog_session_state_name(in[i].state);
        if (in[i].state == ENVLOG_STATE_DAMAGED || in[i].state == ENVLOG_STATE_TORN)
            rc = EXIT_DAMAGE;
        if (c->json) {
            cli_jbegin("session");
            printf(",\"session\":\"%s\",\"start_unix_ns\":%" PRIu64 ",\"start\":\"%s\",",
                   in[i].id_hex, in[i].start_unix_ns, t);
            fputs("\"label\":", stdout);
            envlog_json_string(in[i].label, cli_fwrite, stdout);
            fputs(",\"host\":", stdout);
            envlog_json_string(in[i].host, cli_fwrite, stdout);
            fputs(",\"runtime\":", stdout);
            envlog_json_string(in[i].runtime, cli_fwrite, stdout);
            printf(",\"records\":%" PRIu64 ",\"last_seq\":%" PRIu64
                   ",\"segments\":%" PRIu64 ",\"state\":\"%s\",\"bytes\":%" PRIu64
                   ",\"dropped_bytes\":%" PRIu64 "}\n",
                   in[i].records, in[i].last_seq, in[i].segments, st, in[i].bytes,
                   in[i].dropped_bytes);
        } else {
            /* Labels and hosts are anyone's text: padded by display width. */
            printf("%-32s  %-24s  ", in[i].id_hex, in[i].start_unix_ns ? t : "-");
            cli_pad(*in[i].label ? in[i].label : "-", 16);
            fputs("  ", stdout);
            cli_pad(*in[i].host ? in[i].host : "-", 12);
            printf("  %7" PRIu64 "  %4" PRIu64 "  %-8s  %" PRIu64 "\n", in[i].records,
                   in[i].segments, st, in[i].bytes);
        }
    }
    if (!c->json && n == 0)
        printf("no sessions in %s\n", envlog_env_path(env));
    envlog_sessions_free(in, n);
    envlog_env_close(env);
    return rc;
}

enum cat_mode { CAT_TEXT, CAT_JSON, CAT_DIAG };

static int cat_one(envlog_env *env, const envlog_id128 *id, enum cat_mode mode,
                   bool heading)
{
    envlog_reader *r;
    envlog_err e = envlog_reader_open(env, id, &r);
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO || e == ENVLOG_NOT_FOUND)
        return cli_fail(e, "opening session");
    if (e) {
        /* A session directory that is not one (a link, a file) is damage
         * to report; the other sessions are read all the same. */
        envlog_damage d = {.session = *id};
        snprintf(d.reason, sizeof d.reason, "%.95s", envlog_errmsg());
        int rc = EXIT_OK;
        cli_damage(&rc, &d, false);
        return rc;
    }
    int rc = EXIT_OK;
    if (heading) {
        char hex[33];
        envlog_id_format(id, hex);
        printf("session %s\n", hex);
    }
    const envlog_record *rec;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
            cli_damage(&rc, envlog_reader_damage(r), e == ENVLOG_TRUNCATED);
            continue;
        }
        if (e) {
            rc = cli_fail(e, "reading session");
            break;
        }
        if (mode == CAT_JSON)
            e = cli_record_json(rec);
        else if (mode == CAT_DIAG)
            e = envlog_record_diag(rec, cli_fwrite, stdout);
        else
            e = envlog_record_text(rec, cli_fwrite, stdout);
        if (e) {
            rc = cli_fail(e, "printing a record");
            break;
        }
        putchar('\n');
    }
    envlog_reader_close(r);
    return rc;
}

static int cat_run(cli *c)
{
    enum cat_mode mode = c->json ? CAT_JSON : CAT_TEXT;
    int first_arg = c->argc;
    for (int i = 1; i < c->argc; i++) {
        if (!strcmp(c->argv[i], "--json"))
            mode = CAT_JSON;
        else if (!strcmp(c->argv[i], "--diag"))
            mode = CAT_DIAG;
        else if (!strcmp(c->argv[i], "--"))
            { first_arg = i + 1; break; }
        else if (c->argv[i][0] == '-')
            return cli_bad_arg(c, "cat", c->argv[i]);
        else
            { first_arg = i; break; }
    }
    envlog_env *env;
    int rc = cli_open_env(c, CLI_READ, &env);
    if (rc)
        return rc;
    int worst = EXIT_OK;
    if (first_arg < c->argc) {
        for (int i = first_arg; i < c->argc && worst != EXIT_USAGE; i++) {
            envlog_id128 id;
            if ((rc = cli_resolve_session(env, c->argv[i], &id)) ||
                (rc = cat_one(env, &id, mode, mode == CAT_TEXT && c->argc - first_arg > 1)))
                worst = rc > worst ? rc : worst;
        }
    } else {
        envlog_id128 *ids;
        size_t n;
        envlog_err e = envlog_sessions_ids(env, &ids, &n);
        if (e) {
            envlog_env_close(env);
            return cli_fail(e, "listing sessions");
        }
        for (size_t i = 0; i < n && worst != EXIT_USAGE; i++)
            if ((rc = cat_one(env, &ids[i], mode, mode == CAT_TEXT)))
                worst = rc > worst ? rc : worst;
        envlog_ids_free(ids);
    }
    envlog_env_close(env);
    return worst;
}

const cli_cmd cli_cmd_sessions = {
    "sessions", "list the sessions of the environment",
    "usage: envlog [-C DIR] sessions [--json]\n"
    "\n"
    "Lists every session (oldest first): id, start time, label, host, records,\n"
    "segments, state (sealed, live, unsealed, torn, damaged) and bytes on disk.\n"
    "Exit status 1 when a session is torn or damaged.\n",
    sessions_run,
};

const cli_cmd cli_cmd_cat = {
    "cat", "print the records of sessions in order",
    "usage: envlog [-C DIR] cat [--json | --diag] [SESSION...]\n"
    "\n"
    "Prints the records of each SESSION (a full id or a unique prefix; all\n"
    "sessions when none is given) in seq order, one per line: as readable text,\n"
    "as JSON objects (--json), or as CBOR diagnostic notation (--diag, RFC 8949\n"
    "section 8).  Damage is reported on stderr with its place and exit status 1.\n",
    cat_run,
};
