/* SPDX-License-Identifier: MIT */
/*
 * cmd_verify.c - `envlog verify [--fix] [BUNDLE...]`: how far each segment
 * is good, both snapshot generations read whole, and bundles.  Files change
 * only with --fix, which cuts the torn tail of a session whose writer is
 * gone (keeping a byte-identical .broken copy, as redis-check-aof does) and
 * puts a whole snapshot generation back, setting the damaged one aside.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct seg_good {
    uint32_t segment;
    uint64_t good_end; /* just past the last good record */
    uint64_t records;
} seg_good;

/* A session listed a moment ago that is gone now: a compaction (one the
 * environment started on its own, say) retired it, the snapshot holding
 * what it held.  Said, and not damage. */
static bool retired(cli *c, envlog_env *env, const envlog_session_info *in)
{
    envlog_reader *r;
    envlog_err e = envlog_reader_open(env, &in->id, &r);
    if (!e)
        envlog_reader_close(r);
    if (e != ENVLOG_NOT_FOUND)
        return false;
    if (c->json) {
        cli_jbegin("verify.session");
        printf(",\"session\":\"%s\",\"state\":\"retired\"}\n", in->id_hex);
    } else
        printf("%s  retired by a compaction while being read: in the snapshot\n", in->id_hex);
    return true;
}

