/* SPDX-License-Identifier: MIT */
/*
 * py_record.c - the record kinds a Session writes from Python: tune(),
 * compile(), mark(), user() and forget().
 *
 * Each call checks its arguments, builds the library's record on the stack
 * (strings and buffers stay owned by their Python objects for the call) and
 * hands it to envlog_record_*(), which decides its effect and level exactly
 * as it does for C callers.  The Session object itself, its life and its
 * spans, is py_session.c's.
 */
#include "envlog_py.h"

#include <string.h>

/* ------------------------------------------------------------------- tunes */

static const char *const trial_keys[] = {"name",   "index",     "samples", "min_ns",
                                         "median_ns", "mean_ns", "max_ns",  "stddev_ns",
                                         "error",  "sample_ns", NULL};

static int check_keys(PyObject *d, const char *what, const char *const *known)
{
    PyObject *k;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, NULL)) {
        int ok = 0;
        const char *s = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        if (!s)
            PyErr_Clear();
        for (size_t i = 0; s && known[i] && !ok; i++)
            ok = !strcmp(s, known[i]);
        if (!ok) {
            PyErr_Format(PyExc_ValueError, "%s: unknown field %R", what, k);
            return -1;
        }
    }
    return 0;
}

static int double_item(PyObject *item, const char *what, void *out, void *ctx)
{
    (void)ctx;
    return envpy_double(item, what, out);
}

static int doubles(PyObject *o, const char *what, const double **out, size_t *n,
                   envpy_arena *a)
{
    void *v;
    int rc = envpy_seq(o, what, "a sequence of numbers", sizeof(double), double_item, NULL,
                       &v, n, a);
    *out = v;
    return rc;
}

static int trial_in(PyObject *d, const char *what, envlog_trial *t, envpy_arena *a)
{
    char f[128];
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a dict, got %s", what, Py_TYPE(d)->tp_name);
        return -1;
    }
    if (check_keys(d, what, trial_keys))
        return -1;
    PyObject *v;
    uint64_t idx;
    if (!(v = envpy_get(d, "index"))) {
        PyErr_Format(PyExc_ValueError, "%s: a trial needs an index", what);
        return -1;
    }
    snprintf(f, sizeof f, "%s['index']", what);
    if (envpy_u64(v, f, &idx))
        return -1;
    if (idx > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: index %llu is out of range", f,
                     (unsigned long long)idx);
        return -1;
    }
    t->index = (uint32_t)idx;
    snprintf(f, sizeof f, "%s['name']", what);
    if (envpy_opt_str(envpy_get(d, "name"), f, &t->name))
        return -1;
    snprintf(f, sizeof f, "%s['error']", what);
    if (envpy_opt_str(envpy_get(d, "error"), f, &t->error))
        return -1;
    snprintf(f, sizeof f, "%s['sample_ns']", what);
    if (doubles(envpy_get(d, "sample_ns"), f, &t->sample_ns, &t->n_sample_ns, a))
        return -1;
    t->samples = t->n_sample_ns;
    if ((v = envpy_get(d, "samples"))) {
        snprintf(f, sizeof f, "%s['samples']", what);
        if (envpy_u64(v, f, &t->samples))
            return -1;
    }
    static const char *const stats[] = {"min_ns", "median_ns", "mean_ns", "max_ns",
                                        "stddev_ns"};
    double *dst[] = {&t->min_ns, &t->median_ns, &t->mean_ns, &t->max_ns, &t->stddev_ns};
    for (int i = 0; i < 5; i++)
        if ((v = envpy_get(d, stats[i]))) {
            snprintf(f, sizeof f, "%s['%s']", what, stats[i]);
            if (envpy_double(v, f, dst[i]))
                return -1;
        }
    return 0;
}

typedef struct {
    const envlog_tune *t;
    envpy_arena *a;
} trial_ctx;

/* A trial of the tune in ctx: its index must name a candidate, whose name
 * it takes when it gives none. */
