#!/bin/bash
# SPDX-License-Identifier: MIT
# trace: valid JSON (python3 -m json.tool), one process per session (its
# process_name metadata), one complete slice per span, tune and compile
# record, on one time axis; to stdout and with -o; and a damaged
# environment still gives a whole file.
. "$(dirname "$0")/lib.sh"

check_trace() { # FIXTURE TRACE-FILE
    "$PY" -m json.tool "$2" >/dev/null || fail "$1: json.tool rejects the trace"
    "$ENVLOG" -C "$FIX/$1" sessions --json >"$TMP/sessions.json"
    "$ENVLOG" -C "$FIX/$1" cat --json >"$TMP/cat.json"
    "$PY" - "$2" "$TMP/sessions.json" "$TMP/cat.json" <<'PY' || fail "$1: trace contents"
import json, sys
from collections import Counter
trace = json.load(open(sys.argv[1]))
sessions = [json.loads(l) for l in open(sys.argv[2])]
records = [json.loads(l) for l in open(sys.argv[3])]
ev = trace["traceEvents"]
problems = []
procs = {e["pid"]: e["args"]["name"] for e in ev
         if e.get("ph") == "M" and e.get("name") == "process_name"}
pnames = [e for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"]
if len(pnames) != len(procs):
    problems.append("a pid named twice")
if len(procs) != len(sessions):
    problems.append(f"{len(procs)} processes for {len(sessions)} sessions")
# every session is one process: its slices all carry its id and one pid
pid_of = {}
for e in ev:
    if e.get("ph") in ("X", "i"):
        sid = e["args"]["session"]
        if pid_of.setdefault(sid, e["pid"]) != e["pid"]:
            problems.append(f"session {sid} in two processes")
        if e["pid"] not in procs:
            problems.append(f"pid {e['pid']} has no process_name")
        if e["ts"] < 0 or e.get("dur", 0) < 0:
            problems.append(f"negative time in {e}")
if len(set(pid_of.values())) != len(pid_of):
    problems.append("two sessions share a process")
for s in sessions:
    short = s["session"][:8]
    if not any(short in n for n in procs.values()):
        problems.append(f"no process named for session {s['session']}")
want = Counter(r["kind"] for r in records if r["kind"] in ("span", "tune", "compile"))
got = Counter(e["cat"] for e in ev if e.get("ph") == "X")
if want != got:
    problems.append(f"slices {dict(got)}, records {dict(want)}")
# one slice per record: each (session, seq) once
keys = Counter((e["args"]["session"], e["args"]["seq"]) for e in ev if e.get("ph") == "X")
dup = [k for k, n in keys.items() if n > 1]
if dup:
    problems.append(f"records drawn twice: {dup}")
recs = {(r["session"], r["seq"]): r["kind"] for r in records}
for k in keys:
    if recs.get(k) not in ("span", "tune", "compile"):
        problems.append(f"slice for {k} is not a span, tune or compile record")
marks = sum(1 for r in records if r["kind"] == "mark")
if sum(1 for e in ev if e.get("ph") == "i") != marks:
    problems.append("marks are not one instant each")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
}

expect_rc 0 "$ENVLOG" -C "$FIX/main" trace
cp "$TMP/out" "$TMP/main.json"
check_trace main "$TMP/main.json"
grep -q '"cat":"span"' "$TMP/main.json" || fail "no span in the trace of main"

expect_rc 0 "$ENVLOG" -C "$FIX/main" trace -o "$TMP/main-o.json"
[ ! -s "$TMP/out" ] || fail "trace -o wrote to stdout"
grep_out "wrote $TMP/main-o.json (6 sessions)" "$TMP/err"
cmp -s "$TMP/main.json" "$TMP/main-o.json" || fail "trace -o differs from stdout"

# Damage: reported, exit 1, the file still whole.
expect_rc 1 "$ENVLOG" -C "$FIX/torn" trace -o "$TMP/torn.json"
grep_out "torn tail" "$TMP/err"
check_trace torn "$TMP/torn.json"

expect_rc 2 "$ENVLOG" -C "$FIX/main" trace --bogus
