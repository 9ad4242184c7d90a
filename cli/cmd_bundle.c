/* SPDX-License-Identifier: MIT */
/*
 * cmd_bundle.c - `envlog compact` and `envlog bundle export|import|inspect|
 * embed`: checkpoints and shippable caches.
 */
#include "cli.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int parse_evidence(const char *s, envlog_evidence *ev)
{
    if (!strcmp(s, "none"))
        *ev = ENVLOG_EVIDENCE_NONE;
    else if (!strcmp(s, "winners"))
        *ev = ENVLOG_EVIDENCE_WINNERS;
    else if (!strcmp(s, "all"))
        *ev = ENVLOG_EVIDENCE_ALL;
    else
        return cli_error(EXIT_USAGE, "--evidence takes none, winners or all, not '%s'", s);
    return EXIT_OK;
}

static int compact_run(cli *c)
{
    envlog_evidence ev = ENVLOG_EVIDENCE_WINNERS;
    bool ev_given = false;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        int rc;
        if (!strcmp(a, "--evidence") && i + 1 < c->argc) {
            if ((rc = parse_evidence(c->argv[++i], &ev)))
                return rc;
            ev_given = true;
        } else if (!strncmp(a, "--evidence=", 11)) {
            if ((rc = parse_evidence(a + 11, &ev)))
                return rc;
            ev_given = true;
        } else if (!strcmp(a, "--json")) {
            c->json = true;
        } else {
            return cli_bad_arg(c, "compact", a);
        }
    }
    envlog_env *env;
    envlog_config cfg;
    int rc = cli_open_config(c, CLI_WRITE, "reading the config", NULL, 0, &env, &cfg);
    if (rc)
        return rc;
    envlog_compact_report r;
    envlog_compact_opts o;
    envlog_compact_opts_from(&o, &cfg);
    if (ev_given)
        o.evidence = ev;
    o.reason = "envlog compact";
    o.on_progress = cli_progress_step;
    envlog_err e = envlog_compact_x(env, &o, &r);
    cli_progress_done();
    envlog_env_close(env);
    if (e)
        return cli_fail(e, "compacting");
    if (c->json) {
        cli_jbegin("compact");
        printf(",\"entries\":%" PRIu64 ",\"evidence\":%" PRIu64 ",\"sessions_folded\":%" PRIu64
               ",\"sessions_removed\":%" PRIu64 ",\"sessions_live\":%" PRIu64
               ",\"sessions_damaged\":%" PRIu64 ",\"sessions_kept\":%" PRIu64
               ",\"sessions_stray\":%" PRIu64 ",\"bytes_before\":%" PRIu64
               ",\"bytes_after\":%" PRIu64 ",\"previous_bytes\":%" PRIu64
               ",\"history_dropped\":%" PRIu64 ",\"evicted\":%" PRIu64
               ",\"evicted_bytes\":%" PRIu64 "}\n", r.entries,
               r.evidence, r.sessions_folded, r.sessions_removed, r.sessions_live,
               r.sessions_damaged, r.sessions_kept, r.sessions_stray, r.bytes_before,
               r.bytes_after, r.previous_bytes, r.history_dropped, r.evicted, r.evicted_bytes);
    } else {
        printf("compacted %" PRIu64 " %s into a snapshot of %" PRIu64 " %s (%" PRIu64
               " evidence %s)\nremoved %" PRIu64 " session %s; kept %" PRIu64
               " live and %" PRIu64 " damaged\n", r.sessions_folded,
               cli_plural(r.sessions_folded, "session", "sessions"), r.entries,
               cli_plural(r.entries, "entry", "entries"), r.evidence,
               cli_plural(r.evidence, "record", "records"), r.sessions_removed,
               cli_plural(r.sessions_removed, "directory", "directories"), r.sessions_live,
               r.sessions_damaged);
        if (r.sessions_kept)
            printf("kept %" PRIu64 " more until the next compaction: snapshot/previous, the "
                   "generation kept, does not cover them yet\n", r.sessions_kept);
        if (r.history_dropped)
            printf("dropped %" PRIu64 " record%s of history (retention: see `envlog config`)\n",
                   r.history_dropped, r.history_dropped == 1 ? "" : "s");
        if (r.evicted)
            printf("evicted %" PRIu64 " entr%s, %" PRIu64 " %s (max_size: see `envlog gc`)\n",
                   r.evicted, r.evicted == 1 ? "y" : "ies", r.evicted_bytes,
                   cli_plural(r.evicted_bytes, "byte", "bytes"));
        if (r.sessions_stray)
            printf("kept %" PRIu64 " with stray entries in their directories (see `envlog "
                   "verify`)\n", r.sessions_stray);
        printf("%" PRIu64 " %s before, %" PRIu64 " after (snapshot/previous: %" PRIu64
               ")\n", r.bytes_before, cli_plural(r.bytes_before, "byte", "bytes"), r.bytes_after,
               r.previous_bytes);
    }
    return r.sessions_damaged || r.sessions_stray ? EXIT_DAMAGE : EXIT_OK;
}

