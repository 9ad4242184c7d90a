/* SPDX-License-Identifier: MIT */
/*
 * cli.h - what the envlog command's files share.  The command uses only the
 * public headers; this file holds its own plumbing: options, exit codes,
 * output helpers and the command table.
 */
#ifndef ENVLOG_CLI_H
#define ENVLOG_CLI_H

#include "envlog.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum {
    EXIT_OK = 0,
    EXIT_DAMAGE = 1, /* damage or a difference found */
    EXIT_USAGE = 2,  /* usage or system error */
    EXIT_INPUT = 3   /* invalid input */
};

typedef struct cli_cmd cli_cmd;
typedef struct cli {
    const char *dir; /* -C DIR, or NULL for the default */
    bool json;
    int argc;        /* the command's own arguments, argv[0] = its name */
    char **argv;
    int dashdash;    /* the index of the first "--" in argv, else argc:
                        what follows it is an operand, never an option */
    const cli_cmd *cmd; /* the command running */
} cli;

struct cli_cmd {
    const char *name;
    const char *summary;
    const char *usage; /* full --help text */
    int (*run)(cli *c);
};

/* text.c: `one` when n is 1, else `many` ("1 session", "2 sessions"). */
const char *cli_plural(uint64_t n, const char *one, const char *many);
/* A duration in the unit that suits it: "950ns", "12.5us", "3.2ms", "1.5s". */
void cli_duration(uint64_t ns, char out[24]);
/* The cells a terminal gives UTF-8 text `s`; cli_pad() prints `s` to stdout
 * and spaces up to `width` cells (a column aligned by display width). */
size_t cli_width(const char *s);
void cli_pad(const char *s, size_t width);
/* suggest.c: the word of `known` closest to `word` (a typo away), or NULL. */
const char *cli_closest(const char *word, const char *const *known, size_t n);
/* An argument the command does not take: "unknown option", with the
 * closest option its --help names, or "unexpected argument". */
int cli_bad_arg(const cli *c, const char *what, const char *arg);
/* True for argv[i] after "--" (an operand, whatever it looks like); a
 * command's loop skips the "--" itself (i == c->dashdash). */
static inline bool cli_operand(const cli *c, int i)
{
    return i > c->dashdash;
}
/* errors.c: prints "envlog: error: ..." to stderr; returns `code`. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The exit code for a library error, after printing it with its detail. */
int cli_fail(envlog_err e, const char *what);
/* The same with the detail `said`, kept from before later calls. */
int cli_fail_said(envlog_err e, const char *what, const char *said);
/* How a command opens the environment. */
enum { CLI_READ, CLI_WRITE, CLI_CREATE };
/* Opens the environment read-only (inspection), for writing (it must
 * exist: a mistyped -C never makes one), or creating it. */
int cli_open_env(cli *c, int how, envlog_env **env);
/* Opens the environment as cli_open_env() does and reads its config into
 * *cfg with the settings `set` (n pairs of key and value; a NULL value is
 * skipped) changed, checked as config lines are.  On failure the
 * environment is closed again and `what` names what failed. */
int cli_open_config(cli *c, int how, const char *what, const char *const set[][2], size_t n,
                    envlog_env **env, envlog_config *cfg);
/* Opens the environment as cli_open_env() does, and its live state
 * (envlog_env_state(): owned by the environment); on failure the
 * environment is closed again and `what` names what failed. */
int cli_open_state(cli *c, int how, const char *what, envlog_env **env, envlog_state **st);
/* The sessions of `env` (envlog_sessions_list()); on failure `env` is
 * closed and the exit code returned. */
int cli_sessions_list(envlog_env *env, envlog_session_info **in, size_t *n);
/* For a command whose one option is --json: sets c->json, and refuses any
 * other argument.  @return EXIT_OK or the usage error. */
int cli_json_only(cli *c);
/* True when argv[i] is -h or --help. */
bool cli_wants_help(const cli *c);
int cli_usage(const cli_cmd *cmd, FILE *to, int code);
/* A writer for the library's renderers, to a FILE *: ENVLOG_IO when the
 * write fails (cli_fail() then says why). */
envlog_err cli_fwrite(void *ctx, const char *text, size_t len);
/* Formats Unix ns as an ISO 8601 UTC time with milliseconds. */
void cli_time(uint64_t unix_ns, char out[32]);
/* Resolves SESSION (a full id or a unique prefix) among `env`'s sessions. */
int cli_resolve_session(envlog_env *env, const char *arg, envlog_id128 *id);

/* The version of the JSON lines `--json` prints (schemas/, envlog(1) JSON
 * OUTPUT); it changes when a field changes meaning or goes away. */
#define CLI_JSON_VERSION 1
/* Begins a JSON line: {"type":TYPE,"schema_version":CLI_JSON_VERSION (the
 * caller goes on with ,"field":... and closes it). */
void cli_jbegin(const char *type);
/* A record as a JSON line's object: {"type":"record","schema_version":..
 * and the fields envlog_record_json() writes (no newline). */
