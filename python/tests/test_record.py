# SPDX-License-Identifier: MIT
"""Recording from Python, read back by the command (Python -> C) and by
the package (-> Python again): every kind, the effect gate and the levels
exactly as in C."""
import os
import threading

import pytest

import envlog
from conftest import hexify, lines

NS = "tune/py-test/1.0/cpu-test-2c"


def record_all(env):
    """One of every kind, with the fields a caller sets."""
    with env.session(label="py-rt", runtime="py-test", runtime_version="1.0",
                     devices=["cpu-test-2c"], process_mode="execute") as s:
        stamps = {"mark": s.mark("start")}
        with s.span("outer", phase="warm-up") as outer:
            with s.span("inner", n=3) as inner:
                inner.attrs["extra"] = "yes"
        stamps["outer"], stamps["inner"] = outer.stamp, inner.stamp
        stamps["tune"] = s.tune(
            NS, "matmul/m=64", ["naive", "blocked"], winner="blocked", margin=0.25,
            within_noise=False, wall_ns=12345, policy="hand/cpu-clock",
            params={"min_samples": 3},
            trials=[{"index": 0, "samples": 3, "min_ns": 10.0, "median_ns": 12.0,
                     "mean_ns": 12.5, "max_ns": 15.0, "stddev_ns": 1.5},
                    {"index": 1, "samples": 3, "min_ns": 8.0, "median_ns": 9.6,
                     "mean_ns": 9.5, "max_ns": 11.0, "stddev_ns": 0.75}])
        stamps["compile"] = s.compile(
            "kernels/nvrtc/13.0/sm_90", "saxpy", source="extern \"C\" void saxpy() {}",
            options="-O3", compiler_version="13.0", arch="sm_90", duration_ns=3500,
            binary=b"\x7fELF\x00binary", log="ok", tune=stamps["tune"])
        stamps["user"] = s.user("py-note", {"bytes": b"\x00\x01", "list": [1, -2, 3.5],
                                           "text": "caf\u00e9", "none": None})
        stamps["forget"] = s.forget(namespace=NS, key="matmul/m=0", checksum=["x"],
                                    reason="stale")
        sid = s.id
    return sid, stamps


def test_round_trip_python_to_c_to_python(cli, env, env_dir):
    sid, stamps = record_all(env)
    theirs = cli.json("cat", sid, env_dir=env_dir)
    mine = list(env.records(sid))
    assert [hexify(r) for r in mine] == theirs
    by_seq = {r["seq"]: r for r in mine}
    assert by_seq[0]["kind"] == "session"
    assert by_seq[0]["label"] == "py-rt" and by_seq[0]["devices"] == ["cpu-test-2c"]
    assert by_seq[0]["runtime"] == "py-test" and by_seq[0]["process_mode"] == "execute"
    tune = by_seq[stamps["tune"]["seq"]]
    assert tune["effect"] == "changed" and tune["stored"] is True and tune["winner"] == 1
    assert tune["checksum"] == envlog.tune_checksum(["naive", "blocked"])
    assert [t["name"] for t in tune["trials"]] == ["naive", "blocked"]
    assert tune["trials"][1]["median_ns"] == 9.6
    assert tune["params"] == [{"name": "min_samples", "value": 3}]
    comp = by_seq[stamps["compile"]["seq"]]
    assert comp["binary"] == b"\x7fELF\x00binary" and comp["outcome"] == "compiled"
    assert comp["binary_hash"] == envlog.hash128(b"\x7fELF\x00binary")
    assert comp["kernel_key"] == envlog.kernel_key(
        "extern \"C\" void saxpy() {}", "-O3", "13.0", "sm_90")
    assert comp["tune"] == stamps["tune"]
    user = by_seq[stamps["user"]["seq"]]
    assert user["body"] == {"bytes": b"\x00\x01", "list": [1, -2, 3.5], "text": "caf\u00e9",
                            "none": None}
    assert user["effect"] == "observed"
    spans = {by_seq[stamps[k]["seq"]]["name"]: by_seq[stamps[k]["seq"]]
             for k in ("outer", "inner")}
    assert spans["inner"]["parent"] == spans["outer"]["id"]
    assert {a["key"]: a["value"] for a in spans["inner"]["attrs"]} == {"n": "3", "extra": "yes"}
    assert by_seq[stamps["forget"]["seq"]]["reason"] == "stale"
    # The state the command folds is the one the package folds.
    assert lines(env.replay().dump()) == lines(cli.run("replay", env_dir=env_dir).stdout)
    w = env.winner(NS, "matmul/m=64", ["naive", "blocked"])
    assert w["winner"] == "blocked" and w["stamp"] == stamps["tune"]


