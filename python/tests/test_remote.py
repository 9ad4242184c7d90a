# SPDX-License-Identifier: MIT
"""Sharing from Python (README, Fleet): ``Env(pull=True)``, a session's
``auto_push`` and the config's automatic sharing, against a real
redis-server on a free 127.0.0.1 port (Debian's, as the C remote tests
start it; `make deps` installs it).  Without redis-server these tests fail,
saying so: a case that could not run is never a skip.

A session's push at its end runs in a detached process: each recording here
runs in a child interpreter that adopts those processes
(PR_SET_CHILD_SUBREAPER) and waits for them before it exits, so what they
did, or that none ran, is read without polling."""
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

import envlog

NS = "tune/py/1.0/remote"
CANDS = ["a", "b", "c"]

# Records one tune, key TAG, in ENV with the session option auto_push
# (none, true or false), then waits for the processes its end started.
RECORD = r"""
import ctypes, os, sys
import envlog
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
path, tag, push = sys.argv[1:4]
with envlog.open(path) as env:
    with env.session(auto_push={"none": None, "true": True, "false": False}[push]) as s:
        s.tune(%r, tag, %r, winner=1)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
""" % (NS, CANDS)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server of this test module, and redis-cli to ask it."""

    def __init__(self, port, proc):
        self.port = port
        self.proc = proc

    def __call__(self, *args):
        p = subprocess.run([shutil.which("redis-cli"), "-p", str(self.port)] + list(args),
                           capture_output=True, text=True, timeout=30, check=True)
        return p.stdout.strip()


@pytest.fixture(scope="module")
def redis(tmp_path_factory):
    server, client = shutil.which("redis-server"), shutil.which("redis-cli")
    if not server or not client:
        pytest.fail("redis-server and redis-cli are needed (make deps installs them): no "
                    "remote test ran")
    d = tmp_path_factory.mktemp("redis")
    for _ in range(10):
        port = _free_port()
        proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1",
                                 "--dir", str(d), "--save", "", "--appendonly", "no",
                                 "--logfile", str(d / "log")])
        for _ in range(100):
            if proc.poll() is not None:
                break
            ping = subprocess.run([client, "-p", str(port), "ping"], capture_output=True,
                                  text=True, timeout=30)
            if ping.stdout.strip() == "PONG":
                yield Redis(port, proc)
                proc.kill()
                proc.wait()
                return
            time.sleep(0.05)
        proc.kill()
        proc.wait()
    pytest.fail("redis-server did not start")


@pytest.fixture
def url(redis):
    """The remote's URL, on an empty server."""
    redis("flushall")
    return f"redis://127.0.0.1:{redis.port}/0"


def new_env(cli, path, url, **settings):
    """An environment with remote origin at `url` (nothing automatic unless
    `settings` say so)."""
    envlog.open(str(path)).close()
    cli.run("remote", "add", "origin", url, env_dir=path)
    for key, value in settings.items():
        cli.run("remote", "set", "origin", key, value, env_dir=path)
    return path


def record(path, tag, push):
    p = subprocess.run([sys.executable, "-c", RECORD, str(path), tag, push],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stderr


def status(path, kind):
    """ENV/remotes/origin.KIND: the last automatic push's or pull's outcome."""
    f = path / "remotes" / f"origin.{kind}"
    return f.read_text() if f.exists() else None


def test_session_auto_push_true_pushes_with_the_config_off(cli, redis, url, tmp_path):
    a = new_env(cli, tmp_path / "a", url)
    record(a, "k1", "true")
    assert redis("hlen", "envlog:sessions") == "1"
    assert "automatic push: ok" in status(a, "push")


def test_session_auto_push_false_pushes_nothing_with_the_config_on(cli, redis, url, tmp_path):
    a = new_env(cli, tmp_path / "a", url, auto_push="on")
    record(a, "k1", "false")
    assert redis("hlen", "envlog:sessions") == "0"
    assert status(a, "push") is None
    # None follows the config, which says push.
    record(a, "k2", "none")
    assert redis("hlen", "envlog:sessions") == "2"


def test_pull_at_open_takes_what_the_remote_holds(cli, url, tmp_path):
    a = new_env(cli, tmp_path / "a", url)
    with envlog.open(str(a)) as env, env.session() as s:
        s.tune(NS, "k1", CANDS, winner=2)
    cli.run("push", env_dir=a)
    b = new_env(cli, tmp_path / "b", url)
    with envlog.open(str(b)) as env:
        assert env.winner(NS, "k1", CANDS) is None  # auto_pull is off
    with envlog.Env(str(b), pull=True) as env:
        assert env.winner(NS, "k1", CANDS)["winner"] == "c"
        assert len(env.session_ids()) == 1
    assert "automatic pull: ok" in status(b, "pull")


def test_the_config_auto_pull_pulls_at_every_open(cli, url, tmp_path):
    a = new_env(cli, tmp_path / "a", url)
    record(a, "k1", "true")
    b = new_env(cli, tmp_path / "b", url, auto_pull="on")
    with envlog.open(str(b)) as env:
        assert env.winner(NS, "k1", CANDS)["winner"] == "b"


def test_the_server_down_never_fails_the_open_and_is_said_once(cli, capfd, tmp_path):
    down = f"redis://127.0.0.1:{_free_port()}/0"  # nothing listens there
    b = new_env(cli, tmp_path / "b", down, timeout="1s")
    capfd.readouterr()
    for _ in range(2):
        with envlog.open(str(b), pull=True) as env, env.session() as s:
            s.tune(NS, "local", CANDS, winner=0)
        with envlog.open(str(b)) as env:
            assert env.winner(NS, "local", CANDS)["winner"] == "a"
    err = capfd.readouterr().err
    assert err.count("automatic pull failed") == 1, err
    assert "going on with the local environment" in err
    assert "automatic pull failed" in status(b, "pull")


def test_bad_sharing_options_are_refused(cli, url, tmp_path):
    b = new_env(cli, tmp_path / "b", url)
    with pytest.raises(envlog.InvalidArgumentError):
        envlog.Env(str(b), readonly=True, pull=True)
    with envlog.open(str(b)) as env:
        for bad in (1, 0, "on"):
            with pytest.raises(TypeError, match="auto_push"):
                env.session(auto_push=bad)
