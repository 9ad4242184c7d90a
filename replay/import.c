/* SPDX-License-Identifier: MIT */
/*
 * import.c - importing a bundle: each entry checked on its own (names,
 * namespaces, binary hashes, its record against its wrapper) and rejected
 * on its own, the others written as IMPORTED records of an import session,
 * so the bundle file can be deleted afterwards; a warning when the bundle's
 * runtime versions are not those of the environment.
 */
#include "replay_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NAME_MAX_LEN ENVLOG_BUNDLE_NAME_MAX
#define NS_MAX_LEN 1024
#define KEY_MAX_LEN 4096

static bool text_ok(const char *s, size_t max)
{
    if (!s || !*s)
        return false;
    const unsigned char *p = (const unsigned char *)s;
    for (; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return (size_t)(p - (const unsigned char *)s) <= max;
}

/* Namespaces are '/'-separated components, none empty, "." or "..". */
static bool ns_ok(const char *ns)
{
    if (!text_ok(ns, NS_MAX_LEN))
        return false;
    const char *p = ns;
    for (;;) {
        size_t l = strcspn(p, "/");
        if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!p[l])
            return true;
        p += l + 1;
    }
}

/* Why an entry is refused, or NULL. */
static const char *entry_problem(const envlog_snap_item *it, const envlog_record *rec)
{
    /* Its trials or log would not come along (envlog(5), the detail). */
    if (rec->detail_problem)
        return rec->detail_problem;
    if (it->table == ENVLOG_TABLE_TUNE) {
        const envlog_tune *t = &rec->u.tune;
        if (rec->kind != ENVLOG_KIND_TUNE)
            return "a tune entry that holds another kind of record";
        if (!ns_ok(t->ns))
            return "invalid namespace";
        if (!text_ok(t->key, KEY_MAX_LEN))
            return "invalid tune key";
        if (!t->stored || t->winner < 0 || (size_t)t->winner >= t->n_candidates)
            return "a tune entry without a stored winner";
        for (size_t i = 0; i < t->n_candidates; i++)
            if (!text_ok(t->candidates[i], NAME_MAX_LEN))
                return "invalid candidate name";
        if (envlog_tune_checksum(t->candidates, t->n_candidates) != t->checksum)
            return "tune-set checksum does not match its candidates";
        return NULL;
    }
    const envlog_compile *c = &rec->u.compile;
    if (rec->kind != ENVLOG_KIND_COMPILE)
        return "a kernel entry that holds another kind of record";
    if (!ns_ok(c->ns))
        return "invalid namespace";
    if (!text_ok(c->name, NAME_MAX_LEN))
        return "invalid kernel name";
    if (c->outcome != ENVLOG_COMPILED || !c->binary.size || c->binary_size != c->binary.size)
        return "a kernel entry without its binary";
    envlog_hash128 h = envlog_hash128_bytes(c->binary.data, c->binary.size);
    if (memcmp(h.b, c->binary_hash.b, 16))
        return "binary does not match its hash";
    return NULL;
}

typedef struct import_ctx {
    envlog_env *env;
    envlog_state *live;
    envlog_session *s;
    const envlog_snap_manifest *m;
    envlog_import_report *rep;
    const char **local_ns; /* namespaces with an entry before the import */
    size_t n_local;
} import_ctx;

static envlog_err note_ns(void *ctx, const envlog_entry *e)
{
    import_ctx *c = ctx;
    const char *ns = e->tune ? e->tune->ns : e->kernel->ns;
    if (c->n_local && !strcmp(c->local_ns[c->n_local - 1], ns))
        return ENVLOG_OK;
    const char **p = envlog_realloc(c->local_ns, (c->n_local + 1) * sizeof *p);
    if (!p)
        return envlog__fail(ENVLOG_NOMEM, "importing a bundle");
    c->local_ns = p;
    c->local_ns[c->n_local++] = ns;
    return ENVLOG_OK;
}

static bool ns_local(const import_ctx *c, const char *ns)
{
    for (size_t i = 0; i < c->n_local; i++)
        if (!strcmp(c->local_ns[i], ns))
            return true;
    return false;
}

/* The length of the table/runtime/version part of `ns`: its first three
 * components. */
static size_t version_part(const char *ns)
{
    size_t n = 0;
    for (int k = 0; k < 3; k++) {
        n += strcspn(ns + n, "/");
        if (k < 2 && ns[n])
            n++;
    }
    return n;
}

/* Whether some local entry is of the runtime version of `ns`. */
static bool version_local(const import_ctx *c, const char *ns)
{
    size_t n = version_part(ns);
    for (size_t i = 0; i < c->n_local; i++)
        if (version_part(c->local_ns[i]) == n && !strncmp(c->local_ns[i], ns, n))
            return true;
    return false;
}

/* Counts an entry of a runtime version the target has no entry of, and
 * names the first few such versions. */
