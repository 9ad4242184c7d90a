/* SPDX-License-Identifier: MIT */
/*
 * convert.c - between Python values and the library's: errors as
 * exceptions, arguments checked and copied into a per-call arena, and the
 * dicts the module hands back.
 *
 * Every converter names the argument it was given, so a wrong type or value
 * reads "ns: expected str, got int" rather than a bare TypeError.
 */
#include "envlog_py.h"

#include <string.h>

/* ------------------------------------------------------------------ errors */

static PyObject *errors_by_code; /* envlog._errors.BY_CODE: {code: class} */
static PyObject *error_base;     /* envlog._errors.Error */

int envpy_errors_init(void)
{
    PyObject *m = PyImport_ImportModule("envlog._errors");
    if (!m)
        return -1;
    errors_by_code = PyObject_GetAttrString(m, "BY_CODE");
    error_base = PyObject_GetAttrString(m, "Error");
    Py_DECREF(m);
    if (!errors_by_code || !error_base || !PyDict_Check(errors_by_code)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ImportError, "envlog._errors.BY_CODE is not a dict");
        return -1;
    }
    return 0;
}

PyObject *envpy_raise(envlog_err e, const char *what)
{
    const char *detail = envlog_errmsg();
    PyObject *code = PyLong_FromLong((long)e);
    if (!code)
        return NULL;
    PyObject *cls = PyDict_GetItemWithError(errors_by_code, code);
    if (!cls && PyErr_Occurred()) {
        Py_DECREF(code);
        return NULL;
    }
    if (!cls)
        cls = error_base;
    PyObject *exc = PyObject_CallFunction(cls, "sOss", what, code, envlog_strerror(e),
                                          detail ? detail : "");
    Py_DECREF(code);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* ------------------------------------------------------------------- arena */

void *envpy_alloc(envpy_arena *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 8;
        void **p = PyMem_Realloc(a->blocks, cap * sizeof *p);
        if (!p) {
            PyErr_NoMemory();
            return NULL;
        }
        a->blocks = p;
        a->cap = cap;
    }
    void *b = PyMem_Calloc(1, size ? size : 1);
    if (!b) {
        PyErr_NoMemory();
        return NULL;
    }
    a->blocks[a->n++] = b;
    return b;
}

int envpy_keep(envpy_arena *a, PyObject *o)
{
    if (!o)
        return -1;
    if (a->nrefs == a->caprefs) {
        size_t cap = a->caprefs ? 2 * a->caprefs : 8;
        PyObject **p = PyMem_Realloc(a->refs, cap * sizeof *p);
        if (!p) {
            Py_DECREF(o);
            PyErr_NoMemory();
            return -1;
        }
        a->refs = p;
        a->caprefs = cap;
    }
    a->refs[a->nrefs++] = o;
    return 0;
}

void envpy_arena_free(envpy_arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        PyMem_Free(a->blocks[i]);
    for (size_t i = 0; i < a->nrefs; i++)
        Py_DECREF(a->refs[i]);
    PyMem_Free(a->blocks);
    PyMem_Free(a->refs);
    memset(a, 0, sizeof *a);
}

/* -------------------------------------------------------------- converters */

static int type_error(const char *what, const char *want, PyObject *o)
{
    PyErr_Format(PyExc_TypeError, "%s: expected %s, got %s", what, want,
                 Py_TYPE(o)->tp_name);
    return -1;
}

int envpy_str(PyObject *o, const char *what, const char **out)
{
    if (!o || !PyUnicode_Check(o))
        return o ? type_error(what, "str", o)
                 : (PyErr_Format(PyExc_TypeError, "%s is required", what), -1);
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: not encodable as UTF-8", what);
        return -1;
    }
    if ((size_t)n != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "%s: holds a NUL character", what);
        return -1;
    }
    *out = s;
    return 0;
}

int envpy_opt_str(PyObject *o, const char *what, const char **out)
{
    if (!o || o == Py_None) {
        *out = NULL;
        return 0;
    }
    return envpy_str(o, what, out);
}

int envpy_u64(PyObject *o, const char *what, uint64_t *out)
{
    if (!PyLong_Check(o) || PyBool_Check(o))
        return type_error(what, "int", o);
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: %R is outside 0 to 2**64-1", what, o);
        return -1;
    }
    *out = v;
    return 0;
}

int envpy_i64(PyObject *o, const char *what, int64_t *out)
{
    if (!PyLong_Check(o) || PyBool_Check(o))
        return type_error(what, "int", o);
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: %R is outside the 64-bit range", what, o);
        return -1;
    }
    *out = v;
    return 0;
}

