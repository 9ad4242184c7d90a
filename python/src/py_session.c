/* SPDX-License-Identifier: MIT */
/*
 * py_session.c - envlog._envlog.Session and Span: recording tunes, compiles,
 * marks, user records, forgets and spans.
 *
 * Each call checks its arguments, builds the library's record on the stack
 * (strings and buffers stay owned by their Python objects for the call) and
 * hands it to envlog_record_*(), which decides its effect and level exactly
 * as it does for C callers.
 *
 * A span's storage is the library's to link into a per-thread list until
 * the span closes, so it is allocated apart from the Python object: a span
 * still open when its session ends is left allocated (a few bytes) rather
 * than freed under the list, and a span is closed only on the thread that
 * opened it.
 */
#include "envlog_py.h"

#include <pythread.h>
#include <string.h>

typedef struct {
    envlog_span sp;
    char *name;
    unsigned long thread;
} span_box;

typedef struct SpanObject {
    PyObject_HEAD
    span_box *box;
    SessionObject *session;
    int open;
} SpanObject;

static int session_ok(SessionObject *self)
{
    if (!self->s) {
        PyErr_SetString(PyExc_ValueError, "the session has ended");
        return -1;
    }
    return 0;
}

static int parse_level(const char *s, envlog_level *out)
{
    static const char *const names[] = {"off", "basic", "full"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (envlog_level)i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "level: 'off', 'basic' or 'full', not '%s'", s);
    return -1;
}

static int parse_sync(const char *s, envlog_sync *out)
{
    static const char *const names[] = {"none", "close", "record"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (envlog_sync)i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "sync: 'none', 'close' or 'record', not '%s'", s);
    return -1;
}

static int session_init(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"env",           "label",          "runtime", "runtime_version",
                          "devices",       "process_mode",   "level",   "sync",
                          "pending_budget", "segment_size",  "auto_compact", NULL};
    PyObject *env, *label = NULL, *rt = NULL, *rv = NULL, *dev = NULL, *pm = NULL,
                   *level = NULL, *sync = NULL, *budget = NULL, *segsz = NULL, *ac = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$OOOOOOOOOO:Session", kwl, &Env_Type, &env,
                                     &label, &rt, &rv, &dev, &pm, &level, &sync, &budget,
                                     &segsz, &ac))
        return -1;
    if (self->s) {
        PyErr_SetString(PyExc_ValueError, "Session is already begun");
        return -1;
    }
    EnvObject *eo = (EnvObject *)env;
    envpy_arena a = {0};
    envlog_session_opts o;
    envlog_session_opts_init(&o);
    const char *lv = NULL, *sy = NULL;
    uint64_t u;
    int rc = -1;
    if (envpy_env_ok(eo) || envpy_opt_str(label, "label", &o.label) ||
        envpy_opt_str(rt, "runtime", &o.runtime) ||
        envpy_opt_str(rv, "runtime_version", &o.runtime_version) ||
        envpy_strs(dev, "devices", &o.devices, &o.n_devices, &a) ||
        envpy_opt_str(pm, "process_mode", &o.process_mode) ||
        envpy_opt_str(level, "level", &lv) || (lv && parse_level(lv, &o.level)) ||
        envpy_opt_str(sync, "sync", &sy) || (sy && parse_sync(sy, &o.sync)))
        goto out;
    if (budget && budget != Py_None) {
        if (envpy_u64(budget, "pending_budget", &u))
            goto out;
        o.pending_budget = (size_t)u;
    }
    if (segsz && segsz != Py_None && envpy_u64(segsz, "segment_size", &o.segment_size))
        goto out;
    if (ac != Py_None) {
        bool b;
        if (envpy_bool(ac, "auto_compact", &b))
            goto out;
        o.auto_compact = b ? 1 : -1;
    }
    envlog_err e = envlog_session_begin(eo->env, &o, &self->s);
    if (e) {
        envpy_raise(e, "beginning a session");
        goto out;
    }
    Py_INCREF(eo);
    self->env = eo;
    /* The environment ends it first if it is closed before.  Sessions
     * gone since are dropped from its list here. */
    for (Py_ssize_t i = PyList_GET_SIZE(eo->sessions); i-- > 0;)
        if (PyWeakref_GetObject(PyList_GET_ITEM(eo->sessions, i)) == Py_None &&
            PyList_SetSlice(eo->sessions, i, i + 1, NULL))
            goto out;
    PyObject *ref = PyWeakref_NewRef((PyObject *)self, NULL);
    if (!ref || PyList_Append(eo->sessions, ref)) {
        Py_XDECREF(ref);
        goto out;
    }
    Py_DECREF(ref);
    rc = 0;
