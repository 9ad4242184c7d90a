#!/bin/bash
# SPDX-License-Identifier: MIT
# run.sh - `envlog trace` end to end.
#
#   run.sh ENVLOG TRACE_ENV OUTDIR FIXTURES_REPLAY
#
# Writes environments with tests/trace/trace_env (spans, tunes and compiles
# from several threads; a real two-thread NVRTC batch where NVRTC is
# there), traces them and the replay fixtures (records written before
# threads and starts were recorded), holds every trace to the Trace Event
# Format and to its records (check_trace.py), and draws each into
# OUTDIR/*.png (draw_trace.py) for a person to look at.  What did not run is
# said, and counted apart from what passed.
set -u
if [ $# -ne 4 ]; then
    echo "usage: run.sh ENVLOG TRACE_ENV OUTDIR FIXTURES_REPLAY" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
ENVLOG=$(realpath "$1") TRACE_ENV=$(realpath "$2") OUT=$3 FIX=$(realpath "$4")
PY=${PY:-/usr/bin/python3}
unset ENVLOG_DIR
mkdir -p "$OUT"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/envlog-trace-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/xdg
pass=0 failed=() notrun=()

# check NAME ENV [check_trace options]: trace ENV, check it, draw it.
check() {
    local name=$1 env=$2
    shift 2
    local ok=1 want=${WANT_RC:-0} rc
    "$ENVLOG" -C "$env" trace -o "$tmp/$name.json" 2>"$tmp/$name.err"
    rc=$?
    [ $rc = "$want" ] || {
        echo "FAIL: $name: envlog trace exited $rc, not $want"; cat "$tmp/$name.err"; ok=0; }
    "$ENVLOG" -C "$env" cat --json >"$tmp/$name.cat" 2>>"$tmp/$name.err"
    rc=$?
    [ $rc = "$want" ] || {
        echo "FAIL: $name: envlog cat exited $rc, not $want"; cat "$tmp/$name.err"; ok=0; }
    if [ $ok = 1 ] && ! "$PY" "$here/check_trace.py" "$tmp/$name.json" \
        --records "$tmp/$name.cat" "$@"; then
        echo "FAIL: $name: the trace breaks the rules above"; ok=0
    fi
    if [ $ok = 1 ] && ! "$PY" "$here/draw_trace.py" "$tmp/$name.json" "$OUT/$name.png" \
        "envlog trace: $name" >"$tmp/$name.draw" 2>&1; then
        echo "FAIL: $name: drawing it failed"; cat "$tmp/$name.draw"; ok=0
    fi
    if [ $ok = 1 ]; then
        cp "$tmp/$name.json" "$OUT/$name.json"
        pass=$((pass + 1))
    else
        failed+=("$name")
    fi
}

# The checker must catch what it is for: a crossing on one track, a
# compile moved off its start, a track without a name.
selftest() {
    local name=$1 want=$2 edit=$3
    "$PY" - "$tmp/threads.json" "$tmp/$name.json" "$edit" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"]
edit = sys.argv[3]
xs = [e for e in ev if e.get("ph") == "X"]
if edit == "cross":
    a = next(e for e in xs if e["name"] == "crossing-a")
    b = next(e for e in xs if e["name"] == "crossing-b")
    b["tid"] = a["tid"]
elif edit == "move":
    c = next(e for e in xs if e["cat"] == "compile" and e["args"]["start_recorded"])
    c["ts"] += 0.001
elif edit == "unnamed":
    ev[:] = [e for e in ev if e.get("name") != "thread_name" or e["tid"] != 1]
json.dump(doc, open(sys.argv[2], "w"))
PY
    if "$PY" "$here/check_trace.py" "$tmp/$name.json" --records "$tmp/threads.cat" \
        >"$tmp/$name.out" 2>&1; then
        echo "FAIL: check_trace.py accepts a trace with $want"; failed+=("$name")
    elif ! grep -q "$want" "$tmp/$name.out"; then
        echo "FAIL: check_trace.py rejects $name without saying '$want':"
        cat "$tmp/$name.out"; failed+=("$name")
    else
        pass=$((pass + 1))
    fi
}

"$TRACE_ENV" threads "$tmp/threads" || { echo "FAIL: trace_env threads"; exit 1; }
check threads "$tmp/threads" --min-compile-threads 2
selftest crossing "crosses" cross
selftest moved "recorded at" move
selftest unnamed "has no thread_name" unnamed

"$TRACE_ENV" batch "$tmp/batch" >"$tmp/batch.log" 2>&1
rc=$?
if [ $rc = 77 ]; then
    notrun+=("batch ($(cat "$tmp/batch.log"))")
elif [ $rc != 0 ]; then
    echo "FAIL: trace_env batch"; cat "$tmp/batch.log"; failed+=(batch)
else
    check batch "$tmp/batch"
fi

# Records written before threads and starts were recorded, and a torn
# session (reported, exit 1, the trace still whole).
check fixture-main "$FIX/main"
WANT_RC=1 check fixture-torn "$FIX/torn"

for n in "${notrun[@]}"; do
    echo "NOT RUN: $n"
done
echo "trace: $pass passed, ${#failed[@]} failed${failed:+ (${failed[*]})}," \
     "${#notrun[@]} not run; pictures in $OUT"
[ ${#failed[@]} = 0 ]
