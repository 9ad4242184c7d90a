/* SPDX-License-Identifier: MIT */
/*
 * schema.c - the event model: one table of fields per record kind.
 *
 * The tables are the single statement of what each kind carries: the codec
 * encodes and decodes from them, the JSON renderer takes its names from them,
 * and man/envlog.5's CDDL mirrors them key for key.  Keys 0-3 of every event
 * map are the envelope (kind, seq, offset, effect); body keys start at 4.
 * A key, once given a meaning, keeps it: new fields take new keys.
 */
#include "core_int.h"

#include <stddef.h>
#include <string.h>

#define NOPRES SIZE_MAX
#define F(k, ty, nm, st, mem)                                                  \
    {k, ty, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 0, 0, 0}
#define FULL(k, ty, nm, st, mem)                                               \
    {k, ty, 1, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 0, 0, 0}
#define ARR(k, ty, nm, st, mem, cnt, sub)                                      \
    {k, ty, 0, nm, offsetof(st, mem), offsetof(st, cnt), NOPRES, sub, NULL, 0, 0, 0}
#define FULLARR(k, ty, nm, st, mem, cnt, sub)                                  \
    {k, ty, 1, nm, offsetof(st, mem), offsetof(st, cnt), NOPRES, sub, NULL, 0, 0, 0}
#define OPT(k, ty, nm, st, mem, pres)                                          \
    {k, ty, 0, nm, offsetof(st, mem), 0, offsetof(st, pres), NULL, NULL, 0, 0, 0}
#define ENUM(k, nm, st, mem, names)                                             \
    {k, ENVLOG_F_ENUM, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, names, 0, 0, 0}
/* Fields the fold reads: encoded first, so envlog_event_decode_fold() stops
 * before the heavy ones (trials, logs, sources). */
#define FO(k, ty, nm, st, mem)                                                 \
    {k, ty, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 1, 0, 0}
#define FOARR(k, ty, nm, st, mem, cnt, sub)                                    \
    {k, ty, 0, nm, offsetof(st, mem), offsetof(st, cnt), NOPRES, sub, NULL, 1, 0, 0}
#define FOENUM(k, nm, st, mem, names)                                          \
    {k, ENVLOG_F_ENUM, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, names, 1, 0, 0}
/* A 64-bit hash (a tune checksum): hex text in JSON. */
#define FID(k, nm, st, mem)                                                    \
    {k, ENVLOG_F_U64, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 0, 0, 1}
#define FOID(k, nm, st, mem)                                                   \
    {k, ENVLOG_F_U64, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 1, 0, 1}
/* An index into the record's candidates (checked against them). */
#define CIDX(k, ty, nm, st, mem)                                               \
    {k, ty, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 0, 1, 0}
#define SCHEMA(var, nm, st, tab)                                               \
    const envlog_schema var = {nm, sizeof(st), tab, sizeof tab / sizeof tab[0], 0, 0}
/* A map with a hand-written encoder for its common shape (encode.c). */
#define SCHEMA_FAST(var, nm, st, tab, fast)                                    \
    const envlog_schema var = {nm, sizeof(st), tab, sizeof tab / sizeof tab[0], 0, fast}
/* An event kind whose format 2 records carry a detail (key 23). */
#define SCHEMA_DETAIL(var, nm, st, tab)                                          \
    const envlog_schema var = {nm, sizeof(st), tab, sizeof tab / sizeof tab[0], 1, 0}

static const char *const level_names[] = {"off", "basic", "full", NULL};
static const char *const outcome_names[] = {"compiled", "loaded", "failed", NULL};
static const char *const table_names[] = {"tune", "kernel", NULL};

static const envlog_field param_f[] = {
    F(0, ENVLOG_F_TEXT, "name", envlog_param, name),
    F(1, ENVLOG_F_F64, "value", envlog_param, value),
};
static SCHEMA(param_s, "param", envlog_param, param_f);

static const envlog_field attr_f[] = {
    F(0, ENVLOG_F_TEXT, "key", envlog_attr, key),
    F(1, ENVLOG_F_TEXT, "value", envlog_attr, value),
};
static SCHEMA(attr_s, "attr", envlog_attr, attr_f);

