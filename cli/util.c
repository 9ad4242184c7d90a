/* SPDX-License-Identifier: MIT */
/*
 * util.c - small helpers the commands share: JSON strings, the progress bar,
 * damage lines and the --until argument.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cli_jstr(const char *s)
{
    envlog_json_string(s ? s : "", cli_fwrite, stdout);
}

void cli_jbegin(const char *type)
{
    printf("{\"type\":\"%s\",\"schema_version\":%d", type, CLI_JSON_VERSION);
}

/* The record's own object, its opening brace taken by the line's. */
static envlog_err record_piece(void *ctx, const char *text, size_t len)
{
    bool *first = ctx;
    if (*first && len && text[0] == '{') {
        *first = false;
        cli_jbegin("record");
        putchar(',');
        text++;
        len--;
    }
    return cli_fwrite(stdout, text, len);
}

envlog_err cli_record_json(const envlog_record *rec)
{
    bool first = true;
    return envlog_record_json(rec, record_piece, &first);
}

const char *cli_damage_file(const envlog_damage *d)
{
    switch (d->file) {
    case ENVLOG_DAMAGE_SNAPSHOT: return "snapshot/current";
    case ENVLOG_DAMAGE_PREVIOUS: return "snapshot/previous";
    case ENVLOG_DAMAGE_STRAY: return "environment";
    case ENVLOG_DAMAGE_SEGMENT: break;
    }
    return "session";
}

void cli_damage(void *ctx, const envlog_damage *d, bool torn)
{
    char id[33];
    cli_progress_done();
    envlog_id_format(&d->session, id);
    if (d->file == ENVLOG_DAMAGE_SEGMENT)
        fprintf(stderr,
                "envlog: %s: session %s segment %" PRIu32 " offset %" PRIu64
                ": %s (%" PRIu64 " bytes dropped)\n",
                torn ? "torn tail" : "damage", id, d->segment, d->offset, d->reason,
                d->bytes);
    else {
        /* The reason may name the file already. */
        const char *f = cli_damage_file(d), *why = d->reason;
        size_t fl = strlen(f);
        if (!strncmp(why, f, fl) && !strncmp(why + fl, ": ", 2))
            why += fl + 2;
        if (d->bytes || d->offset)
            fprintf(stderr, "envlog: damage: %s offset %" PRIu64 ": %s (%" PRIu64 " bytes)\n",
                    f, d->offset, why, d->bytes);
        else
            fprintf(stderr, "envlog: damage: %s: %s\n", f, why);
    }
    if (ctx)
        *(int *)ctx = EXIT_DAMAGE;
}

static int parse_time(const char *s, uint64_t *ns)
{
    char *end;
    if (strspn(s, "0123456789") == strlen(s) && *s) {
        *ns = strtoull(s, &end, 10);
        return 0;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return -1;
    uint64_t frac = 0, scale = 1000000000u;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*p - '0') * scale;
            }
            p++;
        }
    }
    if (*p == 'Z')
        p++;
    if (*p)
        return -1;
    time_t t = timegm(&tm);
    if (t < 0)
        return -1;
    *ns = (uint64_t)t * 1000000000u + frac;
    return 0;
}

int cli_parse_until(envlog_env *env, const char *arg, envlog_replay_opts *o)
{
    const char *colon = strrchr(arg, ':');
    if (colon && strspn(arg, "0123456789abcdefABCDEF") == (size_t)(colon - arg) &&
        colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        char id[33];
        size_t n = (size_t)(colon - arg);
        if (n == 0 || n > 32)
            return cli_error(EXIT_USAGE, "--until: '%s' is not SESSION:SEQ", arg);
        memcpy(id, arg, n);
        id[n] = 0;
        int rc = cli_resolve_session(env, id, &o->until_session);
        if (rc)
            return rc;
        o->until_stamp = true;
        o->until_seq = strtoull(colon + 1, NULL, 10);
        return EXIT_OK;
    }
    if (parse_time(arg, &o->until_unix_ns))
        return cli_error(EXIT_USAGE,
                         "--until: '%s' is neither SESSION:SEQ nor a time "
                         "(Unix ns or YYYY-MM-DDTHH:MM:SS[.fff]Z)", arg);
    o->until_time = true;
    return EXIT_OK;
}

int cli_parse_checksum(const char *opt, const char *arg, uint64_t *out)
{
    /* strtoull(arg, NULL, 0) would read the hex "11db8e5f..." as 11: a
     * checksum copied from `why` must never silently name another entry. */
    bool hex = arg[0] == '0' && (arg[1] == 'x' || arg[1] == 'X');
    const char *digits = hex ? arg + 2 : arg;
    size_t n = strlen(digits);
    char *end;
    errno = 0;
    if (n && strspn(digits, hex ? "0123456789abcdefABCDEF" : "0123456789") == n) {
        unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
        if (!errno && !*end) {
            *out = v;
            return EXIT_OK;
        }
    }
    return cli_error(EXIT_USAGE, "%s: '%s' is not a checksum (decimal, or hex "
                     "with 0x, as `envlog why` prints it)", opt, arg);
}

