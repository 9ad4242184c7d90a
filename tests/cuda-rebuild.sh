#!/bin/bash
# SPDX-License-Identifier: MIT
# cuda-rebuild.sh ENVLOG HELPER - the test of `envlog rebuild`: an
# environment compiled at FULL, and one kernel at BASIC whose source the
# runtime recorded on its own, rebuilds reproducibly (exit 0); a kernel that
# embeds the time differs (exit 1) with every input the same; a record whose
# source does not hash to its source_hash differs naming that input; no
# NVRTC makes every kernel unavailable with its reason and the run not green
# (exit 1: nothing verified); --verify never writes; a plain rebuild records
# again a kernel the state no longer holds.  Skips, saying so, without
# NVRTC.
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
echo "$out" | grep -q "^5 reproducible, 0 differ, 0 unavailable, 0 without a recorded source: 5 of 5 kernels checked" ||
  fail "unexpected summary: $out"; ok
[ "$(echo "$out" | grep -c '^reproducible ')" -eq 5 ] || fail "not 5 reproducible lines: $out"; ok
echo "$out" | grep -q "refused again, as recorded" || fail "the refused kernel: $out"; ok
after=$(cd "$d/good" && find . | sort | xargs ls -ld --time-style=+%s.%N 2>/dev/null | md5sum)
[ "$before" = "$after" ] || fail "rebuild --verify wrote to the environment"; ok

json=$("$bin" -C "$d/good" rebuild --verify --json) || fail "--json exited $?"
[ "$(echo "$json" | wc -l)" -eq 6 ] || fail "--json: not 6 lines: $json"; ok
echo "$json" | tail -1 | grep -q '"summary":true,"reproducible":5,"differs":0,"unavailable":0,"skipped_without_source":0,.*"kernels":5,"checked":5,.*"verdict":"reproducible"' ||
  fail "--json summary: $(echo "$json" | tail -1)"; ok
echo "$json" | head -1 | grep -q '"status":"reproducible".*"rebuilt_hash":"[0-9a-f]\{32\}"' ||
  fail "--json item: $(echo "$json" | head -1)"; ok

out=$(ENVLOG_NVRTC=/nonexistent/libnvrtc.so "$bin" -C "$d/good" rebuild --verify 2>&1); rc=$?
[ $rc -eq 1 ] || fail "without NVRTC (nothing verified) rebuild exited $rc, not 1: $out"; ok
echo "$out" | grep -q "^0 reproducible, 0 differ, 5 unavailable, 0 without a recorded source: 0 of 5 kernels checked" ||
  fail "without NVRTC: $out"; ok
echo "$out" | grep -q "ENVLOG_NVRTC=/nonexistent/libnvrtc.so" || fail "no reason given: $out"; ok
echo "$out" | grep -q "^envlog: rebuild: 0 of 5 kernels checked: not checked: 5 (no NVRTC here)" ||
  fail "no account of what was not checked: $out"; ok

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
echo "$out" | grep -q "every recorded input is what was used (source hash, options \"\", NVRTC" ||
  fail "the same inputs not said: $out"; ok

"$helper" "$d/mm" mismatch || fail "making the mismatch environment"
out=$("$bin" -C "$d/mm" rebuild --verify 2>&1); rc=$?
[ $rc -eq 1 ] || fail "a mismatched source: exit $rc, not 1: $out"; ok
echo "$out" | grep -q "source hash: recorded [0-9a-f]\{16\}, the source used hashes to [0-9a-f]\{16\}" ||
  fail "the differing input not named: $out"; ok
json=$("$bin" -C "$d/mm" rebuild --verify --json)
echo "$json" | head -1 | grep -q '"inputs_differ":\["source_hash","kernel_key"\]' ||
  fail "--json inputs_differ: $json"; ok

out=$("$bin" -C "$d/none" rebuild --verify 2>&1); rc=$?
[ $rc -eq 2 ] || fail "a missing environment: exit $rc, not 2: $out"; ok
echo "cuda-rebuild: $n checks passed"
