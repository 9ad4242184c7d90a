# SPDX-License-Identifier: MIT
"""Reference counts: a loop of 100,000 calls through each path that builds
or takes Python objects keeps the process's memory flat (a leaked object
per call would grow it by megabytes)."""
import gc
import os

import pytest

import envlog

# Under the sanitizers (make asan) the allocator keeps freed memory in
# quarantine: the process's size says nothing of leaks there.
pytestmark = pytest.mark.skipif(
    bool(os.environ.get("ENVLOG_PY_SANITIZED")),
    reason="memory growth NOT measured: a sanitizer build's allocator keeps what is freed")

N = 100_000
SLACK = 2 * 1024 * 1024  # bytes: allocator noise, far below one object per call


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def flat(fn):
    """Memory growth over N calls, after a warm-up that fills the caches."""
    for _ in range(N // 10):
        fn()
    gc.collect()
    before = rss()
    for _ in range(N):
        fn()
    gc.collect()
    return rss() - before


def test_calls_do_not_leak(tmp_path):
    env = envlog.open(str(tmp_path / "env"))
    ns = "tune/leak/1/cpu"
    with env.session() as s:
        s.tune(ns, "k", ["a", "b"], winner=1, trials=[{"index": 0, "median_ns": 2.0},
                                                      {"index": 1, "median_ns": 1.0}])
        s.compile("k/1", "f", kernel_key="11" * 16, binary=b"\x01" * 64)
        for i in range(50):
            s.mark(f"m{i}")
        sid = s.id
    st = env.state()
    growth = {
        "winner hit": flat(lambda: st.winner(ns, "k", ["a", "b"])),
        "winner miss": flat(lambda: st.winner(ns, "nope", 12345)),
        "kernel": flat(lambda: st.kernel("k/1", "11" * 16)),
        "bad argument": flat(lambda: _refused(lambda: st.winner(ns, 7, 0))),
        "library error": flat(lambda: _refused(lambda: env.reader("0" * 32))),
    }
    recs = env.reader(sid)
    items = list(recs)
    growth["record dicts"] = flat(lambda: envlog.record(items[N % len(items)]))
    # Observed records, held within a small budget (the oldest dropped, so
    # the library holds a few at a time): the conversions of every argument,
    # and the library's encoding of each record.  On an environment whose
    # live state is not open yet: a live state keeps every user record
    # (for its dump), by design, so the autotune that opens it comes last.
    env2 = envlog.open(str(tmp_path / "env"))
    s2 = env2.session(level="full", pending_budget=4096)
    growth["tune record"] = flat(lambda: s2.tune(ns, "x", ["a", "b"], winner=0, stored=False,
                                                 trials=[{"index": 0, "median_ns": 1.0,
                                                          "sample_ns": [1.0, 2.0]}],
                                                 params={"p": 1}))
    growth["span"] = flat(lambda: s2.span_open("s").close({"a": "b", "n": 3}))
    growth["user record"] = flat(lambda: s2.user("u", {"k": [1, 2.5, b"x"]}))
    assert s2.autotune("k", {"a": len, "b": len}, namespace=ns).hit
    growth["autotune hit"] = flat(lambda: s2.autotune("k", {"a": len, "b": len},
                                                      namespace=ns))
    growth["refused record"] = flat(lambda: _refused(lambda: s2.tune(ns, "x", ["a"],
                                                                     winner=3)))
    s2.end()
    env2.close()
    assert {k: v for k, v in growth.items() if v > SLACK} == {}


def _refused(fn):
    try:
        fn()
    except (TypeError, ValueError, envlog.Error):
        return
    raise AssertionError("expected a refusal")
