/* SPDX-License-Identifier: MIT */
/*
 * py_state.c - envlog._envlog.State: lookups of a folded state (winners,
 * kernels, what is near a miss), its entries in canonical order, its
 * statistics and its canonical dump.
 */
#include "envlog_py.h"

#include <string.h>

static int state_ok(StateObject *self)
{
    if (!self->st) {
        PyErr_SetString(PyExc_ValueError, "the state is closed");
        return -1;
    }
    /* The live state belongs to its environment. */
    if (!self->owned && envpy_env_ok(self->env))
        return -1;
    return 0;
}

static void state_dealloc(StateObject *self)
{
    if (self->owned)
        envlog_state_close(self->st);
    Py_XDECREF(self->env);
    Py_XDECREF(self->damage);
    PyObject_Free(self);
}

static PyObject *state_close(StateObject *self, PyObject *noargs)
{
    (void)noargs;
    if (self->owned)
        envlog_state_close(self->st);
    self->st = NULL;
    Py_RETURN_NONE;
}

static PyObject *state_winner(StateObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"namespace", "key", "checksum", NULL};
    PyObject *ns, *key, *ck;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:winner", kwl, &ns, &key, &ck))
        return NULL;
    envpy_arena a = {0};
    const char *n, *k;
    uint64_t c;
    PyObject *r = NULL;
    if (!state_ok(self) && !envpy_str(ns, "namespace", &n) && !envpy_str(key, "key", &k) &&
        !envpy_checksum(ck, "checksum", &c, &a)) {
        envlog_tune_entry t;
        envlog_err e = envlog_state_winner(self->st, n, k, c, &t);
        if (e == ENVLOG_NOT_FOUND)
            r = (Py_INCREF(Py_None), Py_None);
        else if (e)
            envpy_raise(e, "looking up a winner");
        else
            r = envpy_tune_entry(&t);
    }
    envpy_arena_free(&a);
    return r;
}

static PyObject *state_kernel(StateObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"namespace", "kernel_key", NULL};
    PyObject *ns, *key;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:kernel", kwl, &ns, &key))
        return NULL;
    const char *n;
    envlog_hash128 k;
    if (state_ok(self) || envpy_str(ns, "namespace", &n) || envpy_id(key, "kernel_key", &k))
        return NULL;
    envlog_kernel_entry ke;
    envlog_err e = envlog_state_kernel(self->st, n, &k, &ke);
    if (e == ENVLOG_NOT_FOUND)
        Py_RETURN_NONE;
    if (e)
        return envpy_raise(e, "looking up a kernel");
    return envpy_kernel_entry(&ke);
}

static PyObject *state_explain(StateObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"table", "namespace", "key", "checksum", "candidates", NULL};
    const char *table;
    PyObject *ns, *key, *ck = NULL, *cands = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO|OO:explain", kwl, &table, &ns, &key, &ck,
                                     &cands))
        return NULL;
    envpy_arena a = {0};
    const char *n, *k;
    uint64_t c = 0;
    const char *const *cv;
    size_t nc;
    PyObject *r = NULL;
    envlog_table t = !strcmp(table, "tune") ? ENVLOG_TABLE_TUNE : ENVLOG_TABLE_KERNEL;
    if (strcmp(table, "tune") && strcmp(table, "kernel")) {
        PyErr_Format(PyExc_ValueError, "table: 'tune' or 'kernel', not '%s'", table);
        return NULL;
    }
    if (state_ok(self) || envpy_str(ns, "namespace", &n) || envpy_str(key, "key", &k) ||
        (ck && ck != Py_None && envpy_checksum(ck, "checksum", &c, &a)) ||
        envpy_strs(cands, "candidates", &cv, &nc, &a))
        goto out;
    envlog_near *nv;
    size_t nn;
    envlog_err e = envlog_state_explain(self->st, t, n, k, c, cv, nc, &nv, &nn);
    if (e) {
        envpy_raise(e, "explaining a miss");
        goto out;
    }
    r = PyList_New((Py_ssize_t)nn);
    for (size_t i = 0; r && i < nn; i++) {
        PyObject *st = envpy_stamp(&nv[i].stamp);
        PyObject *d = st ? Py_BuildValue(
                               "{ss,sN,sN,sK,ss,sN,ss}", "table",
                               nv[i].table == ENVLOG_TABLE_TUNE ? "tune" : "kernel",
                               "namespace", envpy_str_or_none(nv[i].ns), "key",
                               envpy_str_or_none(nv[i].key), "checksum",
                               (unsigned long long)nv[i].checksum, "origin",
                               nv[i].origin == ENVLOG_IMPORTED ? "imported" : "local",
                               "stamp", st, "differs", nv[i].differs)
                         : NULL;
        if (!d) {
            Py_CLEAR(r);
            break;
        }
        PyList_SET_ITEM(r, (Py_ssize_t)i, d);
    }
    envlog_near_free(nv);
out:
    envpy_arena_free(&a);
    return r;
}