static void note_version(import_ctx *c, const char *ns)
{
    if (version_local(c, ns))
        return;
    c->rep->other_version++;
    size_t n = version_part(ns), have = strlen(c->rep->other_versions);
    for (const char *p = c->rep->other_versions; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, ns, n))
            return;
        p += len + (p[len] == ',');
    }
    if (have + n + 2 < sizeof c->rep->other_versions)
        snprintf(c->rep->other_versions + have, sizeof c->rep->other_versions - have, "%s%.*s",
                 have ? "," : "", (int)n, ns);
}

static envlog_err begin_import(import_ctx *c)
{
    if (c->s)
        return ENVLOG_OK;
    char label[NAME_MAX_LEN + 16];
    snprintf(label, sizeof label, "import: %s", c->m->name ? c->m->name : "");
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    o.label = label;
    o.runtime = "envlog";
    o.runtime_version = ENVLOG_VERSION_STRING;
    o.level = ENVLOG_LEVEL_FULL; /* an entry is taken whole */
    envlog_err e = envlog_session_begin(c->env, &o, &c->s);
    if (e)
        return e;
    c->rep->session = envlog_session_id(c->s);
    /* Its records count only once it ends (all or nothing, below). */
    envlog_session_batch(c->s);
    return ENVLOG_OK;
}

static void reject(import_ctx *c, const envlog_record *rec, const char *why)
{
    if (!c->rep->rejected++)
        snprintf(c->rep->first_reject, sizeof c->rep->first_reject, "%s (%s)", why,
                 rec->kind == ENVLOG_KIND_TUNE && rec->u.tune.key ? rec->u.tune.key
                 : rec->kind == ENVLOG_KIND_COMPILE && rec->u.compile.name
                     ? rec->u.compile.name : "?");
}

static envlog_err import_entry(import_ctx *c, const envlog_snap_item *it,
                               const envlog_record *rec)
{
    const char *why = entry_problem(it, rec);
    if (why) {
        reject(c, rec, why);
        return ENVLOG_OK;
    }
    bool present;
    envlog_err e = it->table == ENVLOG_TABLE_TUNE
        ? envlog_state_holds(c->live, ENVLOG_TABLE_TUNE, rec->u.tune.ns, rec->u.tune.key,
                             rec->u.tune.checksum, NULL, &present)
        : envlog_state_holds(c->live, ENVLOG_TABLE_KERNEL, rec->u.compile.ns, NULL, 0,
                             &rec->u.compile.kernel_key, &present);
    if (e)
        return e;
    note_version(c, it->table == ENVLOG_TABLE_TUNE ? rec->u.tune.ns : rec->u.compile.ns);
    if (present) {
        c->rep->skipped++;
        return ENVLOG_OK;
    }
    e = begin_import(c);
    if (e)
        return e;
    bool tune = it->table == ENVLOG_TABLE_TUNE;
    const char *ns = tune ? rec->u.tune.ns : rec->u.compile.ns;
    e = envlog_record_imported(c->s, tune ? ENVLOG_KIND_TUNE : ENVLOG_KIND_COMPILE,
                               tune ? (const void *)&rec->u.tune : &rec->u.compile, NULL);
    /* The recorder's own checks (trial indexes, UTF-8, ...) refuse an entry
     * without writing it: that entry is rejected, the import goes on. */
    if (e == ENVLOG_INVALID_ARG) {
        reject(c, rec, envlog_errmsg());
        return ENVLOG_OK;
    }
    if (e)
        return e;
    c->rep->taken++;
    /* Into an empty environment everything is new, not foreign. */
    if (c->n_local && !ns_local(c, ns))
        c->rep->foreign++;
    return ENVLOG_OK;
}

envlog_err envlog_bundle_import_memory(envlog_env *env, const void *data, size_t size,
                                       envlog_import_report *rep)
{
    return envlog_bundle_import_x(env, data, size, NULL, rep);
}

