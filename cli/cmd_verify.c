/* SPDX-License-Identifier: MIT */
/*
 * cmd_verify.c - `envlog verify [--fix]`: how far each segment is good.
 * Files change only with --fix, which cuts the torn tail of a session whose
 * writer is gone, keeping a byte-identical .broken copy (redis-check-aof).
 */
#include "cli.h"

#include <inttypes.h>
#include <string.h>

typedef struct seg_good {
    uint32_t segment;
    uint64_t good_end; /* just past the last good record */
    uint64_t records;
} seg_good;

static int verify_session(cli *c, envlog_env *env, const envlog_session_info *in,
                          bool fix)
{
    envlog_reader *r;
    envlog_err e = envlog_reader_open(env, &in->id, &r);
    if (e) {
        if (c->json) {
            printf("{\"session\":\"%s\",\"state\":\"damaged\",\"error\":", in->id_hex);
            cli_jstr(envlog_errmsg());
            printf("}\n");
        } else {
            printf("%s  damaged: %s\n", in->id_hex, envlog_errmsg());
        }
        return EXIT_DAMAGE;
    }
    seg_good segs[64];
    size_t ns = 0, more = 0;
    int rc = EXIT_OK;
    const envlog_record *rec;
    envlog_damage dmg[16];
    bool torn[16];
    size_t nd = 0, extra = 0;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
            rc = EXIT_DAMAGE;
            if (nd < 16) {
                dmg[nd] = *envlog_reader_damage(r);
                torn[nd++] = e == ENVLOG_TRUNCATED;
            } else {
                extra++;
            }
            continue;
        }
        if (e) {
            envlog_reader_close(r);
            return cli_fail(e, "reading a session");
        }
        if (!ns || segs[ns - 1].segment != rec->segment) {
            if (ns == 64) {
                more++;
                continue;
            }
            segs[ns++] = (seg_good){rec->segment, 0, 0};
        }
        segs[ns - 1].good_end = rec->file_end;
        segs[ns - 1].records++;
    }
    envlog_session_state st = envlog_reader_state(r);
    envlog_reader_close(r);
    if (c->json) {
        printf("{\"session\":\"%s\",\"state\":\"%s\",\"records\":%" PRIu64
               ",\"segments\":[", in->id_hex, envlog_session_state_name(st), in->records);
        for (size_t i = 0; i < ns; i++)
            printf("%s{\"segment\":%" PRIu32 ",\"records\":%" PRIu64 ",\"good_to\":%" PRIu64
                   "}", i ? "," : "", segs[i].segment, segs[i].records, segs[i].good_end);
        printf("],\"damage\":[");
        for (size_t i = 0; i < nd; i++) {
            printf("%s{\"segment\":%" PRIu32 ",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64
                   ",\"torn\":%s,\"reason\":", i ? "," : "", dmg[i].segment,
                   dmg[i].offset, dmg[i].bytes, torn[i] ? "true" : "false");
            cli_jstr(dmg[i].reason);
            putchar('}');
        }
        printf("]");
    } else {
        printf("%s  %-8s  %" PRIu64 " records in %" PRIu64 " segments\n", in->id_hex,
               envlog_session_state_name(st), in->records, in->segments);
        for (size_t i = 0; i < ns; i++)
            printf("  segment %" PRIu32 ": %" PRIu64 " records, good to offset %" PRIu64 "\n",
                   segs[i].segment, segs[i].records, segs[i].good_end);
        if (more)
            printf("  (%zu more segments)\n", more);
        for (size_t i = 0; i < nd; i++)
            printf("  %s: segment %" PRIu32 " offset %" PRIu64 ": %s (%" PRIu64
                   " bytes dropped)\n", torn[i] ? "torn tail" : "damage", dmg[i].segment,
                   dmg[i].offset, dmg[i].reason, dmg[i].bytes);
        if (extra)
            printf("  (%zu more damaged regions)\n", extra);
    }
    if (fix && rc) {
        envlog_repair rep;
        e = envlog_session_repair(env, &in->id, &rep);
        if (c->json) {
            printf(",\"fix\":{\"repaired\":%s,\"segment\":%" PRIu32 ",\"cut_at\":%" PRIu64
                   ",\"bytes_removed\":%" PRIu64 ",\"broken\":", rep.repaired ? "true" : "false",
                   rep.segment, rep.cut_at, rep.bytes_removed);
            cli_jstr(rep.broken);
            printf(",\"note\":");
            cli_jstr(e ? envlog_errmsg() : rep.why);
            printf("}");
        } else if (e) {
            printf("  not fixed: %s\n", envlog_errmsg());
        } else if (rep.repaired) {
            printf("  fixed: segment %" PRIu32 " cut at offset %" PRIu64 " (%" PRIu64
                   " bytes removed); the original is kept as %s%s%s\n", rep.segment,
                   rep.cut_at, rep.bytes_removed, rep.broken, rep.why[0] ? "; " : "",
                   rep.why);
        } else {
            printf("  not fixed: %s\n", rep.why);
        }
    }
    if (c->json)
        printf("}\n");
    return rc;
}

static int verify_run(cli *c)
{
    bool fix = false;
    for (int i = 1; i < c->argc; i++) {
        if (!strcmp(c->argv[i], "--fix"))
            fix = true;
        else if (!strcmp(c->argv[i], "--json"))
            c->json = true;
        else
            return cli_error(EXIT_USAGE, "verify: unexpected argument '%s'", c->argv[i]);
    }
    envlog_env *env;
    int rc = cli_open_env(c, fix ? CLI_WRITE : CLI_READ, &env);
    if (rc)
        return rc;
    envlog_session_info *in;
    size_t n;
    envlog_err e = envlog_sessions_list(env, &in, &n);
    if (e) {
        envlog_env_close(env);
        return cli_fail(e, "listing sessions");
    }
    int worst = EXIT_OK;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += in[i].bytes;
    uint64_t done = 0;
    static char label[] = "verify";
    for (size_t i = 0; i < n; i++) {
        rc = verify_session(c, env, &in[i], fix);
        if (rc > worst)
            worst = rc;
        done += in[i].bytes;
        cli_progress(label, done, total);
    }
    cli_progress_done();
    if (!c->json)
        printf("%zu sessions checked: %s\n", n, worst ? "damage found" : "all good");
    envlog_sessions_free(in, n);
    envlog_env_close(env);
    return worst;
}

const cli_cmd cli_cmd_verify = {
    "verify", "check every segment; --fix cuts torn tails",
    "usage: envlog [-C DIR] verify [--fix] [--json]\n"
    "\n"
    "Reads every segment of every session and prints how far each is good, and\n"
    "each damaged region or torn tail with its place.  Nothing is changed unless\n"
    "--fix is given: then the torn tail of a session whose writer is gone is cut,\n"
    "after a byte-identical copy <segment>.broken is kept beside it.  A live\n"
    "session is never touched; other damage is reported, not repaired.\n"
    "Exit status 1 when damage was found (even when --fix repaired it).\n",
    verify_run,
};