/* A callback's code when a Python exception is set (the caller raises it). */
#define PY_RAISED ENVLOG_INVALID_ARG

static envlog_err each_entry(void *ctx, const envlog_entry *e)
{
    PyObject *d = e->table == ENVLOG_TABLE_TUNE ? envpy_tune_entry(e->tune)
                                                : envpy_kernel_entry(e->kernel);
    int bad = !d || PyList_Append(ctx, d);
    Py_XDECREF(d);
    return bad ? PY_RAISED : ENVLOG_OK;
}

static PyObject *state_entries(StateObject *self, PyObject *noargs)
{
    (void)noargs;
    if (state_ok(self))
        return NULL;
    PyObject *l = PyList_New(0);
    if (!l)
        return NULL;
    envlog_err e = envlog_state_each(self->st, each_entry, l);
    if (e) {
        Py_DECREF(l);
        return PyErr_Occurred() ? NULL : envpy_raise(e, "listing entries");
    }
    return l;
}

static PyObject *state_stats(StateObject *self, PyObject *noargs)
{
    (void)noargs;
    if (state_ok(self))
        return NULL;
    envlog_state_stats s;
    envlog_state_stats_get(self->st, &s);
    return Py_BuildValue("{sK,sK,sK,sK,sK,sK,sK,sK,sK,sK,si,sK,sK}", "tunes",
                         (unsigned long long)s.tunes, "kernels", (unsigned long long)s.kernels,
                         "user_records", (unsigned long long)s.user_records, "records",
                         (unsigned long long)s.records, "sessions",
                         (unsigned long long)s.sessions, "damaged",
                         (unsigned long long)s.damaged, "last_change_unix_ns",
                         (unsigned long long)s.last_change_unix_ns, "snapshot_bytes",
                         (unsigned long long)s.snapshot_bytes, "snapshot_entries",
                         (unsigned long long)s.snapshot_entries, "snapshot_sessions",
                         (unsigned long long)s.snapshot_sessions, "snapshot_generation",
                         s.snapshot_generation, "snapshot_damaged",
                         (unsigned long long)s.snapshot_damaged, "snapshot_lost",
                         (unsigned long long)s.snapshot_lost);
}

static envlog_err dump_write(void *ctx, const char *text, size_t len)
{
    PyObject *s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
    int bad = !s || PyList_Append(ctx, s);
    Py_XDECREF(s);
    return bad ? PY_RAISED : ENVLOG_OK;
}

static PyObject *state_dump(StateObject *self, PyObject *noargs)
{
    (void)noargs;
    if (state_ok(self))
        return NULL;
    PyObject *parts = PyList_New(0);
    if (!parts)
        return NULL;
    envlog_err e = envlog_state_dump(self->st, dump_write, parts);
    PyObject *r = NULL;
    if (e)
        PyErr_Occurred() ? (void)0 : (void)envpy_raise(e, "dumping the state");
    else {
        PyObject *empty = PyUnicode_FromString("");
        r = empty ? PyUnicode_Join(empty, parts) : NULL;
        Py_XDECREF(empty);
    }
    Py_DECREF(parts);
    return r;
}

static PyObject *state_damage(StateObject *self, void *closure)
{
    (void)closure;
    Py_INCREF(self->damage);
    return self->damage;
}

static PyObject *state_live(StateObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(!self->owned);
}

static PyMethodDef state_methods[] = {
    {"winner", (PyCFunction)(void (*)(void))state_winner, METH_VARARGS | METH_KEYWORDS,
     "winner(namespace, key, checksum) -> dict | None: the standing winner; checksum\n"
     "is the tune-set checksum or the candidate names."},
    {"kernel", (PyCFunction)(void (*)(void))state_kernel, METH_VARARGS | METH_KEYWORDS,
     "kernel(namespace, kernel_key) -> dict | None: the standing binary."},
    {"explain", (PyCFunction)(void (*)(void))state_explain, METH_VARARGS | METH_KEYWORDS,
     "explain(table, namespace, key, checksum=None, candidates=None) -> list[dict]:\n"
     "the entries near a missed lookup and what differs."},
    {"entries", (PyCFunction)state_entries, METH_NOARGS,
     "entries() -> list[dict]: every standing entry in canonical order."},
    {"stats", (PyCFunction)state_stats, METH_NOARGS, "stats() -> dict: counts."},
    {"dump", (PyCFunction)state_dump, METH_NOARGS,
     "dump() -> str: the canonical dump, one JSON object per line."},
    {"close", (PyCFunction)state_close, METH_NOARGS,
     "close(): frees a replayed state (the live one stays with its environment)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef state_getset[] = {
    {"damage", (getter)state_damage, NULL, "The damage met folding it, as dicts.", NULL},
    {"live", (getter)state_live, NULL, "Whether it is the environment's live state.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject State_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "envlog._envlog.State",
    .tp_basicsize = sizeof(StateObject),
    .tp_dealloc = (destructor)state_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A folded state: a winner per tune key, a binary per kernel.",
    .tp_methods = state_methods,
    .tp_getset = state_getset,
};