static int verify_session(cli *c, envlog_env *env, const envlog_session_info *in,
                          bool fix)
{
    envlog_reader *r;
    envlog_err e = envlog_reader_open(env, &in->id, &r);
    if (e && retired(c, env, in))
        return EXIT_OK;
    if (e) {
        if (c->json) {
            cli_jbegin("verify.session");
            printf(",\"session\":\"%s\",\"state\":\"damaged\",\"error\":", in->id_hex);
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
    /* Records whose detail did not read (envlog(5), the detail): they
     * stand, but what they say of their trials or log is lost. */
    struct {
        uint32_t segment;
        uint64_t offset, seq;
        char why[160];
    } det[8];
    size_t ndet = 0, det_more = 0;
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
            /* A segment that went with its session between two reads. */
            char said[256];
            snprintf(said, sizeof said, "%s", envlog_errmsg());
            if (retired(c, env, in))
                return EXIT_OK;
            return cli_fail_said(e, "reading a session", said);
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
        if (rec->detail_problem) {
            rc = EXIT_DAMAGE;
            if (ndet < 8) {
                det[ndet].segment = rec->segment;
                det[ndet].offset = rec->file_offset;
                det[ndet].seq = rec->stamp.seq;
                snprintf(det[ndet++].why, sizeof det[0].why, "%s", rec->detail_problem);
            } else {
                det_more++;
            }
        }
    }
    envlog_session_state st = envlog_reader_state(r);
    envlog_reader_close(r);
    if (rc && retired(c, env, in))
        return EXIT_OK;
    if (in->strays)
        rc = EXIT_DAMAGE;
    if (c->json) {
        cli_jbegin("verify.session");
        printf(",\"session\":\"%s\",\"state\":\"%s\",\"records\":%" PRIu64
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
        printf("],\"strays\":%" PRIu64, in->strays);
        if (ndet) {
            printf(",\"detail_problems\":[");
            for (size_t i = 0; i < ndet; i++) {
                printf("%s{\"segment\":%" PRIu32 ",\"offset\":%" PRIu64 ",\"seq\":%" PRIu64
                       ",\"reason\":", i ? "," : "", det[i].segment, det[i].offset, det[i].seq);
                cli_jstr(det[i].why);
                putchar('}');
            }
            printf("],\"detail_problems_more\":%zu", det_more);
        }
    } else {
        printf("%s  %-8s  %" PRIu64 " %s in %" PRIu64 " %s\n", in->id_hex,
               envlog_session_state_name(st), in->records,
               cli_plural(in->records, "record", "records"), in->segments,
               cli_plural(in->segments, "segment", "segments"));
        if (in->strays)
            printf("  %" PRIu64 " stray entr%s in its directory (neither segments nor "
                   ".broken copies): left alone, the session is never retired\n",
                   in->strays, in->strays == 1 ? "y" : "ies");
        for (size_t i = 0; i < ns; i++)
            printf("  segment %" PRIu32 ": %" PRIu64 " %s, good to offset %" PRIu64 "\n",
                   segs[i].segment, segs[i].records,
                   cli_plural(segs[i].records, "record", "records"), segs[i].good_end);
        if (more)
            printf("  (%zu more segments)\n", more);
        for (size_t i = 0; i < nd; i++)
            printf("  %s: segment %" PRIu32 " offset %" PRIu64 ": %s (%" PRIu64
                   " bytes dropped)\n", torn[i] ? "torn tail" : "damage", dmg[i].segment,
                   dmg[i].offset, dmg[i].reason, dmg[i].bytes);
        if (extra)
            printf("  (%zu more damaged regions)\n", extra);
        for (size_t i = 0; i < ndet; i++)
            printf("  detail: segment %" PRIu32 " offset %" PRIu64 " (seq %" PRIu64
                   "): %s; the record stands without its detail\n", det[i].segment,
                   det[i].offset, det[i].seq, det[i].why);
        if (det_more)
            printf("  (%zu more records whose detail did not read)\n", det_more);
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

/* ------------------------------------------------------------ snapshots */

typedef struct snap_out {
    cli *c;
    size_t lost_shown;
} snap_out;

static void print_damage(void *ctx, const envlog_damage *d, bool torn)
{
    snap_out *o = ctx;
    (void)torn;
    if (o->c->json) {
        cli_jbegin("verify.snapshot");
        printf(",\"snapshot\":\"%s\",\"damage\":{\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64
               ",\"reason\":", cli_damage_file(d), d->offset, d->bytes);
        cli_jstr(d->reason);
        printf("}}\n");
    } else {
        printf("  damage in %s: offset %" PRIu64 " (%" PRIu64 " bytes): %s\n",
               cli_damage_file(d), d->offset, d->bytes, d->reason);
    }
}

static void print_lost(void *ctx, const envlog_entry *e)
{
    snap_out *o = ctx;
    char key[33];
    if (e->kernel)
        envlog_id_format(&e->kernel->kernel_key, key);
    if (o->c->json) {
        cli_jbegin("verify.snapshot");
        printf(",\"snapshot\":\"snapshot/current\",\"lost\":{\"table\":\"%s\",\"namespace\":",
               e->tune ? "tune" : "kernel");
        cli_jstr(e->tune ? e->tune->ns : e->kernel->ns);
        printf(",\"key\":");
        cli_jstr(e->tune ? e->tune->key : key);
        printf("}}\n");
    } else if (o->lost_shown++ < 20) {
        printf("  lost: %s %s %s\n", e->tune ? "tune" : "kernel",
               e->tune ? e->tune->ns : e->kernel->ns, e->tune ? e->tune->key : key);
    }
}

static void print_file(cli *c, const char *name, const envlog_snapshot_file *f)
{
    if (!f->present)
        return;
    if (c->json) {
        cli_jbegin("verify.snapshot");
        printf(",\"snapshot\":\"%s\",\"present\":%s,\"readable\":%s,\"intact\":%s,"
               "\"bytes\":%" PRIu64 ",\"entries\":%" PRIu64 ",\"entries_read\":%" PRIu64
               ",\"evidence\":%" PRIu64 ",\"evidence_read\":%" PRIu64 ",\"sessions\":%" PRIu64
               ",\"damaged\":%" PRIu64 ",\"problem\":", name, f->present ? "true" : "false",
               f->readable ? "true" : "false", f->intact ? "true" : "false", f->bytes,
               f->entries, f->entries_read, f->evidence, f->evidence_read, f->sessions,
               f->damaged);
        cli_jstr(f->problem);
        printf("}\n");
        return;
    }
    if (f->intact)
        printf("%-18s intact: %" PRIu64 " %s, %" PRIu64 " evidence, %" PRIu64
               " %s, %" PRIu64 " %s\n", name, f->entries, cli_plural(f->entries, "entry", "entries"),
               f->evidence, f->sessions, cli_plural(f->sessions, "session", "sessions"),
               f->bytes, cli_plural(f->bytes, "byte", "bytes"));
    else
        printf("%-18s damaged: %s\n", name, f->problem);
}

/* Both generations checked, and with --fix a whole one put back. */
static int verify_snapshots(cli *c, envlog_env *env, bool fix)
{
    snap_out o = {c, 0};
    envlog_snapshot_report r;
    envlog_err e = envlog_snapshot_check(env, print_damage, print_lost, &o, &r);
    if (e)
        return cli_fail(e, "checking the snapshot");
    print_file(c, "snapshot/current", &r.current);
    print_file(c, "snapshot/previous", &r.previous);
    bool bad = (r.current.present && !r.current.intact) ||
               (r.previous.present && !r.previous.intact) ||
               (!r.current.present && r.previous.present);
    if (!bad)
        return EXIT_OK;
    if (!c->json) {
        if (r.lost_known)
            printf("  %" PRIu64 " entr%s lost from snapshot/current%s\n", r.lost,
                   r.lost == 1 ? "y" : "ies",
                   r.lost ? "; the generation before it and the sessions still hold them"
                          : "");
        if (o.lost_shown > 20)
            printf("  (%zu more lost)\n", o.lost_shown - 20);
    }
    if (fix) {
        envlog_snapshot_fix f;
        e = envlog_snapshot_repair(env, &f);
        if (c->json) {
            cli_jbegin("verify.snapshot");
            printf(",\"snapshot\":\"fix\",\"repaired\":%s,\"restored\":%s,\"salvaged\":%s,"
                   "\"lost\":%" PRIu64 ",\"kept\":", f.repaired ? "true" : "false",
                   f.restored ? "true" : "false", f.salvaged ? "true" : "false", f.lost);
            cli_jstr(f.kept);
            printf(",\"note\":");
            cli_jstr(e ? envlog_errmsg() : f.what);
            printf("}\n");
        } else if (e) {
            printf("  snapshot not fixed: %s\n", envlog_errmsg());
        } else {
            printf("  %s: %s%s%s\n", f.repaired ? "fixed" : "not fixed", f.what,
                   f.kept[0] ? "; the damaged file is kept as " : "", f.kept);
        }
    }
    return EXIT_DAMAGE;
}

/* -------------------------------------------------------------- bundles */

static int verify_bundle(cli *c, const char *arg)
{
    cli_bundle_in b;
    int rc = cli_bundle_in_open("verify", arg, &b);
    if (rc)
        return rc;
    const char *path = b.name;
    envlog_bundle_info *in;
    envlog_err e = cli_bundle_inspect(&b, &in);
    cli_bundle_in_close(&b);
    if (e) {
        if (c->json) {
            cli_jbegin("verify.bundle");
            printf(",\"bundle\":");
            cli_jstr(path);
            printf(",\"intact\":false,\"error\":");
            cli_jstr(envlog_errmsg());
            printf("}\n");
        } else {
            printf("bundle %s  unreadable: %s\n", path, envlog_errmsg());
        }
        return e == ENVLOG_IO || e == ENVLOG_NOMEM || e == ENVLOG_NOT_FOUND ||
                       e == ENVLOG_PERMISSION
                   ? EXIT_USAGE
                   : EXIT_DAMAGE;
    }
    bool ok = !in->bad_records && in->content_ok;
    if (c->json) {
        cli_jbegin("verify.bundle");
        printf(",\"bundle\":");
        cli_jstr(path);
        printf(",\"intact\":%s,\"entries\":%" PRIu64 ",\"bad_records\":%" PRIu64
               ",\"content_ok\":%s}\n", ok ? "true" : "false",
               in->tunes + in->kernels + in->users, in->bad_records,
               in->content_ok ? "true" : "false");
    } else if (ok) {
        uint64_t n = in->tunes + in->kernels + in->users;
        printf("bundle %s  intact: %" PRIu64 " %s\n", path, n, cli_plural(n, "entry", "entries"));
    } else {
        printf("bundle %s  damaged: %" PRIu64 " damaged record%s%s\n", path, in->bad_records,
               in->bad_records == 1 ? "" : "s",
               in->content_ok ? "" : ", its content hash does not match");
    }
    envlog_bundle_info_free(in);
    return ok ? EXIT_OK : EXIT_DAMAGE;
}

static int verify_run(cli *c)
{
    bool fix = false, only_bundles = false;
    const char *bundles[64];
    size_t nb = 0;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (!strcmp(a, "--fix"))
            fix = true;
        else if (!strcmp(a, "--json"))
            c->json = true;
        else if (!strcmp(a, "--") && !only_bundles)
            only_bundles = true;
        else if (a[0] == '-' && a[1] && !only_bundles)
            return cli_bad_arg(c, "verify", a);
        else if (nb == 64)
            return cli_error(EXIT_USAGE, "verify: at most 64 bundles at a time");
        else
            bundles[nb++] = a;
    }
    int worst = EXIT_OK;
    for (size_t i = 0; i < nb; i++) {
        int rc = verify_bundle(c, bundles[i]);
        if (rc > worst)
            worst = rc;
    }
    if (nb && !c->dir && !getenv("ENVLOG_DIR"))
        return worst; /* bundles alone: no environment was asked for */
    envlog_env *env;
    int rc = cli_open_env(c, fix ? CLI_WRITE : CLI_READ, &env);
    if (rc)
        return rc > worst ? rc : worst;
    envlog_session_info *in;
    size_t n;
    if ((rc = cli_sessions_list(env, &in, &n)))
        return rc;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += in[i].bytes;
    uint64_t done = 0;
    for (size_t i = 0; i < n; i++) {
        rc = verify_session(c, env, &in[i], fix);
        if (rc > worst)
            worst = rc;
        done += in[i].bytes;
        cli_progress(NULL, done, total);
    }
    cli_progress_done();
    rc = verify_snapshots(c, env, fix);
    if (rc > worst)
        worst = rc;
    if (!c->json)
        printf("%zu %s checked: %s\n", n, cli_plural(n, "session", "sessions"),
               worst ? "damage found" : "all good");
    envlog_sessions_free(in, n);
    envlog_env_close(env);
    return worst;
}

const cli_cmd cli_cmd_verify = {
    "verify", "check every segment, both snapshot generations and bundles; --fix repairs",
    "usage: envlog [-C DIR] verify [--fix] [--json] [--] [BUNDLE...]\n"
    "\n"
    "Reads every segment of every session and prints how far each is good, and\n"
    "each damaged region or torn tail with its place; then reads both snapshot\n"
    "generations (snapshot/current and snapshot/previous, the one it was built\n"
    "on) whole and says what each holds, each damaged place, and which entries\n"
    "the current one lost; and checks each BUNDLE named.  Nothing is changed\n"
    "unless --fix is given: then the torn tail of a session whose writer is gone\n"
    "is cut, after a byte-identical copy <segment>.broken is kept beside it, and\n"
    "a damaged snapshot/current is set aside as snapshot/current.broken and the\n"
    "whole generation before it put back (with the sessions it does not cover it\n"
    "is the whole state; when no generation is whole, a new one is made from\n"
    "what reads).  A live session is never touched; other damage is reported,\n"
    "not repaired.  With BUNDLE arguments and neither -C nor ENVLOG_DIR, only\n"
    "the bundles are checked.\n"
    "Exit status 1 when damage was found (even when --fix repaired it).\n",
    verify_run,
};
