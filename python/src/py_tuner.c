/* SPDX-License-Identifier: MIT */
/*
 * py_tuner.c - Session._tune(): Python callables autotuned by the library's own
 * tuner (envlog_cuda_tune on a host stream), so the sampling policy, the
 * scoring rule and the record are exactly the C tuner's.
 *
 * Each run of a candidate goes through envlog_cuda_host_launch(), so the
 * process modes apply as they do to C candidates.  The caller's timer, when
 * given, is an object with start() and stop() -> elapsed ns (CUDA events
 * from PyTorch, say); without one the library's CPU clock times each run.
 * A candidate that raises fails that trial (the exception is handed back);
 * KeyboardInterrupt and the like stop every later run and are raised again
 * once the tune is recorded.
 */
#include "envlog_py.h"

#include <string.h>

typedef struct {
    PyObject *run;     /* run(index) */
    PyObject *timer;   /* start(), stop() -> ns; or NULL */
    PyObject *errors;  /* {index: exception} */
    PyObject *fatal;   /* a BaseException that is not an Exception */
    PyObject *timer_error;
    size_t index;
    int failed;        /* the last run raised */
} tune_ctx;

/* Takes the pending exception: kept per candidate, or as fatal. */
static void take_exception(tune_ctx *t, PyObject **slot, size_t index)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    if (!value)
        return;
    if (!PyErr_GivenExceptionMatches(value, PyExc_Exception)) {
        if (!t->fatal)
            t->fatal = value;
        else
            Py_DECREF(value);
        return;
    }
    if (slot) {
        if (!*slot)
            *slot = value;
        else
            Py_DECREF(value);
        return;
    }
    PyObject *k = PyLong_FromSize_t(index);
    if (!k || PyDict_SetItem(t->errors, k, value))
        PyErr_Clear();
    Py_XDECREF(k);
    Py_DECREF(value);
}

static void host_run(void *arg)
{
    tune_ctx *t = arg;
    PyObject *r = PyObject_CallFunction(t->run, "n", (Py_ssize_t)t->index);
    if (!r) {
        t->failed = 1;
        take_exception(t, NULL, t->index);
    }
    Py_XDECREF(r);
}

/* A fatal exception (not an Exception) stops every later candidate and
 * timer call with ENVLOG_STOPPED; tune() raises it.  A candidate that
 * raised an Exception failed alone (ENVLOG_INVALID_ARG). */
static envlog_err run_candidate(void *ctx, envlog_cuda_stream *s, size_t index)
{
    tune_ctx *t = ctx;
    if (t->fatal)
        return ENVLOG_STOPPED;
    t->index = index;
    t->failed = 0;
    envlog_err e = envlog_cuda_host_launch(s, host_run, t);
    if (e)
        return e;
    return t->failed ? ENVLOG_INVALID_ARG : ENVLOG_OK;
}

static envlog_err timer_start(void *ctx, envlog_cuda_stream *s)
{
    (void)s;
    tune_ctx *t = ctx;
    if (t->fatal)
        return ENVLOG_STOPPED;
    PyObject *r = PyObject_CallMethod(t->timer, "start", NULL);
    if (!r) {
        take_exception(t, &t->timer_error, 0);
        return ENVLOG_INVALID_ARG;
    }
    Py_DECREF(r);
    return ENVLOG_OK;
}

static envlog_err timer_stop(void *ctx, envlog_cuda_stream *s, double *ns)
{
    (void)s;
    tune_ctx *t = ctx;
    if (t->fatal)
        return ENVLOG_STOPPED;
    PyObject *r = PyObject_CallMethod(t->timer, "stop", NULL);
    double v = -1;
    if (r && (PyFloat_Check(r) || PyLong_Check(r)) && !PyBool_Check(r))
        v = PyFloat_AsDouble(r);
    else if (r)
        PyErr_Format(PyExc_TypeError, "timer.stop(): expected the elapsed ns as a number, "
                     "got %s", Py_TYPE(r)->tp_name);
    Py_XDECREF(r);
    if (!PyErr_Occurred() && !(v >= 0))
        PyErr_Format(PyExc_ValueError, "timer.stop(): %g is not an elapsed time", v);
    if (PyErr_Occurred()) {
        take_exception(t, &t->timer_error, 0);
        return ENVLOG_INVALID_ARG;
    }
    *ns = v;
    return ENVLOG_OK;
}

