/* SPDX-License-Identifier: MIT */
/*
 * cmd_remote.c - `envlog remote`, `envlog push` and `envlog pull`: the
 * remotes of an environment's config, and sharing its sealed sessions with
 * the machines that use the same remote (envlog_remote.h).
 */
#include "cli.h"
#include "envlog_remote.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --------------------------------------------------------------- remote */

static int remote_list(cli *c, envlog_env *env)
{
    envlog_remote_info *v;
    size_t n;
    envlog_err e = envlog_remote_list(env, &v, &n);
    if (e)
        return cli_fail(e, "reading the remotes");
    for (size_t i = 0; i < n; i++) {
        const envlog_remote_info *r = &v[i];
        if (c->json) {
            printf("{\"name\":");
            cli_jstr(r->name);
            printf(",\"url\":");
            cli_jstr(r->url);
            printf(",\"prefix\":");
            cli_jstr(r->prefix);
            printf(",\"password_env\":");
            cli_jstr(r->password_env);
            printf(",\"namespace\":");
            cli_jstr(r->ns);
            printf(",\"auto_pull\":%s,\"auto_push\":%s,\"push_snapshot\":%s,\"timeout_s\":%" PRIu64
                   ",\"last_auto\":", r->auto_pull ? "true" : "false",
                   r->auto_push ? "true" : "false", r->push_snapshot ? "true" : "false",
                   r->timeout_ns / 1000000000u);
            cli_jstr(r->last_auto);
            printf("}\n");
            continue;
        }
        printf("%s\t%s", r->name, r->url);
        if (strcmp(r->prefix, "envlog"))
            printf("\tprefix %s", r->prefix);
        if (r->password_env[0])
            printf("\tpassword from $%s", r->password_env);
        if (r->ns[0])
            printf("\tnamespace %s", r->ns);
        if (r->auto_pull || r->auto_push)
            printf("\tautomatic%s%s%s (timeout %" PRIu64 "s)", r->auto_pull ? " pull" : "",
                   r->auto_push ? " push" : "",
                   r->auto_push && r->push_snapshot ? " with the snapshot" : "",
                   r->timeout_ns / 1000000000u);
        printf("\n");
        if (r->last_auto[0])
            printf("\tlast automatic: %s\n", r->last_auto);
    }
    envlog_remote_list_free(v);
    if (envlog_remote_available() != ENVLOG_OK)
        fprintf(stderr, "envlog: %s\n", envlog_errmsg());
    return EXIT_OK;
}

static int remote_run(cli *c)
{
    const char *sub = c->argc > 1 ? c->argv[1] : "list";
    const char *args[3] = {NULL, NULL, NULL}, *pwenv = NULL;
    int nargs = 0;
    for (int i = 2; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (!strcmp(a, "--json"))
            c->json = true;
        else if (!strcmp(a, "--password-env") && i + 1 < c->argc)
            pwenv = c->argv[++i];
        else if (a[0] == '-' && a[1])
            return cli_error(EXIT_USAGE, "remote: unknown option '%s'", a);
        else if (nargs < 3)
            args[nargs++] = a;
        else
            return cli_error(EXIT_USAGE, "remote %s: too many arguments", sub);
    }
    int want = !strcmp(sub, "list") ? 0 : !strcmp(sub, "add") ? 2 : !strcmp(sub, "remove") ? 1
               : !strcmp(sub, "set") ? 3 : -1;
    if (want < 0)
        return cli_error(EXIT_USAGE, "remote: add, list, remove or set, not '%s'", sub);
    if (nargs != want)
        return cli_error(EXIT_USAGE, "remote %s takes %s", sub,
                         want == 0 ? "no argument" : want == 1 ? "NAME"
                         : want == 2 ? "NAME URL" : "NAME KEY VALUE");
    envlog_env *env;
    int rc = cli_open_env(c, want ? CLI_WRITE : CLI_READ, &env);
    if (rc)
        return rc;
    envlog_err e = ENVLOG_OK;
    if (want == 0)
        rc = remote_list(c, env);
    else if (want == 1)
        e = envlog_remote_remove(env, args[0]);
    else if (want == 2)
        e = envlog_remote_add(env, args[0], args[1], pwenv);
    else
        e = envlog_remote_set(env, args[0], args[1], args[2]);
    envlog_env_close(env);
    if (e)
        return cli_fail(e, sub);
    return rc;
}

