/* SPDX-License-Identifier: MIT */
/*
 * main.c - the envlog command: global options and dispatch.
 *
 * Data goes to stdout, diagnostics to stderr as "envlog: error: ...".  Exit
 * status: 0 ok, 1 damage or difference found, 2 usage or system error,
 * 3 invalid input.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const cli_cmd *const commands[] = {
    &cli_cmd_status,
    &cli_cmd_sessions,
    &cli_cmd_cat,
    &cli_cmd_why,
    &cli_cmd_replay,
    &cli_cmd_verify,
    &cli_cmd_trace,
    &cli_cmd_forget,
    &cli_cmd_compact,
    &cli_cmd_prune,
    &cli_cmd_gc,
    &cli_cmd_config,
    &cli_cmd_bundle,
    &cli_cmd_diff,
    &cli_cmd_rebuild,
    &cli_cmd_remote,
    &cli_cmd_push,
    &cli_cmd_pull,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    fputs("envlog: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

/* The errno of the last write through cli_fwrite() that failed: a renderer
 * returns its writer's ENVLOG_IO as it is, with no detail of its own, so
 * cli_fail() says this rather than an older failure's detail. */
static int write_errno;

int cli_fail(envlog_err e, const char *what)
{
    int err = write_errno;
    write_errno = 0;
    if (e == ENVLOG_IO && err)
        return cli_error(EXIT_USAGE, "%s: writing the output failed: %s", what,
                         strerror(err));
    int code = EXIT_USAGE;
    switch (e) {
    case ENVLOG_FORMAT:
    case ENVLOG_BAD_DATA:
    case ENVLOG_TOO_BIG: code = EXIT_INPUT; break;
    case ENVLOG_CORRUPT:
    case ENVLOG_TRUNCATED: code = EXIT_DAMAGE; break;
    default: break;
    }
    return cli_error(code, "%s: %s (%s)", what, envlog_errmsg(), envlog_strerror(e));
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

envlog_err cli_fwrite(void *ctx, const char *text, size_t len)
{
    if (fwrite(text, 1, len, ctx) == len)
        return ENVLOG_OK;
    write_errno = errno ? errno : EIO;
    return ENVLOG_IO;
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

static int main_usage(FILE *to, int code)
{
    fputs("usage: envlog [-C DIR] [--json] COMMAND [ARGS...]\n"
          "\n"
          "Records and explains how a GPU compute environment was built.\n"
          "\n"
          "options:\n"
          "  -C DIR       use the environment at DIR (default: $ENVLOG_DIR, else\n"
          "               $XDG_CACHE_HOME/envlog/default, else ~/.cache/envlog/default)\n"
          "  --json       print data as one JSON object per line\n"
          "  -h, --help   show this help; COMMAND --help shows a command's\n"
          "  --version    print the version\n"
          "\n"
          "commands:\n", to);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(to, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fputs("\nexit status: 0 ok, 1 damage or difference found, 2 usage or system\n"
          "error, 3 invalid input.  See envlog(1).\n", to);
    return code;
}

int main(int argc, char **argv)
{
    cli c = {0};
    cli_progress_start();
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-C")) {
            if (++i == argc)
                return cli_error(EXIT_USAGE, "-C needs a directory");
            c.dir = argv[i];
        } else if (!strncmp(a, "-C", 2) && a[2]) {
            c.dir = a + 2;
        } else if (!strcmp(a, "--json")) {
            c.json = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help")) {
            if (!strcmp(a, "help") && i + 1 < argc) {
                for (size_t k = 0; k < N_COMMANDS; k++)
                    if (!strcmp(argv[i + 1], commands[k]->name))
                        return cli_usage(commands[k], stdout, EXIT_OK);
                return cli_error(EXIT_USAGE, "unknown command '%s' (envlog help lists them)",
                                 argv[i + 1]);
            }
            return main_usage(stdout, EXIT_OK);
        } else if (!strcmp(a, "--version")) {
            printf("envlog %s (environment format %d)\n", envlog_version_string(),
                   ENVLOG_FORMAT_VERSION);
            return EXIT_OK;
        } else if (a[0] == '-') {
            static const char *const global[] = {"-C", "--json", "--help", "--version"};
            const char *s = cli_closest(a, global, sizeof global / sizeof global[0]);
            if (s)
                return cli_error(EXIT_USAGE, "unknown option '%s'; did you mean '%s'?", a, s);
            cli_error(EXIT_USAGE, "unknown option '%s'", a);
            return main_usage(stderr, EXIT_USAGE);
        } else {
            break;
        }
    }
    if (i == argc)
        return main_usage(stderr, EXIT_USAGE);
    c.argc = argc - i;
    c.argv = argv + i;
    c.dashdash = c.argc;
    for (int k = 1; k < c.argc; k++)
        if (!strcmp(c.argv[k], "--")) {
            c.dashdash = k;
            break;
        }
    for (size_t k = 0; k < N_COMMANDS; k++) {
        if (strcmp(c.argv[0], commands[k]->name))
            continue;
        c.cmd = commands[k];
        cli_progress_label(commands[k]->name);
        if (cli_wants_help(&c))
            return cli_usage(commands[k], stdout, EXIT_OK);
        int rc = commands[k]->run(&c);
        if (fflush(stdout) && rc == EXIT_OK)
            return cli_error(EXIT_USAGE, "writing output failed");
        return rc;
    }
    const char *names[N_COMMANDS];
    for (size_t k = 0; k < N_COMMANDS; k++)
        names[k] = commands[k]->name;
    const char *s = cli_closest(c.argv[0], names, N_COMMANDS);
    if (s)
        return cli_error(EXIT_USAGE, "unknown command '%s'; did you mean '%s'?", c.argv[0], s);
    cli_error(EXIT_USAGE, "unknown command '%s'", c.argv[0]);
    return main_usage(stderr, EXIT_USAGE);
}
