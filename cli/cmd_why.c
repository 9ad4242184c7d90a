/* SPDX-License-Identifier: MIT */
/*
 * cmd_why.c - `envlog why KEY`: every tune of a key in every session, its
 * trials in the order they ran, and the rule that made the standing entry
 * stand (or why none does).
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* One (namespace, checksum) group's fold, replayed verdict by verdict. */
typedef struct group {
    char *ns;
    uint64_t checksum;
    bool standing;
    bool imported;
    bool forgotten; /* the last value was removed by a forget */
    bool seen;      /* a tune of the group was read: its history is kept */
    uint64_t set_seq;
    char set_session[33];
} group;

typedef struct why_ctx {
    cli *c;
    const char *key, *ns;
    group *g;
    size_t n, cap;
    size_t tunes, forgets;
    size_t compacted;    /* tunes read from the snapshot */
    envlog_compaction comp;
} why_ctx;

static group *group_of(why_ctx *w, const char *ns, uint64_t checksum)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->g[i].checksum == checksum && !strcmp(w->g[i].ns, ns))
            return &w->g[i];
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 8;
        group *p = realloc(w->g, w->cap * sizeof *p);
        if (!p)
            return NULL;
        w->g = p;
    }
    group *g = &w->g[w->n];
    memset(g, 0, sizeof *g);
    if (!(g->ns = strdup(ns)))
        return NULL;
    g->checksum = checksum;
    w->n++;
    return g;
}

/* The same rules as the fold (replay/state.c), told as a verdict. */
static const char *verdict(group *g, const envlog_tune *t, const char *sid,
                           uint64_t seq, const char **rule)
{
    if (!t->stored) {
        *rule = "not-stored";
        return "not stored: the pick was not measured";
    }
    if (!g->standing || (g->imported && !t->imported)) {
        *rule = !g->standing ? (t->imported ? "imported" : "first-local")
                             : "local-replaced-imported";
        g->standing = true;
        g->forgotten = false;
        g->imported = t->imported;
        g->set_seq = seq;
        memcpy(g->set_session, sid, 33);
        return !strcmp(*rule, "imported") ? "set: imported"
               : !strcmp(*rule, "first-local") ? "set: first local value"
                                                : "set: a local value replaced an imported one";
    }
    *rule = t->imported ? "import-ignored" : "kept-first";
    return t->imported ? "ignored: an imported value never replaces an entry"
                       : "ignored: the first local value stands";
}

/* What became of a tune's trials: they ran, none did, or they were lost on
 * the way here (compacted away, or not carried by a bundle). */
static const char *trials_fate(const why_ctx *w, const envlog_replay_rec *r)
{
    const envlog_tune *t = &r->rec->u.tune;
    if (t->n_trials)
        return "ran";
    /* A stored pick was measured, so a stored tune without trials lost
     * them; a snapshot at evidence none strips every tune's. */
    bool measured = t->stored && !t->short_circuit;
    if (r->compacted && (measured || w->comp.evidence == ENVLOG_EVIDENCE_NONE))
        return "compacted";
    if (t->imported && measured)
        return "not-in-bundle";
    return "none-ran";
}

static const char *stop_words(const envlog_trial *r, envlog_stop s)
{
    switch (s) {
    case ENVLOG_STOP_CONVERGED: return "converged";
    case ENVLOG_STOP_DROPPED: return "dropped: too slow";
    case ENVLOG_STOP_SAMPLE_LIMIT: return "sample limit";
    case ENVLOG_STOP_ERROR: return r->error;
    default: return "not told by the policy";
    }
}

static bool was_tried(const envlog_tune *t, size_t cand)
{
    for (size_t i = 0; i < t->n_trials; i++)
        if (t->trials[i].index == cand)
            return true;
    return false;
}