const cli_cmd cli_cmd_remote = {
    "remote", "name the Redis servers this environment shares sessions through",
    "usage: envlog [-C DIR] remote [list] [--json]\n"
    "       envlog [-C DIR] remote add NAME URL [--password-env VAR]\n"
    "       envlog [-C DIR] remote set NAME KEY VALUE\n"
    "       envlog [-C DIR] remote remove NAME\n"
    "\n"
    "Remotes are lines of DIR/config (remote.NAME.KEY = VALUE).  URL is\n"
    "redis://[user[:password]@]host[:port][/db]; a password is never printed\n"
    "(--password-env VAR takes it from $VAR when connecting instead).  KEY is\n"
    "url, password_env, prefix (of the remote's keys, default envlog),\n"
    "namespace (the filter of automatic sharing), auto_pull (at open),\n"
    "auto_push (at session end), push_snapshot (automatic push takes the\n"
    "snapshot too, as push --snapshot does) or timeout (of automatic sharing,\n"
    "default 2s).\n",
    remote_run,
};

/* ------------------------------------------------------ push and pull */

typedef struct xfer {
    cli *c;
    const char *verb;
    bool drawn;
} xfer;

/* Sessions done of all, on a terminal only. */
static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    xfer *x = ctx;
    fprintf(stderr, "\r%s: %" PRIu64 "/%" PRIu64 " sessions", x->verb, done, total);
    x->drawn = true;
}

static void progress_done(xfer *x)
{
    if (x->drawn)
        fputc('\n', stderr);
    x->drawn = false;
}

static const char *what_name(envlog_remote_what w)
{
    static const char *const n[] = {"sent", "received", "present", "filtered", "refused",
                                    "skipped"};
    return (unsigned)w < 6 ? n[w] : "?";
}

static void on_session(void *ctx, const envlog_remote_item *it)
{
    xfer *x = ctx;
    char id[33];
    envlog_id_format(&it->session, id);
    if (x->c->json) {
        if (it->what == ENVLOG_REMOTE_PRESENT)
            return;
        printf("{\"session\":\"%s\",\"%s\":true,\"bytes\":%" PRIu64, id, what_name(it->what),
               it->bytes);
        if (it->why) {
            printf(",\"why\":");
            cli_jstr(it->why);
        }
        printf("}\n");
        return;
    }
    if (it->what == ENVLOG_REMOTE_REFUSED || it->what == ENVLOG_REMOTE_SKIPPED) {
        progress_done(x);
        fprintf(stderr, "envlog: %s: session %s %s: %s\n", x->verb, id,
                it->what == ENVLOG_REMOTE_REFUSED ? "refused" : "not pushed", it->why);
    }
}

