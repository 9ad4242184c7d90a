#!/bin/bash
# SPDX-License-Identifier: MIT
# The committed fixtures are what gen_replay_fixtures makes: it still runs,
# and a fresh run gives the same environments up to ids and times (the
# same sessions, records, segments and states, and the same folded state
# once session ids are numbered in order).
. "$(dirname "$0")/lib.sh"

"$GEN" "$TMP/gen" || fail "the generator failed"
expect_rc 2 "$GEN" "$TMP/gen" # never over an existing directory

# Spans are left out of the comparison of records: the committed fixtures
# were written when spans were stamped as they closed, and spans now take
# their seq when they open, a span with a changed record inside it being
# its opening and its close (envlog(5), SPANS).  So records are counted
# without openings, and a stamp in the state is the rank of its record
# among the session's records that are not spans.
normalize() { # ENV: the sessions and the state with ids numbered
    "$ENVLOG" -C "$1" sessions --json >"$TMP/s.json"
    "$ENVLOG" -C "$1" replay >"$TMP/r.json" 2>/dev/null
    "$ENVLOG" -C "$1" cat --json >"$TMP/c.json" 2>/dev/null
    "$PY" - "$TMP/s.json" "$TMP/r.json" "$TMP/c.json" <<'PY'
import json, sys
from collections import Counter
openings = Counter(r["session"] for r in map(json.loads, open(sys.argv[3]))
                   if r.get("kind") == "span" and r.get("open"))
ids = {}
for l in open(sys.argv[1]):
    s = json.loads(l)
    ids[s["session"]] = f"S{len(ids)}"
    print(ids[s["session"]], s["label"], s["records"] - openings[s["session"]],
          s["segments"], s["state"])
rank = {}
for r in map(json.loads, open(sys.argv[3])):
    if r.get("kind") != "span":
        n = sum(1 for (sid, _) in rank if sid == r["session"])
        rank[(r["session"], r["seq"])] = n
def restamp(v):
    if isinstance(v, dict):
        if "session" in v and "seq" in v and (v["session"], v["seq"]) in rank:
            v = dict(v, seq=f"R{rank[(v['session'], v['seq'])]}")
        return {k: restamp(x) for k, x in v.items()}
    if isinstance(v, list):
        return [restamp(x) for x in v]
    return v
for l in open(sys.argv[2]):
    l = json.dumps(restamp(json.loads(l)), sort_keys=True)
    for k, v in ids.items():
        l = l.replace(k, v)
    print(l)
PY
}

for fx in $(ls "$FIX"); do
    [ -d "$TMP/gen/$fx" ] || fail "the generator no longer makes $fx"
    normalize "$FIX/$fx" >"$TMP/committed"
    normalize "$TMP/gen/$fx" >"$TMP/fresh"
    diff "$TMP/committed" "$TMP/fresh" || fail "$fx: a fresh run differs from the committed fixture"
done
[ "$(ls "$TMP/gen")" = "$(ls "$FIX")" ] || fail "the generator makes other fixtures"
