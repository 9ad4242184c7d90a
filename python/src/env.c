/* SPDX-License-Identifier: MIT */
/*
 * env.c - envlog._envlog.Env and Reader: an open environment, its sessions
 * read back record by record, replay in the total order, bundles and
 * compaction.
 *
 * Records leave the module as (json, payload, kind): the library's own
 * rendering (envlog_record_json, the field names of envlog(5)) and the CBOR
 * as stored, from which the package takes what JSON cannot carry (byte
 * strings, a user body's own types).
 */
#include "envlog_py.h"

#include <string.h>

int envpy_env_ok(EnvObject *e)
{
    if (!e || !e->env) {
        PyErr_SetString(PyExc_ValueError, "the environment is closed");
        return -1;
    }
    return 0;
}

static int env_init(EnvObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"path", "create", "readonly", "upkeep", "pull", NULL};
    PyObject *path = Py_None, *fs = NULL;
    int create = 1, readonly = 0, upkeep = 1, pull = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$pppp:Env", kwl, &path, &create,
                                     &readonly, &upkeep, &pull))
        return -1;
    if (self->env) {
        PyErr_SetString(PyExc_ValueError, "Env is already open");
        return -1;
    }
    if (path != Py_None && !envpy_path(path, "path", &fs))
        return -1;
    unsigned flags = (create && !readonly ? ENVLOG_OPEN_CREATE : 0) |
                     (readonly ? ENVLOG_OPEN_READONLY : 0) |
                     (upkeep ? 0 : ENVLOG_OPEN_NO_UPKEEP) | (pull ? ENVLOG_OPEN_PULL : 0);
    envlog_env *env = NULL;
    envlog_err e = envlog_env_open(fs ? PyBytes_AS_STRING(fs) : NULL, flags, &env);
    Py_XDECREF(fs);
    if (e) {
        envpy_raise(e, "opening the environment");
        return -1;
    }
    self->env = env;
    Py_XSETREF(self->path, PyUnicode_DecodeFSDefault(envlog_env_path(env)));
    if (!self->sessions)
        self->sessions = PyList_New(0);
    return self->path && self->sessions ? 0 : -1;
}

/* Ends the sessions still open on this environment (a session must end
 * before its environment closes). */
static int end_sessions(EnvObject *self)
{
    if (!self->sessions)
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(self->sessions);
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        PyObject *s = PyWeakref_GetObject(PyList_GET_ITEM(self->sessions, i));
        if (s != Py_None) {
            Py_INCREF(s);
            PyObject *r = PyObject_CallMethod(s, "end", NULL);
            Py_DECREF(s);
            if (!r)
                PyErr_WriteUnraisable(s);
            Py_XDECREF(r);
        }
    }
    return PyList_SetSlice(self->sessions, 0, n, NULL);
}

static PyObject *env_close(EnvObject *self, PyObject *noargs)
{
    (void)noargs;
    if (self->env) {
        end_sessions(self);
        envlog_env_close(self->env);
        self->env = NULL;
    }
    Py_RETURN_NONE;
}

static void env_dealloc(EnvObject *self)
{
    if (self->env) {
        end_sessions(self);
        envlog_env_close(self->env);
    }
    Py_XDECREF(self->path);
    Py_XDECREF(self->sessions);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *env_closed(EnvObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->env == NULL);
}

static PyObject *env_path(EnvObject *self, void *closure)
{
    (void)closure;
    if (!self->path)
        Py_RETURN_NONE;
    Py_INCREF(self->path);
    return self->path;
}

static const char *const state_names[] = {"sealed", "live", "unsealed", "torn", "damaged"};

static const char *session_state_name(envlog_session_state st)
{
    return (unsigned)st < 5 ? state_names[st] : "unknown";
}

