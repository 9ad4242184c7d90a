# SPDX-License-Identifier: MIT
"""Bundles from Python: export, inspect, import, against the command."""
import pytest

import envlog
from conftest import lines

NS = "tune/py-bundle/1/cpu-x"


def fill(env, n=5):
    with env.session(label="builder", runtime="py-bundle", runtime_version="1") as s:
        for i in range(n):
            s.tune(NS, f"k{i}", ["a", "b"], winner=i % 2,
                   trials=[{"index": 0, "median_ns": 10.0 + i}, {"index": 1, "median_ns": 9.0}])
        s.compile("kernels/x/sm_90", "f", kernel_key=envlog.hash128(b"key"),
                  binary=b"\x7fELF" * 8, outcome="compiled")


def test_export_inspect_import(cli, tmp_path):
    src = envlog.open(str(tmp_path / "src"))
    fill(src)
    path = tmp_path / "b.envb"
    info = src.bundle_export(str(path), "py bundle", evidence="all")
    assert info["name"] == "py bundle" and info["tunes"] == 5 and info["kernels"] == 1
    looked = envlog.bundle_inspect(str(path))
    assert looked["content_ok"] and looked["bad_records"] == 0
    assert looked == envlog.bundle_inspect(path.read_bytes())
    theirs = cli.json("bundle", "inspect", str(path))[0]
    for k in ("name", "tunes", "kernels", "sessions", "content_hash", "schema"):
        assert looked[k] == theirs[k], k
    dst = envlog.open(str(tmp_path / "dst"))
    rep = dst.bundle_import(str(path))
    assert (rep["taken"], rep["skipped"], rep["rejected"]) == (6, 0, 0)
    assert len(rep["session"]) == 32
    again = dst.bundle_import(path.read_bytes())
    assert (again["taken"], again["skipped"]) == (0, 6) and again["session"] is None
    w = dst.winner(NS, "k1", ["a", "b"])
    assert w["origin"] == "imported" and w["winner"] == "b"
    # The command folds the imported state to the same dump.
    assert lines(dst.replay().dump()) == lines(cli.run("replay", env_dir=tmp_path / "dst").stdout)
    # Prefixes: only what lies under them.
    part = src.bundle_export(str(tmp_path / "k.envb"), "kernels", prefixes=["kernels"],
                             level=3)
    assert part["tunes"] == 0 and part["kernels"] == 1


def test_bad_bundles_raise_the_librarys_errors(tmp_path):
    env = envlog.open(str(tmp_path / "env"))
    fill(env, 2)
    path = tmp_path / "b.envb"
    env.bundle_export(str(path), "b")
    data = path.read_bytes()
    with pytest.raises(envlog.Error) as ei:
        envlog.bundle_inspect(b"not a bundle at all")
    assert ei.value.code in (8, 9) and ei.value.detail
    with pytest.raises(envlog.Error) as ei:
        env.bundle_import(data[: len(data) // 2])
    assert ei.value.code in (8, 9, 12)
    with pytest.raises(envlog.NotFoundError):
        envlog.bundle_inspect(str(tmp_path / "missing.envb"))
    with pytest.raises(TypeError, match="bundle"):
        envlog.bundle_inspect(12)
    with pytest.raises(ValueError, match="evidence"):
        env.bundle_export(str(tmp_path / "x"), "x", evidence="some")
    with pytest.raises(ValueError, match="level"):
        env.bundle_export(str(tmp_path / "x"), "x", level=99)
    with pytest.raises(TypeError, match="name"):
        env.bundle_export(str(tmp_path / "x"), None)


def test_export_of_several_environments(cli, tmp_path):
    a = envlog.open(str(tmp_path / "a"))
    fill(a, 3)
    b = envlog.open(str(tmp_path / "b"))
    with b.session(label="other", runtime="py-bundle", runtime_version="1") as s:
        s.tune(NS, "k0", ["a", "b"], winner=1)      # later: a's k0 stands
        s.tune(NS, "only-b", ["a", "b"], winner=1)
    path = tmp_path / "ab.envb"
    info = a.bundle_export(str(path), "ab", more=[b])
    assert info["tunes"] == 4 and info["kernels"] == 1
    assert [x["path"] for x in info["sources"]] == [str((tmp_path / d).resolve()) for d in "ab"]
    assert info["sources"][1]["sessions"] == 1
    theirs = cli.json("bundle", "inspect", str(path))[0]
    assert theirs["sources"] == info["sources"]
    dst = envlog.open(str(tmp_path / "dst"))
    assert dst.bundle_import(str(path))["taken"] == 5
    assert dst.winner(NS, "k0", ["a", "b"])["winner"] == "a"
    assert dst.winner(NS, "only-b", ["a", "b"])["winner"] == "b"
    anon = a.bundle_export(str(path), "ab", more=[b], anonymous=True)
    assert [x["path"] for x in anon["sources"]] == ["", ""]
    with pytest.raises(TypeError, match="more"):
        a.bundle_export(str(path), "ab", more=["b"])
    b.close()
    with pytest.raises(ValueError, match="closed"):
        a.bundle_export(str(path), "ab", more=[b])