static int trial_item(PyObject *item, const char *what, void *out, void *ctx)
{
    trial_ctx *c = ctx;
    envlog_trial *t = out;
    if (trial_in(item, what, t, c->a))
        return -1;
    if (t->index >= c->t->n_candidates) {
        PyErr_Format(PyExc_ValueError, "%s['index']: %u is not an index into the %zu "
                     "candidates", what, t->index, c->t->n_candidates);
        return -1;
    }
    if (!t->name)
        t->name = c->t->candidates[t->index];
    return 0;
}

static int params_in(PyObject *o, envlog_param **out, size_t *n, envpy_arena *a)
{
    *out = NULL;
    *n = 0;
    if (!o || o == Py_None)
        return 0;
    if (!PyDict_Check(o)) {
        PyErr_Format(PyExc_TypeError, "params: expected a dict of name: number, got %s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t len = PyDict_Size(o), pos = 0, i = 0;
    envlog_param *p = envpy_alloc(a, (size_t)len * sizeof *p);
    PyObject *k, *v;
    if (!p)
        return -1;
    while (PyDict_Next(o, &pos, &k, &v)) {
        if (envpy_str(k, "params key", &p[i].name))
            return -1;
        char f[128];
        snprintf(f, sizeof f, "params[%.80s]", p[i].name);
        if (envpy_double(v, f, &p[i].value))
            return -1;
        i++;
    }
    *out = p;
    *n = (size_t)i;
    return 0;
}

PyObject *envpy_record_tune(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"namespace", "key",      "candidates",   "trials",
                          "policy",    "params",   "winner",       "margin",
                          "within_noise", "winner_ns", "short_circuit", "wall_ns",
                          "stored",    NULL};
    PyObject *ns, *key, *cands, *trials = Py_None, *policy = Py_None, *params = Py_None,
                                *winner = NULL, *margin = NULL, *noise = NULL, *wns = NULL,
                                *sc = NULL, *wall = NULL, *stored = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$OOOOOOOOOO:tune", kwl, &ns, &key, &cands,
                                     &trials, &policy, &params, &winner, &margin, &noise,
                                     &wns, &sc, &wall, &stored))
        return NULL;
    envpy_arena a = {0};
    envlog_tune t = {0};
    t.winner = -1;
    PyObject *r = NULL;
    envlog_param *pv;
    if (envpy_session_ok(self) || envpy_str(ns, "namespace", &t.ns) ||
        envpy_str(key, "key", &t.key) ||
        envpy_strs(cands, "candidates", &t.candidates, &t.n_candidates, &a) ||
        envpy_opt_str(policy, "policy", &t.policy) || params_in(params, &pv, &t.n_params, &a))
        goto out;
    t.params = pv;
    if (cands == Py_None) {
        PyErr_SetString(PyExc_TypeError, "candidates: expected a sequence of str, got None");
        goto out;
    }
    t.checksum = envlog_tune_checksum(t.candidates, t.n_candidates);
    if (winner && winner != Py_None) {
        if (PyUnicode_Check(winner)) {
            const char *w;
            if (envpy_str(winner, "winner", &w))
                goto out;
            for (size_t i = 0; i < t.n_candidates && t.winner < 0; i++)
                if (!strcmp(t.candidates[i], w))
                    t.winner = (int64_t)i;
            if (t.winner < 0) {
                PyErr_Format(PyExc_ValueError, "winner: %R is not one of the candidates",
                             winner);
                goto out;
            }
        } else if (envpy_i64(winner, "winner", &t.winner)) {
            goto out;
        } else if (t.winner < -1 || t.winner >= (int64_t)t.n_candidates) {
            PyErr_Format(PyExc_ValueError, "winner: %lld is not -1 or an index into the %zu "
                         "candidates", (long long)t.winner, t.n_candidates);
            goto out;
        }
    }
    if ((margin && envpy_double(margin, "margin", &t.margin)) ||
        (noise && envpy_bool(noise, "within_noise", &t.within_noise)) ||
        (wns && envpy_double(wns, "winner_ns", &t.winner_ns)) ||
        (sc && envpy_bool(sc, "short_circuit", &t.short_circuit)) ||
        (wall && envpy_u64(wall, "wall_ns", &t.wall_ns)))
        goto out;
    t.stored = t.winner >= 0;
    if (stored != Py_None && envpy_bool(stored, "stored", &t.stored))
        goto out;
    trial_ctx tc = {&t, &a};
    void *tv;
    if (envpy_seq(trials, "trials", "a sequence of dicts", sizeof(envlog_trial), trial_item,
                  &tc, &tv, &t.n_trials, &a))
        goto out;
    t.trials = tv;
    envlog_stamp st;
    r = envpy_stamp_or_raise(envlog_record_tune(self->s, &t, &st), &st, "recording a tune");
