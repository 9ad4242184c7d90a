# SPDX-License-Identifier: MIT
"""The record constructors and lookups called with random arguments: each
call either records or raises TypeError, ValueError or an envlog.Error,
and the interpreter never crashes (a crash fails the whole run)."""
import math
import random

import envlog

SEED = 18


def values(rng, depth=0):
    """A random Python value of the kinds callers pass by mistake."""
    pick = rng.randrange(22 if depth < 2 else 16)
    simple = [
        None, True, False, 0, -1, 2**64, 2**63 - 1, -(2**63) - 1, 3.5, math.nan, math.inf,
        "", "a\0b", "\ud800", "tune/x/1/cpu", b"\x00" * 16,
    ]
    if pick < len(simple):
        return simple[pick]
    if pick == 16:
        return rng.randrange(-5, 70)
    if pick == 17:
        return "".join(rng.choice("ab/=\u00e9x0") for _ in range(rng.randrange(40)))
    if pick == 18:
        return [values(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 19:
        return {rng.choice(["index", "name", "median_ns", "samples", "error", "sample_ns",
                            "session", "seq", "x", 1]): values(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    if pick == 20:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(20)))
    return (values(rng, depth + 1), values(rng, depth + 1))


TUNE = ["trials", "policy", "params", "winner", "margin", "within_noise", "winner_ns",
        "short_circuit", "wall_ns", "stored"]
COMPILE = ["kernel_key", "source_hash", "options", "compiler_version", "arch", "outcome",
           "duration_ns", "binary", "binary_hash", "binary_size", "log", "source", "ir", "tune"]
FORGET = ["table", "namespace", "key", "checksum", "reason", "under"]
SESSION = ["label", "runtime", "runtime_version", "devices", "process_mode", "level", "sync",
           "pending_budget", "segment_size", "auto_compact", "auto_push"]
ALLOWED = (TypeError, ValueError, envlog.Error, OverflowError)


def kwargs(rng, names):
    return {n: values(rng) for n in rng.sample(names, rng.randrange(len(names) + 1))}


def test_constructors_never_crash(tmp_path):
    rng = random.Random(SEED)
    env = envlog.open(str(tmp_path / "env"))
    s = env.session(level="full")
    accepted = refused = 0
    calls = [
        lambda: s.tune(values(rng), values(rng), values(rng), **kwargs(rng, TUNE)),
        lambda: s.tune("ns/a", "k", ["a", "b"], **kwargs(rng, TUNE)),
        lambda: s.compile(values(rng), values(rng), **kwargs(rng, COMPILE)),
        lambda: s.compile("k/1", "f", kernel_key="00" * 16, **kwargs(rng, COMPILE)),
        lambda: s.mark(values(rng)),
        lambda: s.user(values(rng), values(rng), changed=values(rng)),
        lambda: s.forget(**kwargs(rng, FORGET)),
        lambda: s.span_open(values(rng)).close(values(rng)),
        lambda: env.winner(values(rng), values(rng), values(rng)),
        lambda: env.kernel(values(rng), values(rng)),
        lambda: env.explain(values(rng), values(rng), values(rng), values(rng)),
        lambda: env.replay(until=values(rng)).close(),
        lambda: env.session(**kwargs(rng, SESSION)).end(),
        lambda: envlog.bundle_inspect(values(rng)),
        lambda: envlog.tune_checksum(values(rng)),
    ]
    for _ in range(4000):
        try:
            rng.choice(calls)()
            accepted += 1
        except ALLOWED:
            refused += 1
    s.end()
    # Both outcomes happened, and what was recorded reads back whole.
    assert accepted > 100 and refused > 1000
    for sid in env.session_ids():
        recs, damage, state = env.read(sid)
        assert damage == [] and state == "sealed"
    env.close()