int envpy_double(PyObject *o, const char *what, double *out)
{
    if (!(PyFloat_Check(o) || PyLong_Check(o)) || PyBool_Check(o))
        return type_error(what, "a number", o);
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: %R does not fit a double", what, o);
        return -1;
    }
    *out = v;
    return 0;
}

int envpy_bool(PyObject *o, const char *what, bool *out)
{
    if (!PyBool_Check(o))
        return type_error(what, "bool", o);
    *out = o == Py_True;
    return 0;
}

int envpy_bytes(PyObject *o, const char *what, envlog_bytes *out, envpy_arena *a)
{
    if (!o || o == Py_None) {
        out->data = NULL;
        out->size = 0;
        return 0;
    }
    if (!PyObject_CheckBuffer(o) || PyUnicode_Check(o))
        return type_error(what, "bytes or a buffer", o);
    /* A copy as bytes: it stays put while the library reads it. */
    PyObject *b = PyBytes_FromObject(o);
    if (!b || envpy_keep(a, b))
        return -1;
    out->data = PyBytes_AS_STRING(b);
    out->size = (size_t)PyBytes_GET_SIZE(b);
    return 0;
}

int envpy_seq(PyObject *o, const char *what, const char *want, size_t size,
              int (*convert)(PyObject *item, const char *what, void *out, void *ctx),
              void *ctx, void **out, size_t *n, envpy_arena *a)
{
    *out = NULL;
    *n = 0;
    if (!o || o == Py_None)
        return 0;
    PyObject *seq = PyUnicode_Check(o) || PyBytes_Check(o) ? NULL : PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Clear();
        return type_error(what, want, o);
    }
    if (envpy_keep(a, seq))
        return -1;
    size_t len = (size_t)PySequence_Fast_GET_SIZE(seq);
    char *v = envpy_alloc(a, len * size);
    if (!v)
        return -1;
    char item[96];
    for (size_t i = 0; i < len; i++) {
        snprintf(item, sizeof item, "%s[%zu]", what, i);
        if (convert(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), item, v + i * size, ctx))
            return -1;
    }
    *out = v;
    *n = len;
    return 0;
}

static int str_item(PyObject *item, const char *what, void *out, void *ctx)
{
    (void)ctx;
    return envpy_str(item, what, out);
}

int envpy_strs(PyObject *o, const char *what, const char *const **out, size_t *n,
               envpy_arena *a)
{
    void *v;
    int rc = envpy_seq(o, what, "a sequence of str", sizeof(const char *), str_item, NULL,
                       &v, n, a);
    *out = v;
    return rc;
}

int envpy_id(PyObject *o, const char *what, envlog_id128 *out)
{
    if (PyBytes_Check(o)) {
        if (PyBytes_GET_SIZE(o) != 16) {
            PyErr_Format(PyExc_ValueError, "%s: expected 16 bytes, got %zd", what,
                         PyBytes_GET_SIZE(o));
            return -1;
        }
        memcpy(out->b, PyBytes_AS_STRING(o), 16);
        return 0;
    }
    const char *s;
    if (!PyUnicode_Check(o))
        return type_error(what, "32 hex digits (str) or 16 bytes", o);
    if (envpy_str(o, what, &s))
        return -1;
    if (envlog_id_parse(s, out) != ENVLOG_OK) {
        PyErr_Format(PyExc_ValueError, "%s: %R is not 32 hex digits", what, o);
        return -1;
    }
    return 0;
}

int envpy_checksum(PyObject *o, const char *what, uint64_t *out, envpy_arena *a)
{
    if (PyLong_Check(o) && !PyBool_Check(o))
        return envpy_u64(o, what, out);
    const char *const *names;
    size_t n;
    if (PyUnicode_Check(o) || PyBool_Check(o) || !PySequence_Check(o))
        return type_error(what, "an int or a sequence of candidate names", o);
    if (envpy_strs(o, what, &names, &n, a))
        return -1;
    *out = envlog_tune_checksum(names, n);
    return 0;
}

int envpy_path(PyObject *o, const char *what, PyObject **out)
{
    if (!PyUnicode_Check(o) && !PyBytes_Check(o) && !PyObject_HasAttrString(o, "__fspath__")) {
        type_error(what, "a path (str or os.PathLike)", o);
        return 0;
    }
    if (!PyUnicode_FSConverter(o, out))
        return 0;
    if (strlen(PyBytes_AS_STRING(*out)) != (size_t)PyBytes_GET_SIZE(*out)) {
        Py_CLEAR(*out);
        PyErr_Format(PyExc_ValueError, "%s: holds a NUL character", what);
        return 0;
    }
    return 1;
}

