# SPDX-License-Identifier: MIT
"""The autotuner for Python callables: the library's tuner, its policy and
its record, checked against `envlog why --json`; numpy variants tuned for
real; the caller's timer; failures; the decorator."""
import os

import numpy as np
import pytest

import envlog


class StepTimer:
    """A timer whose samples are set per candidate: the tune's outcome is
    then known exactly (a stand-in for CUDA events)."""

    name = "step-timer"

    def __init__(self, costs):
        self.costs = costs      # name -> ns per sample, or a list to cycle through
        self.current = None
        self.calls = 0

    def start(self):
        self.calls += 1

    def stop(self):
        c = self.costs[self.current]
        return c[self.calls % len(c)] if isinstance(c, list) else c


def tracked(timer, name):
    def fn():
        timer.current = name
    return fn


def test_numpy_variants_tuned_and_explained(cli, env, env_dir):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((96, 96))
    b = rng.standard_normal((96, 96))

    def matmul_numpy(x, y):
        return x @ y

    def matmul_einsum(x, y):
        return np.einsum("ij,jk->ik", x, y)

    def matmul_rows(x, y):
        return np.stack([row @ y for row in x])

    cands = [matmul_numpy, matmul_einsum, matmul_rows]
    policy = {"min_samples": 3, "max_samples": 8}
    with env.session(label="numpy", runtime="numpy", runtime_version=np.__version__) as s:
        r = s.autotune("matmul/96", cands, args=(a, b), policy=policy)
        sid = s.id
    assert r.measured and r.stored and not r.hit
    assert r.winner in {c.__qualname__ for c in cands}
    assert r.fn in cands and np.allclose(r.fn(a, b), a @ b)
    assert r.namespace.startswith(f"tune/numpy/{np.__version__}/cpu-")
    # What the command says is what the package says, event for event (the
    # command also ranks the trials and names the runner-up: fields the
    # package's why() leaves to the record it carries).
    theirs = cli.json("why", "matmul/96", env_dir=env_dir)
    ours = env.why("matmul/96")
    assert [e["event"] for e in ours] == [e["event"] for e in theirs]
    for o, t in zip(ours, theirs):
        assert o == {k: t[k] for k in o}
    tune = [e for e in theirs if e["event"] == "tune"]
    assert len(tune) == 1 and tune[0]["record"]["session"] == sid
    rec = tune[0]["record"]
    trials = rec["trials"]
    assert [t["name"] for t in trials] == [c.__qualname__ for c in cands]
    assert all(3 <= t["samples"] <= 8 and "error" not in t for t in trials)
    assert rec["policy"] == "adaptive-median/cpu-clock"
    assert {p["name"] for p in rec["params"]} >= {"min_samples", "max_samples", "rel_tol"}
    # The scoring rule: the lowest median wins, and the margin is to the runner-up.
    medians = [t["median_ns"] for t in trials]
    best = min(range(len(medians)), key=lambda i: (medians[i], i))
    assert rec["winner"] == best and r.index == best
    runner = min(m for i, m in enumerate(medians) if i != best)
    assert rec["margin"] == pytest.approx(runner / medians[best] - 1)
    standing = [e for e in theirs if e["event"] == "standing"]
    assert standing[0]["winner"] == r.winner and standing[0]["seq"] == r.stamp["seq"]
    # A second process asks first and finds it: nothing runs, nothing is written.
    env2 = envlog.open(str(env_dir))
    calls = []
    with env2.session(runtime="numpy", runtime_version=np.__version__) as s2:
        again = s2.autotune("matmul/96", [(c.__qualname__, lambda *x, c=c: calls.append(c))
                                          for c in cands], args=(a, b))
    assert again.hit and again.winner == r.winner and calls == []
    assert len(env2.session_ids()) == 1
    env2.close()


def test_the_callers_timer_decides(cli, env, env_dir):
    timer = StepTimer({"slow": 300.0, "fast": 100.0, "mid": 200.0})
    names = ["slow", "fast", "mid"]
    with env.session(runtime="sim", runtime_version="1") as s:
        r = s.autotune("sim/1", {n: tracked(timer, n) for n in names}, timer=timer,
                       policy={"warmup": 0, "min_samples": 4, "max_samples": 4,
                               "drop_factor": 0})
    assert r.winner == "fast" and r.margin == pytest.approx(200.0 / 100.0 - 1)
    assert not r.within_noise
    assert timer.calls == 12
    rec = [e for e in cli.json("why", "sim/1", env_dir=env_dir) if e["event"] == "tune"][0]
    rec = rec["record"]
    assert rec["policy"] == "adaptive-median/step-timer"
    assert [t["median_ns"] for t in rec["trials"]] == [300, 100, 200]
    assert [t["samples"] for t in rec["trials"]] == [4, 4, 4]
    w = env.winner(r.namespace, "sim/1", names)
    assert w["winner"] == "fast" and w["winner_cost_ns"] == 100