static void print_info(const cli *c, const envlog_bundle_info *in, const char *file)
{
    char t[32], h[33];
    cli_time(in->created_unix_ns, t);
    envlog_id_format(&in->content_hash, h);
    if (c->json) {
        cli_jbegin("bundle");
        printf(",\"file\":");
        cli_jstr(file);
        /* (format 1, every bundle before format 2, goes without) */
        if (in->format != 1)
            printf(",\"format\":%d", in->format);
        printf(",\"schema\":%" PRIu64 ",\"name\":", in->schema);
        cli_jstr(in->name);
        printf(",\"envlog_version\":");
        cli_jstr(in->envlog_version);
        printf(",\"created\":\"%s\",\"created_unix_ns\":%" PRIu64 ",\"runtimes\":[", t,
               in->created_unix_ns);
        for (size_t i = 0; i < in->n_runtimes; i++) {
            if (i)
                putchar(',');
            cli_jstr(in->runtimes[i]);
        }
        printf("],\"environments\":[");
        for (size_t i = 0; i < in->n_environments; i++) {
            if (i)
                putchar(',');
            cli_jstr(in->environments[i]);
        }
        printf("],\"sources\":[");
        for (size_t i = 0; i < in->n_sources; i++) {
            printf("%s{\"path\":", i ? "," : "");
            cli_jstr(in->sources[i].path);
            printf(",\"sessions\":%" PRIu64 ",\"records\":%" PRIu64 "}", in->sources[i].sessions,
                   in->sources[i].records);
        }
        printf("],\"namespaces\":[");
        for (size_t i = 0; i < in->n_namespaces; i++) {
            printf("%s{\"namespace\":", i ? "," : "");
            cli_jstr(in->namespaces[i]);
            printf(",\"entries\":%" PRIu64 "}", in->namespace_entries[i]);
        }
        printf("],\"sessions\":%" PRIu64 ",\"tunes\":%" PRIu64 ",\"kernels\":%" PRIu64
               ",\"users\":%" PRIu64 ",\"evidence\":%" PRIu64 ",\"content_hash\":\"%s\""
               ",\"content_ok\":%s,\"bad_records\":%" PRIu64 ",\"compressed_size\":%" PRIu64
               ",\"size\":%" PRIu64 "}\n", in->sessions, in->tunes, in->kernels, in->users,
               in->evidence, h, in->content_ok ? "true" : "false", in->bad_records,
               in->compressed_size, in->size);
        return;
    }
    printf("bundle       %s\nfile         %s\nformat       %d%s\nschema       %" PRIu64
           "\ncreated      %s by envlog %s\n", in->name, file, in->format,
           in->format == 1 ? " (the snapshot file)" : " (the snapshot's records in columns)",
           in->schema, t, in->envlog_version);
    for (size_t i = 0; i < in->n_runtimes; i++)
        printf("%s%s\n", i ? "             " : "runtimes     ", in->runtimes[i]);
    for (size_t i = 0; i < in->n_environments; i++)
        printf("%s%s\n", i ? "             " : "captured on  ", in->environments[i]);
    for (size_t i = 0; i < in->n_sources; i++)
        printf("%s%s (%" PRIu64 " %s, %" PRIu64 " %s)\n", i ? "             " : "sources      ",
               *in->sources[i].path ? in->sources[i].path : "-", in->sources[i].sessions,
               cli_plural(in->sources[i].sessions, "session", "sessions"),
               in->sources[i].records, cli_plural(in->sources[i].records, "record", "records"));
    printf("sessions     %" PRIu64 "\nentries      %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64
           " user %s, %" PRIu64 " evidence %s\n", in->sessions, in->tunes,
           cli_plural(in->tunes, "tune", "tunes"), in->kernels,
           cli_plural(in->kernels, "kernel", "kernels"), in->users,
           cli_plural(in->users, "record", "records"), in->evidence,
           cli_plural(in->evidence, "record", "records"));
    for (size_t i = 0; i < in->n_namespaces; i++)
        printf("  %6" PRIu64 "  %s\n", in->namespace_entries[i], in->namespaces[i]);
    printf("size         %" PRIu64 " bytes compressed, %" PRIu64 " bytes\n", in->compressed_size,
           in->size);
    printf("check        %s, %" PRIu64 " bad records, content hash %s %s\n",
           in->bad_records || !in->content_ok ? "FAILED" : "ok", in->bad_records, h,
           in->content_ok ? "matches" : "DOES NOT MATCH");
}