envlog_err cli_record_json(const envlog_record *rec);
/* Writes `s` as a JSON string to stdout. */
void cli_jstr(const char *s);
/* progress.c: a progress line on standard error, only when it is a
 * terminal, once the command has run ENVLOG_PROGRESS_AFTER_MS (1000 ms by
 * default; "off" never).  cli_progress_label() names what is going on;
 * cli_progress() is an envlog_replay_opts.on_progress (its ctx is left to
 * on_damage); cli_progress_step() an envlog_compact_opts/bundle_opts one. */
void cli_progress_start(void);
void cli_progress_label(const char *label);
void cli_progress(void *ctx, uint64_t done, uint64_t total);
void cli_progress_step(void *ctx, const char *step, uint64_t done, uint64_t total);
/* "N of M" progress of a count (kernels, entries), not bytes; the second
 * for a step callback counting entries (envlog_import_opts). */
void cli_progress_count(uint64_t done, uint64_t total, const char *unit);
void cli_progress_count_step(void *ctx, const char *step, uint64_t done, uint64_t total);
/* Clears the progress line if one was drawn. */
void cli_progress_done(void);
/* Prints a damage report to stderr (for on_damage; ctx: int *worst exit). */
void cli_damage(void *ctx, const envlog_damage *d, bool torn);
/* A command's output (output.c; envlog(1), OUTPUT FILES): "-" or NULL is
 * standard output; a new file is written under a temporary name of its own
 * beside it (PATH.tmp.PID.XXXXXX), synced and named without replacing
 * anything; an existing regular file is replaced that way only with
 * CLI_OUT_FORCE; a FIFO or device is written through; a symbolic link is
 * refused unless CLI_OUT_FOLLOW.  A temporary file a killed run left is
 * removed by the next. */
enum { CLI_OUT_FORCE = 1, CLI_OUT_FOLLOW = 2 };
enum { CLI_OUT_STDOUT, CLI_OUT_NEW, CLI_OUT_REPLACE, CLI_OUT_THROUGH };
typedef struct cli_out {
    int how;
    FILE *f;
    char path[4096];
    char tmp[4200];
} cli_out;
int cli_out_begin(const char *cmd, const char *path, unsigned flags, cli_out *o);
/* `ok`: everything was written; else a new file is dropped. */
int cli_out_end(const char *cmd, cli_out *o, bool ok);
/* An envlog_write_fn writing to a cli_out (ctx), as cli_fwrite(). */
envlog_err cli_out_write(void *ctx, const char *p, size_t n);
/* Parses --force/-f and --follow into *flags: true when argv's `a` was one. */
bool cli_out_flag(const char *a, unsigned *flags);
/* True for "-" (and NULL): standard output or input. */
bool cli_is_stdio(const char *path);
/* The whole of `path` ("-": standard input), at most `max` bytes, in
 * *data (free()). */
int cli_read_input(const char *cmd, const char *path, uint64_t max, void **data, size_t *n);
/* A bundle named on the command line: a path the library reads, or "-",
 * standard input read whole into data (name says "standard input"). */
typedef struct cli_bundle_in {
    const char *path; /* NULL when data holds it */
    const char *name; /* for messages */
    void *data;
    size_t n;
} cli_bundle_in;
int cli_bundle_in_open(const char *cmd, const char *arg, cli_bundle_in *b);
void cli_bundle_in_close(cli_bundle_in *b);
envlog_err cli_bundle_inspect(const cli_bundle_in *b, envlog_bundle_info **info);

/* "session", "snapshot/current", ... for a damage report. */
const char *cli_damage_file(const envlog_damage *d);
/* Parses "SESSION:SEQ" (a session id or prefix) or a time (Unix ns, or
 * ISO 8601 UTC such as 2026-12-02T17:28:01.294Z) into replay options. */
int cli_parse_until(envlog_env *env, const char *arg, envlog_replay_opts *o);
/* Parses a tune-set checksum: decimal, or hex with a 0x prefix (as `why`
 * prints it).  Returns EXIT_OK, or prints why not and returns EXIT_USAGE. */
int cli_parse_checksum(const char *opt, const char *arg, uint64_t *out);

extern const cli_cmd cli_cmd_sessions;
extern const cli_cmd cli_cmd_cat;
extern const cli_cmd cli_cmd_status;
extern const cli_cmd cli_cmd_why;
extern const cli_cmd cli_cmd_replay;
extern const cli_cmd cli_cmd_verify;
extern const cli_cmd cli_cmd_trace;
extern const cli_cmd cli_cmd_forget;
extern const cli_cmd cli_cmd_compact;
extern const cli_cmd cli_cmd_prune;
extern const cli_cmd cli_cmd_gc;
extern const cli_cmd cli_cmd_config;
extern const cli_cmd cli_cmd_bundle;
extern const cli_cmd cli_cmd_diff;
extern const cli_cmd cli_cmd_rebuild;
extern const cli_cmd cli_cmd_remote;
extern const cli_cmd cli_cmd_push;
extern const cli_cmd cli_cmd_pull;

#endif /* ENVLOG_CLI_H */
