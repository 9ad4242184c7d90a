#!/bin/bash
# SPDX-License-Identifier: MIT
# replay --until through the command line: for records across the total
# order, SESSION:SEQ (full id or prefix) and the record's time in Unix ns
# give the same state, an ISO 8601 time means the same as its Unix ns, the
# last record gives the whole state and a time before the first gives
# none; bad points are usage errors.  (check_replay_history.c checks each
# point against a physically truncated copy of the history.)
. "$(dirname "$0")/lib.sh"

env=$FIX/main
"$ENVLOG" -C "$env" sessions --json >"$TMP/sessions.json" || fail "sessions"
"$ENVLOG" -C "$env" cat --json >"$TMP/cat.json" || fail "cat"
# The total order: session start + offset, session id, seq.
"$PY" - "$TMP/sessions.json" "$TMP/cat.json" >"$TMP/order" <<'PY'
import json, sys
start = {}
for l in open(sys.argv[1]):
    s = json.loads(l)
    start[s["session"]] = s["start_unix_ns"]
recs = []
for l in open(sys.argv[2]):
    r = json.loads(l)
    recs.append((start[r["session"]] + r["offset_ns"], r["session"], r["seq"]))
recs.sort()
for t, s, q in recs:
    print(t, s, q)
PY
n=$(wc -l <"$TMP/order")
[ "$n" -ge 20 ] || fail "only $n records in the fixture"
"$ENVLOG" -C "$env" replay >"$TMP/full" || fail "replay"

changes=0
while read -r t sid seq; do
    "$ENVLOG" -C "$env" replay --until "$sid:$seq" >"$TMP/a" || fail "--until $sid:$seq"
    "$ENVLOG" -C "$env" replay --until "$t" >"$TMP/b" || fail "--until $t"
    "$ENVLOG" -C "$env" replay --until="${sid:0:12}:$seq" >"$TMP/c" || fail "--until= prefix"
    cmp -s "$TMP/a" "$TMP/b" || { diff "$TMP/a" "$TMP/b"; fail "$sid:$seq and $t differ"; }
    cmp -s "$TMP/a" "$TMP/c" || fail "a session id prefix gives another state"
    cp "$TMP/a" "$TMP/prev"
    changes=$((changes + 1))
done <"$TMP/order"
[ "$changes" = "$n" ] || fail "walked $changes of $n records"
cmp -s "$TMP/prev" "$TMP/full" || fail "--until the last record is not the whole state"

first=$(head -1 "$TMP/order" | cut -d' ' -f1)
expect_rc 0 "$ENVLOG" -C "$env" replay --until $((first - 1))
[ ! -s "$TMP/out" ] || fail "--until before the first record is not empty"

# ISO 8601 to the millisecond: the same as that millisecond in Unix ns.
mid=$(sed -n "$((n / 2))p" "$TMP/order" | cut -d' ' -f1)
ms=$((mid / 1000000))
iso=$(date -u -d "@$((ms / 1000))" +%Y-%m-%dT%H:%M:%S).$(printf %03d $((ms % 1000)))Z
"$ENVLOG" -C "$env" replay --until "$iso" >"$TMP/iso" || fail "--until $iso"
"$ENVLOG" -C "$env" replay --until "$((ms * 1000000))" >"$TMP/ns" || fail "--until ns"
cmp -s "$TMP/iso" "$TMP/ns" || fail "--until $iso differs from its Unix ns"

# --out writes the same bytes, atomically (no .tmp left).
expect_rc 0 "$ENVLOG" -C "$env" replay --until "$mid" --out "$TMP/dump"
[ ! -s "$TMP/out" ] || fail "--out wrote to stdout"
"$ENVLOG" -C "$env" replay --until "$mid" >"$TMP/stdout-dump"
cmp -s "$TMP/dump" "$TMP/stdout-dump" || fail "--out differs from stdout"
[ -s "$TMP/dump" ] || fail "an empty dump half way through the history"
[ ! -e "$TMP/dump.tmp" ] || fail "--out left its .tmp behind"

sid=$(head -1 "$TMP/order" | cut -d' ' -f2)
expect_rc 2 "$ENVLOG" -C "$env" replay --until "$sid:999"
grep_out "no record $sid:999" "$TMP/err"
expect_rc 2 "$ENVLOG" -C "$env" replay --until "ffffffff:1"
grep_out "no session matches 'ffffffff'" "$TMP/err"
expect_rc 2 "$ENVLOG" -C "$env" replay --until "yesterday"
expect_rc 2 "$ENVLOG" -C "$env" replay --until "2026-13-45T99:00:00Z"