/* EXIT_OK when the existing file `o` replaces reads as an envlog bundle
 * (or is empty); else says what it is and refuses. */
static int replaces_bundle(const cli_out *o)
{
    struct stat st;
    if (stat(o->path, &st) || !S_ISREG(st.st_mode) || st.st_size == 0)
        return EXIT_OK;
    envlog_bundle_info *info;
    envlog_err e = envlog_bundle_inspect(o->path, &info);
    envlog_bundle_info_free(info);
    if (!e || e == ENVLOG_TOO_BIG)
        return EXIT_OK;
    return cli_error(EXIT_USAGE, "bundle export: %s exists and is not an envlog bundle (%s); "
                     "refused, even with --force: remove it first", o->path,
                     envlog_errmsg());
}

/* The environments of `--from`, opened to read: a path that is not one is
 * refused, naming it, before anything is read. */
static int open_more(const char *const *from, size_t n, envlog_env **more)
{
    for (size_t i = 0; i < n; i++) {
        envlog_err e = envlog_env_open(from[i], ENVLOG_OPEN_READONLY | ENVLOG_OPEN_NO_UPKEEP,
                                       &more[i]);
        if (!e)
            continue;
        int rc = e == ENVLOG_NOT_FOUND
                     ? cli_error(EXIT_USAGE, "bundle export: --from %s: no environment there "
                                 "(%s)", from[i], envlog_errmsg())
                     : cli_fail(e, from[i]);
        for (size_t k = 0; k < i; k++)
            envlog_env_close(more[k]);
        return rc;
    }
    return EXIT_OK;
}

static void close_more(envlog_env *env, envlog_env **more, size_t n)
{
    envlog_env_close(env);
    for (size_t i = 0; i < n; i++)
        envlog_env_close(more[i]);
}