static PyObject *env_sessions(EnvObject *self, PyObject *noargs)
{
    (void)noargs;
    if (envpy_env_ok(self))
        return NULL;
    envlog_session_info *in;
    size_t n;
    envlog_err e = envlog_sessions_list(self->env, &in, &n);
    if (e)
        return envpy_raise(e, "listing sessions");
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *d = Py_BuildValue(
            "{ss,sK,sN,sN,sN,sK,sK,sK,sK,sK,ss,sK}", "id", in[i].id_hex, "start_unix_ns",
            (unsigned long long)in[i].start_unix_ns, "label", envpy_str_or_none(in[i].label),
            "host", envpy_str_or_none(in[i].host), "runtime",
            envpy_str_or_none(in[i].runtime), "records", (unsigned long long)in[i].records,
            "segments", (unsigned long long)in[i].segments, "bytes",
            (unsigned long long)in[i].bytes, "last_seq", (unsigned long long)in[i].last_seq,
            "dropped_bytes", (unsigned long long)in[i].dropped_bytes, "state",
            session_state_name(in[i].state), "strays", (unsigned long long)in[i].strays);
        if (!d) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    envlog_sessions_free(in, n);
    return l;
}

static PyObject *env_session_ids(EnvObject *self, PyObject *noargs)
{
    (void)noargs;
    if (envpy_env_ok(self))
        return NULL;
    envlog_id128 *ids;
    size_t n;
    envlog_err e = envlog_sessions_ids(self->env, &ids, &n);
    if (e)
        return envpy_raise(e, "listing sessions");
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *h = envpy_hex(ids[i].b, 16);
        if (!h) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, h);
    }
    envlog_ids_free(ids);
    return l;
}

/* ------------------------------------------------------------------ reader */

typedef struct {
    PyObject_HEAD
    envlog_reader *r;
    EnvObject *env;
    PyObject *damage; /* list of damage dicts met so far */
    int done;
} ReaderObject;

static PyObject *env_reader(EnvObject *self, PyObject *arg)
{
    envlog_id128 id;
    if (envpy_env_ok(self) || envpy_id(arg, "session", &id))
        return NULL;
    ReaderObject *ro = PyObject_New(ReaderObject, &Reader_Type);
    if (!ro)
        return NULL;
    ro->r = NULL;
    ro->done = 0;
    Py_INCREF(self);
    ro->env = self;
    ro->damage = PyList_New(0);
    if (!ro->damage) {
        Py_DECREF(ro);
        return NULL;
    }
    envlog_err e = envlog_reader_open(self->env, &id, &ro->r);
    if (e) {
        Py_DECREF(ro);
        return envpy_raise(e, "opening a session");
    }
    return (PyObject *)ro;
}

static void reader_dealloc(ReaderObject *self)
{
    envlog_reader_close(self->r);
    Py_XDECREF(self->env);
    Py_XDECREF(self->damage);
    PyObject_Free(self);
}

static PyObject *reader_next(ReaderObject *self)
{
    if (self->done || !self->r)
        return NULL;
    if (!self->env->env) {
        /* Its environment closed under it: nothing more to read. */
        PyErr_SetString(PyExc_ValueError, "the environment is closed");
        return NULL;
    }
    for (;;) {
        const envlog_record *rec;
        envlog_err e = envlog_reader_next(self->r, &rec);
        if (e == ENVLOG_OK)
            return envpy_record(rec);
        if (e == ENVLOG_END) {
            self->done = 1;
            return NULL;
        }
        if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
            PyObject *d = envpy_damage(envlog_reader_damage(self->r), e == ENVLOG_TRUNCATED);
            if (!d || PyList_Append(self->damage, d)) {
                Py_XDECREF(d);
                return NULL;
            }
            Py_DECREF(d);
            continue;
        }
        self->done = 1;
        return envpy_raise(e, "reading a session");
    }
}

static PyObject *reader_state(ReaderObject *self, void *closure)
{
    (void)closure;
    if (!self->done)
        Py_RETURN_NONE;
    return PyUnicode_FromString(session_state_name(envlog_reader_state(self->r)));
}

static PyObject *reader_damage(ReaderObject *self, void *closure)
{
    (void)closure;
    Py_INCREF(self->damage);
    return self->damage;
}

