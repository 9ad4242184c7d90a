# SPDX-License-Identifier: MIT
"""envlog from Python: read an environment, look up and explain winners,
record tunes, compiles, marks, user records and spans, autotune Python
callables with every trial recorded, and export and import bundles.

>>> import envlog
>>> env = envlog.open()                       # $ENVLOG_DIR, else ~/.cache/envlog/default
>>> with env.session(label="nightly", runtime="torch", runtime_version="2.4") as s:
...     r = s.autotune("add/n=4096", {"numpy": add_np, "loop": add_loop}, args=(x, y))
>>> env.why("add/n=4096")                     # what `envlog why --json` says, as dicts

Everything goes through the C library (include/envlog.h), linked into the
extension module envlog._envlog: the same files, rules and checks as the
`envlog` command.  Records are dicts with the field names of envlog(5), as
`envlog cat --json` shows them; 64-bit identities (checksums) are ints,
session ids and 128-bit hashes 32 hex digits, byte strings (binaries, IR)
bytes, and a user record's body or an import's manifest the value CBOR
decodes to.
"""
import datetime
import functools
import json
import platform

import cbor2

from . import _envlog
from ._errors import (BadDataError, BusyError, CorruptError, Error, FormatError,
                      InvalidArgumentError, IOError, NoMemoryError, NoSpaceError,
                      NotFoundError, PermissionDeniedError, StateError, TooBigError,
                      TruncatedError, UnavailableError)
from ._why import why as _why

__all__ = [
    "open", "Env", "Session", "State", "CBOR", "TuneResult", "TuneError", "autotune",
    "autotuned", "bundle_inspect", "tune_checksum", "hash128", "kernel_key",
    "default_path", "policy_defaults", "cpu_fingerprint", "record",
    "Error", "TruncatedError", "CorruptError", "InvalidArgumentError", "NoMemoryError",
    "IOError", "NoSpaceError", "FormatError", "BadDataError", "NotFoundError",
    "BusyError", "TooBigError", "UnavailableError", "PermissionDeniedError", "StateError",
]

__version__, _ = _envlog.version()
library_version = __version__

State = _envlog.State
tune_checksum = _envlog.tune_checksum
hash128 = _envlog.hash128
kernel_key = _envlog.kernel_key
bundle_inspect = _envlog.bundle_inspect
default_path = _envlog.default_path
policy_defaults = _envlog.policy_defaults
cpu_fingerprint = _envlog.cpu_fingerprint

_KIND_TUNE, _KIND_COMPILE, _KIND_IMPORT, _KIND_FORGET, _KIND_USER = 17, 18, 21, 22, 23


def record(item):
    """The dict of one record as the extension hands it out, (json, payload,
    kind): the library's JSON rendering, with what JSON cannot carry taken
    from the CBOR as stored (a compile's binary and IR as bytes, a user
    body and an import's manifest as CBOR decodes them) and checksums as
    ints."""
    text, payload, kind = item
    rec = json.loads(text)
    if kind in (_KIND_TUNE, _KIND_FORGET) and isinstance(rec.get("checksum"), str):
        # A 64-bit identity, which JSON may show as "0x..." text.
        rec["checksum"] = int(rec["checksum"], 16)
    if kind in (_KIND_COMPILE, _KIND_IMPORT, _KIND_USER):
        raw = cbor2.loads(payload)
        fields = {_KIND_COMPILE: ((15, "binary"), (18, "ir")),
                  _KIND_IMPORT: ((6, "manifest"),),
                  _KIND_USER: ((5, "body"),)}[kind]
        for k, name in fields:
            if k in raw:
                rec[name] = raw[k]
    return rec


class CBOR:
    """A value already encoded as one CBOR item, for Session.user()."""

    __slots__ = ("data",)

    def __init__(self, data):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data: expected bytes, got {type(data).__name__}")
        self.data = bytes(data)