static int export_run(cli *c, int i)
{
    const char *name = NULL, *out = NULL;
    const char *prefixes[64], *from[64];
    size_t np = 0, nf = 0;
    unsigned oflags = 0;
    bool anonymous = false;
    envlog_evidence ev = ENVLOG_EVIDENCE_WINNERS;
    int rc, level = 0, format = 0;
    for (; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (i == c->dashdash)
            continue;
        if (cli_operand(c, i)) {
            if (name)
                return cli_error(EXIT_USAGE, "bundle export: one NAME (quote names with spaces)");
            name = a;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && i + 1 < c->argc)
            out = c->argv[++i];
        else if ((!strcmp(a, "--namespace") || !strcmp(a, "-n")) && i + 1 < c->argc) {
            if (np == 64)
                return cli_error(EXIT_USAGE, "bundle export: at most 64 --namespace prefixes");
            /* "nvrtc/" names what "nvrtc" does: whole components. */
            char *p = c->argv[++i];
            for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
                p[n - 1] = 0;
            const char *why = envlog_ns_prefix_problem(p);
            if (why)
                return cli_error(EXIT_USAGE, "bundle export: --namespace '%s': %s", p, why);
            prefixes[np++] = p;
        } else if (!strcmp(a, "--from") && i + 1 < c->argc) {
            if (nf == 64)
                return cli_error(EXIT_USAGE, "bundle export: at most 64 --from environments");
            from[nf++] = c->argv[++i];
        } else if (!strcmp(a, "--evidence") && i + 1 < c->argc) {
            if ((rc = parse_evidence(c->argv[++i], &ev)))
                return rc;
        } else if (!strcmp(a, "--level") && i + 1 < c->argc) {
            const char *v = c->argv[++i];
            char *end;
            long l = strtol(v, &end, 10);
            if (!*v || *end || l < 1 || l > 22)
                return cli_error(EXIT_USAGE, "--level takes a zstd level, 1 to 22, not '%s'",
                                 v);
            level = (int)l;
        } else if (!strcmp(a, "--format") && i + 1 < c->argc) {
            const char *v = c->argv[++i];
            if (strcmp(v, "1") && strcmp(v, "2"))
                return cli_error(EXIT_USAGE, "--format takes a bundle format, 1 or 2, not "
                                 "'%s'", v);
            format = v[0] - '0';
        } else if (!strcmp(a, "--json"))
            c->json = true;
        else if (cli_out_flag(a, &oflags))
            ;
        else if (!strcmp(a, "--anonymous"))
            anonymous = true;
        else if (a[0] == '-')
            return cli_bad_arg(c, "bundle export", a);
        else if (!name)
            name = a;
        else
            return cli_error(EXIT_USAGE, "bundle export: one NAME (quote names with spaces)");
    }
    if (!name || !out)
        return cli_error(EXIT_USAGE, "usage: envlog bundle export NAME -o FILE");
    envlog_env *env, *more[64];
    if ((rc = cli_open_env(c, CLI_READ, &env)))
        return rc;
    if ((rc = open_more(from, nf, more))) {
        envlog_env_close(env);
        return rc;
    }
    /* Refused before the work, not after. */
    cli_out of;
    if ((rc = cli_out_begin("bundle export", out, oflags, &of))) {
        close_more(env, more, nf);
        return rc;
    }
    /* --force replaces a bundle, never a file that is something else (a
     * mistyped -o must not cost a file). */
    if (of.how == CLI_OUT_REPLACE && (rc = replaces_bundle(&of))) {
        cli_out_end("bundle export", &of, false);
        close_more(env, more, nf);
        return rc;
    }
    int damaged = EXIT_OK;
    envlog_bundle_opts o = {.name = name, .prefixes = prefixes, .n_prefixes = np,
                            .evidence = ev, .zstd_level = level, .format = format,
                            .on_damage = cli_damage,
                            .ctx = &damaged, .on_progress = cli_progress_step,
                            .anonymous = anonymous, .more = more, .n_more = nf};
    cli_progress_label("bundle export");
    envlog_bundle_info *info;
    envlog_err e = envlog_bundle_export_to(env, &o, cli_out_write, &of, &info);
    cli_progress_done();
    close_more(env, more, nf);
    rc = cli_out_end("bundle export", &of, !e);
    if (e == ENVLOG_NOT_FOUND)
        return cli_error(EXIT_DAMAGE, "bundle export: %s (no file written)", envlog_errmsg());
    if (e)
        return cli_fail(e, "exporting the bundle");
    if (rc) {
        envlog_bundle_info_free(info);
        return rc;
    }
    /* The report goes to standard error when the bundle itself is on
     * standard output. */
    FILE *to = of.how == CLI_OUT_STDOUT ? stderr : stdout;
    const char *where = of.how == CLI_OUT_STDOUT ? "standard output" : out;
    if (!c->json)
        fprintf(to, "exported bundle '%s' to %s: %" PRIu64 " tunes, %" PRIu64 " kernels, %" PRIu64
                " bytes\n", name, where, info->tunes, info->kernels, info->compressed_size);
    else if (of.how != CLI_OUT_STDOUT)
        print_info(c, info, out);
    envlog_bundle_info_free(info);
    return damaged;
}

/* `bundle SUB FILE [--json]`: the one FILE argument. */
static int file_arg(cli *c, int i, const char *sub, const char **file)
{
    *file = NULL;
    char what[32];
    snprintf(what, sizeof what, "bundle %s", sub);
    for (; i < c->argc; i++) {
        if (i == c->dashdash)
            continue;
        bool operand = cli_operand(c, i) || c->argv[i][0] != '-' || !strcmp(c->argv[i], "-");
        if (!operand && !strcmp(c->argv[i], "--json"))
            c->json = true;
        else if (!*file && operand)
            *file = c->argv[i];
        else
            return cli_bad_arg(c, what, c->argv[i]);
    }
    if (!*file)
        return cli_error(EXIT_USAGE, "usage: envlog bundle %s FILE", sub);
    return EXIT_OK;
}

static int inspect_run(cli *c, int i)
{
    const char *file;
    int rc = file_arg(c, i, "inspect", &file);
    if (rc)
        return rc;
    cli_bundle_in b;
    if ((rc = cli_bundle_in_open("bundle inspect", file, &b)))
        return rc;
    envlog_bundle_info *info;
    envlog_err e = cli_bundle_inspect(&b, &info);
    cli_bundle_in_close(&b);
    if (e)
        return cli_fail(e, b.name);
    print_info(c, info, b.name);
    rc = info->bad_records || !info->content_ok ? EXIT_DAMAGE : EXIT_OK;
    envlog_bundle_info_free(info);
    return rc;
}