int envpy_bundle_arg(PyObject *o, PyObject **fs, envlog_bytes *data, envpy_arena *a)
{
    *fs = NULL;
    if (PyObject_CheckBuffer(o) && !PyUnicode_Check(o)) {
        if (envpy_bytes(o, "bundle", data, a))
            return -1;
        if (!data->data)
            data->data = "";
        return 0;
    }
    return envpy_path(o, "bundle", fs) ? 0 : -1;
}

PyObject *envpy_get(PyObject *d, const char *key)
{
    PyObject *v = PyDict_GetItemString(d, key);
    return v;
}

int envpy_stamp_in(PyObject *o, const char *what, envlog_stamp *out)
{
    memset(out, 0, sizeof *out);
    if (!PyDict_Check(o))
        return type_error(what, "a stamp dict {session, seq, offset_ns}", o);
    PyObject *sess = envpy_get(o, "session"), *seq = envpy_get(o, "seq"),
             *off = envpy_get(o, "offset_ns");
    char item[96];
    if (!sess || !seq) {
        PyErr_Format(PyExc_ValueError, "%s: a stamp needs session and seq", what);
        return -1;
    }
    snprintf(item, sizeof item, "%s['session']", what);
    if (envpy_id(sess, item, &out->session))
        return -1;
    snprintf(item, sizeof item, "%s['seq']", what);
    if (envpy_u64(seq, item, &out->seq))
        return -1;
    snprintf(item, sizeof item, "%s['offset_ns']", what);
    return off ? envpy_u64(off, item, &out->offset_ns) : 0;
}

/* ---------------------------------------------------------------- builders */

int envpy_choice(const char *s, const char *what, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    char list[256];
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s'%s'",
                                !i ? "" : i == n - 1 ? " or " : ", ", names[i]);
    PyErr_Format(PyExc_ValueError, "%s: %s, not '%s'", what, list, s);
    return -1;
}

PyObject *envpy_hex(const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char buf[64];
    if (n > sizeof buf / 2)
        n = sizeof buf / 2;
    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = digits[b[i] >> 4];
        buf[2 * i + 1] = digits[b[i] & 15];
    }
    return PyUnicode_FromStringAndSize(buf, (Py_ssize_t)(2 * n));
}

PyObject *envpy_stamp(const envlog_stamp *st)
{
    PyObject *sid = envpy_hex(st->session.b, 16);
    if (!sid)
        return NULL;
    PyObject *d = Py_BuildValue("{sN,sK,sK}", "session", sid, "seq",
                                (unsigned long long)st->seq, "offset_ns",
                                (unsigned long long)st->offset_ns);
    return d;
}

PyObject *envpy_stamp_or_raise(envlog_err e, const envlog_stamp *st, const char *what)
{
    if (e)
        return envpy_raise(e, what);
    return envpy_stamp(st);
}

PyObject *envpy_str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

PyObject *envpy_strlist(const char *const *v, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *s = envpy_str_or_none(v[i]);
        if (!s) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, s);
    }
    return l;
}

/* The record's JSON rendering, grown in a Python-managed buffer. */
typedef struct {
    char *p;
    size_t n, cap;
} jbuf;

static envlog_err jbuf_write(void *ctx, const char *text, size_t len)
{
    jbuf *b = ctx;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + len)
            cap *= 2;
        char *p = PyMem_Realloc(b->p, cap);
        if (!p)
            return ENVLOG_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, text, len);
    b->n += len;
    return ENVLOG_OK;
}

PyObject *envpy_record(const envlog_record *rec)
{
    jbuf b = {0};
    envlog_err e = envlog_record_json(rec, jbuf_write, &b);
    if (e) {
        PyMem_Free(b.p);
        return envpy_raise(e, "rendering a record");
    }
    PyObject *t = Py_BuildValue("(s#y#i)", b.p ? b.p : "", (Py_ssize_t)b.n,
                                (const char *)rec->payload.data,
                                (Py_ssize_t)rec->payload.size, (int)rec->kind);
    PyMem_Free(b.p);
    return t;
}

static const char *const damage_files[] = {"segment", "snapshot", "previous", "stray"};

PyObject *envpy_damage(const envlog_damage *d, bool torn)
{
    PyObject *sid = envpy_hex(d->session.b, 16);
    if (!sid)
        return NULL;
    return Py_BuildValue("{sN,sI,sK,sK,ss,ss,sO}", "session", sid, "segment",
                         (unsigned)d->segment, "offset", (unsigned long long)d->offset,
                         "bytes", (unsigned long long)d->bytes, "reason", d->reason,
                         "file", (unsigned)d->file < 4 ? damage_files[d->file] : "unknown",
                         "torn", torn ? Py_True : Py_False);
}

