#!/bin/bash
# SPDX-License-Identifier: MIT
# cuda-man.sh STATIC - envlog-cuda(3) checked against the code: the program
# of its EXAMPLES compiles with -Wall -Wextra -Werror against STATIC, runs
# twice in one fresh environment with the exit status the text gives, and
# prints the lines of the second block (not "$ " lines; "..." matches
# anything); every function of include/envlog_cuda.h is named on the page;
# `man -l' renders it without a warning (skipped without man).
# $CC and $MAN_CFLAGS are word lists on purpose.
# shellcheck disable=SC2086
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATIC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
CC=${CC:-cc}
MAN_CFLAGS=${MAN_CFLAGS:-}
PAGE=$ROOT/man/envlog-cuda.3
HDR=$ROOT/include/envlog_cuda.h
tmp=$(mktemp -d "${TMPDIR:-/tmp}/envlog-cuda-man.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    [ $# -gt 1 ] && [ -s "$2" ] && sed 's/^/    | /' "$2" | head -n 40
}
unroff() {
    sed -e 's/\\e/\x01/g' -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' \
        -e 's/\\f[BIRP]//g' -e 's/\\&//g' -e 's/\x01/\\/g'
}

# The example: block 1 is the program, block 2 what running it shows.
awk -v dir="$tmp" '
    /^\.\\" example-begin/ { inex = 1; st = $0; sub(/.*status=/, "", st); print st > (dir "/status"); next }
    /^\.\\" example-end/ { inex = 0; next }
    !inex { next }
    /^\.EX/ { code = 1; blk++; next }
    /^\.EE/ { code = 0; next }
    code { print > (dir "/b" blk); next }
    /^\.\\"/ { next }
    { print >> (dir "/text") }
' "$PAGE"
want=$(cat "$tmp/status" 2>/dev/null || echo missing)
if [ ! -s "$tmp/b1" ] || [ ! -s "$tmp/b2" ]; then
    fail "envlog-cuda(3) has an example program and its output"
elif ! unroff < "$tmp/text" | tr '\n' ' ' | grep -qi "status $want\b"; then
    fail "envlog-cuda(3) example: its text does not say \"status $want\""
else
    unroff < "$tmp/b1" > "$tmp/example.c"
    if ! $CC $MAN_CFLAGS -std=c11 -Wall -Wextra -Werror -I"$ROOT/include" "$tmp/example.c" \
        "$STATIC" -lcbor -lxxhash -lzstd -lpthread -ldl -lm -o "$tmp/example" 2> "$tmp/cc.err"; then
        fail "envlog-cuda(3) example compiles" "$tmp/cc.err"
    else
        pass "envlog-cuda(3) example compiles with -Wall -Wextra -Werror"
        mkdir "$tmp/env"
        rc=0
        for run in 1 2; do
            (ENVLOG_DIR="$tmp/env" "$tmp/example" >> "$tmp/out" 2>&1) || rc=$?
        done
        # every expected line, in order, against the output lines
        unroff < "$tmp/b2" | grep -v '^\$ ' > "$tmp/want"
        ok=1
        line=0
        while IFS= read -r w; do
            line=$((line + 1))
            got=$(sed -n "${line}p" "$tmp/out")
            pat=$(printf '%s' "$w" | sed -e 's/[][\.*^$/]/\\&/g' -e 's/\\\.\\\.\\\./.*/g')
            printf '%s\n' "$got" | grep -q "^$pat\$" || { ok=0; echo "line $line: want '$w', got '$got'" >> "$tmp/diff"; }
        done < "$tmp/want"
        if [ "$rc" -ne "$want" ]; then
            echo "exit status $rc, the page says $want" >> "$tmp/out"
            fail "envlog-cuda(3) example runs (status $want)" "$tmp/out"
        elif [ $ok -ne 1 ]; then
            cat "$tmp/out" >> "$tmp/diff"
            fail "envlog-cuda(3) example: output differs from the page" "$tmp/diff"
        else
            pass "envlog-cuda(3) example runs twice: measured, then from the cache"
        fi
    fi
fi

# Every function of the header is on the page.
grep -oE '^[a-z][a-z0-9_ *]*[ *](envlog_cuda_[a-z0-9_]+)\(' "$HDR" |
    sed -E 's/.*(envlog_cuda_[a-z0-9_]+)\($/\1/' | sort -u > "$tmp/functions"
missing=$(while read -r f; do grep -q "^\.BR $f ()" "$PAGE" || echo "$f"; done < "$tmp/functions")
if [ -z "$missing" ] && [ -s "$tmp/functions" ]; then
    pass "envlog-cuda(3) names all $(wc -l < "$tmp/functions") functions of envlog_cuda.h"
else
    echo "$missing" > "$tmp/missing"
    fail "envlog-cuda(3) names every function of envlog_cuda.h" "$tmp/missing"
fi

if command -v man > /dev/null 2>&1; then
    if MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$PAGE" > "$tmp/page.txt" 2> "$tmp/page.err" &&
        [ ! -s "$tmp/page.err" ] && [ -s "$tmp/page.txt" ]; then
        pass "man -l envlog-cuda.3 renders without warnings"
    else
        fail "man -l envlog-cuda.3 renders without warnings" "$tmp/page.err"
    fi
else
    echo "SKIP: man is not installed; envlog-cuda(3)'s rendering is not checked"
fi
echo "cuda-man: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