def test_a_dropped_candidate_stops_early(env):
    # Noisy samples never converge at rel_tol 0: the fast one runs to
    # max_samples, the slow one is dropped as soon as min_samples are in.
    timer = StepTimer({"fast": [100.0, 110.0], "slow": [1000.0, 1100.0]})
    with env.session() as s:
        r = s.autotune("drop/1", {n: tracked(timer, n) for n in ("fast", "slow")},
                       timer=timer, policy={"warmup": 0, "min_samples": 2,
                                            "max_samples": 50, "drop_factor": 2.0,
                                            "rel_tol": 0.0})
    rec = next(x for x in env.records() if x["kind"] == "tune")
    assert r.winner == "fast"
    assert rec["trials"][0]["samples"] == 50
    assert rec["trials"][1]["samples"] == 2


def test_a_failing_candidate_is_a_failed_trial(cli, env, env_dir):
    def broken():
        raise ValueError("bad shape")

    def fine():
        pass

    with env.session() as s:
        r = s.autotune("fail/1", {"broken": broken, "fine": fine},
                       policy={"min_samples": 2, "max_samples": 3})
        assert r.winner == "fine" and r.stored
        assert isinstance(r.errors["broken"], ValueError)
        assert "fine" not in r.errors
        none = s.autotune("fail/2", {"broken": broken, "also broken": broken})
        # One candidate is the answer without measuring (the seed's rule).
        single = s.autotune("fail/3", {"broken": broken})
    assert none.winner is None and not none.stored and none.measured
    assert single.winner == "broken" and not single.measured
    trials = [e["record"]["trials"] for e in cli.json("why", "fail/1", env_dir=env_dir)
              if e["event"] == "tune"][0]
    assert "error" in trials[0] and "error" not in trials[1]
    assert env.winner(none.namespace, "fail/2", ["broken", "also broken"]) is None
    assert [e["event"] for e in env.why("fail/2")] == ["tune", "none"]


def test_timer_errors_and_interrupts_propagate(env):
    class BadTimer:
        def start(self):
            pass

        def stop(self):
            return "soon"

    with env.session() as s:
        # (two candidates: one would be the answer without any timing)
        with pytest.raises(TypeError, match="timer.stop"):
            s.autotune("t/1", {"a": lambda: None, "b": lambda: None}, timer=BadTimer())
        with pytest.raises(TypeError, match="timer"):
            s.autotune("t/2", {"a": lambda: None, "b": lambda: None}, timer=object())
        ran = []

        def interrupted():
            ran.append(1)
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            s.autotune("t/3", {"a": interrupted, "b": lambda: ran.append(2)})
        assert ran == [1]
        with pytest.raises(ValueError, match="named twice"):
            s.autotune("t/4", [("a", len), ("a", len)])
        with pytest.raises(TypeError, match="candidates"):
            s.autotune("t/5", 42)
        with pytest.raises(ValueError, match="policy"):
            s.autotune("t/6", [len], policy={"samples": 3})
        with pytest.raises(envlog.InvalidArgumentError, match="policy"):
            s.autotune("t/7", [len], policy={"min_samples": 0})
    with pytest.raises(TypeError, match="session"):
        envlog.autotune("t/8", [len], session=None)


def test_the_decorator_tunes_once_per_key(env):
    calls = []
    with env.session(runtime="deco", runtime_version="1") as s:
        @envlog.autotuned(configs=[{"block": 16}, {"block": 64}], key=["n"], session=s,
                          policy={"warmup": 0, "min_samples": 1, "max_samples": 2})
        def kernel(n, *, block):
            calls.append(block)
            return n * block

        out = kernel(8)
        tuned_calls = len(calls)
        assert out in (8 * 16, 8 * 64) and tuned_calls >= 3
        assert kernel(8) == out and len(calls) == tuned_calls + 1
        (k, res), = kernel.results.items()
        assert k == "kernel/n=8" and res.winner in ("block=16", "block=64")
        kernel(9)
        assert len(kernel.results) == 2
    assert {e["key"] for e in env.entries()} == {"kernel/n=8", "kernel/n=9"}


def test_the_readme_numpy_example_runs(tmp_path):
    """README.md's numpy example, as written, twice: measured, then a hit."""
    import re
    import subprocess
    import sys
    from conftest import ROOT
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", section, re.S)
              if "import numpy" in b]
    assert len(blocks) == 1, "README.md's Python section has one numpy example"
    env = dict(os.environ, ENVLOG_DIR=str(tmp_path / "env"))
    outs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", blocks[0]], env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout.split())
    assert outs[0][1] == "measured," and outs[1][1:] == ["hit"]
    assert outs[0][0] == outs[1][0]