static int xfer_run(cli *c, bool push)
{
    const char *verb = push ? "push" : "pull";
    const char *name = NULL;
    const char **ns = NULL;
    size_t n_ns = 0;
    envlog_remote_opts o = {0};
    if (c->argc > 1 && !(ns = calloc((size_t)c->argc, sizeof *ns)))
        return cli_error(EXIT_USAGE, "%s: out of memory", verb);
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (!strcmp(a, "--json"))
            c->json = true;
        else if (!strcmp(a, "--dry-run"))
            o.dry_run = true;
        else if (push && !strcmp(a, "--snapshot"))
            o.snapshot = true;
        else if (!push && !strcmp(a, "--no-snapshot"))
            o.no_snapshot = true;
        else if (!strcmp(a, "--namespace") && i + 1 < c->argc) {
            const char *why = envlog_ns_prefix_problem(c->argv[++i]);
            if (why) {
                free(ns);
                return cli_error(EXIT_USAGE, "%s: --namespace '%s': %s", verb, c->argv[i], why);
            }
            ns[n_ns++] = c->argv[i];
        } else if (a[0] == '-' && a[1]) {
            free(ns);
            return cli_error(EXIT_USAGE, "%s: unknown option '%s'", verb, a);
        } else if (!name) {
            name = a;
        } else {
            free(ns);
            return cli_error(EXIT_USAGE, "%s: one remote NAME, no more", verb);
        }
    }
    envlog_env *env;
    int rc = cli_open_env(c, push ? CLI_READ : CLI_WRITE, &env);
    if (rc) {
        free(ns);
        return rc;
    }
    xfer x = {c, verb, false};
    o.remote = name;
    o.prefixes = ns;
    o.n_prefixes = n_ns;
    o.on_session = on_session;
    o.on_progress = !c->json && isatty(2) ? on_progress : NULL;
    o.ctx = &x;
    envlog_remote_report rep;
    envlog_err e = push ? envlog_remote_push(env, &o, &rep) : envlog_remote_pull(env, &o, &rep);
    envlog_env_close(env);
    free(ns);
    progress_done(&x);
    if (e)
        return cli_fail(e, verb);
    if (c->json)
        printf("{\"%s\":{\"dry_run\":%s,\"sessions\":%" PRIu64 ",\"bytes\":%" PRIu64
               ",\"present\":%" PRIu64 ",\"filtered\":%" PRIu64 ",\"refused\":%" PRIu64
               ",\"skipped\":%" PRIu64 ",\"remote_sessions\":%" PRIu64 ",\"snapshot\":{"
               "\"moved\":%s,\"bytes\":%" PRIu64 ",\"retired\":%" PRIu64 ",\"note\":",
               verb, o.dry_run ? "true" : "false", rep.sessions, rep.bytes, rep.present,
               rep.filtered, rep.refused, rep.skipped, rep.remote_sessions,
               rep.snapshot_moved ? "true" : "false", rep.snapshot_bytes, rep.retired);
    if (c->json) {
        cli_jstr(rep.snapshot_note);
        printf("}}}\n");
    } else
        printf("%s%s: %" PRIu64 " session%s %s (%" PRIu64 " bytes), %" PRIu64
               " already there, %" PRIu64 " outside the filter, %" PRIu64 " refused, %" PRIu64
               " not sealed; the remote lists %" PRIu64 "\n", verb,
               o.dry_run ? " (dry run: nothing moved)" : "", rep.sessions,
               rep.sessions == 1 ? "" : "s",
               push ? (o.dry_run ? "to send" : "sent") : (o.dry_run ? "to take" : "received"),
               rep.bytes, rep.present, rep.filtered, rep.refused, rep.skipped,
               rep.remote_sessions + (push && !o.dry_run ? rep.sessions : 0) - rep.retired);
    if (!c->json && rep.snapshot_note[0])
        printf("%s: %s\n", verb, rep.snapshot_note);
    if (!c->json && rep.retired)
        printf("%s: %" PRIu64 " session%s retired from the remote (its snapshot holds them)\n",
               verb, rep.retired, rep.retired == 1 ? "" : "s");
    if (rep.refused) {
        fprintf(stderr, "envlog: %s: %" PRIu64 " refused, nothing of them taken: %s\n", verb,
                rep.refused, rep.first_problem);
        return EXIT_DAMAGE;
    }
    return EXIT_OK;
}

static int push_run(cli *c)
{
    return xfer_run(c, true);
}

static int pull_run(cli *c)
{
    return xfer_run(c, false);
}

const cli_cmd cli_cmd_push = {
    "push", "upload the sealed sessions a remote lacks",
    "usage: envlog [-C DIR] push [NAME] [--namespace PREFIX]... [--snapshot] [--dry-run]\n"
    "                            [--json]\n"
    "\n"
    "Uploads every sealed session of the environment that remote NAME (default:\n"
    "the only one, else origin) does not hold, each visible there only once all\n"
    "of it is.  --namespace keeps to sessions with records under PREFIX (more\n"
    "than one: any of them).  --snapshot also pushes the environment's snapshot\n"
    "(if it holds every session the remote keeps in its snapshot only) and retires\n"
    "from the remote the sessions it holds whole.  Pushing twice changes nothing.\n",
    push_run,
};

const cli_cmd cli_cmd_pull = {
    "pull", "download and check the sessions a remote has and this one lacks",
    "usage: envlog [-C DIR] pull [NAME] [--namespace PREFIX]... [--no-snapshot]\n"
    "                            [--dry-run] [--json]\n"
    "\n"
    "Downloads every session remote NAME lists that the environment lacks, checks\n"
    "its hashes and reads it whole as a sealed session before it is taken.  The\n"
    "remote's snapshot comes first when the environment has none, or lacks\n"
    "sessions only that snapshot holds (not with --no-snapshot).  A session or\n"
    "snapshot that fails a check is refused alone (exit status 1).  --namespace\n"
    "keeps to sessions with records under PREFIX.  Pulling twice changes nothing.\n",
    pull_run,
};
