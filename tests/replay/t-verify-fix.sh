#!/bin/bash
# SPDX-License-Identifier: MIT
# verify --fix: on a torn tail, cuts it after keeping a byte-identical
# .broken copy of the segment, after which verify is clean and the fold is
# unchanged; other damage (flipped bits, a missing segment) and clean
# environments are left byte for byte as they were.  The goldens
# verify-*.cmd check the reports themselves.
. "$(dirname "$0")/lib.sh"

# --- torn tail
copy_env torn "$TMP/torn"
"$ENVLOG" -C "$TMP/torn" replay >"$TMP/replay-before" 2>/dev/null
big=$(cd "$FIX/torn/sessions" && for s in *; do [ "$(ls "$s" | wc -l)" -gt 1 ] && echo "$s"; done)
[ -n "$big" ] || fail "no multi-segment session in the torn fixture"
last=$(ls "$FIX/torn/sessions/$big" | sort | tail -1)
orig=$FIX/torn/sessions/$big/$last
cut=$("$ENVLOG" -C "$FIX/torn" verify --json | "$PY" -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    for d in o.get("damage", []):
        if d["torn"]:
            print(d["offset"])')
[ -n "$cut" ] || fail "verify --json names no torn tail"

expect_rc 1 "$ENVLOG" -C "$TMP/torn" verify --fix
grep_out "fixed: segment 2 cut at offset $cut ($(( $(stat -c %s "$orig") - cut )) bytes removed); the original is kept as $last.broken"
[ -f "$TMP/torn/sessions/$big/$last.broken" ] || fail "no .broken copy"
cmp "$orig" "$TMP/torn/sessions/$big/$last.broken" || fail ".broken is not the original segment"
[ "$(stat -c %s "$TMP/torn/sessions/$big/$last")" = "$cut" ] || fail "segment not cut at $cut"
cmp -n "$cut" "$orig" "$TMP/torn/sessions/$big/$last" || fail "the kept part changed"

expect_rc 0 "$ENVLOG" -C "$TMP/torn" verify
grep_out "2 sessions checked: all good"
grep_out "^$big  unsealed "
# The torn record was never used: the fold is what it was.
"$ENVLOG" -C "$TMP/torn" replay >"$TMP/replay-after" 2>"$TMP/replay-after.err" ||
    fail "replay after the fix: exit $?"
cmp "$TMP/replay-before" "$TMP/replay-after" || fail "the fix changed the fold"
[ ! -s "$TMP/replay-after.err" ] || fail "replay still reports damage"
# A second --fix finds nothing to do and changes nothing.
before=$(tree_sum "$TMP/torn")
expect_rc 0 "$ENVLOG" -C "$TMP/torn" verify --fix
[ "$before" = "$(tree_sum "$TMP/torn")" ] || fail "a second --fix changed files"

# --- damage that is not a torn tail: reported, never repaired
for fx in flipped missing; do
    copy_env $fx "$TMP/$fx"
    before=$(tree_sum "$TMP/$fx")
    expect_rc 1 "$ENVLOG" -C "$TMP/$fx" verify --fix
    grep_out "not fixed: damage other than a torn tail: not repaired automatically"
    [ "$before" = "$(tree_sum "$TMP/$fx")" ] || fail "$fx: --fix changed files"
    [ -z "$(find "$TMP/$fx" -name '*.broken')" ] || fail "$fx: a .broken copy appeared"
    expect_rc 1 "$ENVLOG" -C "$TMP/$fx" verify
done

# --- clean: nothing to do
copy_env main "$TMP/main"
before=$(tree_sum "$TMP/main")
expect_rc 0 "$ENVLOG" -C "$TMP/main" verify --fix
[ "$before" = "$(tree_sum "$TMP/main")" ] || fail "main: --fix changed files"

# --- verify alone never writes, even to a torn environment
copy_env torn "$TMP/torn2"
before=$(tree_sum "$TMP/torn2")
expect_rc 1 "$ENVLOG" -C "$TMP/torn2" verify
expect_rc 1 "$ENVLOG" -C "$TMP/torn2" verify --json
[ "$before" = "$(tree_sum "$TMP/torn2")" ] || fail "verify without --fix changed files"
"$PY" -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$TMP/out" ||
    fail "verify --json is not one JSON object per line"