static int import_run(cli *c, int i)
{
    const char *file;
    envlog_env *env;
    int rc = file_arg(c, i, "import", &file);
    /* Read whole first (a path or standard input): the import reports its
     * progress over the bytes it has. */
    cli_bundle_in b = {.name = cli_is_stdio(file) ? "standard input" : file};
    if (rc || (rc = cli_read_input("bundle import", file, ENVLOG_BUNDLE_MAX_SIZE, &b.data,
                                   &b.n)))
        return rc;
    if ((rc = cli_open_env(c, CLI_CREATE, &env))) {
        cli_bundle_in_close(&b);
        return rc;
    }
    envlog_import_report r;
    envlog_import_opts io = {.on_progress = cli_progress_count_step};
    cli_progress_label("bundle import");
    envlog_err e = envlog_bundle_import_x(env, b.data, b.n, &io, &r);
    cli_progress_done();
    cli_bundle_in_close(&b);
    envlog_env_close(env);
    file = b.name;
    if (e)
        return cli_fail(e, file);
    char id[33] = "";
    if (r.taken)
        envlog_id_format(&r.session, id);
    if (c->json) {
        cli_jbegin("import");
        printf(",\"taken\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"rejected\":%" PRIu64
               ",\"foreign\":%" PRIu64 ",\"session\":\"%s\",\"first_reject\":", r.taken,
               r.skipped, r.rejected, r.foreign, id);
        cli_jstr(r.first_reject);
        printf(",\"other_version\":%" PRIu64 ",\"other_versions\":", r.other_version);
        cli_jstr(r.other_versions);
        printf("}\n");
    } else {
        printf("imported %s: %" PRIu64 " taken, %" PRIu64 " skipped (already present), %" PRIu64
               " rejected\n", file, r.taken, r.skipped, r.rejected);
        if (r.taken)
            printf("recorded as IMPORTED in session %s; the bundle file may now be deleted\n", id);
        else
            printf("nothing new: the environment is unchanged\n");
        if (r.foreign)
            printf("note: %" PRIu64 " %s under namespaces with no local entry (another "
                   "device, runtime or version?): they match only lookups under those "
                   "namespaces\n", r.foreign, cli_plural(r.foreign, "entry is", "entries are"));
        if (r.rejected)
            printf("first rejected: %s\n", r.first_reject);
    }
    if (r.other_version)
        fprintf(stderr, "envlog: warning: %s: %" PRIu64 " %s of a runtime version this "
                "environment had no entry of (%s): %s only lookups by that version\n", file,
                r.other_version, cli_plural(r.other_version, "entry is", "entries are"),
                r.other_versions, r.other_version == 1 ? "it matches" : "they match");
    return r.rejected ? EXIT_INPUT : EXIT_OK;
}

