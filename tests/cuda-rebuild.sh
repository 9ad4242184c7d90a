#!/bin/bash
# SPDX-License-Identifier: MIT
# cuda-rebuild.sh ENVLOG HELPER - the test of `envlog rebuild`: an
# environment compiled at FULL rebuilds reproducibly (exit 0), a kernel that
# embeds the time differs (exit 1), no NVRTC makes every kernel unavailable
# with its reason, --verify never writes, and a plain rebuild records again a
# kernel the state no longer holds.  Skips, saying so, without NVRTC.
set -u
bin=$1
helper=$2
d=$(mktemp -d "${TMPDIR:-/tmp}/envlog-cuda-rebuild-XXXXXX")
trap 'rm -rf "$d"' EXIT
n=0
fail() { echo "cuda-rebuild: FAIL: $*" >&2; exit 1; }
ok() { n=$((n + 1)); }

"$helper" probe
case $? in
0) ;;
77) echo "cuda-rebuild: skipped: NVRTC is not available here"; exit 0 ;;
*) fail "the helper does not run" ;;
esac

"$helper" "$d/good" good || fail "making the environment"
before=$(cd "$d/good" && find . | sort | xargs ls -ld --time-style=+%s.%N 2>/dev/null | md5sum)
out=$("$bin" -C "$d/good" rebuild --verify 2>&1); rc=$?
[ $rc -eq 0 ] || fail "rebuild --verify exited $rc: $out"; ok
echo "$out" | grep -q "^4 reproducible, 0 differ, 0 unavailable; 1 compile record without a source" ||
  fail "unexpected summary: $out"; ok
[ "$(echo "$out" | grep -c '^reproducible ')" -eq 4 ] || fail "not 4 reproducible lines: $out"; ok
echo "$out" | grep -q "refused again, as recorded" || fail "the refused kernel: $out"; ok
after=$(cd "$d/good" && find . | sort | xargs ls -ld --time-style=+%s.%N 2>/dev/null | md5sum)
[ "$before" = "$after" ] || fail "rebuild --verify wrote to the environment"; ok

json=$("$bin" -C "$d/good" rebuild --verify --json) || fail "--json exited $?"
[ "$(echo "$json" | wc -l)" -eq 5 ] || fail "--json: not 5 lines: $json"; ok
echo "$json" | tail -1 | grep -q '"summary":true,"reproducible":4,"differs":0,"unavailable":0,"skipped_without_source":1' ||
  fail "--json summary: $(echo "$json" | tail -1)"; ok
echo "$json" | head -1 | grep -q '"status":"reproducible".*"rebuilt_hash":"[0-9a-f]\{32\}"' ||
  fail "--json item: $(echo "$json" | head -1)"; ok

out=$(ENVLOG_NVRTC=/nonexistent/libnvrtc.so "$bin" -C "$d/good" rebuild --verify 2>&1); rc=$?
[ $rc -eq 0 ] || fail "without NVRTC rebuild exited $rc: $out"; ok
echo "$out" | grep -q "^0 reproducible, 0 differ, 4 unavailable" || fail "without NVRTC: $out"; ok
echo "$out" | grep -q "ENVLOG_NVRTC=/nonexistent/libnvrtc.so" || fail "no reason given: $out"; ok

"$bin" -C "$d/good" forget --kernel envlog_reduce_sum --all >/dev/null || fail "forget"
out=$("$bin" -C "$d/good" rebuild 2>&1); rc=$?
[ $rc -eq 0 ] || fail "rebuild exited $rc: $out"; ok
[ "$(echo "$out" | grep -c 'recorded again: the state')" -eq 1 ] || fail "not restored once: $out"; ok
out=$("$bin" -C "$d/good" rebuild 2>&1) || fail "second rebuild exited $?"
echo "$out" | grep -q 'recorded again: the state' && fail "restored twice: $out"; ok

"$helper" "$d/ts" timestamp || fail "making the timestamp environment"
sleep 1.1
out=$("$bin" -C "$d/ts" rebuild --verify 2>&1); rc=$?
[ $rc -eq 1 ] || fail "a differing kernel: exit $rc, not 1: $out"; ok
echo "$out" | grep -q "^differs " || fail "no 'differs' line: $out"; ok
echo "$out" | grep -q "^0 reproducible, 1 differ, 0 unavailable" || fail "summary: $out"; ok

out=$("$bin" -C "$d/none" rebuild --verify 2>&1); rc=$?
[ $rc -eq 2 ] || fail "a missing environment: exit $rc, not 2: $out"; ok
echo "cuda-rebuild: $n checks passed"