out:
    envpy_arena_free(&a);
    return rc;
}

/* Ends the session: the tuner's runtime first, then the library's end,
 * which seals the last segment.  Spans still open are discarded. */
static envlog_err session_finish(SessionObject *self)
{
    if (!self->s)
        return ENVLOG_OK;
    envpy_session_tuner_close(self);
    for (size_t i = 0; i < self->n_spans; i++) {
        self->spans[i]->open = 0;
        self->spans[i]->box = NULL; /* still linked by the library: left allocated */
    }
    self->n_spans = 0;
    envlog_err e = envlog_session_end(self->s);
    self->s = NULL;
    return e;
}

static PyObject *session_end(SessionObject *self, PyObject *noargs)
{
    (void)noargs;
    envlog_err e = session_finish(self);
    if (e)
        return envpy_raise(e, "ending the session");
    Py_RETURN_NONE;
}

static void session_dealloc(SessionObject *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    session_finish(self);
    Py_XDECREF(self->env);
    PyMem_Free(self->spans);
    Py_XDECREF(self->tuner_key);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *stamp_or_raise(envlog_err e, const envlog_stamp *st, const char *what)
{
    if (e)
        return envpy_raise(e, what);
    return envpy_stamp(st);
}

static PyObject *session_id(SessionObject *self, void *closure)
{
    (void)closure;
    if (session_ok(self))
        return NULL;
    envlog_id128 id = envlog_session_id(self->s);
    return envpy_hex(id.b, 16);
}

static PyObject *session_ended(SessionObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->s == NULL);
}

static PyObject *session_stats(SessionObject *self, PyObject *noargs)
{
    (void)noargs;
    if (session_ok(self))
        return NULL;
    envlog_session_stats st;
    envlog_session_stats_get(self->s, &st);
    return Py_BuildValue("{sK,sK,sK,sK,sK,sK,sO}", "accepted", (unsigned long long)st.accepted,
                         "written", (unsigned long long)st.written, "held",
                         (unsigned long long)st.held, "dropped", (unsigned long long)st.dropped,
                         "segments", (unsigned long long)st.segments, "bytes",
                         (unsigned long long)st.bytes, "on_disk",
                         st.on_disk ? Py_True : Py_False);
}

static PyObject *session_flush(SessionObject *self, PyObject *noargs)
{
    (void)noargs;
    if (session_ok(self))
        return NULL;
    envlog_err e = envlog_session_flush(self->s);
    if (e)
        return envpy_raise(e, "flushing the session");
    Py_RETURN_NONE;
}

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

static PyObject *session_tune(SessionObject *self, PyObject *args, PyObject *kw)
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
    if (session_ok(self) || envpy_str(ns, "namespace", &t.ns) || envpy_str(key, "key", &t.key) ||
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
    r = stamp_or_raise(envlog_record_tune(self->s, &t, &st), &st, "recording a tune");
out:
    envpy_arena_free(&a);
    return r;
}

/* ---------------------------------------------------------------- compiles */

static int hash_in(PyObject *o, const char *what, envlog_hash128 *h)
{
    return envpy_id(o, what, (envlog_id128 *)h);
}

static int parse_outcome(const char *s, envlog_outcome *out)
{
    static const char *const names[] = {"compiled", "loaded", "failed"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (envlog_outcome)i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "outcome: 'compiled', 'loaded' or 'failed', not '%s'", s);
    return -1;
}

static PyObject *session_compile(SessionObject *self, PyObject *args, PyObject *kw)
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
    PyObject *r = NULL;
    if (session_ok(self) || envpy_str(ns, "namespace", &c.ns) || envpy_str(name, "name", &c.name) ||
        envpy_opt_str(opt, "options", &c.options) ||
        envpy_opt_str(cv, "compiler_version", &c.compiler_version) ||
        envpy_opt_str(arch, "arch", &c.arch) || envpy_opt_str(oc, "outcome", &outcome) ||
        (outcome && parse_outcome(outcome, &c.outcome)) ||
        (dur && envpy_u64(dur, "duration_ns", &c.duration_ns)) ||
        envpy_bytes(bin, "binary", &c.binary, &a) || envpy_opt_str(lg, "log", &c.log) ||
        envpy_opt_str(src, "source", &c.source) || envpy_bytes(ir, "ir", &c.ir, &a))
        goto out;
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
    r = stamp_or_raise(envlog_record_compile(self->s, &c, &st), &st, "recording a compile");
out:
    envpy_arena_free(&a);
    return r;
}

/* ------------------------------------------------- marks, user, forget */

