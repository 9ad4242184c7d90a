/* SPDX-License-Identifier: MIT */
/*
 * py_session.c - envlog._envlog.Session and Span: a recording session's
 * life (its options, end, id, counts and flush) and its spans.  The record
 * kinds it writes are py_record.c's, the tuner py_tuner.c's; the method
 * table here names them all.
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

static const char *const level_names[] = {"off", "basic", "full"};
static const char *const sync_names[] = {"none", "close", "record"};

/* An option that is None, True or False as the library's 0, 1 or -1. */
static int tristate(PyObject *o, const char *what, int *out)
{
    bool b;
    if (o == Py_None)
        return 0;
    if (envpy_bool(o, what, &b))
        return -1;
    *out = b ? 1 : -1;
    return 0;
}

static int session_init(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"env",           "label",          "runtime", "runtime_version",
                          "devices",       "process_mode",   "level",   "sync",
                          "pending_budget", "segment_size",  "auto_compact", "auto_push",
                          NULL};
    PyObject *env, *label = NULL, *rt = NULL, *rv = NULL, *dev = NULL, *pm = NULL,
                   *level = NULL, *sync = NULL, *budget = NULL, *segsz = NULL, *ac = Py_None,
                   *ap = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$OOOOOOOOOOO:Session", kwl, &Env_Type, &env,
                                     &label, &rt, &rv, &dev, &pm, &level, &sync, &budget,
                                     &segsz, &ac, &ap))
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
    int lvi, syi;
    uint64_t u;
    int rc = -1;
    if (envpy_env_ok(eo) || envpy_opt_str(label, "label", &o.label) ||
        envpy_opt_str(rt, "runtime", &o.runtime) ||
        envpy_opt_str(rv, "runtime_version", &o.runtime_version) ||
        envpy_strs(dev, "devices", &o.devices, &o.n_devices, &a) ||
        envpy_opt_str(pm, "process_mode", &o.process_mode) ||
        envpy_opt_str(level, "level", &lv) ||
        (lv && envpy_choice(lv, "level", level_names, 3, &lvi)) ||
        envpy_opt_str(sync, "sync", &sy) || (sy && envpy_choice(sy, "sync", sync_names, 3, &syi)))
        goto out;
    if (lv)
        o.level = (envlog_level)lvi;
    if (sy)
        o.sync = (envlog_sync)syi;
    if (budget && budget != Py_None) {
        if (envpy_u64(budget, "pending_budget", &u))
            goto out;
        o.pending_budget = (size_t)u;
    }
    if (segsz && segsz != Py_None && envpy_u64(segsz, "segment_size", &o.segment_size))
        goto out;
    /* None: as the config says (0); True: whatever it says (1); False:
     * never (-1). */
    if (tristate(ac, "auto_compact", &o.auto_compact) || tristate(ap, "auto_push", &o.auto_push))
        goto out;
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

static PyObject *session_id(SessionObject *self, void *closure)
{
    (void)closure;
    if (envpy_session_ok(self))
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
    if (envpy_session_ok(self))
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
    if (envpy_session_ok(self))
        return NULL;
    envlog_err e = envlog_session_flush(self->s);
    if (e)
        return envpy_raise(e, "flushing the session");
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------- spans */

static PyObject *session_span_open(SessionObject *self, PyObject *arg)
{
    const char *name;
    if (envpy_session_ok(self) || envpy_str(arg, "name", &name))
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
    r = envpy_stamp_or_raise(e, &st, "closing a span");
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
    {"tune", (PyCFunction)(void (*)(void))envpy_record_tune, METH_VARARGS | METH_KEYWORDS,
     "tune(namespace, key, candidates, *, trials=None, policy=None, params=None,\n"
     "winner=-1, margin=0.0, within_noise=False, winner_ns=0.0, short_circuit=False,\n"
     "wall_ns=0, stored=None) -> dict: records a tune; its stamp."},
    {"compile", (PyCFunction)(void (*)(void))envpy_record_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(namespace, name, *, kernel_key=None, ...) -> dict: records a compile."},
    {"mark", (PyCFunction)envpy_record_mark, METH_O, "mark(label) -> dict: records a mark."},
    {"user", (PyCFunction)(void (*)(void))envpy_record_user, METH_VARARGS | METH_KEYWORDS,
     "user(kind, body, *, changed=False) -> dict: records one CBOR item as a user record."},
    {"forget", (PyCFunction)(void (*)(void))envpy_record_forget, METH_VARARGS | METH_KEYWORDS,
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
