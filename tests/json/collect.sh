#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs every command that has --json, over copies of the fixtures and an
# environment it makes (compacted, exported, imported, pruned, forgotten,
# damaged), and appends each JSON line printed to OUT: what
# tests/json/validate.py holds to schemas/.  A command whose exit status is
# not the one expected fails the run.
# usage: collect.sh ENVLOG FIXTURES OUT [REBUILD_ENV [CUDA_DEMO]]
set -u
E=$(realpath "$1")
FIX=$(realpath "$2")
OUT=$3
REB=${4:-}
DEMO=${5:-}
t=$(mktemp -d "${TMPDIR:-/tmp}/envlog-json-XXXXXX")
trap 'rm -rf "$t"' EXIT
: > "$OUT"
fails=0
# run RC ARGS...: the JSON lines of `envlog ARGS` go to OUT.
run() {
    local want=$1
    shift
    "$E" "$@" > "$t/o" 2> "$t/e"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "collect: envlog $* exited $rc, not $want: $(head -c 300 "$t/e")" >&2
        fails=$((fails + 1))
    fi
    if ! grep -q '^{' "$t/o"; then
        echo "collect: envlog $* printed no JSON line" >&2
        fails=$((fails + 1))
    fi
    grep '^{' "$t/o" >> "$OUT"
}
cp -r "$FIX/replay/main" "$t/main"
cp -r "$FIX/replay/torn" "$t/torn"
cp -r "$FIX/replay/flipped" "$t/flipped"
cp -r "$FIX/envs/basic" "$t/basic"
run 0 -C "$t/main" status --json
run 0 -C "$t/main" replay
run 0 -C "$t/main" sessions --json
run 1 -C "$t/torn" sessions --json
run 0 -C "$t/basic" cat --json
run 0 -C "$t/main" why softmax_64 --json
run 1 -C "$t/main" why attn_256 --json --namespace autotune/triton/3.0.0/sm_90 --checksum 7
run 1 -C "$t/main" why no-such-key --json
run 0 -C "$t/main" verify --json
run 1 -C "$t/torn" verify --json
run 1 -C "$t/flipped" verify --json
run 0 -C "$t/main" forget softmax_64 --dry-run --json
run 0 -C "$t/main" forget softmax_64 --json
run 1 -C "$t/main" why softmax_64 --json
run 0 -C "$t/main" forget --namespace autotune/triton/3.0.0/sm_80 --dry-run --json
run 0 -C "$t/main" bundle export nightly -o "$t/n.envb" --json
run 0 bundle inspect "$t/n.envb" --json
run 0 verify --json "$t/n.envb"
run 0 -C "$t/new" bundle import "$t/n.envb" --json
run 0 -C "$t/new" bundle import "$t/n.envb" --json
run 1 diff "$t/main" "$t/basic" --json
run 0 diff "$t/new" "$t/n.envb" --json
run 0 -C "$t/main" compact --json
run 0 -C "$t/main" compact --evidence all --json
run 0 -C "$t/main" status --json
run 0 -C "$t/main" verify --json
run 0 -C "$t/main" prune --keep-sessions 1 --dry-run --json
run 0 -C "$t/main" prune --older-than 0s --json
run 0 -C "$t/main" gc --max-size 1MiB --json
run 0 -C "$t/main" gc --max-size 1 --dry-run --json
run 1 -C "$t/main" why softmax_64 --json
# rebuild needs compiles recorded at FULL, made with NVRTC.
if [ -z "$REB" ]; then
    echo "collect: rebuild --json NOT checked (no helper given)"
elif "$REB" probe; then
    "$REB" "$t/reb" good > /dev/null || { echo "collect: making a rebuild environment failed" >&2; exit 1; }
    run 0 -C "$t/reb" rebuild --verify --json
else
    echo "collect: rebuild --json NOT checked: NVRTC is not available here"
fi
# The demo's job (make demo) into an environment of its own.
if [ -n "$DEMO" ]; then
    "$DEMO" --dir "$t/demo" --quick > "$t/demo.log" 2>&1 ||
        { echo "collect: the demo failed: $(tail -n 3 "$t/demo.log")" >&2; exit 1; }
    run 0 -C "$t/demo" status --json
    run 0 -C "$t/demo" sessions --json
    run 0 -C "$t/demo" cat --json
    run 0 -C "$t/demo" why "matmul-cpu/m=128,n=128,k=128" --json
    run 0 -C "$t/demo" verify --json
    run 0 -C "$t/demo" replay
    run 0 -C "$t/demo" bundle export demo -o "$t/demo.envb" --json
    run 0 -C "$t/demo" compact --json
    run 0 -C "$t/demo" status --json
else
    echo "collect: the demo's environment NOT checked (no demo program given)"
fi
n=$(wc -l < "$OUT")
echo "collect: $n JSON lines from $(grep -c . <<< "$(grep -o '"type":"[a-z.]*"' "$OUT" | sort -u)") line types"
[ "$fails" = 0 ]