static const envlog_field trial_f[] = {
    F(0, ENVLOG_F_TEXT, "name", envlog_trial, name),
    CIDX(1, ENVLOG_F_U32, "index", envlog_trial, index),
    F(2, ENVLOG_F_U64, "samples", envlog_trial, samples),
    F(3, ENVLOG_F_F64, "min_ns", envlog_trial, min_ns),
    F(4, ENVLOG_F_F64, "median_ns", envlog_trial, median_ns),
    F(5, ENVLOG_F_F64, "mean_ns", envlog_trial, mean_ns),
    F(6, ENVLOG_F_F64, "max_ns", envlog_trial, max_ns),
    F(7, ENVLOG_F_F64, "stddev_ns", envlog_trial, stddev_ns),
    F(8, ENVLOG_F_TEXT, "error", envlog_trial, error),
    FULLARR(9, ENVLOG_F_F64S, "sample_ns", envlog_trial, sample_ns, n_sample_ns, NULL),
    OPT(10, ENVLOG_F_U64, "start_ns", envlog_trial, start_ns, has_start),
    OPT(11, ENVLOG_F_U64, "wall_ns", envlog_trial, wall_ns, has_start),
};
static SCHEMA_FAST(trial_s, "trial", envlog_trial, trial_f, ENVLOG_FAST_TRIAL);

static const envlog_field session_f[] = {
    F(4, ENVLOG_F_H128, "id", envlog_session_rec, id),
    F(5, ENVLOG_F_U64, "start_unix_ns", envlog_session_rec, start_unix_ns),
    F(6, ENVLOG_F_TEXT, "envlog_version", envlog_session_rec, envlog_version),
    F(7, ENVLOG_F_TEXT, "runtime", envlog_session_rec, runtime),
    F(8, ENVLOG_F_TEXT, "runtime_version", envlog_session_rec, runtime_version),
    F(9, ENVLOG_F_TEXT, "label", envlog_session_rec, label),
    F(10, ENVLOG_F_TEXT, "host", envlog_session_rec, host),
    F(11, ENVLOG_F_U64, "pid", envlog_session_rec, pid),
    F(12, ENVLOG_F_TEXT, "os", envlog_session_rec, os),
    F(13, ENVLOG_F_TEXT, "arch", envlog_session_rec, arch),
    ARR(14, ENVLOG_F_TEXTS, "devices", envlog_session_rec, devices, n_devices, NULL),
    F(15, ENVLOG_F_TEXT, "process_mode", envlog_session_rec, process_mode),
    ENUM(16, "level", envlog_session_rec, level, level_names),
    F(17, ENVLOG_F_U64, "dropped", envlog_session_rec, dropped),
};
static SCHEMA(session_s, "session", envlog_session_rec, session_f);

static const envlog_field tune_f[] = {
    FO(4, ENVLOG_F_TEXT, "namespace", envlog_tune, ns),
    FO(5, ENVLOG_F_TEXT, "key", envlog_tune, key),
    FOID(6, "checksum", envlog_tune, checksum),
    FO(16, ENVLOG_F_BOOL, "stored", envlog_tune, stored),
    FO(17, ENVLOG_F_BOOL, "imported", envlog_tune, imported),
    FO(11, ENVLOG_F_I64, "winner", envlog_tune, winner),
    FOARR(7, ENVLOG_F_TEXTS, "candidates", envlog_tune, candidates, n_candidates, NULL),
    FO(12, ENVLOG_F_F64, "margin", envlog_tune, margin),
    FO(13, ENVLOG_F_BOOL, "within_noise", envlog_tune, within_noise),
    FO(18, ENVLOG_F_F64, "winner_ns", envlog_tune, winner_ns),
    ARR(8, ENVLOG_F_OBJS, "trials", envlog_tune, trials, n_trials, &trial_s),
    F(9, ENVLOG_F_TEXT, "policy", envlog_tune, policy),
    ARR(10, ENVLOG_F_OBJS, "params", envlog_tune, params, n_params, &param_s),
    F(14, ENVLOG_F_BOOL, "short_circuit", envlog_tune, short_circuit),
    F(15, ENVLOG_F_U64, "wall_ns", envlog_tune, wall_ns),
    OPT(19, ENVLOG_F_U64, "start_ns", envlog_tune, start_ns, has_start),
    OPT(20, ENVLOG_F_U64, "thread", envlog_tune, thread, has_start),
};
static SCHEMA_DETAIL(tune_s, "tune", envlog_tune, tune_f);