def test_c_written_records_read_identically(cli, fixture_env):
    """C -> Python -> C: what C wrote, copied by Python into a new session,
    reads back through the command as the same records."""
    src_dir = fixture_env("basic")
    src = envlog.open(str(src_dir), create=False)
    dst_dir = src_dir.parent / "copy"
    dst = envlog.open(str(dst_dir))
    originals = [r for r in src.records() if r["kind"] in ("tune", "compile", "mark")]
    assert originals
    with dst.session(label="copy", level="full") as s:
        sid = s.id
        for r in originals:
            if r["kind"] == "tune":
                s.tune(r["namespace"], r["key"], r.get("candidates", []),
                       trials=[{k: v for k, v in t.items()} for t in r.get("trials", [])],
                       policy=r.get("policy"),
                       params={p["name"]: p["value"] for p in r.get("params", [])},
                       winner=r["winner"], margin=float(r["margin"]),
                       within_noise=r["within_noise"], winner_ns=float(r["winner_ns"]),
                       short_circuit=r["short_circuit"], wall_ns=r["wall_ns"],
                       stored=r["stored"])
            elif r["kind"] == "compile":
                s.compile(r["namespace"], r["name"], kernel_key=r["kernel_key"],
                          source_hash=r["source_hash"], options=r.get("options"),
                          compiler_version=r.get("compiler_version"), arch=r.get("arch"),
                          outcome=r["outcome"], duration_ns=r["duration_ns"],
                          binary=r.get("binary"), binary_hash=r["binary_hash"],
                          binary_size=r["binary_size"], log=r.get("log"),
                          source=r.get("source"), ir=r.get("ir"), tune=r.get("tune"))
            else:
                s.mark(r["label"])
    copied = [r for r in cli.json("cat", sid, env_dir=dst_dir) if r["kind"] != "session"]
    assert len(copied) == len(originals)
    envelope = ("session", "seq", "offset_ns", "wall_unix_ns")
    for a, b in zip(originals, copied):
        a = {k: v for k, v in hexify(a).items() if k not in envelope}
        b = {k: v for k, v in b.items() if k not in envelope}
        if a["kind"] == "tune" and a["winner_ns"] == 0 and a["winner"] >= 0:
            # envlog's writer, given 0, writes the winner's median (envlog(5)).
            medians = [t["median_ns"] for t in a["trials"] if t["index"] == a["winner"]]
            a["winner_ns"] = medians[-1] if medians else 0
        assert a == b


def test_a_session_that_only_observes_writes_nothing(env, env_dir):
    with env.session(label="observer") as s:
        s.mark("nothing changes")
        with s.span("look"):
            pass
        s.user("note", [1, 2])
        s.tune(NS, "k", ["a"], winner=0, stored=False)   # an unmeasured pick
        s.compile("k/1", "f", kernel_key="00" * 16, outcome="loaded")
        st = s.stats()
        assert st["accepted"] == 5 and st["held"] == 5 and not st["on_disk"]
    assert os.listdir(env_dir / "sessions") == []
    assert env.session_ids() == []


def test_the_first_changed_record_writes_the_held_ones(env):
    with env.session() as s:
        s.mark("held")
        s.user("note", "changes", changed=True)
        sid = s.id
        assert s.stats()["on_disk"]
    recs = list(env.records(sid))
    assert [r["kind"] for r in recs] == ["session", "mark", "user"]


def test_level_off_records_nothing_and_full_keeps_samples(env):
    with env.session(level="off") as s:
        s.tune(NS, "k", ["a"], winner=0)
        st = s.stats()
        assert (st["written"], st["held"], st["on_disk"]) == (0, 0, False)
    assert env.session_ids() == []
    assert env.winner(NS, "k", ["a"]) is None
    trial = {"index": 0, "sample_ns": [3.0, 4.0, 5.0], "median_ns": 4.0}
    for level, kept in (("basic", False), ("full", True)):
        with env.session(level=level) as s:
            s.tune(NS, f"k-{level}", ["a"], winner=0, trials=[trial])
            sid = s.id
        t = [r for r in env.records(sid) if r["kind"] == "tune"][0]
        assert ("sample_ns" in t["trials"][0]) == kept
        assert t["trials"][0]["samples"] == 3


