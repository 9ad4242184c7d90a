#!/bin/bash
# SPDX-License-Identifier: MIT
# cuda-gpu.sh ENVLOG RUNNER DEMO - the checks that need a real GPU, in one
# short run for a machine that has one: the cuda suite with its GPU tests
# (which must run, not skip), the demo twice in a fresh environment (the GPU
# autotune and launches checked against the CPU, then everything from the
# cache), and `envlog rebuild --verify` on what the demo compiled.  On a
# machine without a GPU it says so and passes.
set -u
bin=$1
runner=$2
demo=$3
fail() { echo "cuda-gpu: FAIL: $*" >&2; exit 1; }
d=$(mktemp -d "${TMPDIR:-/tmp}/envlog-cuda-gpu-XXXXXX")
trap 'rm -rf "$d"' EXIT

out=$("$runner" cuda 2>&1); rc=$?
echo "$out" | tail -n 3
[ $rc -eq 0 ] || fail "the cuda suite failed"
if echo "$out" | grep -q "skipped (no GPU here)"; then
    echo "cuda-gpu: no GPU here (the suite's GPU tests skipped): nothing more to check"
    exit 0
fi
out=$("$demo" --dir "$d/env" 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "the demo exited $rc"
echo "$out" | grep -q "^\[3\] GPU autotune on " || fail "the demo did not tune on the GPU"
echo "$out" | grep -q "GPU matmul result agrees" || fail "GPU matmul result"
echo "$out" | grep -q "they agree" || fail "GPU sum"
out=$("$demo" --dir "$d/env" 2>&1) || fail "the second demo run exited $?"
echo "$out" | tail -n 3
echo "$out" | grep -q "^everything came from the cache" || fail "the second run was not all hits"
"$bin" -C "$d/env" rebuild --verify | tail -n 1 || fail "rebuild --verify found a difference"
echo "cuda-gpu: all GPU checks passed"