static PyGetSetDef reader_getset[] = {
    {"state", (getter)reader_state, NULL,
     "How the session ended (sealed, live, unsealed, torn, damaged), once read; else None.",
     NULL},
    {"damage", (getter)reader_damage, NULL, "The damage met so far, as dicts.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Reader_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "envlog._envlog.Reader",
    .tp_basicsize = sizeof(ReaderObject),
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The records of one session in seq order, as (json, payload, kind).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)reader_next,
    .tp_getset = reader_getset,
};

/* ------------------------------------------------------------------ replay */

int envpy_replay_opts(PyObject *until_ns, PyObject *until_session, PyObject *until_seq,
                      int check, envlog_replay_opts *o)
{
    memset(o, 0, sizeof *o);
    o->check_snapshot = check != 0;
    if (until_ns && until_ns != Py_None) {
        o->until_time = true;
        if (envpy_u64(until_ns, "until_unix_ns", &o->until_unix_ns))
            return -1;
    }
    if (until_session && until_session != Py_None) {
        o->until_stamp = true;
        if (envpy_id(until_session, "until_session", &o->until_session))
            return -1;
        if (!until_seq || until_seq == Py_None) {
            PyErr_SetString(PyExc_ValueError, "until_seq: needed with until_session");
            return -1;
        }
        if (envpy_u64(until_seq, "until_seq", &o->until_seq))
            return -1;
    } else if (until_seq && until_seq != Py_None) {
        PyErr_SetString(PyExc_ValueError, "until_session: needed with until_seq");
        return -1;
    }
    return 0;
}

typedef struct {
    PyObject *fn;
    PyObject *damage;   /* list */
    PyObject *sessions; /* {session id bytes: summary dict or None} */
    int failed;         /* on_damage raised */
} replay_ctx;

/* What on_record returns when a Python exception is set: the walk stops,
 * and replay_each raises it. */
#define PY_RAISED ENVLOG_INVALID_ARG

static void on_damage(void *ctx, const envlog_damage *d, bool torn)
{
    replay_ctx *c = ctx;
    if (c->failed)
        return;
    PyObject *v = envpy_damage(d, torn);
    if (!v || PyList_Append(c->damage, v))
        c->failed = 1;
    Py_XDECREF(v);
}

static PyObject *session_summary(const envlog_session_rec *s)
{
    if (!s)
        Py_RETURN_NONE;
    PyObject *id = envpy_hex(s->id.b, 16);
    PyObject *dev = id ? envpy_strlist(s->devices, s->n_devices) : NULL;
    if (!dev) {
        Py_XDECREF(id);
        return NULL;
    }
    return Py_BuildValue("{sN,sK,sN,sN,sN,sN,sN,sN}", "id", id, "start_unix_ns",
                         (unsigned long long)s->start_unix_ns, "host",
                         envpy_str_or_none(s->host), "label", envpy_str_or_none(s->label),
                         "runtime", envpy_str_or_none(s->runtime), "runtime_version",
                         envpy_str_or_none(s->runtime_version), "devices", dev,
                         "process_mode", envpy_str_or_none(s->process_mode));
}

static envlog_err on_record(void *ctx, const envlog_replay_rec *r)
{
    replay_ctx *c = ctx;
    if (c->failed)
        return PY_RAISED;
    PyObject *key = PyBytes_FromStringAndSize((const char *)r->rec->stamp.session.b, 16);
    if (!key)
        return PY_RAISED;
    PyObject *sum = PyDict_GetItemWithError(c->sessions, key);
    if (!sum) {
        if (PyErr_Occurred() || !(sum = session_summary(r->session)) ||
            PyDict_SetItem(c->sessions, key, sum)) {
            Py_XDECREF(sum);
            Py_DECREF(key);
            return PY_RAISED;
        }
        Py_DECREF(sum);
    }
    Py_DECREF(key);
    PyObject *rec = envpy_record(r->rec);
    if (!rec)
        return PY_RAISED;
    PyObject *res = PyObject_CallFunction(c->fn, "NKO", rec, (unsigned long long)r->unix_ns,
                                          sum);
    if (!res)
        return PY_RAISED;
    int stop = PyObject_IsTrue(res);
    Py_DECREF(res);
    return stop < 0 ? PY_RAISED : stop ? ENVLOG_STOPPED : ENVLOG_OK;
}