static PyObject *session_mark(SessionObject *self, PyObject *arg)
{
    const char *label;
    if (session_ok(self) || envpy_str(arg, "label", &label))
        return NULL;
    envlog_stamp st;
    return stamp_or_raise(envlog_record_mark(self->s, label, &st), &st, "recording a mark");
}

static PyObject *session_user(SessionObject *self, PyObject *args, PyObject *kw)
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
    if (!session_ok(self) && !envpy_str(kind, "kind", &k) &&
        !envpy_bytes(body, "body", &b, &a) && !envpy_bool(changed, "changed", &ch)) {
        if (body == Py_None) {
            PyErr_SetString(PyExc_TypeError, "body: expected CBOR bytes, got None");
        } else {
            envlog_stamp st;
            r = stamp_or_raise(envlog_record_user(self->s, k, b.data, b.size,
                                                  ch ? ENVLOG_CHANGED : ENVLOG_OBSERVED, &st),
                               &st, "recording a user record");
        }
    }
    envpy_arena_free(&a);
    return r;
}

static PyObject *session_forget(SessionObject *self, PyObject *args, PyObject *kw)
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
    if (!session_ok(self) && !envpy_opt_str(ns, "namespace", &f.ns) &&
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
            r = stamp_or_raise(envlog_record_forget(self->s, &f, &st), &st,
                               "recording a forget");
        }
    }
    envpy_arena_free(&a);
    return r;
}

/* ------------------------------------------------------------------- spans */

static PyObject *session_span_open(SessionObject *self, PyObject *arg)
{
    const char *name;
    if (session_ok(self) || envpy_str(arg, "name", &name))
        return NULL;
    span_box *box = PyMem_Calloc(1, sizeof *box);
    size_t n = strlen(name) + 1;
    if (box)
        box->name = PyMem_Malloc(n);
    if (!box || !box->name) {
        PyMem_Free(box);
        return PyErr_NoMemory();
    }
    memcpy(box->name, name, n);
    SpanObject *so = PyObject_New(SpanObject, &Span_Type);
    if (!so) {
        PyMem_Free(box->name);
        PyMem_Free(box);
        return NULL;
    }
    so->box = box;
    so->open = 0;
    Py_INCREF(self);
    so->session = self;
    envlog_err e = envlog_span_open(self->s, box->name, &box->sp);
    if (e) {
        Py_DECREF(so);
        return envpy_raise(e, "opening a span");
    }
    box->thread = PyThread_get_thread_ident();
    so->open = 1;
    if (self->n_spans == self->cap_spans) {
        size_t cap = self->cap_spans ? 2 * self->cap_spans : 8;
        SpanObject **p = PyMem_Realloc(self->spans, cap * sizeof *p);
        if (!p) {
            /* Linked by the library: it stays allocated, as at a session's end. */
            so->open = 0;
            so->box = NULL;
            Py_DECREF(so);
            return PyErr_NoMemory();
        }
        self->spans = p;
        self->cap_spans = cap;
    }
    self->spans[self->n_spans++] = so;
    return (PyObject *)so;
}

static void span_forget(SpanObject *self)
{
    SessionObject *s = self->session;
    for (size_t i = s->n_spans; i-- > 0;)
        if (s->spans[i] == self) {
            memmove(&s->spans[i], &s->spans[i + 1], (s->n_spans - i - 1) * sizeof *s->spans);
            s->n_spans--;
            break;
        }
}

static PyObject *span_close(SpanObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"attrs", NULL};
    PyObject *attrs = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:close", kwl, &attrs))
        return NULL;
    if (!self->open || !self->box) {
        PyErr_SetString(PyExc_ValueError, "the span is not open");
        return NULL;
    }
    if (self->box->thread != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "a span closes on the thread that opened it");
        return NULL;
    }
    if (attrs != Py_None && !PyDict_Check(attrs)) {
        PyErr_Format(PyExc_TypeError, "attrs: expected a dict of str: str, got %s",
                     Py_TYPE(attrs)->tp_name);
        return NULL;
    }
    envpy_arena a = {0};
    Py_ssize_t len = attrs == Py_None ? 0 : PyDict_Size(attrs), pos = 0, i = 0;
    envlog_attr *av = envpy_alloc(&a, (size_t)len * sizeof *av);
    PyObject *k, *v, *r = NULL;
    if (!av)
        goto out;
    while (len && PyDict_Next(attrs, &pos, &k, &v)) {
        if (envpy_str(k, "attrs key", &av[i].key))
            goto out;
        if (!PyUnicode_Check(v)) {
            /* Attributes are text: numbers and the like take their str(). */
            PyObject *s = PyObject_Str(v);
            if (!s || envpy_keep(&a, s))
                goto out;
            v = s;
        }
        char f[128];
        snprintf(f, sizeof f, "attrs[%.80s]", av[i].key);
        if (envpy_str(v, f, &av[i].value))
            goto out;
        i++;
    }
    envlog_stamp st;
    self->open = 0;
    envlog_err e = envlog_span_close(&self->box->sp, av, (size_t)i, &st);
    span_forget(self);
    r = stamp_or_raise(e, &st, "closing a span");