envlog_err envlog_bundle_import_x(envlog_env *env, const void *data, size_t size,
                                  const envlog_import_opts *opts, envlog_import_report *rep)
{
    envlog_import_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    if (!env || !data)
        return envlog__fail(ENVLOG_INVALID_ARG, "import needs an environment and a bundle");
    /* An invalid bundle imports nothing.  A format 1 bundle is checked
     * whole before anything is written.  A format 2 bundle's snapshot is
     * checked whole by its hash as its columns are decoded; where there
     * are CPUs for it that runs on a thread of its own while the walk
     * below reads, checks and records what is decoded, and a bundle it
     * then refuses undoes what was written, as a content hash that does
     * not match does. */
    int threads = opts ? opts->threads : 0;
    bool fed = threads >= 2 || (threads == 0 && sysconf(_SC_NPROCESSORS_ONLN) >= 2);
    envlog_bundle_walk w;
    envlog_err e = envlog_bundle_walk_open(data, size, fed, &w);
    if (e)
        return e;
    envlog_bundle_opened o = w.o;
    import_ctx c = {.env = env, .rep = rep, .m = envlog_snap_manifest_get(o.snap)};
    envlog_err e2 = ENVLOG_OK; /* the decoder's verdict */
    bool settled = false;
    if (o.format == 1 && !envlog_snap_content_ok(o.snap) && !envlog_snap_bad_records(o.snap)) {
        envlog_bundle_walk_close(&w);
        return envlog__fail(ENVLOG_BAD_DATA, "bundle content hash does not match its manifest");
    }
    if ((e = envlog_env_state(env, &c.live)))
        goto out;
    if ((e = envlog_state_each(c.live, note_ns, &c)))
        goto out;
    uint64_t entries = c.m->tunes + c.m->kernels, done = 0;
    /* Room for the entries at once, as many as the manifest says but no
     * more than the bundle's bytes could hold (a bundle takes about 11
     * bytes an entry; a hostile count buys nothing). */
    if ((e = envlog_state_expect(c.live, (size_t)(entries < size / 4 ? entries : size / 4))))
        goto out;
    const envlog_snap_item *it;
    const envlog_record *rec;
    envlog_snap_rewind(o.snap);
    /* Each entry is read and decoded (on a thread of its own where there
     * are CPUs for it) while the one before is checked and recorded. */
    envlog_snap_ahead *ahead;
    /* A fed walk reads ahead on a thread of its own only given a third. */
    if ((e = envlog_snap_ahead_start(o.snap, w.fed && threads == 2 ? 1 : threads, &ahead)))
        goto out;
    while (!e && !(e = envlog_snap_ahead_next(ahead, &it, &rec)))
        if (it->kind == ENVLOG_KIND_ENTRY && it->table != ENVLOG_TABLE_USER) {
            e = import_entry(&c, it, rec);
            if (opts && opts->on_progress)
                opts->on_progress(opts->ctx, "importing", ++done, entries);
        }
    envlog_snap_ahead_stop(ahead);
    if (e == ENVLOG_END)
        e = ENVLOG_OK;
    settled = true;
    if ((e2 = envlog_bundle_walk_settle(&w)))
        goto out;
    if (!e && !envlog_snap_content_ok(o.snap) && !envlog_snap_bad_records(o.snap))
        e = envlog__fail(ENVLOG_BAD_DATA, "bundle content hash does not match its manifest");
    /* Records that failed their checksum or decode are rejected too. */
    uint64_t bad = envlog_snap_bad_records(o.snap);
    const envlog_damage *first = envlog_snap_first_damage(o.snap);
    if (bad && !rep->rejected)
        snprintf(rep->first_reject, sizeof rep->first_reject,
                 "%llu damaged record(s) in the bundle, the first at byte %llu: %.80s",
                 (unsigned long long)bad, (unsigned long long)(first ? first->offset : 0),
                 first ? first->reason : "");
    rep->rejected += bad;
    if (!e && c.s) {
        envlog_import im = {c.m->name ? c.m->name : "", c.m->content_hash,
                            envlog_snap_manifest_raw(o.snap), rep->taken, rep->skipped,
                            rep->rejected};
        e = envlog_record_import(c.s, &im, NULL);
    }
out:
    /* The decoder's verdict comes first, as if it had run first. */
    if (!settled)
        e2 = envlog_bundle_walk_settle(&w);
    if (e2) { /* nothing of the walk counts: the report of a refusal */
        e = e2;
        memset(rep, 0, sizeof *rep);
    }
    /* The failure's message, whatever runs after it. */
    char why[512] = "";
    if (e)
        snprintf(why, sizeof why, "%s", envlog_errmsg());
    if (c.s) {
        envlog_session_stats ss;
        envlog_session_stats_get(c.s, &ss);
        envlog_id128 sid = envlog_session_id(c.s);
        envlog_err end = envlog_session_end(c.s);
        if (!e && end) {
            e = end;
            snprintf(why, sizeof why, "%s", envlog_errmsg());
        }
        /* All or nothing: the entries taken before the failure must not
         * stand without the rest (a retry takes them all). */
        if (e && ss.on_disk)
            envlog_session_discard(env, &sid);
        if (e) {
            rep->taken = rep->foreign = rep->other_version = 0;
            rep->other_versions[0] = 0;
            memset(&rep->session, 0, sizeof rep->session);
        }
    }
    envlog_free(c.local_ns);
    envlog_bundle_walk_close(&w);
    return e ? envlog__fail(e, "%s", why) : ENVLOG_OK;
}

envlog_err envlog_bundle_import(envlog_env *env, const char *path,
                                envlog_import_report *rep)
{
    envlog_buf b = {0};
    envlog_err e = envlog_bundle_read_path(path, &b);
    if (!e)
        e = envlog_bundle_import_memory(env, b.p, b.len, rep);
    else if (rep)
        memset(rep, 0, sizeof *rep);
    envlog_buf_free(&b);
    return e;
}
