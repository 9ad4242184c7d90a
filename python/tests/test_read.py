# SPDX-License-Identifier: MIT
"""Reading: sessions, records, the folded state and replay up to a point,
each held against what the `envlog` command says about the same files."""
import datetime
import os

import pytest

import envlog
from conftest import hexify, lines


def test_sessions_match_the_command(cli, fixture_env):
    d = fixture_env("basic")
    env = envlog.open(str(d), create=False)
    mine = env.sessions()
    theirs = cli.json("sessions", env_dir=d)
    assert [s["id"] for s in mine] == [s.get("session", s.get("id")) for s in theirs]
    assert len(mine) >= 2
    for a, b in zip(mine, theirs):
        for k in ("label", "host", "records", "segments", "state"):
            assert a[k] == b[k], k
    assert env.session_ids() == [s["id"] for s in mine]


def test_records_match_cat_json(cli, fixture_env):
    d = fixture_env("basic")
    env = envlog.open(str(d), create=False)
    mine = [hexify(r) for r in env.records()]
    theirs = cli.json("cat", env_dir=d)
    assert mine == theirs
    kinds = {r["kind"] for r in mine}
    assert {"session", "tune", "compile"} <= kinds


def test_compile_binary_is_bytes(fixture_env):
    env = envlog.open(str(fixture_env("basic")), create=False)
    compiles = [r for r in env.records() if r["kind"] == "compile" and "binary" in r]
    assert compiles
    for r in compiles:
        assert isinstance(r["binary"], bytes)
        assert len(r["binary"]) == r["binary_size"]
        assert envlog.hash128(r["binary"]) == r["binary_hash"]


def test_state_dump_matches_replay(cli, fixture_env):
    d = fixture_env("basic")
    env = envlog.open(str(d), create=False)
    st = env.replay()
    assert lines(st.dump()) == lines(cli.run("replay", env_dir=d).stdout)
    st.close()
    with pytest.raises(ValueError, match="closed"):
        st.entries()


def test_lookups(fixture_env):
    env = envlog.open(str(fixture_env("basic")), create=False)
    entries = list(env.entries())
    tunes = [e for e in entries if e["table"] == "tune"]
    kernels = [e for e in entries if e["table"] == "kernel"]
    assert tunes and kernels
    for t in tunes:
        got = env.winner(t["namespace"], t["key"], t["checksum"])
        assert got == t
        # The candidate names give the same checksum.
        assert env.winner(t["namespace"], t["key"], t["candidates"]) == t
        assert isinstance(t["checksum"], int) and 0 <= t["checksum"] < 2**64
        assert t["candidates"][t["winner_index"]] == t["winner"]
    for k in kernels:
        assert env.kernel(k["namespace"], k["kernel_key"]) == k
        assert env.kernel(k["namespace"], bytes.fromhex(k["kernel_key"])) == k
    t = tunes[0]
    assert env.winner(t["namespace"] + "/other", t["key"], t["checksum"]) is None
    assert env.winner(t["namespace"], t["key"], t["checksum"] ^ 1) is None


def test_explain_a_miss(fixture_env):
    env = envlog.open(str(fixture_env("basic")), create=False)
    t = next(e for e in env.entries() if e["table"] == "tune")
    parts = t["namespace"].split("/")
    parts[-1] = parts[-1] + "-elsewhere"
    near = env.explain("/".join(parts), t["key"], t["checksum"])
    assert any(n["namespace"] == t["namespace"] for n in near)
    assert all(n["differs"] for n in near)


def test_replay_until(cli, fixture_env):
    d = fixture_env("basic")
    env = envlog.open(str(d), create=False)
    hist = env.history()
    assert len(hist) == len(list(env.records()))
    times = [r["unix_ns"] for r in hist]
    assert times == sorted(times)
    # Up to and including the first tune: the state as it was then.
    first = next(r for r in hist if r["kind"] == "tune" and r["stored"])
    stamp = {"session": first["session"], "seq": first["seq"]}
    st = env.replay(until=stamp)
    assert lines(st.dump()) == lines(cli.run("replay", "--until", f"{first['session']}:{first['seq']}",
                                env_dir=d).stdout)
    assert st.stats()["records"] < env.replay().stats()["records"]
    st.close()
    # By time: the records at or before that instant.
    st = env.replay(until=first["unix_ns"])
    assert lines(st.dump()) == lines(cli.run("replay", "--until", str(first["unix_ns"]), env_dir=d).stdout)
    assert env.history(until=first["unix_ns"]) == [r for r in hist
                                                     if r["unix_ns"] <= first["unix_ns"]]
    when = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)
    assert env.replay(until=when).entries() == []
    with pytest.raises(ValueError, match="time zone"):
        env.replay(until=datetime.datetime(2020, 1, 1))
    with pytest.raises(ValueError, match="session and seq"):
        env.replay(until={"session": first["session"]})
    with pytest.raises(TypeError, match="until"):
        env.replay(until=1.5)


def test_damage_is_reported_as_the_command_does(cli, fixture_env):
    d = fixture_env("damaged")
    env = envlog.open(str(d), create=False)
    bad = [s for s in env.sessions() if s["state"] in ("torn", "damaged")]
    assert bad
    for s in bad:
        recs, damage, state = env.read(s["id"])
        assert state == s["state"]
        assert damage and all(x["bytes"] > 0 or x["torn"] for x in damage)
        theirs = cli.json("cat", s["id"], env_dir=d, ok=(0, 1))
        assert [hexify(r) for r in recs] == theirs
    # Replay goes on past the damage and says where it was.
    assert env.replay().damage


def test_errors_carry_code_and_detail(tmp_path):
    with pytest.raises(envlog.NotFoundError) as ei:
        envlog.open(str(tmp_path / "missing"), create=False)
    assert ei.value.code == 10 and ei.value.name and isinstance(ei.value, LookupError)
    (tmp_path / "notenv").mkdir()
    (tmp_path / "notenv" / "FORMAT").write_text("something else\n")
    with pytest.raises(envlog.FormatError) as ei:
        envlog.open(str(tmp_path / "notenv"))
    assert ei.value.code == 8 and "FORMAT" in str(ei.value) + ei.value.detail
    env = envlog.open(str(tmp_path / "env"))
    with pytest.raises(envlog.NotFoundError):
        env.reader("0" * 32)
    with pytest.raises(ValueError, match="session: .* is not 32 hex digits"):
        env.reader("xyz")
    with pytest.raises(TypeError, match="namespace: expected str, got int"):
        env.winner(1, "k", 0)
    with pytest.raises(ValueError, match="checksum: .* outside"):
        env.winner("ns", "k", -1)
    env.close()
    with pytest.raises(ValueError, match="closed"):
        env.winner("ns", "k", 0)
    ro = envlog.open(str(tmp_path / "env"), readonly=True)
    with pytest.raises(envlog.StateError):
        ro.session()


def test_default_path_follows_envlog_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVLOG_DIR", str(tmp_path / "dflt"))
    assert envlog.default_path() == str(tmp_path / "dflt")
    env = envlog.open()
    assert env.path == str(tmp_path / "dflt")
    assert os.path.isfile(tmp_path / "dflt" / "FORMAT")
    env.close()
