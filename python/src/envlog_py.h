/* SPDX-License-Identifier: MIT */
/*
 * envlog_py.h - what the files of the extension module envlog._envlog share:
 * the handle types, the error mapping and the argument converters.
 *
 * The module is a thin layer over the public API of include/envlog.h and
 * include/envlog_cuda.h; the Python package (python/envlog/) builds the
 * friendly surface on top of it.  Every argument is checked here before it
 * reaches the library, so no Python value can crash the interpreter: a wrong
 * type is a TypeError, a wrong value a ValueError, each naming the argument.
 */
#ifndef ENVLOG_PY_H
#define ENVLOG_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <envlog.h>
#include <envlog_cuda.h>

/* An open environment.  `state` is the live state the library owns. */
typedef struct {
    PyObject_HEAD
    envlog_env *env;
    PyObject *path;       /* str */
    PyObject *sessions;   /* list of weak references to its open Sessions */
} EnvObject;

/* A folded state: owned (from replay) or the environment's live one. */
typedef struct {
    PyObject_HEAD
    envlog_state *st;
    EnvObject *env;       /* kept alive; for a live state, checked open */
    int owned;
    PyObject *damage;     /* list: the damage met folding it */
} StateObject;

/* A recording session. */
typedef struct {
    PyObject_HEAD
    envlog_session *s;
    EnvObject *env;
    struct SpanObject **spans; /* the open spans (borrowed: each holds the session) */
    size_t n_spans, cap_spans;
    envlog_cuda *cuda;    /* the tuner's runtime, opened on first use */
    envlog_cuda_stream *stream;
    PyObject *tuner_key;  /* (runtime, runtime_version) the runtime was opened for */
    PyObject *weakrefs;
} SessionObject;

extern PyTypeObject Env_Type, State_Type, Session_Type, Span_Type, Reader_Type;

/* Errors: envlog's code and detail carried by an exception of
 * envlog._errors (CorruptError, NotFoundError, ...). */
PyObject *envpy_raise(envlog_err e, const char *what);
int envpy_errors_init(void);

/* A scratch arena for one call: C copies of Python arguments that live
 * until envpy_arena_free(). */
typedef struct {
    void **blocks;
    size_t n, cap;
    PyObject **refs;
    size_t nrefs, caprefs;
} envpy_arena;

void *envpy_alloc(envpy_arena *a, size_t size);
int envpy_keep(envpy_arena *a, PyObject *o); /* steals a reference */
void envpy_arena_free(envpy_arena *a);

/* Converters: each returns 0, or -1 with a TypeError/ValueError naming
 * `what` set.  Strings are UTF-8 without NUL bytes. */
int envpy_str(PyObject *o, const char *what, const char **out);
int envpy_opt_str(PyObject *o, const char *what, const char **out); /* None: NULL */
int envpy_u64(PyObject *o, const char *what, uint64_t *out);
int envpy_i64(PyObject *o, const char *what, int64_t *out);
int envpy_double(PyObject *o, const char *what, double *out);
int envpy_bool(PyObject *o, const char *what, bool *out);
int envpy_bytes(PyObject *o, const char *what, envlog_bytes *out, envpy_arena *a);
int envpy_strs(PyObject *o, const char *what, const char *const **out, size_t *n,
               envpy_arena *a);
/* A sequence of items, each converted by convert(item, "what[i]", slot, ctx)
 * into an arena array of `size`-byte slots; None gives none.  `want` names
 * the expected type in the TypeError. */
int envpy_seq(PyObject *o, const char *what, const char *want, size_t size,
              int (*convert)(PyObject *item, const char *what, void *out, void *ctx),
              void *ctx, void **out, size_t *n, envpy_arena *a);
int envpy_id(PyObject *o, const char *what, envlog_id128 *out);
int envpy_checksum(PyObject *o, const char *what, uint64_t *out, envpy_arena *a);
int envpy_stamp_in(PyObject *o, const char *what, envlog_stamp *out);
/* The index in names[0..n) of `s` in *out; else a ValueError naming `what`
 * and the names ("what: 'a', 'b' or 'c', not 's'"). */
int envpy_choice(const char *s, const char *what, const char *const *names, int n, int *out);
/* A path (str, bytes or os.PathLike) as a new bytes object in *out; returns 1,
 * or 0 with a TypeError naming `what` (the convention of PyArg converters). */
int envpy_path(PyObject *o, const char *what, PyObject **out);
/* The value of `key` in dict `d`: a borrowed reference, NULL when absent. */
PyObject *envpy_get(PyObject *d, const char *key);

/* Builders: new references, NULL with an exception set. */
PyObject *envpy_hex(const uint8_t *b, size_t n);
PyObject *envpy_stamp(const envlog_stamp *st);
/* A record call's outcome: its stamp, or with `e` the error, saying `what`. */
PyObject *envpy_stamp_or_raise(envlog_err e, const envlog_stamp *st, const char *what);
PyObject *envpy_str_or_none(const char *s);
PyObject *envpy_strlist(const char *const *v, size_t n);
PyObject *envpy_record(const envlog_record *rec); /* (json, payload, kind) */
PyObject *envpy_damage(const envlog_damage *d, bool torn);

/* What the record calls hand back and take. */
PyObject *envpy_tune_entry(const envlog_tune_entry *t);
PyObject *envpy_kernel_entry(const envlog_kernel_entry *k);
PyObject *envpy_bundle_info(const envlog_bundle_info *in);

/* A bundle given as a path or as bytes: *fs gets the encoded path (a new
 * reference), or else *data the bytes (kept in the arena).  Returns 0 or -1. */
int envpy_bundle_arg(PyObject *o, PyObject **fs, envlog_bytes *data, envpy_arena *a);

/* Whether the environment is still open (else sets StateError). */
int envpy_env_ok(EnvObject *e);

/* Replay options from keyword values (until_unix_ns, until_session,
 * until_seq, check_snapshot). */
int envpy_replay_opts(PyObject *until_ns, PyObject *until_session, PyObject *until_seq,
                      int check, envlog_replay_opts *o);

/* Whether the session has not ended: 0, or -1 with a ValueError set
 * (inline: the session, its record kinds and the tuner all ask it, and
 * none of them calls up into another for it). */
static inline int envpy_session_ok(SessionObject *self)
{
    if (!self->s) {
        PyErr_SetString(PyExc_ValueError, "the session has ended");
        return -1;
    }
    return 0;
}

/* The record kinds: Session.tune(), compile(), mark(), user(), forget(). */
PyObject *envpy_record_tune(SessionObject *self, PyObject *args, PyObject *kw);
PyObject *envpy_record_compile(SessionObject *self, PyObject *args, PyObject *kw);
PyObject *envpy_record_mark(SessionObject *self, PyObject *arg);
PyObject *envpy_record_user(SessionObject *self, PyObject *args, PyObject *kw);
PyObject *envpy_record_forget(SessionObject *self, PyObject *args, PyObject *kw);

/* The tuner: Session._tune(). */
PyObject *envpy_session_tune(SessionObject *self, PyObject *args, PyObject *kw);
void envpy_session_tuner_close(SessionObject *self);
PyObject *envpy_session_tune_ns(SessionObject *self, PyObject *args, PyObject *kw);

#endif /* ENVLOG_PY_H */
