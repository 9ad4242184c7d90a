#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Progress lines on a terminal, and none on a pipe (envlog(1), ENVIRONMENT).

usage: progress.py ENVLOG FIXTURES [REBUILD_HELPER]

Each long command runs twice with ENVLOG_PROGRESS_AFTER_MS=0: its standard
error a pseudo-terminal (a progress line must be drawn, then cleared) and a
pipe (not a byte of it).  With the default delay a quick command draws
nothing even on a terminal, and ENVLOG_PROGRESS_AFTER_MS=off draws nothing.
"""
import os
import pty
import shutil
import subprocess
import sys
import tempfile

CLEAR = b"\r\x1b[K"


def run_tty(argv, env):
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(), out


def run_pipe(argv, env):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env)
    return p.returncode, p.stderr


def main(argv):
    envlog, fixtures = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    helper = argv[2] if len(argv) > 2 else None
    t = tempfile.mkdtemp(prefix="envlog-progress-")
    checks = fails = 0
    try:
        main_env = os.path.join(t, "main")
        shutil.copytree(os.path.join(fixtures, "replay", "main"), main_env)
        bundle = os.path.join(t, "b.envb")
        cases = [
            ("replay", ["-C", main_env, "replay", "-o", "/dev/null"], "replay ["),
            ("verify", ["-C", main_env, "verify"], "verify ["),
            ("status", ["-C", main_env, "status"], "status ["),
            ("diff", ["diff", main_env, os.path.join(fixtures, "replay", "torn")], "diff: reading"),
            ("bundle export", ["-C", main_env, "bundle", "export", "b", "-o", bundle, "--force"],
             "bundle export: compressing ["),
            ("compact", ["-C", main_env, "compact"], "compact: reading ["),
            ("bundle import", ["-C", os.path.join(t, "new"), "bundle", "import", bundle],
             "bundle import: importing ["),
        ]
        if helper and subprocess.run([helper, "probe"]).returncode == 0:
            reb = os.path.join(t, "reb")
            subprocess.run([helper, reb, "good"], check=True, stdout=subprocess.DEVNULL)
            cases.append(("rebuild", ["-C", reb, "rebuild", "--verify"], "rebuild ["))
        else:
            print("progress: rebuild NOT checked (no NVRTC or no helper)")
        env = dict(os.environ, ENVLOG_PROGRESS_AFTER_MS="0")
        for name, args, want in cases:
            for how in ("tty", "pipe"):
                rc, err = (run_tty if how == "tty" else run_pipe)([envlog] + args, env)
                checks += 1
                if rc not in (0, 1):
                    print("progress: FAIL: %s on a %s exited %d: %r" % (name, how, rc, err[-300:]))
                    fails += 1
                elif how == "tty" and (want.encode() not in err or not err.endswith(CLEAR)
                                       and CLEAR not in err.split(want.encode())[-1]):
                    print("progress: FAIL: %s on a terminal drew no %r line, or did not clear it: %r"
                          % (name, want, err[-300:]))
                    fails += 1
                elif how == "pipe" and (b"\x1b[K" in err or b"[#" in err or b"\r" in err):
                    print("progress: FAIL: %s on a pipe printed progress: %r" % (name, err[-300:]))
                    fails += 1
        # A quick command under the default delay, and "off": nothing.
        for value in (None, "off"):
            e = dict(os.environ)
            e.pop("ENVLOG_PROGRESS_AFTER_MS", None)
            if value:
                e["ENVLOG_PROGRESS_AFTER_MS"] = value
            rc, err = run_tty([envlog, "-C", main_env, "verify"], e)
            checks += 1
            if b"\x1b[K" in err:
                print("progress: FAIL: verify drew progress with ENVLOG_PROGRESS_AFTER_MS=%s" % value)
                fails += 1
    finally:
        shutil.rmtree(t)
    print("progress: %d checks, %d failed (commands on a pseudo-terminal and on a pipe)"
          % (checks, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