static PyObject *env_replay_each(EnvObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"fn",        "until_unix_ns",  "until_session",
                          "until_seq", "check_snapshot", NULL};
    PyObject *fn, *un = NULL, *us = NULL, *uq = NULL;
    int check = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOp:replay_each", kwl, &fn, &un, &us,
                                     &uq, &check))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "fn: expected a callable, got %s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    envlog_replay_opts o;
    if (envpy_env_ok(self) || envpy_replay_opts(un, us, uq, check, &o))
        return NULL;
    replay_ctx c = {fn, PyList_New(0), PyDict_New(), 0};
    if (!c.damage || !c.sessions) {
        Py_XDECREF(c.damage);
        Py_XDECREF(c.sessions);
        return NULL;
    }
    o.on_damage = on_damage;
    o.ctx = &c;
    envlog_err e = envlog_replay_each(self->env, &o, on_record, &c);
    Py_DECREF(c.sessions);
    if (c.failed || (e == PY_RAISED && PyErr_Occurred())) {
        Py_DECREF(c.damage);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "replay stopped");
        return NULL;
    }
    if (e && e != ENVLOG_STOPPED) {
        Py_DECREF(c.damage);
        return envpy_raise(e, "replaying");
    }
    return c.damage;
}

/* The environment's live state, or a state folded up to a point. */
static PyObject *make_state(EnvObject *env, envlog_state *st, int owned, PyObject *damage)
{
    StateObject *so = PyObject_New(StateObject, &State_Type);
    if (!so) {
        if (owned)
            envlog_state_close(st);
        Py_XDECREF(damage);
        return NULL;
    }
    so->st = st;
    so->owned = owned;
    Py_INCREF(env);
    so->env = env;
    so->damage = damage ? damage : PyList_New(0);
    if (!so->damage) {
        Py_DECREF(so);
        return NULL;
    }
    return (PyObject *)so;
}

static PyObject *env_state(EnvObject *self, PyObject *noargs)
{
    (void)noargs;
    envlog_state *st;
    if (envpy_env_ok(self))
        return NULL;
    envlog_err e = envlog_env_state(self->env, &st);
    if (e)
        return envpy_raise(e, "folding the environment");
    return make_state(self, st, 0, NULL);
}

static PyObject *env_replay(EnvObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"until_unix_ns", "until_session", "until_seq", "check_snapshot",
                          NULL};
    PyObject *un = NULL, *us = NULL, *uq = NULL;
    int check = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOp:replay", kwl, &un, &us, &uq, &check))
        return NULL;
    envlog_replay_opts o;
    if (envpy_env_ok(self) || envpy_replay_opts(un, us, uq, check, &o))
        return NULL;
    replay_ctx c = {NULL, PyList_New(0), NULL, 0};
    if (!c.damage)
        return NULL;
    o.on_damage = on_damage;
    o.ctx = &c;
    envlog_state *st = NULL;
    envlog_err e = envlog_state_open(self->env, &o, &st);
    if (e || c.failed) {
        envlog_state_close(st);
        Py_DECREF(c.damage);
        return c.failed ? NULL : envpy_raise(e, "replaying");
    }
    return make_state(self, st, 1, c.damage);
}

/* ----------------------------------------------------------------- bundles */

static int parse_evidence(const char *s, envlog_evidence *ev)
{
    if (!strcmp(s, "none"))
        *ev = ENVLOG_EVIDENCE_NONE;
    else if (!strcmp(s, "winners"))
        *ev = ENVLOG_EVIDENCE_WINNERS;
    else if (!strcmp(s, "all"))
        *ev = ENVLOG_EVIDENCE_ALL;
    else {
        PyErr_Format(PyExc_ValueError, "evidence: takes 'none', 'winners' or 'all', not '%s'",
                     s);
        return -1;
    }
    return 0;
}