static void print_trials(const why_ctx *w, const envlog_replay_rec *rr,
                         const envlog_rank *rank, int64_t runner_up)
{
    const envlog_tune *t = &rr->rec->u.tune;
    const char *fate = trials_fate(w, rr);
    if (!strcmp(fate, "compacted")) {
        char tm[32];
        cli_time(w->comp.created_unix_ns, tm);
        printf("    trials no longer recorded: compacted away (snapshot of %s, %s%s"
               "evidence %s)\n", tm, w->comp.reason, w->comp.reason[0] ? ", " : "",
               w->comp.evidence == ENVLOG_EVIDENCE_NONE ? "none" : "from an earlier one");
        return;
    }
    if (!strcmp(fate, "not-in-bundle")) {
        printf("    trials not carried by the bundle it was imported from\n");
        return;
    }
    if (!t->n_trials) {
        printf("    no trials ran%s\n", t->short_circuit ? ": picked without measuring" : "");
        return;
    }
    size_t wn = strlen("candidate");
    for (size_t i = 0; i < t->n_candidates; i++)
        if (cli_width(t->candidates[i]) > wn)
            wn = cli_width(t->candidates[i]);
    for (size_t i = 0; i < t->n_trials; i++)
        if (t->trials[i].name && cli_width(t->trials[i].name) > wn)
            wn = cli_width(t->trials[i].name);
    printf("    %-4s %-3s ", "rank", "#");
    cli_pad("candidate", wn);
    printf(" %7s %10s %10s %10s %10s %9s %7s  %s\n", "samples", "min", "median", "mean",
           "max", "stddev", "cost", "stopped");
    for (size_t i = 0; i < t->n_trials; i++) {
        const envlog_trial *r = &t->trials[rank[i].trial];
        printf("    %-4zu %-3u ", i + 1, r->index);
        cli_pad(r->name ? r->name : "-", wn);
        if (r->error)
            printf(" %7" PRIu64 " %10s %10s %10s %10s %9s %7s  failed: %s\n", r->samples, "-",
                   "-", "-", "-", "-", "-", r->error);
        else {
            char pct[16] = "-";
            if (rank[i].percent > 0)
                snprintf(pct, sizeof pct, "%.1f%%", rank[i].percent);
            printf(" %7" PRIu64 " %8.0fns %8.0fns %8.0fns %8.0fns %7.0fns %7s  %s%s\n",
                   r->samples, r->min_ns, r->median_ns, r->mean_ns, r->max_ns, r->stddev_ns,
                   pct, stop_words(r, rank[i].stop),
                   (int64_t)r->index == t->winner ? "  <- winner"
                   : (int64_t)r->index == runner_up ? "  <- runner-up" : "");
        }
    }
    for (size_t i = 0; i < t->n_candidates; i++)
        if (!was_tried(t, i)) {
            printf("    %-4s %-3zu ", "-", i);
            cli_pad(t->candidates[i], wn);
            printf(" %7s  not measured%s\n", "0", t->short_circuit ? " (short-circuited)" : "");
        }
}

/* The ranking as JSON fields of a tune event. */
static void json_ranking(const why_ctx *w, const envlog_replay_rec *rr,
                         const envlog_rank *rank, int64_t runner_up)
{
    const envlog_tune *t = &rr->rec->u.tune;
    const char *fate = trials_fate(w, rr);
    printf(",\"trials\":\"%s\",\"ranking\":[", fate);
    for (size_t i = 0; i < t->n_trials; i++) {
        const envlog_trial *r = &t->trials[rank[i].trial];
        printf("%s{\"rank\":%zu,\"index\":%u,\"candidate\":", i ? "," : "", i + 1, r->index);
        cli_jstr(r->name ? r->name : "");
        printf(",\"cost_ns\":%.17g,\"percent\":%.17g,\"stopped\":\"%s\"}", rank[i].cost_ns,
               rank[i].percent, envlog_stop_name(rank[i].stop));
    }
    putchar(']');
    if (runner_up >= 0 && (size_t)runner_up < t->n_candidates) {
        printf(",\"runner_up\":");
        cli_jstr(t->candidates[runner_up]);
    }
    if (!strcmp(fate, "compacted")) {
        char tm[32];
        cli_time(w->comp.created_unix_ns, tm);
        printf(",\"compaction\":{\"time\":\"%s\",\"reason\":", tm);
        cli_jstr(w->comp.reason);
        printf(",\"evidence\":\"%s\"}",
               w->comp.evidence == ENVLOG_EVIDENCE_NONE    ? "none"
               : w->comp.evidence == ENVLOG_EVIDENCE_WINNERS ? "winners"
                                                              : "all");
    }
}

