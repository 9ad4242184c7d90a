/* SPDX-License-Identifier: MIT */
/*
 * util.c - small helpers the commands share: JSON strings, damage lines,
 * opening the environment, --help, times, session ids and the --until
 * argument.
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

int cli_open_env(cli *c, int how, envlog_env **env)
{
    /* A command does one thing: its own sessions (forget, import, rebuild)
     * never start a compaction behind the next command's back. */
    envlog_err e = envlog_env_open(c->dir, (how == CLI_CREATE ? ENVLOG_OPEN_CREATE
                                            : how == CLI_READ  ? ENVLOG_OPEN_READONLY
                                                               : 0u) |
                                               ENVLOG_OPEN_NO_UPKEEP, env);
    if (e == ENVLOG_NOT_FOUND && how != CLI_CREATE)
        return cli_error(EXIT_USAGE, "no environment at %s (%s)",
                         c->dir ? c->dir : "the default path", envlog_errmsg());
    if (e)
        return cli_fail(e, "opening the environment");
    return EXIT_OK;
}

int cli_open_config(cli *c, int how, const char *what, const char *const set[][2], size_t n,
                    envlog_env **env, envlog_config *cfg)
{
    int rc = cli_open_env(c, how, env);
    if (rc)
        return rc;
    envlog_err e = envlog_config_read(*env, cfg);
    for (size_t i = 0; !e && i < n; i++)
        if (set[i][1])
            e = envlog_config_set(cfg, set[i][0], set[i][1]);
    if (e) {
        envlog_env_close(*env);
        return cli_fail(e, what);
    }
    return EXIT_OK;
}

int cli_open_state(cli *c, int how, const char *what, envlog_env **env, envlog_state **st)
{
    int rc = cli_open_env(c, how, env);
    if (rc)
        return rc;
    envlog_err e = envlog_env_state(*env, st);
    if (!e)
        return EXIT_OK;
    envlog_env_close(*env);
    return cli_fail(e, what);
}

int cli_sessions_list(envlog_env *env, envlog_session_info **in, size_t *n)
{
    envlog_err e = envlog_sessions_list(env, in, n);
    if (!e)
        return EXIT_OK;
    envlog_env_close(env);
    return cli_fail(e, "listing sessions");
}

int cli_json_only(cli *c)
{
    for (int i = 1; i < c->argc; i++) {
        if (!strcmp(c->argv[i], "--json"))
            c->json = true;
        else
            return cli_bad_arg(c, c->cmd->name, c->argv[i]);
    }
    return EXIT_OK;
}

bool cli_wants_help(const cli *c)
{
    for (int i = 1; i < c->argc; i++) {
        if (!strcmp(c->argv[i], "--"))
            break;
        if (!strcmp(c->argv[i], "-h") || !strcmp(c->argv[i], "--help"))
            return true;
    }
    return false;
}

int cli_usage(const cli_cmd *cmd, FILE *to, int code)
{
    fputs(cmd->usage, to);
    return code;
}

void cli_time(uint64_t unix_ns, char out[32])
{
    time_t t = (time_t)(unix_ns / 1000000000u);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03uZ", (unsigned)(unix_ns / 1000000u % 1000u));
}

int cli_resolve_session(envlog_env *env, const char *arg, envlog_id128 *id)
{
    size_t len = strlen(arg);
    if (len == 32 && envlog_id_parse(arg, id) == ENVLOG_OK)
        return EXIT_OK;
    if (len == 0 || len > 32 || strspn(arg, "0123456789abcdefABCDEF") != len)
        return cli_error(EXIT_USAGE, "'%s' is not a session id or id prefix", arg);
    envlog_id128 *ids;
    size_t n, hits = 0;
    envlog_err e = envlog_sessions_ids(env, &ids, &n);
    if (e)
        return cli_fail(e, "listing sessions");
    for (size_t i = 0; i < n; i++) {
        char hex[33];
        envlog_id_format(&ids[i], hex);
        if (!strncasecmp(hex, arg, len)) {
            *id = ids[i];
            hits++;
        }
    }
    envlog_ids_free(ids);
    if (hits == 0)
        return cli_error(EXIT_USAGE, "no session matches '%s'", arg);
    if (hits > 1)
        return cli_error(EXIT_USAGE, "'%s' matches %zu sessions; give more digits",
                         arg, hits);
    return EXIT_OK;
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