def test_live_state_sees_this_process_at_once(env):
    with env.session() as s:
        assert env.winner(NS, "live", ["a", "b"]) is None
        s.tune(NS, "live", ["a", "b"], winner="a")
        assert env.winner(NS, "live", ["a", "b"])["winner"] == "a"
        s.forget(namespace=NS, key="live", checksum=["a", "b"])
        assert env.winner(NS, "live", ["a", "b"]) is None


def test_spans_close_on_their_thread(env):
    s = env.session()
    sp = s.span_open("t")
    err = []

    def other():
        try:
            sp.close()
        except RuntimeError as e:
            err.append(e)
    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert err and "thread" in str(err[0])
    sp.close()
    with pytest.raises(ValueError, match="not open"):
        sp.close()
    # A span left open when its session ends is discarded, as in C.
    left = s.span_open("left")
    s.end()
    assert not left.open
    with pytest.raises(ValueError, match="not open"):
        left.close()
    with pytest.raises(ValueError, match="ended"):
        s.mark("late")


def test_closing_the_environment_ends_its_sessions(env_dir):
    env = envlog.open(str(env_dir))
    s = env.session()
    s.user("note", 1, changed=True)
    env.close()
    assert s.ended
    again = envlog.open(str(env_dir))
    assert [x["state"] for x in again.sessions()] == ["sealed"]


def test_bad_arguments_name_themselves(env):
    s = env.session()
    cases = [
        (lambda: s.tune(1, "k", ["a"]), TypeError, "namespace"),
        (lambda: s.tune(NS, "k", "ab"), TypeError, "candidates"),
        (lambda: s.tune(NS, "k", ["a", 2]), TypeError, r"candidates\[1\]"),
        (lambda: s.tune(NS, "k", ["a"], winner=5), ValueError, "winner"),
        (lambda: s.tune(NS, "k", ["a"], winner="z"), ValueError, "winner"),
        (lambda: s.tune(NS, "k", ["a"], trials=[{"index": 3}]), ValueError, "index"),
        (lambda: s.tune(NS, "k", ["a"], trials=[{"idx": 0}]), ValueError, "unknown field"),
        (lambda: s.tune(NS, "k", ["a"], trials=[{}]), ValueError, "needs an index"),
        (lambda: s.tune(NS, "k", ["a"], margin="x"), TypeError, "margin"),
        (lambda: s.tune(NS, "k", ["a"], params={"a": "b"}), TypeError, r"params\[a\]"),
        (lambda: s.tune("a\0b", "k", ["a"]), ValueError, "NUL"),
        (lambda: s.compile("ns", "f"), ValueError, "kernel_key"),
        (lambda: s.compile("ns", "f", kernel_key="zz"), ValueError, "kernel_key"),
        (lambda: s.compile("ns", "f", kernel_key=b"short"), ValueError, "16 bytes"),
        (lambda: s.compile("ns", "f", kernel_key="00" * 16, outcome="good"), ValueError,
         "outcome"),
        (lambda: s.compile("ns", "f", kernel_key="00" * 16, binary="text"), TypeError,
         "binary"),
        (lambda: s.compile("ns", "f", kernel_key="00" * 16, tune={"seq": 1}), ValueError,
         "tune"),
        (lambda: s.mark(None), TypeError, "label"),
        (lambda: s.user("k", object()), TypeError, "body"),
        (lambda: s.forget(namespace="ns"), ValueError, "forget"),
        (lambda: s.forget(under="a", key="k"), ValueError, "under"),
        (lambda: s.span_open(3), TypeError, "name"),
        (lambda: env.session(level="loud"), ValueError, "level"),
        (lambda: env.session(devices="gpu"), TypeError, "devices"),
        (lambda: env.session(sync="often"), ValueError, "sync"),
    ]
    for fn, exc, what in cases:
        with pytest.raises(exc, match=what):
            fn()
    # The library's own refusals come back as its exceptions, with its detail.
    with pytest.raises(envlog.InvalidArgumentError) as ei:
        s.forget(under="/bad/")
    assert ei.value.code == 4 and ei.value.detail
    with pytest.raises(envlog.InvalidArgumentError):
        s.user("k", envlog.CBOR(b"\x82\x01"))  # an array cut short
    s.end()