/* A forget of the key's entry, or of a namespace prefix holding groups of
 * the key: each group it covers stops standing. */
static envlog_err why_forget(why_ctx *w, const envlog_record *rec, const char *sid,
                             const char *t)
{
    const envlog_forget *f = &rec->u.forget;
    size_t from = 0, to = 0;
    if (f->under) {
        to = w->n;
    } else {
        if (f->table != ENVLOG_TABLE_TUNE || !f->key || !f->ns || strcmp(f->key, w->key) ||
            (w->ns && strcmp(f->ns, w->ns)))
            return ENVLOG_OK;
        group *g = group_of(w, f->ns, f->checksum);
        if (!g)
            return ENVLOG_NOMEM;
        from = (size_t)(g - w->g);
        to = from + 1;
    }
    for (size_t i = from; i < to; i++) {
        group *g = &w->g[i];
        if (f->under && !envlog_ns_under(g->ns, f->under))
            continue;
        bool had = g->standing;
        g->standing = false;
        /* With no tune of the group kept (pruned, or evicted with its
         * history), what the forget removed is not known here. */
        if (had || !g->seen)
            g->forgotten = true;
        w->forgets++;
        if (w->c->json) {
            cli_jbegin("why");
            printf(",\"event\":\"forget\",\"time\":\"%s\",\"session\":\"%s\",\"seq\":%" PRIu64
                   ",\"namespace\":", t, sid, rec->stamp.seq);
            cli_jstr(g->ns);
            printf(",\"checksum\":\"0x%016" PRIx64 "\",\"removed\":%s,\"history_kept\":%s",
                   g->checksum, had ? "true" : "false", g->seen ? "true" : "false");
            if (f->under) {
                printf(",\"under\":");
                cli_jstr(f->under);
            }
            if (f->reason) {
                printf(",\"reason\":");
                cli_jstr(f->reason);
            }
            printf("}\n");
        } else {
            printf("forget  %s  session %s seq %" PRIu64 "\n  %s checksum 0x%016" PRIx64
                   ": %s", t, sid, rec->stamp.seq, g->ns, g->checksum,
                   had        ? "entry removed"
                   : g->seen  ? "nothing was standing"
                              : "the records that set its entry are no longer kept");
            if (f->under)
                printf(" (everything under %s)", f->under);
            if (f->reason)
                printf(": %s", f->reason);
            printf("\n\n");
        }
    }
    return ENVLOG_OK;
}