/* `more`: None or a sequence of open Envs, for envlog_bundle_opts.more. */
static int more_envs(PyObject *more, envlog_bundle_opts *o, envpy_arena *a)
{
    if (more == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(more, "more: a sequence of Env objects");
    if (!seq || envpy_keep(a, seq))
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    envlog_env **v = n ? envpy_alloc(a, (size_t)n * sizeof *v) : NULL;
    if (n && !v)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(it, &Env_Type)) {
            PyErr_Format(PyExc_TypeError, "more[%zd]: an Env, not %.64s", i,
                         Py_TYPE(it)->tp_name);
            return -1;
        }
        if (envpy_env_ok((EnvObject *)it))
            return -1;
        v[i] = ((EnvObject *)it)->env;
    }
    o->more = v;
    o->n_more = (size_t)n;
    return 0;
}

static PyObject *env_bundle_export(EnvObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"path", "name", "prefixes", "evidence", "level", "more",
                          "anonymous", NULL};
    PyObject *path, *name, *prefixes = Py_None, *evidence = NULL, *fs = NULL, *more = Py_None;
    int level = 0, anonymous = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$OOiOp:bundle_export", kwl, &path, &name,
                                     &prefixes, &evidence, &level, &more, &anonymous))
        return NULL;
    envpy_arena a = {0};
    envlog_bundle_opts o = {0};
    o.evidence = ENVLOG_EVIDENCE_WINNERS;
    const char *ev = NULL;
    PyObject *r = NULL;
    if (envpy_env_ok(self) || envpy_str(name, "name", &o.name) ||
        envpy_strs(prefixes, "prefixes", &o.prefixes, &o.n_prefixes, &a) ||
        envpy_opt_str(evidence, "evidence", &ev) || (ev && parse_evidence(ev, &o.evidence)))
        goto out;
    if (level < 0 || level > 22) {
        PyErr_Format(PyExc_ValueError, "level: zstd levels are 1 to 22 (0: the default), not %d",
                     level);
        goto out;
    }
    o.zstd_level = level;
    o.anonymous = anonymous != 0;
    if (more_envs(more, &o, &a) || !envpy_path(path, "path", &fs))
        goto out;
    envlog_bundle_info *info = NULL;
    envlog_err e = envlog_bundle_export(self->env, &o, PyBytes_AS_STRING(fs), &info);
    if (e) {
        envpy_raise(e, "exporting a bundle");
        goto out;
    }
    r = envpy_bundle_info(info);
    envlog_bundle_info_free(info);
out:
    Py_XDECREF(fs);
    envpy_arena_free(&a);
    return r;
}

static PyObject *env_bundle_import(EnvObject *self, PyObject *arg)
{
    if (envpy_env_ok(self))
        return NULL;
    envlog_import_report r;
    envpy_arena a = {0};
    PyObject *fs;
    envlog_bytes b;
    if (envpy_bundle_arg(arg, &fs, &b, &a)) {
        envpy_arena_free(&a);
        return NULL;
    }
    envlog_err e = fs ? envlog_bundle_import(self->env, PyBytes_AS_STRING(fs), &r)
                      : envlog_bundle_import_memory(self->env, b.data, b.size, &r);
    Py_XDECREF(fs);
    envpy_arena_free(&a);
    if (e)
        return envpy_raise(e, "importing a bundle");
    PyObject *sid = r.taken ? envpy_hex(r.session.b, 16) : (Py_INCREF(Py_None), Py_None);
    if (!sid)
        return NULL;
    return Py_BuildValue("{sK,sK,sK,ss,sN,sK}", "taken", (unsigned long long)r.taken,
                         "skipped", (unsigned long long)r.skipped, "rejected",
                         (unsigned long long)r.rejected, "first_reject", r.first_reject,
                         "session", sid, "foreign", (unsigned long long)r.foreign);
}