static const envlog_field compile_f[] = {
    FO(4, ENVLOG_F_TEXT, "namespace", envlog_compile, ns),
    FO(6, ENVLOG_F_H128, "kernel_key", envlog_compile, kernel_key),
    FOENUM(11, "outcome", envlog_compile, outcome, outcome_names),
    FO(20, ENVLOG_F_BOOL, "imported", envlog_compile, imported),
    FO(5, ENVLOG_F_TEXT, "name", envlog_compile, name),
    FO(7, ENVLOG_F_H128, "source_hash", envlog_compile, source_hash),
    FO(8, ENVLOG_F_TEXT, "options", envlog_compile, options),
    FO(9, ENVLOG_F_TEXT, "compiler_version", envlog_compile, compiler_version),
    FO(10, ENVLOG_F_TEXT, "arch", envlog_compile, arch),
    FO(13, ENVLOG_F_H128, "binary_hash", envlog_compile, binary_hash),
    FO(14, ENVLOG_F_U64, "binary_size", envlog_compile, binary_size),
    FO(15, ENVLOG_F_BYTES, "binary", envlog_compile, binary),
    F(12, ENVLOG_F_U64, "duration_ns", envlog_compile, duration_ns),
    F(16, ENVLOG_F_TEXT, "log", envlog_compile, log),
    FULL(17, ENVLOG_F_TEXT, "source", envlog_compile, source),
    FULL(18, ENVLOG_F_BYTES, "ir", envlog_compile, ir),
    OPT(19, ENVLOG_F_STAMP, "tune", envlog_compile, tune, has_tune),
    OPT(21, ENVLOG_F_U64, "start_ns", envlog_compile, start_ns, has_start),
    OPT(22, ENVLOG_F_U64, "thread", envlog_compile, thread, has_start),
};
static SCHEMA_DETAIL(compile_s, "compile", envlog_compile, compile_f);

static const envlog_field span_f[] = {
    F(4, ENVLOG_F_TEXT, "name", envlog_span_rec, name),
    F(5, ENVLOG_F_U64, "id", envlog_span_rec, id),
    F(6, ENVLOG_F_U64, "parent", envlog_span_rec, parent),
    F(7, ENVLOG_F_U64, "open_ns", envlog_span_rec, open_ns),
    F(8, ENVLOG_F_U64, "duration_ns", envlog_span_rec, duration_ns),
    ARR(9, ENVLOG_F_OBJS, "attrs", envlog_span_rec, attrs, n_attrs, &attr_s),
    OPT(10, ENVLOG_F_U64, "thread", envlog_span_rec, thread, has_thread),
    OPT(11, ENVLOG_F_BOOL, "open", envlog_span_rec, open, open),
};
static SCHEMA_DETAIL(span_s, "span", envlog_span_rec, span_f);

static const envlog_field mark_f[] = {
    F(4, ENVLOG_F_TEXT, "label", envlog_mark, label),
    F(5, ENVLOG_F_U64, "wall_unix_ns", envlog_mark, wall_unix_ns),
};
static SCHEMA_DETAIL(mark_s, "mark", envlog_mark, mark_f);

static const envlog_field import_f[] = {
    F(4, ENVLOG_F_TEXT, "bundle", envlog_import, bundle),
    F(5, ENVLOG_F_H128, "bundle_hash", envlog_import, bundle_hash),
    F(6, ENVLOG_F_RECORD, "manifest", envlog_import, manifest),
    F(7, ENVLOG_F_U64, "taken", envlog_import, taken),
    F(8, ENVLOG_F_U64, "skipped", envlog_import, skipped),
    F(9, ENVLOG_F_U64, "rejected", envlog_import, rejected),
};
static SCHEMA_DETAIL(import_s, "import", envlog_import, import_f);

static const envlog_field forget_f[] = {
    ENUM(4, "table", envlog_forget, table, table_names),
    F(5, ENVLOG_F_TEXT, "namespace", envlog_forget, ns),
    F(6, ENVLOG_F_TEXT, "key", envlog_forget, key),
    FID(7, "checksum", envlog_forget, checksum),
    F(8, ENVLOG_F_TEXT, "reason", envlog_forget, reason),
    F(9, ENVLOG_F_TEXT, "under", envlog_forget, under),
};
static SCHEMA(forget_s, "forget", envlog_forget, forget_f);

static const envlog_field user_f[] = {
    F(4, ENVLOG_F_TEXT, "user_kind", envlog_user, kind),
    F(5, ENVLOG_F_RAW, "body", envlog_user, body),
};
static SCHEMA(user_s, "user", envlog_user, user_f);

const envlog_schema *envlog_schema_of(envlog_kind kind)
{
    switch (kind) {
    case ENVLOG_KIND_SESSION: return &session_s;
    case ENVLOG_KIND_TUNE: return &tune_s;
    case ENVLOG_KIND_COMPILE: return &compile_s;
    case ENVLOG_KIND_SPAN: return &span_s;
    case ENVLOG_KIND_MARK: return &mark_s;
    case ENVLOG_KIND_IMPORT: return &import_s;
    case ENVLOG_KIND_FORGET: return &forget_s;
    case ENVLOG_KIND_USER: return &user_s;
    default: return NULL;
    }
}