static envlog_err why_visit(void *ctx, const envlog_replay_rec *r)
{
    why_ctx *w = ctx;
    const envlog_record *rec = r->rec;
    char sid[33], t[32];
    envlog_id_format(&rec->stamp.session, sid);
    cli_time(r->unix_ns, t);
    if (rec->kind == ENVLOG_KIND_FORGET)
        return why_forget(w, rec, sid, t);
    if (rec->kind != ENVLOG_KIND_TUNE)
        return ENVLOG_OK;
    const envlog_tune *tu = &rec->u.tune;
    if (!tu->key || strcmp(tu->key, w->key) || (w->ns && strcmp(tu->ns, w->ns)))
        return ENVLOG_OK;
    group *g = group_of(w, tu->ns, tu->checksum);
    if (!g)
        return ENVLOG_NOMEM;
    w->tunes++;
    g->seen = true;
    const char *rule;
    const char *v = verdict(g, tu, sid, rec->stamp.seq, &rule);
    const envlog_session_rec *s = r->session;
    w->compacted += r->compacted;
    envlog_rank *rank = tu->n_trials ? malloc(tu->n_trials * sizeof *rank) : NULL;
    int64_t runner_up = -1;
    if ((tu->n_trials && !rank) || envlog_tune_rank(tu, rank, &runner_up)) {
        free(rank);
        return ENVLOG_NOMEM;
    }
    if (w->c->json) {
        cli_jbegin("why");
        printf(",\"event\":\"tune\",\"time\":\"%s\",\"verdict\":", t);
        cli_jstr(v);
        printf(",\"rule\":\"%s\",\"host\":", rule);
        cli_jstr(s && s->host ? s->host : "");
        printf(",\"label\":");
        cli_jstr(s && s->label ? s->label : "");
        printf(",\"runtime\":");
        cli_jstr(s && s->runtime ? s->runtime : "");
        printf(",\"runtime_version\":");
        cli_jstr(s && s->runtime_version ? s->runtime_version : "");
        printf(",\"devices\":[");
        for (size_t i = 0; s && i < s->n_devices; i++) {
            if (i)
                putchar(',');
            cli_jstr(s->devices[i]);
        }
        putchar(']');
        json_ranking(w, r, rank, runner_up);
        free(rank);
        printf(",\"record\":");
        envlog_err e = envlog_record_json(rec, cli_fwrite, stdout);
        if (e)
            return e;
        printf("}\n");
        return ENVLOG_OK;
    }
    printf("tune  %s  session %s seq %" PRIu64 "\n", t, sid, rec->stamp.seq);
    if (s) {
        printf("  host %s, label %s, runtime %s %s", s->host ? s->host : "-",
               s->label ? s->label : "-", s->runtime ? s->runtime : "-",
               s->runtime_version ? s->runtime_version : "");
        for (size_t i = 0; i < s->n_devices; i++)
            printf("%s%s", i ? ", " : ", devices ", s->devices[i]);
        putchar('\n');
    }
    printf("  namespace %s\n  checksum 0x%016" PRIx64 " over %zu candidates%s\n", tu->ns,
           tu->checksum, tu->n_candidates, tu->imported ? " (imported)" : "");
    print_trials(w, r, rank, runner_up);
    free(rank);
    printf("  policy %s", tu->policy ? tu->policy : "-");
    for (size_t i = 0; i < tu->n_params; i++)
        printf("%s%s=%g", i ? ", " : " (", tu->params[i].name, tu->params[i].value);
    printf("%s\n", tu->n_params ? ")" : "");
    if (tu->winner >= 0 && (size_t)tu->winner < tu->n_candidates) {
        printf("  winner %s", tu->candidates[tu->winner]);
        if (runner_up >= 0 && (size_t)runner_up < tu->n_candidates)
            printf(", runner-up %s at +%.1f%%", tu->candidates[runner_up], tu->margin * 100);
        else
            printf(", margin %.1f%% to the runner-up", tu->margin * 100);
        printf("%s%s\n", tu->within_noise ? " (within noise)" : "",
               tu->short_circuit ? ", short-circuited" : "");
    } else {
        printf("  no winner\n");
    }
    char wall[24];
    cli_duration(tu->wall_ns, wall);
    if (tu->wall_ns)
        printf("  tuned in %s\n", wall);
    else
        printf("  wall time not recorded\n");
    printf("  -> %s\n\n", v);
    return ENVLOG_OK;
}