static PyObject *env_compact(EnvObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"evidence", NULL};
    const char *ev = "winners";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$s:compact", kwl, &ev))
        return NULL;
    envlog_evidence evidence;
    if (envpy_env_ok(self) || parse_evidence(ev, &evidence))
        return NULL;
    envlog_compact_report r;
    envlog_err e = envlog_compact(self->env, evidence, &r);
    if (e)
        return envpy_raise(e, "compacting");
    return Py_BuildValue("{sK,sK,sK,sK,sK,sK,sK}", "entries", (unsigned long long)r.entries,
                         "evidence", (unsigned long long)r.evidence, "sessions_folded",
                         (unsigned long long)r.sessions_folded, "sessions_removed",
                         (unsigned long long)r.sessions_removed, "sessions_kept",
                         (unsigned long long)r.sessions_kept, "bytes_before",
                         (unsigned long long)r.bytes_before, "bytes_after",
                         (unsigned long long)r.bytes_after);
}

static PyObject *env_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    Py_INCREF(self);
    return self;
}

static PyObject *env_exit(EnvObject *self, PyObject *args)
{
    (void)args;
    return env_close(self, NULL);
}

static PyMethodDef env_methods[] = {
    {"close", (PyCFunction)env_close, METH_NOARGS,
     "close(): ends the sessions still open on it, then closes it."},
    {"sessions", (PyCFunction)env_sessions, METH_NOARGS,
     "sessions() -> list[dict]: every session, by id, from a full read of each."},
    {"session_ids", (PyCFunction)env_session_ids, METH_NOARGS,
     "session_ids() -> list[str]: every session's id, without reading them."},
    {"reader", (PyCFunction)env_reader, METH_O,
     "reader(session) -> Reader: the records of one session."},
    {"replay_each", (PyCFunction)(void (*)(void))env_replay_each,
     METH_VARARGS | METH_KEYWORDS,
     "replay_each(fn, *, until_unix_ns=None, until_session=None, until_seq=None,\n"
     "check_snapshot=False) -> list[dict]: calls fn((json, payload, kind), unix_ns,\n"
     "session) for every record in the total order (a true result stops); returns\n"
     "the damage met."},
    {"state", (PyCFunction)env_state, METH_NOARGS,
     "state() -> State: the live state, kept current by this process's sessions."},
    {"replay", (PyCFunction)(void (*)(void))env_replay, METH_VARARGS | METH_KEYWORDS,
     "replay(*, until_unix_ns=None, until_session=None, until_seq=None,\n"
     "check_snapshot=False) -> State: the state folded up to a point."},
    {"bundle_export", (PyCFunction)(void (*)(void))env_bundle_export,
     METH_VARARGS | METH_KEYWORDS,
     "bundle_export(path, name, *, prefixes=None, evidence='winners', level=0, more=None, "
     "anonymous=False) -> dict"},
    {"bundle_import", (PyCFunction)env_bundle_import, METH_O,
     "bundle_import(path_or_bytes) -> dict: taken, skipped, rejected, ..."},
    {"compact", (PyCFunction)(void (*)(void))env_compact, METH_VARARGS | METH_KEYWORDS,
     "compact(*, evidence='winners') -> dict: folds everything into a snapshot."},
    {"__enter__", (PyCFunction)env_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)env_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef env_getset[] = {
    {"path", (getter)env_path, NULL, "The directory it was opened at.", NULL},
    {"closed", (getter)env_closed, NULL, "Whether it was closed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Env_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "envlog._envlog.Env",
    .tp_basicsize = sizeof(EnvObject),
    .tp_dealloc = (destructor)env_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Env(path=None, *, create=True, readonly=False, upkeep=True, pull=False): an "
              "environment.",
    .tp_methods = env_methods,
    .tp_getset = env_getset,
    .tp_init = (initproc)env_init,
    .tp_new = PyType_GenericNew,
};