static int embed_run(cli *c, int i)
{
    const char *file = NULL, *sym = "envlog_bundle";
    for (; i < c->argc; i++) {
        if (i == c->dashdash)
            continue;
        bool operand = cli_operand(c, i) || c->argv[i][0] != '-' || !strcmp(c->argv[i], "-");
        if (!operand && !strcmp(c->argv[i], "--name") && i + 1 < c->argc)
            sym = c->argv[++i];
        else if (!file && operand)
            file = c->argv[i];
        else
            return cli_bad_arg(c, "bundle embed", c->argv[i]);
    }
    if (!file)
        return cli_error(EXIT_USAGE, "usage: envlog bundle embed FILE [--name SYMBOL] > bundle.c");
    if (!isalpha((unsigned char)sym[0]) && sym[0] != '_')
        return cli_error(EXIT_USAGE, "bundle embed: '%s' is not a C identifier", sym);
    for (const char *p = sym; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return cli_error(EXIT_USAGE, "bundle embed: '%s' is not a C identifier", sym);
    /* The bytes checked are the bytes embedded: read once. */
    void *data;
    size_t size;
    int rc = cli_read_input("bundle embed", file, ENVLOG_BUNDLE_MAX_SIZE, &data, &size);
    if (rc)
        return rc;
    const char *name = cli_is_stdio(file) ? "standard input" : file;
    /* Check it first: embedding a broken bundle only moves the failure. */
    envlog_bundle_info *info;
    envlog_err e = envlog_bundle_inspect_memory(data, size, &info);
    if (e) {
        free(data);
        return cli_fail(e, name);
    }
    bool bad = info->bad_records || !info->content_ok;
    envlog_bundle_info_free(info);
    if (bad) {
        free(data);
        return cli_error(EXIT_INPUT, "%s fails its check; run envlog bundle inspect", name);
    }
    /* The path goes into a comment: only characters that cannot end it. */
    printf("/* Generated by envlog bundle embed from ");
    for (const char *p = name; *p; p++)
        putchar(*p == '*' || (unsigned char)*p < 0x20 ? '_' : *p);
    printf("; import it with\n"
           " * envlog_bundle_import_memory(env, %s, %s_size, &report). */\n"
           "#include <stddef.h>\n\n"
           "const unsigned char %s[] = {", sym, sym, sym);
    const unsigned char *p = data;
    for (size_t n = 0; n < size; n++)
        printf("%s0x%02x", n % 12 ? ", " : (n ? ",\n    " : "\n    "), p[n]);
    free(data);
    printf("\n};\nconst size_t %s_size = %zu;\n", sym, size);
    return fflush(stdout) ? cli_error(EXIT_USAGE, "bundle embed: writing standard output "
                                      "failed: %m") : EXIT_OK;
}

static int bundle_run(cli *c)
{
    if (c->argc < 2)
        return cli_usage(&cli_cmd_bundle, stderr, EXIT_USAGE);
    const char *sub = c->argv[1];
    if (!strcmp(sub, "export"))
        return export_run(c, 2);
    if (!strcmp(sub, "import"))
        return import_run(c, 2);
    if (!strcmp(sub, "inspect"))
        return inspect_run(c, 2);
    if (!strcmp(sub, "embed"))
        return embed_run(c, 2);
    return cli_error(EXIT_USAGE, "bundle: unknown subcommand '%s' (export, import, inspect, "
                     "embed)", sub);
}

const cli_cmd cli_cmd_compact = {
    "compact", "fold everything into a snapshot; retire covered sessions",
    "usage: envlog [-C DIR] compact [--evidence none|winners|all] [--json]\n"
    "\n"
    "Folds the snapshot and every session into a new snapshot (written to\n"
    "snapshot/current.tmp, synced, read back and checked, renamed over\n"
    "snapshot/current; the one before kept as snapshot/previous), then removes\n"
    "the session directories snapshot/previous covers; a live session or a\n"
    "damaged one is never removed.  The config's retention and max_size apply.\n"
    "--evidence: none keeps the entries only, winners (the config's default)\n"
    "keeps the tune record behind each entry, all keeps every record.\n"
    "Exit status 1 when damaged sessions were kept or the snapshot is damaged.\n",
    compact_run,
};

const cli_cmd cli_cmd_bundle = {
    "bundle", "export, import, inspect or embed a bundle",
    "usage: envlog [-C DIR] bundle export NAME -o FILE [--namespace PREFIX]...\n"
    "                              [--evidence none|winners|all] [--level N]\n"
    "                              [--format 1|2] [--from DIR]... [--anonymous]\n"
    "                              [--force] [--follow]\n"
    "       envlog [-C DIR] bundle import FILE\n"
    "       envlog bundle inspect FILE [--json]\n"
    "       envlog bundle embed FILE [--name SYMBOL] > bundle.c\n"
    "\n"
    "FILE may be - (standard output for export, standard input otherwise).\n"
    "export never replaces an existing file unless --force (then atomically),\n"
    "writes through a FIFO or a device, and refuses a symbolic link unless\n"
    "--follow; the bundle follows the umask.  --from DIR adds another environment:\n"
    "all fold as one (duplicated keys merged by the fold rules) and the manifest\n"
    "lists each.  --anonymous leaves out the session records (host, pid, label)\n"
    "and the manifest's hosts, labels and environment paths.\n"
    "\n"
    "A bundle is a snapshot of the standing entries, compressed as standard zstd\n"
    "frames, with a manifest (name, versions, where it was captured, counts and a\n"
    "content hash).  Format 2 (the default, zstd level 3) lays the records out in\n"
    "columns; --format 1 writes the snapshot file itself (zstd level 19), which\n"
    "envlog before format 2 reads.  import checks the manifest and each entry and\n"
    "records the new ones as IMPORTED (the file may then be deleted; importing\n"
    "twice changes nothing; bad entries are rejected one by one, exit status 3).\n"
    "inspect checks every record and shows the format (exit status 1 on damage).\n"
    "embed writes C source holding the bytes, for envlog_bundle_import_memory().\n",
    bundle_run,
};