static int why_run(cli *c)
{
    why_ctx w = {.c = c};
    uint64_t checksum = 0;
    bool has_checksum = false;
    for (int i = 1; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (i == c->dashdash)
            continue;
        if (cli_operand(c, i)) {
            if (w.key)
                return cli_error(EXIT_USAGE, "why: one KEY at a time");
            w.key = a;
        } else if ((!strcmp(a, "--namespace") || !strcmp(a, "-n")) && i + 1 < c->argc)
            w.ns = c->argv[++i];
        else if (!strcmp(a, "--checksum") && i + 1 < c->argc) {
            has_checksum = true;
            if (cli_parse_checksum("why --checksum", c->argv[++i], &checksum))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--json"))
            c->json = true;
        else if (a[0] == '-')
            return cli_bad_arg(c, "why", a);
        else if (!w.key)
            w.key = a;
        else
            return cli_error(EXIT_USAGE, "why: one KEY at a time");
    }
    if (!w.key)
        return cli_error(EXIT_USAGE, "why: which KEY? (see envlog why --help)");
    envlog_env *env;
    int rc = cli_open_env(c, CLI_READ, &env);
    if (rc)
        return rc;
    int worst = EXIT_OK;
    envlog_replay_opts o = {.on_damage = cli_damage, .ctx = &worst, .check_snapshot = true};
    envlog_err e = envlog_compaction_get(env, &w.comp);
    if (!e)
        e = envlog_replay_each(env, &o, why_visit, &w);
    envlog_state *st = NULL;
    /* The same generation as the history above (damage said once). */
    envlog_replay_opts quiet = {.check_snapshot = true};
    if (!e)
        e = envlog_state_open(env, &quiet, &st);
    if (e) {
        rc = e == ENVLOG_NOMEM ? cli_error(EXIT_USAGE, "why: out of memory")
                               : cli_fail(e, "replaying");
        goto done;
    }
    if (w.compacted && w.comp.evidence != ENVLOG_EVIDENCE_ALL) {
        /* Compaction kept the tunes that set entries, not the others. */
        char tm[32];
        cli_time(w.comp.created_unix_ns, tm);
        const char *ev = w.comp.evidence == ENVLOG_EVIDENCE_NONE ? "none" : "winners";
        if (c->json) {
            cli_jbegin("why");
            printf(",\"event\":\"compacted\",\"time\":\"%s\",\"reason\":", tm);
            cli_jstr(w.comp.reason);
            printf(",\"evidence\":\"%s\"}\n", ev);
        } else {
            printf("compacted  %s%s%s, evidence %s\n  tunes of this key before it that set"
                   " no standing entry are no longer recorded%s\n\n",
                   tm, w.comp.reason[0] ? ": " : "", w.comp.reason, ev,
                   w.comp.evidence == ENVLOG_EVIDENCE_NONE ? "; nor are the trials of those"
                                                            " that did"
                                                          : "");
        }
    }
    /* What stands now, straight from the fold: it must agree with the
     * verdicts above. */
    size_t standing = 0;
    for (size_t i = 0; i < w.n; i++) {
        group *g = &w.g[i];
        if (has_checksum && g->checksum != checksum)
            continue;
        envlog_tune_entry te;
        if (envlog_state_winner(st, g->ns, w.key, g->checksum, &te) != ENVLOG_OK) {
            if (c->json) {
                cli_jbegin("why");
                printf(",\"event\":\"none\",\"namespace\":");
                cli_jstr(g->ns);
                printf(",\"checksum\":\"0x%016" PRIx64 "\",\"why\":\"%s\"}\n", g->checksum,
                       g->forgotten ? "forgotten" : "not stored");
            } else {
                printf("now: no entry for %s checksum 0x%016" PRIx64 " (%s)\n", g->ns,
                       g->checksum, g->forgotten ? "forgotten" : "never stored");
            }
            continue;
        }
        standing++;
        char sid[33];
        envlog_id_format(&te.stamp.session, sid);
        if (c->json) {
            cli_jbegin("why");
            printf(",\"event\":\"standing\",\"namespace\":");
            cli_jstr(te.ns);
            printf(",\"key\":");
            cli_jstr(te.key);
            printf(",\"checksum\":\"0x%016" PRIx64 "\",\"winner\":", te.checksum);
            cli_jstr(te.winner);
            printf(",\"margin\":%.17g,\"within_noise\":%s,\"origin\":\"%s\",\"rule\":",
                   te.margin, te.within_noise ? "true" : "false",
                   te.origin == ENVLOG_IMPORTED ? "imported" : "local");
            cli_jstr(envlog_rule_name(te.rule));
            printf(",\"session\":\"%s\",\"seq\":%" PRIu64 "}\n", sid, te.stamp.seq);
        } else {
            printf("now: %s stands for %s checksum 0x%016" PRIx64 "\n"
                   "  set by session %s seq %" PRIu64 " (%s); %s\n",
                   te.winner, te.ns, te.checksum, sid, te.stamp.seq,
                   te.origin == ENVLOG_IMPORTED ? "imported" : "local",
                   envlog_rule_name(te.rule));
        }
    }
    bool asked_seen = false;
    for (size_t i = 0; i < w.n; i++)
        asked_seen |= w.g[i].checksum == checksum;
    if (has_checksum && !asked_seen && w.tunes) {
        if (c->json) {
            cli_jbegin("why");
            printf(",\"event\":\"none\",\"namespace\":");
            cli_jstr(w.ns ? w.ns : "");
            printf(",\"checksum\":\"0x%016" PRIx64 "\",\"why\":\"no tune with this checksum\"}\n",
                   checksum);
        } else {
            printf("now: no entry for %s checksum 0x%016" PRIx64
                   " (no tune of this key used that tune set)\n",
                   w.ns ? w.ns : "any namespace", checksum);
        }
    }
    if (w.ns && (!standing || has_checksum)) {
        /* A miss under the asked namespace: what is near it, and how. */
        envlog_near *nv;
        size_t nn;
        if (!envlog_state_explain(st, ENVLOG_TABLE_TUNE, w.ns, w.key, checksum, NULL, 0,
                                  &nv, &nn)) {
            for (size_t i = 0; i < nn; i++) {
                const char *differs = nv[i].differs;
                envlog_near *again = NULL;
                size_t na = 0;
                /* No checksum was asked for: explain against the entry's
                 * own, so only the namespace components are told apart. */
                if (!has_checksum &&
                    !envlog_state_explain(st, ENVLOG_TABLE_TUNE, w.ns, w.key,
                                          nv[i].checksum, NULL, 0, &again, &na))
                    for (size_t k = 0; k < na; k++)
                        if (again[k].checksum == nv[i].checksum &&
                            !strcmp(again[k].ns, nv[i].ns))
                            differs = again[k].differs;
                if (c->json) {
                    cli_jbegin("why");
                    printf(",\"event\":\"near\",\"namespace\":");
                    cli_jstr(nv[i].ns);
                    printf(",\"checksum\":\"0x%016" PRIx64 "\",\"differs\":", nv[i].checksum);
                    cli_jstr(differs);
                    printf("}\n");
                } else {
                    printf("near: %s checksum 0x%016" PRIx64 ": %s\n", nv[i].ns,
                           nv[i].checksum, differs);
                }
                envlog_near_free(again);
            }
            envlog_near_free(nv);
        }
    }
    if (w.tunes == 0 && !c->json)
        printf("no tune of '%s'%s%s %s\n", w.key, w.ns ? " in " : "", w.ns ? w.ns : "",
               w.forgets ? "is kept: a forget above removed it with its history"
                         : "was ever recorded");
    if (w.tunes == 0 && c->json) {
        cli_jbegin("why");
        printf(",\"event\":\"miss\",\"key\":");
        cli_jstr(w.key);
        printf(",\"why\":\"%s\"}\n", w.forgets ? "history not kept" : "never tuned");
    }
    if (!standing)
        rc = EXIT_DAMAGE; /* like grep: 1 when nothing matches */
done:
    for (size_t i = 0; i < w.n; i++)
        free(w.g[i].ns);
    free(w.g);
    envlog_state_close(st);
    envlog_env_close(env);
    return rc ? rc : worst;
}

const cli_cmd cli_cmd_why = {
    "why", "explain how the winner of a tune key was chosen",
    "usage: envlog [-C DIR] why KEY [--namespace NS] [--checksum N] [--json]\n"
    "\n"
    "Shows every tune of KEY in every session, in the total order: when, which\n"
    "session, host, runtime and devices; its trials in the order they ran with\n"
    "their statistics; the policy and its parameters; the winner, its margin to\n"
    "the runner-up and whether that is within noise; and the verdict of the fold\n"
    "rules.  Then the entry that stands now and the rule that made it stand.\n"
    "With --namespace (and --checksum) a miss is explained: the entries with the\n"
    "same key under another namespace or checksum, and what differs.\n"
    "Exit status 0 when an entry stands, 1 when none does.\n",
    why_run,
};
