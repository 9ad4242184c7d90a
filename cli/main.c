/* SPDX-License-Identifier: MIT */
/*
 * main.c - the envlog command: global options and dispatch.
 *
 * Data goes to stdout, diagnostics to stderr as "envlog: error: ...".  Exit
 * status: 0 ok, 1 damage or difference found, 2 usage or system error,
 * 3 invalid input.
 */
#include "cli.h"
#include "envlog_remote.h"

#include <string.h>

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
    /* Linked with the static library: the remote module's hooks (the
     * config's automatic pull and push, compaction keeping what a remote
     * still lacks) are there only when asked for. */
    envlog_remote_enable_auto();
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
