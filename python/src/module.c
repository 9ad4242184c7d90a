/* SPDX-License-Identifier: MIT */
/*
 * module.c - the module envlog._envlog: its types and the functions that
 * need no handle (versions, hashes, checksums, the default environment,
 * bundle inspection, the tuner's default policy).
 */
#include "envlog_py.h"

#include <envlog_remote.h>
#include <string.h>

static PyObject *m_version(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return Py_BuildValue("(sI)", envlog_version_string(), envlog_version());
}

static PyObject *m_default_path(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    char buf[4096];
    envlog_err e = envlog_env_default_path(buf, sizeof buf);
    if (e)
        return envpy_raise(e, "the default environment");
    return PyUnicode_DecodeFSDefault(buf);
}

static PyObject *m_tune_checksum(PyObject *self, PyObject *arg)
{
    (void)self;
    envpy_arena a = {0};
    const char *const *names;
    size_t n;
    if (envpy_strs(arg, "candidates", &names, &n, &a)) {
        envpy_arena_free(&a);
        return NULL;
    }
    uint64_t c = envlog_tune_checksum(names, n);
    envpy_arena_free(&a);
    return PyLong_FromUnsignedLongLong(c);
}

static PyObject *m_hash128(PyObject *self, PyObject *arg)
{
    (void)self;
    envpy_arena a = {0};
    envlog_bytes b;
    if (arg == Py_None) {
        PyErr_SetString(PyExc_TypeError, "data: expected bytes or a buffer, got None");
        return NULL;
    }
    if (envpy_bytes(arg, "data", &b, &a)) {
        envpy_arena_free(&a);
        return NULL;
    }
    envlog_hash128 h = envlog_hash128_bytes(b.data ? b.data : "", b.size);
    envpy_arena_free(&a);
    return envpy_hex(h.b, 16);
}

static PyObject *m_kernel_key(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwl[] = {"source", "options", "compiler_version", "arch", NULL};
    PyObject *src, *opt = Py_None, *cv, *arch;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO:kernel_key", kwl, &src, &opt, &cv,
                                     &arch))
        return NULL;
    envlog_cuda_kernel_desc d = {0};
    const char *version;
    if (envpy_str(src, "source", &d.source) || envpy_opt_str(opt, "options", &d.options) ||
        envpy_str(cv, "compiler_version", &version) || envpy_str(arch, "arch", &d.arch))
        return NULL;
    d.name = "kernel";
    envlog_hash128 key;
    envlog_err e = envlog_cuda_kernel_key(&d, version, &key);
    if (e)
        return envpy_raise(e, "computing a kernel key");
    return envpy_hex(key.b, 16);
}

/* A path (str or os.PathLike) names a file; bytes-like data is the bundle. */
static PyObject *m_bundle_inspect(PyObject *self, PyObject *arg)
{
    (void)self;
    envlog_bundle_info *info = NULL;
    envpy_arena a = {0};
    PyObject *fs;
    envlog_bytes b;
    if (envpy_bundle_arg(arg, &fs, &b, &a)) {
        envpy_arena_free(&a);
        return NULL;
    }
    envlog_err e = fs ? envlog_bundle_inspect(PyBytes_AS_STRING(fs), &info)
                      : envlog_bundle_inspect_memory(b.data, b.size, &info);
    Py_XDECREF(fs);
    envpy_arena_free(&a);
    if (e)
        return envpy_raise(e, "inspecting a bundle");
    PyObject *r = envpy_bundle_info(info);
    envlog_bundle_info_free(info);
    return r;
}

static PyObject *m_policy_defaults(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    envlog_cuda_policy p;
    envlog_cuda_policy_init(&p);
    return Py_BuildValue("{sI,sI,sI,sd,sd,sd}", "warmup", p.warmup, "min_samples",
                         p.min_samples, "max_samples", p.max_samples, "drop_factor",
                         p.drop_factor, "rel_tol", p.rel_tol, "noise_z", p.noise_z);
}

static PyObject *m_cpu_fingerprint(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    char buf[256];
    envlog_err e = envlog_cuda_cpu_fingerprint(buf, sizeof buf);
    if (e)
        return envpy_raise(e, "the CPU fingerprint");
    return PyUnicode_FromString(buf);
}

static PyObject *m_strerror(PyObject *self, PyObject *arg)
{
    (void)self;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(envlog_strerror((envlog_err)c));
}

static PyMethodDef methods[] = {
    {"version", m_version, METH_NOARGS,
     "version() -> (str, int): the library's version string and number."},
    {"default_path", m_default_path, METH_NOARGS,
     "default_path() -> str: the environment envlog.open() opens without a path."},
    {"tune_checksum", m_tune_checksum, METH_O,
     "tune_checksum(candidates) -> int: the tune-set checksum of candidate names."},
    {"hash128", m_hash128, METH_O,
     "hash128(data) -> str: XXH3-128 of data as 32 hex digits."},
    {"kernel_key", (PyCFunction)(void (*)(void))m_kernel_key, METH_VARARGS | METH_KEYWORDS,
     "kernel_key(source, options, compiler_version, arch) -> str: the kernel key."},
    {"bundle_inspect", m_bundle_inspect, METH_O,
     "bundle_inspect(path_or_bytes) -> dict: a bundle's manifest and check."},
    {"policy_defaults", m_policy_defaults, METH_NOARGS,
     "policy_defaults() -> dict: the tuner's default adaptive-median parameters."},
    {"cpu_fingerprint", m_cpu_fingerprint, METH_NOARGS,
     "cpu_fingerprint() -> str: this machine's CPU fingerprint."},
    {"strerror", m_strerror, METH_O, "strerror(code) -> str: the name of an error code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "envlog._envlog",
    "The C layer of envlog over include/envlog.h; use the envlog package.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__envlog(void);
PyMODINIT_FUNC PyInit__envlog(void)
{
    PyTypeObject *types[] = {&Env_Type, &State_Type, &Session_Type, &Span_Type,
                             &Reader_Type};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    if (envpy_errors_init())
        return NULL;
    /* The library is linked in statically: automatic sharing (the config's
     * auto_pull and auto_push, Env(pull=True), a session's auto_push, and
     * compaction keeping what a remote still lacks) is there only when
     * asked for, as envlog_remote.h says. */
    envlog_remote_enable_auto();
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    const char *names[] = {"Env", "State", "Session", "Span", "Reader"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
