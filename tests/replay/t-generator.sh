#!/bin/bash
# SPDX-License-Identifier: MIT
# The committed fixtures are what gen_replay_fixtures makes: it still runs,
# and a fresh run gives the same environments up to ids and times (the
# same sessions, records, segments and states, and the same folded state
# once session ids are numbered in order).
. "$(dirname "$0")/lib.sh"

"$GEN" "$TMP/gen" || fail "the generator failed"
expect_rc 2 "$GEN" "$TMP/gen" # never over an existing directory

normalize() { # ENV: the sessions and the state with ids numbered
    "$ENVLOG" -C "$1" sessions --json >"$TMP/s.json"
    "$ENVLOG" -C "$1" replay >"$TMP/r.json" 2>/dev/null
    "$PY" - "$TMP/s.json" "$TMP/r.json" <<'PY'
import json, sys
ids = {}
for l in open(sys.argv[1]):
    s = json.loads(l)
    ids[s["session"]] = f"S{len(ids)}"
    print(ids[s["session"]], s["label"], s["records"], s["segments"], s["state"])
for l in open(sys.argv[2]):
    for k, v in ids.items():
        l = l.replace(k, v)
    print(l, end="")
PY
}

for fx in $(ls "$FIX"); do
    [ -d "$TMP/gen/$fx" ] || fail "the generator no longer makes $fx"
    normalize "$FIX/$fx" >"$TMP/committed"
    normalize "$TMP/gen/$fx" >"$TMP/fresh"
    diff "$TMP/committed" "$TMP/fresh" || fail "$fx: a fresh run differs from the committed fixture"
done
[ "$(ls "$TMP/gen")" = "$(ls "$FIX")" ] || fail "the generator makes other fixtures"