out:
    envpy_arena_free(&a);
    return r;
}

/* ---------------------------------------------------------------- compiles */

static int hash_in(PyObject *o, const char *what, envlog_hash128 *h)
{
    return envpy_id(o, what, (envlog_id128 *)h);
}

static const char *const outcome_names[] = {"compiled", "loaded", "failed"};

PyObject *envpy_record_compile(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"namespace",   "name",       "kernel_key", "source_hash",
                          "options",     "compiler_version", "arch", "outcome",
                          "duration_ns", "binary",     "binary_hash", "binary_size",
                          "log",         "source",     "ir",         "tune",
                          NULL};
    PyObject *ns, *name, *kk = Py_None, *sh = Py_None, *opt = Py_None, *cv = Py_None,
                         *arch = Py_None, *oc = Py_None, *dur = NULL, *bin = Py_None,
                         *bh = Py_None, *bs = Py_None, *lg = Py_None, *src = Py_None,
                         *ir = Py_None, *tune = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$OOOOOOOOOOOOOO:compile", kwl, &ns, &name,
                                     &kk, &sh, &opt, &cv, &arch, &oc, &dur, &bin, &bh, &bs,
                                     &lg, &src, &ir, &tune))
        return NULL;
    envpy_arena a = {0};
    envlog_compile c = {0};
    const char *outcome = NULL;
    int oci = 0;
    PyObject *r = NULL;
    if (envpy_session_ok(self) || envpy_str(ns, "namespace", &c.ns) ||
        envpy_str(name, "name", &c.name) ||
        envpy_opt_str(opt, "options", &c.options) ||
        envpy_opt_str(cv, "compiler_version", &c.compiler_version) ||
        envpy_opt_str(arch, "arch", &c.arch) || envpy_opt_str(oc, "outcome", &outcome) ||
        (outcome && envpy_choice(outcome, "outcome", outcome_names, 3, &oci)) ||
        (dur && envpy_u64(dur, "duration_ns", &c.duration_ns)) ||
        envpy_bytes(bin, "binary", &c.binary, &a) || envpy_opt_str(lg, "log", &c.log) ||
        envpy_opt_str(src, "source", &c.source) || envpy_bytes(ir, "ir", &c.ir, &a))
        goto out;
    if (outcome)
        c.outcome = (envlog_outcome)oci;
    if (tune != Py_None) {
        if (envpy_stamp_in(tune, "tune", &c.tune))
            goto out;
        c.has_tune = true;
    }
    if (sh != Py_None ? hash_in(sh, "source_hash", &c.source_hash) : 0)
        goto out;
    if (sh == Py_None && c.source)
        c.source_hash = envlog_hash128_bytes(c.source, strlen(c.source));
    if (bh != Py_None ? hash_in(bh, "binary_hash", &c.binary_hash) : 0)
        goto out;
    if (bh == Py_None && c.binary.size)
        c.binary_hash = envlog_hash128_bytes(c.binary.data, c.binary.size);
    c.binary_size = c.binary.size;
    if (bs != Py_None && envpy_u64(bs, "binary_size", &c.binary_size))
        goto out;
    if (kk != Py_None) {
        if (hash_in(kk, "kernel_key", &c.kernel_key))
            goto out;
    } else if (c.source && c.compiler_version && c.arch) {
        envlog_cuda_kernel_desc d = {c.name, c.source, c.options, c.arch};
        envlog_err e = envlog_cuda_kernel_key(&d, c.compiler_version, &c.kernel_key);
        if (e) {
            envpy_raise(e, "computing the kernel key");
            goto out;
        }
    } else {
        PyErr_SetString(PyExc_ValueError, "kernel_key: needed unless source, compiler_version "
                        "and arch are given to compute it");
        goto out;
    }
    envlog_stamp st;
    r = envpy_stamp_or_raise(envlog_record_compile(self->s, &c, &st), &st, "recording a compile");