static int policy_in(PyObject *o, envlog_cuda_policy *p)
{
    envlog_cuda_policy_init(p);
    if (!o || o == Py_None)
        return 0;
    if (!PyDict_Check(o)) {
        PyErr_Format(PyExc_TypeError, "policy: expected a dict, got %s", Py_TYPE(o)->tp_name);
        return -1;
    }
    static const char *const uints[] = {"warmup", "min_samples", "max_samples"};
    unsigned *ud[] = {&p->warmup, &p->min_samples, &p->max_samples};
    static const char *const dbls[] = {"drop_factor", "rel_tol", "noise_z"};
    double *dd[] = {&p->drop_factor, &p->rel_tol, &p->noise_z};
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &v)) {
        const char *name;
        char f[96];
        if (envpy_str(k, "policy key", &name))
            return -1;
        snprintf(f, sizeof f, "policy['%.60s']", name);
        int found = 0;
        for (int i = 0; i < 3 && !found; i++)
            if (!strcmp(name, uints[i])) {
                uint64_t u;
                if (envpy_u64(v, f, &u))
                    return -1;
                if (u > 100000) {
                    PyErr_Format(PyExc_ValueError, "%s: %llu is over 100000", f,
                                 (unsigned long long)u);
                    return -1;
                }
                *ud[i] = (unsigned)u;
                found = 1;
            }
        for (int i = 0; i < 3 && !found; i++)
            if (!strcmp(name, dbls[i])) {
                if (envpy_double(v, f, dd[i]))
                    return -1;
                found = 1;
            }
        if (!found) {
            PyErr_Format(PyExc_ValueError, "policy: unknown parameter '%s' (warmup, "
                         "min_samples, max_samples, drop_factor, rel_tol, noise_z)", name);
            return -1;
        }
    }
    return 0;
}

void envpy_session_tuner_close(SessionObject *self)
{
    envlog_cuda_stream_close(self->stream);
    envlog_cuda_close(self->cuda);
    self->stream = NULL;
    self->cuda = NULL;
    Py_CLEAR(self->tuner_key);
}

/* The session's runtime for (runtime, runtime_version), opened when first
 * asked for or when another pair is. */
static int tuner_open(SessionObject *self, PyObject *rt, PyObject *rv)
{
    const char *runtime, *version;
    if (envpy_opt_str(rt, "runtime", &runtime) ||
        envpy_opt_str(rv, "runtime_version", &version))
        return -1;
    PyObject *key = Py_BuildValue("(OO)", rt ? rt : Py_None, rv ? rv : Py_None);
    if (!key)
        return -1;
    if (self->cuda && self->tuner_key) {
        int same = PyObject_RichCompareBool(key, self->tuner_key, Py_EQ);
        if (same < 0) {
            Py_DECREF(key);
            return -1;
        }
        if (same) {
            Py_DECREF(key);
            return 0;
        }
    }
    envpy_session_tuner_close(self);
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    o.runtime = runtime ? runtime : "python";
    o.runtime_version = version ? version : envlog_version_string();
    envlog_err e = envlog_cuda_open(self->env->env, self->s, &o, &self->cuda);
    if (!e)
        e = envlog_cuda_stream_open(self->cuda, ENVLOG_CUDA_STREAM_HOST, &self->stream);
    if (e) {
        Py_DECREF(key);
        envpy_session_tuner_close(self);
        envpy_raise(e, "opening the tuner");
        return -1;
    }
    self->tuner_key = key;
    return 0;
}

PyObject *envpy_session_tune_ns(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"runtime", "runtime_version", NULL};
    PyObject *rt = Py_None, *rv = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OO:_tune_namespace", kwl, &rt, &rv))
        return NULL;
    if (envpy_session_ok(self))
        return NULL;
    if (tuner_open(self, rt, rv))
        return NULL;
    char ns[512];
    envlog_err e = envlog_cuda_tune_ns(self->cuda, ENVLOG_CUDA_STREAM_HOST, ns, sizeof ns);
    if (e)
        return envpy_raise(e, "the tuner's namespace");
    return PyUnicode_FromString(ns);
}

