#!/bin/bash
# SPDX-License-Identifier: MIT
# The upkeep commands end to end: config (defaults, one setting changed, a
# bad file applied not at all), the automatic compaction a session end
# starts, prune, gc and forget --namespace, each with --dry-run changing no
# file, their exit statuses, and why/diff/status saying what went and why.
# usage: upkeep.sh ENVLOG REC_PROGRAM
set -u
ENVLOG=$1 REC=$2
t=$(mktemp -d "${TMPDIR:-/tmp}/envlog-upkeep-XXXXXX")
trap 'rm -rf "$t"' EXIT
fail=0 pass=0
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
check() { # name expected-status command...
    local name=$1 want=$2; shift 2
    "$@" > "$t/out" 2> "$t/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        bad "$name: exit $got, want $want"; cat "$t/out" "$t/err"
    else
        pass=$((pass + 1))
    fi
}
has() { # name file pattern: the file holds the fixed string
    if grep -qF -- "$3" "$2"; then pass=$((pass + 1)); else bad "$1: no '$3' in: $(cat "$2")"; fi
}
# Every file and directory under DIR with its bytes and mode.
tree() { (cd "$1" && find . -printf '%p %y %m %s\n' | sort && find . -type f -print0 |
              sort -z | xargs -0 md5sum); }
unchanged() { # name dir: the tree is as snapped
    if [ "$(tree "$2")" = "$(cat "$t/snap")" ]; then pass=$((pass + 1)); else
        bad "$1: the dry run changed the environment"; diff <(cat "$t/snap") <(tree "$2") | head; fi
}
E() { "$ENVLOG" -C "$t/e" "$@"; }

# ---- config
"$REC" "$t/e" 0 1 || exit 1
check config-defaults 0 E config
has config-defaults "$t/out" "compact_sessions = 4 "
has config-defaults "$t/out" "auto_compact     = on "
[ ! -e "$t/e/config" ] || bad "config: printing the settings wrote a file"
check config-set 0 E config auto_compact off
has config-set "$t/e/config" "auto_compact     = off"
check config-evidence 0 E config evidence all
cp "$t/e/config" "$t/config.good"
check config-bad-value 3 E config compact_sessions 0
has config-bad-value "$t/err" "compact_sessions is at least 1"
check config-typo 3 E config compact_sesions 3
has config-typo "$t/err" "did you mean compact_sessions?"
cmp -s "$t/e/config" "$t/config.good" || bad "config: a refused setting changed the file"
check config-usage 2 E config compact_sessions
# A file edited by hand with a bad line applies not at all.
printf 'auto_compact = off\nmax_size = lots\n' > "$t/e/config"
check config-check-bad 3 E config --check
has config-check-bad "$t/err" "config line 2"
check status-bad-config 3 E status
cp "$t/config.good" "$t/e/config"
check config-check 0 E config --check

# ---- automatic compaction: off, then on at 2 sessions.
"$REC" "$t/e" 1 2 && "$REC" "$t/e" 2 3 && "$REC" "$t/e" 0 4 || exit 1
[ ! -e "$t/e/snapshot/current" ] || bad "auto_compact off: it compacted"
check status-off 0 E status
has status-off "$t/out" "automatic compaction off"
check config-on 0 E config auto_compact on
check config-two 0 E config compact_sessions 2
E replay > "$t/before"
"$REC" "$t/e" 1 5 || exit 1 # its end starts a compactor in the background
for _ in $(seq 100); do [ -e "$t/e/snapshot/current" ] && [ ! -e "$t/e/LOCK" ] && break; sleep 0.1; done
for _ in $(seq 100); do E status > "$t/status" 2>&1; grep -q "^compacted.*automatic" "$t/status" && break; sleep 0.1; done
has status-auto "$t/status" "automatic: 5 sessions"
check config-off-again 0 E config auto_compact off
"$REC" "$t/e" 2 6 && "$REC" "$t/e" 0 7 || exit 1
E replay > "$t/state"

# ---- prune: the history of the newest session only.
tree "$t/e" > "$t/snap"
check prune-dry 0 E prune --keep-sessions 1 --dry-run
has prune-dry "$t/out" "prune (dry run: nothing changed):"
unchanged prune-dry "$t/e"
grep -qE "would go" "$t/out" && ! grep -q "^prune.*: 0 records" "$t/out" ||
    bad "prune-dry: no history would go: $(cat "$t/out")"
check prune-json-dry 0 E prune --keep-sessions 1 --dry-run --json
has prune-json-dry "$t/out" '"type":"removed","schema_version":1,"removed":"history"'
has prune-json-dry "$t/out" '"dry_run":true'
unchanged prune-json-dry "$t/e"
check prune-usage 2 E prune
check prune-bad-age 3 E prune --older-than soon
unchanged prune-bad-age "$t/e"
check prune 0 E prune --keep-sessions 1
has prune "$t/out" "records of history dropped"
E replay > "$t/after"
cmp -s "$t/state" "$t/after" || bad "prune: the replayed state changed"
check why-after-prune 0 E why matmul/256
has why-after-prune "$t/out" "<- winner"

# ---- forget --namespace
tree "$t/e" > "$t/snap"
check forget-dry 0 E forget --namespace nvrtc --dry-run
has forget-dry "$t/out" "would forget kernel"
has forget-dry "$t/out" "1 entry would be forgotten under nvrtc"
unchanged forget-dry "$t/e"
check forget-partial-component 1 E forget --namespace nvrtc/13
unchanged forget-partial-component "$t/e"
check forget-bad-prefix 2 E forget --namespace nvrtc/
check forget-bad-reason 2 E forget --namespace nvrtc --reason ""
unchanged forget-bad-reason "$t/e"
cp -a "$t/e" "$t/before-forget"
check forget 0 E forget --namespace nvrtc/13.0 --reason "CUDA 13.0 retired"
has forget "$t/out" "1 entry under nvrtc/13.0, one tombstone"
E replay > "$t/after"
grep -q '"table":"kernel"' "$t/after" && bad "forget: the kernel still stands"
[ "$(grep -c '"table":"tune"' "$t/after")" = 3 ] || bad "forget: the tunes changed"
check diff-forgotten 1 "$ENVLOG" diff "$t/before-forget" "$t/e"
has diff-forgotten "$t/out" "(everything under nvrtc/13.0): CUDA 13.0 retired"
check forget-again 1 E forget --namespace nvrtc

# ---- gc: a bound only the head fits, so every entry goes.
tree "$t/e" > "$t/snap"
check gc-none 2 E gc
has gc-none "$t/err" "no size bound"
check gc-dry 0 E gc --max-size 4KiB --dry-run
has gc-dry "$t/out" "gc (dry run: nothing changed):"
has gc-dry "$t/out" "evicted tune autotune/rt/1.0/sm_90 matmul/256"
unchanged gc-dry "$t/e"
check gc-bad-size 3 E gc --max-size huge
unchanged gc-bad-size "$t/e"
check gc 0 E gc --max-size 100 --json
has gc "$t/out" '"fits":false'
has gc "$t/err" "more than half of the bound"
E replay > "$t/after"
grep -q '"table":"tune"' "$t/after" && bad "gc: a tune still stands"
check why-evicted 1 E why matmul/256
has why-evicted "$t/out" "evicted: the environment is over its max_size of 100 bytes"
has why-evicted "$t/out" "the records that set its entry are no longer kept"
has why-evicted "$t/out" "is kept: a forget above removed it with its history"
check verify-after 0 E verify

echo "upkeep commands: $pass checks passed, $fail failed"
[ "$fail" = 0 ]