const envlog_field *envlog_schema_field(const envlog_schema *s, uint64_t key)
{
    for (size_t i = 0; i < s->n_fields; i++)
        if (s->fields[i].key == key)
            return &s->fields[i];
    return NULL;
}

const char *envlog_kind_name(envlog_kind kind)
{
    if (kind == ENVLOG_KIND_HEADER)
        return "header";
    if (kind == ENVLOG_KIND_SEAL)
        return "seal";
    const envlog_schema *s = envlog_schema_of(kind);
    return s ? s->name : "unknown";
}

envlog_effect envlog_effect_of(envlog_kind kind, const void *body)
{
    switch (kind) {
    case ENVLOG_KIND_TUNE:
        return ((const envlog_tune *)body)->stored ? ENVLOG_CHANGED
                                                   : ENVLOG_OBSERVED;
    case ENVLOG_KIND_COMPILE: {
        const envlog_compile *c = body;
        return c->outcome == ENVLOG_COMPILED && c->binary.size
                   ? ENVLOG_CHANGED
                   : ENVLOG_OBSERVED;
    }
    case ENVLOG_KIND_IMPORT:
    case ENVLOG_KIND_FORGET: return ENVLOG_CHANGED;
    default: return ENVLOG_OBSERVED;
    }
}

void envlog_record_make(envlog_record *rec, envlog_kind kind, const envlog_stamp *stamp,
                        envlog_effect effect, const void *body)
{
    memset(rec, 0, sizeof *rec);
    rec->kind = kind;
    rec->effect = effect;
    rec->stamp = *stamp;
    switch (kind) {
    case ENVLOG_KIND_SESSION: rec->u.session = *(const envlog_session_rec *)body; break;
    case ENVLOG_KIND_TUNE: rec->u.tune = *(const envlog_tune *)body; break;
    case ENVLOG_KIND_COMPILE: rec->u.compile = *(const envlog_compile *)body; break;
    case ENVLOG_KIND_SPAN: rec->u.span = *(const envlog_span_rec *)body; break;
    case ENVLOG_KIND_MARK: rec->u.mark = *(const envlog_mark *)body; break;
    case ENVLOG_KIND_IMPORT: rec->u.import = *(const envlog_import *)body; break;
    case ENVLOG_KIND_FORGET: rec->u.forget = *(const envlog_forget *)body; break;
    case ENVLOG_KIND_USER: rec->u.user = *(const envlog_user *)body; break;
    default: break;
    }
}

bool envlog_ns_under(const char *ns, const char *prefix)
{
    if (!ns || !prefix)
        return false;
    size_t n = strlen(prefix);
    return !strncmp(ns, prefix, n) && (ns[n] == '\0' || ns[n] == '/');
}

const char *envlog_ns_prefix_problem(const char *prefix)
{
    if (!prefix || !*prefix)
        return "the namespace prefix is empty";
    size_t n = strlen(prefix);
    if (prefix[0] == '/' || prefix[n - 1] == '/')
        return "the namespace prefix begins or ends with '/'";
    if (strstr(prefix, "//"))
        return "the namespace prefix has an empty component";
    return NULL;
}

const char *envlog_record_problem(envlog_kind kind, envlog_effect effect,
                                  const void *body, int64_t max_index)
{
    const envlog_schema *s = envlog_schema_of(kind);
    if (!s)
        return NULL; /* unknown kinds pass through */
    if (kind == ENVLOG_KIND_TUNE) {
        const envlog_tune *t = body;
        if (t->winner < -1 || (t->winner >= 0 && (uint64_t)t->winner >= t->n_candidates))
            return "the tune's winner is not one of its candidates";
        if (t->stored && t->winner < 0)
            return "a stored tune without a winner";
        if (max_index == ENVLOG_TRIALS_OF_BODY) {
            max_index = -1;
            for (size_t i = 0; t->trials && i < t->n_trials; i++)
                if ((int64_t)t->trials[i].index > max_index)
                    max_index = t->trials[i].index;
        }
        if (max_index >= 0 && (uint64_t)max_index >= t->n_candidates)
            return "a trial names a candidate the tune does not have";
    }
    if (kind == ENVLOG_KIND_FORGET) {
        const envlog_forget *f = body;
        if (f->under && (f->ns || f->key))
            return "a forget of a namespace prefix names a namespace or a key";
        if (f->under && envlog_ns_prefix_problem(f->under))
            return envlog_ns_prefix_problem(f->under);
    }
    if (kind != ENVLOG_KIND_USER && effect != envlog_effect_of(kind, body))
        return "its effect is not the one its kind and fields give";
    return NULL;
}
