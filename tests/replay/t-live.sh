#!/bin/bash
# SPDX-License-Identifier: MIT
# A live session (its writer, a helper process, still holds the lock) is
# never touched by verify --fix, even when its segment ends in what would
# be a torn tail; once the writer is killed, the same bytes are a torn tail
# that --fix cuts.
. "$(dirname "$0")/lib.sh"

copy_env damage-base "$TMP/env"
"$HOLDER" "$TMP/env" "$TMP/ready" --garbage &
holder=$!
trap 'kill -9 $holder 2>/dev/null' EXIT
for _ in $(seq 1 300); do
    [ -f "$TMP/ready" ] && break
    kill -0 $holder 2>/dev/null || fail "the holder died"
    sleep 0.1
done
[ -f "$TMP/ready" ] || fail "the holder never got ready"
read -r sid seg good <"$TMP/ready"

before=$(tree_sum "$TMP/env")
expect_rc 0 "$ENVLOG" -C "$TMP/env" verify --fix
grep_out "^$sid  live "
grep_out "3 sessions checked: all good"
[ "$before" = "$(tree_sum "$TMP/env")" ] || fail "--fix touched files of a live session"
[ -z "$(find "$TMP/env" -name '*.broken')" ] || fail "a .broken copy of a live segment"
expect_rc 0 "$ENVLOG" -C "$TMP/env" sessions
grep_out "$sid .* live "
# The live writer's records are folded like any others.
expect_rc 0 "$ENVLOG" -C "$TMP/env" why held_key
grep_out "now: y stands"

kill -9 $holder
wait $holder 2>/dev/null
trap - EXIT

expect_rc 1 "$ENVLOG" -C "$TMP/env" verify
grep_out "^$sid  torn "
grep_out "torn tail: segment 0 offset $good: torn tail"
expect_rc 1 "$ENVLOG" -C "$TMP/env" verify --fix
grep_out "fixed: segment 0 cut at offset $good "
cmp -n "$good" "$seg" "$seg.broken" || fail "the kept part and the copy differ"
[ "$(stat -c %s "$seg")" = "$good" ] || fail "not cut at $good"
expect_rc 0 "$ENVLOG" -C "$TMP/env" verify
expect_rc 0 "$ENVLOG" -C "$TMP/env" why held_key

# A live session without damage is simply live.
"$HOLDER" "$TMP/env" "$TMP/ready2" &
holder=$!
trap 'kill -9 $holder 2>/dev/null' EXIT
for _ in $(seq 1 300); do
    [ -f "$TMP/ready2" ] && break
    sleep 0.1
done
read -r sid2 _ _ <"$TMP/ready2"
before=$(tree_sum "$TMP/env")
expect_rc 0 "$ENVLOG" -C "$TMP/env" verify --fix
grep_out "^$sid2  live "
[ "$before" = "$(tree_sum "$TMP/env")" ] || fail "--fix touched a live session"