static const char *origin_name(envlog_origin o)
{
    return o == ENVLOG_IMPORTED ? "imported" : "local";
}

PyObject *envpy_tune_entry(const envlog_tune_entry *t)
{
    PyObject *cands = envpy_strlist(t->candidates, t->n_candidates);
    PyObject *stamp = cands ? envpy_stamp(&t->stamp) : NULL;
    if (!stamp) {
        Py_XDECREF(cands);
        return NULL;
    }
    return Py_BuildValue("{ss,sN,sN,sK,sN,sL,sN,sd,sO,sd,ss,ss,sN}", "table", "tune",
                         "namespace", envpy_str_or_none(t->ns), "key",
                         envpy_str_or_none(t->key), "checksum",
                         (unsigned long long)t->checksum, "winner",
                         envpy_str_or_none(t->winner), "winner_index",
                         (long long)t->winner_index, "candidates", cands, "margin",
                         t->margin, "within_noise", t->within_noise ? Py_True : Py_False,
                         "winner_cost_ns", t->winner_cost_ns, "origin",
                         origin_name(t->origin), "rule", envlog_rule_name(t->rule),
                         "stamp", stamp);
}

PyObject *envpy_kernel_entry(const envlog_kernel_entry *k)
{
    PyObject *stamp = envpy_stamp(&k->stamp);
    if (!stamp)
        return NULL;
    return Py_BuildValue("{ss,sN,sN,sN,sN,sN,sN,sN,sN,sy#,ss,ss,sN}", "table", "kernel",
                         "namespace", envpy_str_or_none(k->ns), "name",
                         envpy_str_or_none(k->name), "kernel_key",
                         envpy_hex(k->kernel_key.b, 16), "source_hash",
                         envpy_hex(k->source_hash.b, 16), "options",
                         envpy_str_or_none(k->options), "compiler_version",
                         envpy_str_or_none(k->compiler_version), "arch",
                         envpy_str_or_none(k->arch), "binary_hash",
                         envpy_hex(k->binary_hash.b, 16), "binary",
                         (const char *)k->binary.data, (Py_ssize_t)k->binary.size,
                         "origin", origin_name(k->origin), "rule",
                         envlog_rule_name(k->rule), "stamp", stamp);
}

PyObject *envpy_bundle_info(const envlog_bundle_info *in)
{
    PyObject *ns = PyDict_New();
    for (size_t i = 0; ns && i < in->n_namespaces; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(in->namespace_entries[i]);
        if (!v || PyDict_SetItemString(ns, in->namespaces[i], v)) {
            Py_XDECREF(v);
            Py_CLEAR(ns);
            break;
        }
        Py_DECREF(v);
    }
    if (!ns)
        return NULL;
    PyObject *src = PyList_New((Py_ssize_t)in->n_sources);
    for (size_t i = 0; src && i < in->n_sources; i++) {
        PyObject *v = Py_BuildValue("{sN,sK,sK}", "path",
                                    envpy_str_or_none(in->sources[i].path), "sessions",
                                    (unsigned long long)in->sources[i].sessions, "records",
                                    (unsigned long long)in->sources[i].records);
        if (!v)
            Py_CLEAR(src);
        else
            PyList_SET_ITEM(src, (Py_ssize_t)i, v);
    }
    if (!src) {
        Py_DECREF(ns);
        return NULL;
    }
    return Py_BuildValue(
        "{sK,sN,sN,sK,sN,sN,sN,sN,sK,sK,sK,sK,sK,sN,sO,sK,sK,sK}", "schema",
        (unsigned long long)in->schema, "name", envpy_str_or_none(in->name),
        "envlog_version", envpy_str_or_none(in->envlog_version), "created_unix_ns",
        (unsigned long long)in->created_unix_ns, "runtimes",
        envpy_strlist((const char *const *)in->runtimes, in->n_runtimes), "environments",
        envpy_strlist((const char *const *)in->environments, in->n_environments),
        "sources", src, "namespaces", ns, "sessions", (unsigned long long)in->sessions, "tunes",
        (unsigned long long)in->tunes, "kernels", (unsigned long long)in->kernels, "users",
        (unsigned long long)in->users, "evidence", (unsigned long long)in->evidence,
        "content_hash", envpy_hex(in->content_hash.b, 16), "content_ok",
        in->content_ok ? Py_True : Py_False, "compressed_size",
        (unsigned long long)in->compressed_size, "size", (unsigned long long)in->size,
        "bad_records", (unsigned long long)in->bad_records);
}