def _until(until):
    """Replay limits from a time (int Unix ns or a datetime) or a stamp
    (a dict with session and seq, or a (session, seq) pair)."""
    if until is None:
        return {}
    if isinstance(until, datetime.datetime):
        if until.tzinfo is None:
            raise ValueError("until: a datetime needs a time zone")
        delta = until - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return {"until_unix_ns": (delta // datetime.timedelta(microseconds=1)) * 1000}
    if isinstance(until, bool):
        raise TypeError("until: expected Unix ns, a datetime or a stamp, got bool")
    if isinstance(until, int):
        return {"until_unix_ns": until}
    if isinstance(until, dict):
        if "session" not in until or "seq" not in until:
            raise ValueError("until: a stamp needs session and seq")
        return {"until_session": until["session"], "until_seq": until["seq"]}
    if isinstance(until, tuple) and len(until) == 2:
        return {"until_session": until[0], "until_seq": until[1]}
    raise TypeError(f"until: expected Unix ns, a datetime or a stamp, got "
                    f"{type(until).__name__}")


class Env(_envlog.Env):
    """An environment directory.  ``Env(path=None, *, create=True,
    readonly=False, upkeep=True, pull=False)``; a path of None is the
    default environment, as for the C library and the command.

    With ``pull=True`` the open ends with a pull from every remote of the
    environment's config (``envlog remote add``; README, Fleet), even one
    whose ``auto_pull`` is off, as ENVLOG_OPEN_PULL does: each bounded by
    its remote's timeout (2 s by default).  A remote that is down, slow or
    refuses never fails the open: it is said once on standard error and the
    environment opens with what it holds.  Not with ``readonly=True``
    (InvalidArgumentError).  A remote whose config has ``auto_pull`` on is
    pulled from at every open that may write, ``pull`` or not."""

    def session(self, **opts):
        """A recording session: ``with env.session(label=..., runtime=...,
        runtime_version=..., devices=[...], level='basic') as s:``.
        Nothing touches the disk until its first CHANGED record.

        ``auto_push`` decides the push when it ends, having written: None
        (the default) as each remote's ``auto_push`` in the config says,
        True to every remote of the config whatever it says, False none.
        The push runs in a detached process, never waited for; a remote
        that is down is said once and the next push catches up, and
        compaction keeps the session until every remote has it.
        ``auto_compact`` takes None, True or False the same way."""
        return Session(self, **opts)

    def records(self, session=None):
        """The records of one session (an id), or of every session in id
        order, each a dict.  Damage is skipped (see ``read()``)."""
        ids = [session] if session is not None else self.session_ids()
        for sid in ids:
            for item in self.reader(sid):
                yield record(item)

    def read(self, session):
        """``(records, damage, state)`` of one session: its records as dicts,
        the damaged regions met, and how it ended ('sealed', 'torn', ...)."""
        r = self.reader(session)
        recs = [record(item) for item in r]
        return recs, r.damage, r.state

    def history(self, until=None, check_snapshot=False):
        """Every record in the total order, up to ``until`` (Unix ns, a
        datetime or a stamp), each a dict with its ``unix_ns`` added."""
        out = []

        def visit(item, unix_ns, _session):
            rec = record(item)
            rec["unix_ns"] = unix_ns
            out.append(rec)

        self.replay_each(visit, check_snapshot=check_snapshot, **_until(until))
        return out

    def replay(self, until=None, check_snapshot=False):
        """The state folded up to ``until`` (Unix ns, a datetime, or a stamp
        {session, seq}): the environment as it was.  Close it when done."""
        return super().replay(check_snapshot=check_snapshot, **_until(until))

    def winner(self, namespace, key, checksum):
        """The standing winner of (namespace, key, checksum) in the live
        state, or None; ``checksum`` may be the candidate names."""
        return self.state().winner(namespace, key, checksum)

    def kernel(self, namespace, kernel_key):
        """The standing kernel of (namespace, kernel key), or None."""
        return self.state().kernel(namespace, kernel_key)

    def entries(self):
        """Every standing entry of the live state, in canonical order."""
        return iter(self.state().entries())

    def __iter__(self):
        return self.entries()

    def explain(self, namespace, key, checksum=None, candidates=None, table="tune"):
        """For a lookup that missed: the entries with the same key under
        another namespace or checksum, each saying what differs."""
        return self.state().explain(table, namespace, key, checksum, candidates)

    def why(self, key, namespace=None, checksum=None):
        """How the winner of ``key`` was chosen, as the list of events
        ``envlog why --json`` prints (see envlog._why)."""
        if checksum is not None and not isinstance(checksum, int):
            checksum = tune_checksum(checksum)
        return _why(self, key, namespace, checksum, record)


def open(path=None, *, create=True, readonly=False, upkeep=True, pull=False):  # noqa: A001
    """Opens the environment at ``path`` (None: $ENVLOG_DIR, else
    $XDG_CACHE_HOME/envlog/default, else ~/.cache/envlog/default), creating
    it unless ``create`` is false or ``readonly`` is true; with ``pull``
    true, pulling from every remote of its config as it opens (see Env)."""
    return Env(path, create=create, readonly=readonly, upkeep=upkeep, pull=pull)


class _SpanContext:
    """``with s.span(name, **attrs) as sp:``; ``sp.attrs`` may grow inside,
    and ``sp.stamp`` is the span record's stamp once it closed."""

    def __init__(self, session, name, attrs):
        self._session = session
        self.name = name
        self.attrs = dict(attrs)
        self.stamp = None
        self._span = None

    def __enter__(self):
        self._span = self._session.span_open(self.name)
        return self

    def __exit__(self, etype, exc, tb):
        attrs = dict(self.attrs)
        if etype is not None:
            attrs.setdefault("error", etype.__name__)
        self.stamp = self._span.close(attrs)
        return False


class TuneError(RuntimeError):
    """No candidate could be measured: every one raised (see ``errors``)."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


class TuneResult:
    """What ``autotune`` chose and how: ``winner`` (a candidate name, or None
    when none could be measured), ``index``, ``fn`` (the winning callable),
    ``hit`` (a standing winner was found: nothing ran), ``measured``,
    ``stored``, ``margin``, ``within_noise``, ``trials`` (how many ran),
    ``wall_ns``, ``stamp`` (of the tune record, when one was recorded),
    ``namespace`` and ``errors`` ({name: the exception a candidate raised})."""

    __slots__ = ("key", "namespace", "names", "winner", "index", "fn", "hit", "measured",
                 "stored", "margin", "within_noise", "trials", "wall_ns", "stamp", "errors")

    def __init__(self, key, namespace, names, fns, raw):
        self.key = key
        self.namespace = namespace
        self.names = list(names)
        self.index = raw["winner"] if raw["winner"] >= 0 else None
        self.winner = names[self.index] if self.index is not None else None
        self.fn = fns[self.index] if self.index is not None else None
        self.hit = raw["hit"]
        self.measured = raw["measured"]
        self.stored = raw["stored"]
        self.margin = raw["margin"]
        self.within_noise = raw["within_noise"]
        self.trials = raw["n_trials"]
        self.wall_ns = raw["wall_ns"]
        self.stamp = raw["stamp"]
        self.errors = {names[i]: e for i, e in raw["errors"].items()}

    def __repr__(self):
        how = "hit" if self.hit else ("measured" if self.measured else "unmeasured")
        return (f"TuneResult(key={self.key!r}, winner={self.winner!r}, {how}, "
                f"margin={self.margin:.3f})")


def _candidates(candidates):
    """Names and callables from a dict, a sequence of (name, callable)
    pairs, or a sequence of callables (named by their __qualname__)."""
    if isinstance(candidates, dict):
        items = list(candidates.items())
    else:
        try:
            seq = list(candidates)
        except TypeError:
            raise TypeError("candidates: expected a dict of name: callable or a sequence, "
                            f"got {type(candidates).__name__}") from None
        items = []
        for i, c in enumerate(seq):
            if isinstance(c, tuple) and len(c) == 2:
                items.append(c)
            elif callable(c):
                items.append((getattr(c, "__qualname__", None) or
                              getattr(c, "__name__", None) or f"candidate{i}", c))
            else:
                raise TypeError(f"candidates[{i}]: expected a callable or a (name, callable) "
                                f"pair, got {type(c).__name__}")
    if not items:
        raise ValueError("candidates: a tune needs at least one")
    names, fns = [], []
    for i, (name, fn) in enumerate(items):
        if not isinstance(name, str):
            raise TypeError(f"candidates[{i}]: a name is a str, not {type(name).__name__}")
        if not callable(fn):
            raise TypeError(f"candidates[{name!r}]: expected a callable, got "
                            f"{type(fn).__name__}")
        if name in names:
            raise ValueError(f"candidates: {name!r} is named twice")
        names.append(name)
        fns.append(fn)
    return names, fns


class Session(_envlog.Session):
    """A recording session of one environment; ends (seals its last
    segment) at the end of a ``with`` block or at ``end()``."""

    def __init__(self, env, **opts):
        super().__init__(env, **opts)
        self._runtime = opts.get("runtime")
        self._runtime_version = opts.get("runtime_version")

    def __enter__(self):
        return self

    def __exit__(self, etype, exc, tb):
        self.end()
        return False

    def user(self, kind, body, *, changed=False):
        """Records ``body`` (anything cbor2 encodes, or a CBOR(...) already
        encoded) as a user record of ``kind``; OBSERVED unless ``changed``."""
        if isinstance(body, CBOR):
            data = body.data
        else:
            try:
                data = cbor2.dumps(body)
            except Exception as e:  # cbor2 raises its own types per value
                raise TypeError(f"body: cannot be encoded as CBOR: {e}") from e
        return super().user(kind, data, changed=changed)

    def span(self, name, **attrs):
        """``with s.span("step", batch=64) as sp:``: a timed span, recorded
        when the block ends with the attributes (values as str)."""
        return _SpanContext(self, name, attrs)

    def tune_namespace(self, runtime=None, runtime_version=None, device=None):
        """The namespace ``autotune`` uses: tune/<runtime>/<version>/<device>,
        the device being this CPU's fingerprint unless one is given."""
        runtime = runtime or self._runtime or "python"
        runtime_version = runtime_version or self._runtime_version or platform.python_version()
        if device is not None:
            return f"tune/{runtime}/{runtime_version}/{device}"
        return self._tune_namespace(runtime=runtime, runtime_version=runtime_version)

    def autotune(self, key, candidates, args=(), kwargs=None, *, namespace=None, device=None,
                 timer=None, policy=None, runtime=None, runtime_version=None):
        """Picks the fastest of ``candidates`` for ``key``.

        A winner standing in the environment for (namespace, key, the
        checksum of the candidate names) is returned at once and nothing
        runs.  Otherwise each candidate is called as ``fn(*args, **kwargs)``
        and measured by the library's tuner (policy ``adaptive-median``,
        envlog-cuda(3)): warm-up runs, then samples until the median
        converges or the candidate falls behind; the lowest median wins.
        Every trial is recorded, and the winner stored when one was
        measured.  ``timer`` is an object with ``start()`` and ``stop()``
        returning elapsed ns (CUDA events, say); without it the CPU clock
        times each call.  ``policy`` overrides its parameters
        (``policy_defaults()``).  Returns a TuneResult."""
        names, fns = _candidates(candidates)
        kwargs = dict(kwargs or {})
        if not isinstance(args, tuple):
            args = tuple(args)
        ns = namespace or self.tune_namespace(runtime, runtime_version, device)

        def run(i):
            fns[i](*args, **kwargs)

        raw = self._tune(key, names, run, namespace=ns, timer=timer, policy=policy,
                         runtime=runtime or self._runtime or "python",
                         runtime_version=(runtime_version or self._runtime_version or
                                          platform.python_version()))
        return TuneResult(key, ns, names, fns, raw)


def autotune(key, candidates, args=(), kwargs=None, *, session, **options):
    """``session.autotune(key, candidates, args, kwargs, **options)``."""
    if not isinstance(session, Session):
        raise TypeError(f"session: expected an envlog.Session, got {type(session).__name__}")
    return session.autotune(key, candidates, args, kwargs, **options)


def autotuned(configs, key, *, session, name=None, **options):
    """A decorator that autotunes a function over ``configs``, as
    ``triton.autotune`` does: ``configs`` maps a name to the keyword
    arguments of one configuration (or is a sequence of such dicts, named
    by their items); ``key`` gives the tune key of a call, a callable of the
    call's arguments or a list of argument names.  The first call for a key
    tunes (or finds the standing winner); later ones call the winner."""
    if isinstance(configs, dict):
        named = dict(configs)
    else:
        named = {}
        for i, c in enumerate(configs):
            if not isinstance(c, dict):
                raise TypeError(f"configs[{i}]: expected a dict of keyword arguments")
            named[",".join(f"{k}={v}" for k, v in sorted(c.items()))] = c
    if not named:
        raise ValueError("configs: at least one is needed")

    def decorate(fn):
        import inspect
        sig = inspect.signature(fn)
        base = name or fn.__name__
        chosen = {}

        def tune_key(args, kwargs):
            if callable(key):
                return str(key(*args, **kwargs))
            bound = sig.bind_partial(*args, **kwargs)
            return ",".join(f"{k}={bound.arguments.get(k)!r}" for k in key)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            k = f"{base}/{tune_key(args, kwargs)}"
            cfg = chosen.get(k)
            if cfg is None:
                cands = {n: functools.partial(fn, *args, **kwargs, **c) for n, c in named.items()}
                res = session.autotune(k, cands, **options)
                if res.winner is None:
                    err = TuneError(f"{k}: no configuration could be measured", res)
                    first = next(iter(res.errors.values()), None)
                    raise err from first
                cfg = chosen[k] = named[res.winner]
                wrapper.results[k] = res
            return fn(*args, **kwargs, **cfg)

        wrapper.results = {}
        return wrapper

    return decorate