PyObject *envpy_session_tune(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"key",    "candidates", "run",     "namespace", "timer",
                          "policy", "runtime",    "runtime_version", NULL};
    PyObject *key, *cands, *run, *ns = Py_None, *timer = Py_None, *policy = Py_None,
                                 *rt = Py_None, *rv = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$OOOOO:_tune", kwl, &key, &cands, &run, &ns,
                                     &timer, &policy, &rt, &rv))
        return NULL;
    if (envpy_session_ok(self))
        return NULL;
    envpy_arena a = {0};
    envlog_cuda_tune_req r = {0};
    envlog_cuda_policy pol;
    envlog_cuda_timer tm = {0};
    tune_ctx t = {run, NULL, PyDict_New(), NULL, NULL, 0, 0};
    PyObject *res = NULL;
    if (!t.errors)
        return NULL;
    if (envpy_str(key, "key", &r.key) ||
        envpy_strs(cands, "candidates", &r.candidates, &r.n_candidates, &a) ||
        envpy_opt_str(ns, "namespace", &r.ns) || policy_in(policy, &pol))
        goto out;
    if (!r.n_candidates) {
        PyErr_SetString(PyExc_ValueError, "candidates: a tune needs at least one");
        goto out;
    }
    if (!PyCallable_Check(run)) {
        PyErr_Format(PyExc_TypeError, "run: expected a callable, got %s", Py_TYPE(run)->tp_name);
        goto out;
    }
    if (timer != Py_None) {
        PyObject *st = PyObject_GetAttrString(timer, "start");
        PyObject *sp = st ? PyObject_GetAttrString(timer, "stop") : NULL;
        int ok = st && sp && PyCallable_Check(st) && PyCallable_Check(sp);
        Py_XDECREF(st);
        Py_XDECREF(sp);
        if (!ok) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "timer: expected an object with start() and "
                         "stop() -> ns, got %s", Py_TYPE(timer)->tp_name);
            goto out;
        }
        PyObject *nm = PyObject_GetAttrString(timer, "name");
        if (!nm) {
            PyErr_Clear();
            nm = PyUnicode_FromString(Py_TYPE(timer)->tp_name);
        }
        if (!nm || envpy_keep(&a, nm) || envpy_str(nm, "timer.name", &tm.name))
            goto out;
        tm.start = timer_start;
        tm.stop = timer_stop;
        tm.ctx = &t;
        t.timer = timer;
        r.timer = &tm;
    }
    if (tuner_open(self, rt, rv))
        goto out;
    r.run = run_candidate;
    r.ctx = &t;
    r.stream = self->stream;
    r.policy = &pol;
    envlog_cuda_tune_result out;
    envlog_err e = envlog_cuda_tune(self->cuda, &r, &out);
    if (t.fatal) {
        PyErr_SetObject((PyObject *)Py_TYPE(t.fatal), t.fatal);
        goto out;
    }
    if (e) {
        envpy_raise(e, "tuning");
        goto out;
    }
    if (t.timer_error) {
        PyErr_SetObject((PyObject *)Py_TYPE(t.timer_error), t.timer_error);
        goto out;
    }
    PyObject *stamp = out.recorded ? envpy_stamp(&out.stamp) : (Py_INCREF(Py_None), Py_None);
    if (!stamp)
        goto out;
    res = Py_BuildValue("{sL,sO,sO,sO,sd,sO,sn,sK,sO,sN,sO}", "winner", (long long)out.winner,
                        "hit", out.hit ? Py_True : Py_False, "measured",
                        out.measured ? Py_True : Py_False, "stored",
                        out.stored ? Py_True : Py_False, "margin", out.margin, "within_noise",
                        out.within_noise ? Py_True : Py_False, "n_trials",
                        (Py_ssize_t)out.n_trials, "wall_ns", (unsigned long long)out.wall_ns,
                        "recorded", out.recorded ? Py_True : Py_False, "stamp", stamp,
                        "errors", t.errors);
out:
    Py_XDECREF(t.errors);
    Py_XDECREF(t.fatal);
    Py_XDECREF(t.timer_error);
    envpy_arena_free(&a);
    return res;
}