out:
    envpy_arena_free(&a);
    return r;
}

/* ------------------------------------------------- marks, user, forget */

PyObject *envpy_record_mark(SessionObject *self, PyObject *arg)
{
    const char *label;
    if (envpy_session_ok(self) || envpy_str(arg, "label", &label))
        return NULL;
    envlog_stamp st;
    return envpy_stamp_or_raise(envlog_record_mark(self->s, label, &st), &st, "recording a mark");
}

PyObject *envpy_record_user(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"kind", "body", "changed", NULL};
    PyObject *kind, *body, *changed = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$O:user", kwl, &kind, &body, &changed))
        return NULL;
    envpy_arena a = {0};
    const char *k;
    envlog_bytes b;
    bool ch;
    PyObject *r = NULL;
    if (!envpy_session_ok(self) && !envpy_str(kind, "kind", &k) &&
        !envpy_bytes(body, "body", &b, &a) && !envpy_bool(changed, "changed", &ch)) {
        if (body == Py_None) {
            PyErr_SetString(PyExc_TypeError, "body: expected CBOR bytes, got None");
        } else {
            envlog_stamp st;
            r = envpy_stamp_or_raise(envlog_record_user(self->s, k, b.data, b.size,
                                                  ch ? ENVLOG_CHANGED : ENVLOG_OBSERVED, &st),
                               &st, "recording a user record");
        }
    }
    envpy_arena_free(&a);
    return r;
}

PyObject *envpy_record_forget(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"table", "namespace", "key", "checksum", "reason", "under", NULL};
    PyObject *ns = Py_None, *key = Py_None, *ck = NULL, *reason = Py_None, *under = Py_None;
    const char *table = "tune";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$sOOOOO:forget", kwl, &table, &ns, &key, &ck,
                                     &reason, &under))
        return NULL;
    envpy_arena a = {0};
    envlog_forget f = {0};
    PyObject *r = NULL;
    if (strcmp(table, "tune") && strcmp(table, "kernel")) {
        PyErr_Format(PyExc_ValueError, "table: 'tune' or 'kernel', not '%s'", table);
        return NULL;
    }
    f.table = strcmp(table, "tune") ? ENVLOG_TABLE_KERNEL : ENVLOG_TABLE_TUNE;
    if (!envpy_session_ok(self) && !envpy_opt_str(ns, "namespace", &f.ns) &&
        !envpy_opt_str(key, "key", &f.key) &&
        !(ck && ck != Py_None && envpy_checksum(ck, "checksum", &f.checksum, &a)) &&
        !envpy_opt_str(reason, "reason", &f.reason) && !envpy_opt_str(under, "under", &f.under)) {
        if (!f.under && (!f.ns || !f.key))
            PyErr_SetString(PyExc_ValueError,
                            "forget: needs namespace and key, or under (a namespace prefix)");
        else if (f.under && (f.ns || f.key))
            PyErr_SetString(PyExc_ValueError, "forget: under takes no namespace and no key");
        else {
            envlog_stamp st;
            r = envpy_stamp_or_raise(envlog_record_forget(self->s, &f, &st), &st,
                               "recording a forget");
        }
    }
    envpy_arena_free(&a);
    return r;
}