out:
    envpy_arena_free(&a);
    return r;
}

static void span_dealloc(SpanObject *self)
{
    /* A span dropped while open stays linked by the library on its thread:
     * its storage is left allocated (a few bytes), never freed under the
     * list.  The span is not recorded, as a C span never closed is not. */
    if (self->open)
        span_forget(self);
    else if (self->box) {
        PyMem_Free(self->box->name);
        PyMem_Free(self->box);
    }
    Py_XDECREF(self->session);
    PyObject_Free(self);
}

static PyObject *span_is_open(SpanObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->open);
}

static PyObject *span_name(SpanObject *self, void *closure)
{
    (void)closure;
    return self->box ? PyUnicode_FromString(self->box->name) : (Py_INCREF(Py_None), Py_None);
}

static PyMethodDef span_methods[] = {
    {"close", (PyCFunction)(void (*)(void))span_close, METH_VARARGS | METH_KEYWORDS,
     "close(attrs=None) -> dict: records the span with its attributes; its stamp."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef span_getset[] = {
    {"open", (getter)span_is_open, NULL, "Whether it is still open.", NULL},
    {"name", (getter)span_name, NULL, "Its name.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Span_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "envlog._envlog.Span",
    .tp_basicsize = sizeof(SpanObject),
    .tp_dealloc = (destructor)span_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A span in progress, from Session.span_open().",
    .tp_methods = span_methods,
    .tp_getset = span_getset,
};

static PyMethodDef session_methods[] = {
    {"end", (PyCFunction)session_end, METH_NOARGS,
     "end(): seals the last segment and ends the session (open spans are discarded)."},
    {"flush", (PyCFunction)session_flush, METH_NOARGS, "flush(): syncs what was written."},
    {"stats", (PyCFunction)session_stats, METH_NOARGS, "stats() -> dict: its counts."},
    {"tune", (PyCFunction)(void (*)(void))session_tune, METH_VARARGS | METH_KEYWORDS,
     "tune(namespace, key, candidates, *, trials=None, policy=None, params=None,\n"
     "winner=-1, margin=0.0, within_noise=False, winner_ns=0.0, short_circuit=False,\n"
     "wall_ns=0, stored=None) -> dict: records a tune; its stamp."},
    {"compile", (PyCFunction)(void (*)(void))session_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(namespace, name, *, kernel_key=None, ...) -> dict: records a compile."},
    {"mark", (PyCFunction)session_mark, METH_O, "mark(label) -> dict: records a mark."},
    {"user", (PyCFunction)(void (*)(void))session_user, METH_VARARGS | METH_KEYWORDS,
     "user(kind, body, *, changed=False) -> dict: records one CBOR item as a user record."},
    {"forget", (PyCFunction)(void (*)(void))session_forget, METH_VARARGS | METH_KEYWORDS,
     "forget(*, table='tune', namespace=None, key=None, checksum=0, reason=None,\n"
     "under=None) -> dict: records a tombstone."},
    {"span_open", (PyCFunction)session_span_open, METH_O,
     "span_open(name) -> Span: opens a span (close it on the same thread)."},
    {"_tune", (PyCFunction)(void (*)(void))envpy_session_tune, METH_VARARGS | METH_KEYWORDS,
     "_tune(key, candidates, run, *, namespace=None, timer=None, policy=None,\n"
     "runtime=None, runtime_version=None) -> dict: the library's tuner."},
    {"_tune_namespace", (PyCFunction)(void (*)(void))envpy_session_tune_ns,
     METH_VARARGS | METH_KEYWORDS,
     "_tune_namespace(*, runtime=None, runtime_version=None) -> str: the tuner's default "
     "namespace."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef session_getset[] = {
    {"id", (getter)session_id, NULL, "The session id (32 hex digits).", NULL},
    {"ended", (getter)session_ended, NULL, "Whether it has ended.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Session_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "envlog._envlog.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_dealloc = (destructor)session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Session(env, *, label=None, ...): a recording session.",
    .tp_weaklistoffset = offsetof(SessionObject, weakrefs),
    .tp_methods = session_methods,
    .tp_getset = session_getset,
    .tp_init = (initproc)session_init,
    .tp_new = PyType_GenericNew,
};
