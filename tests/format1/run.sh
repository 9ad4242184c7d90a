#!/bin/bash
# SPDX-License-Identifier: MIT
# Format 1 still reads: the environments, snapshots and bundles under
# fixtures/format1 were written by envlog 0.1.0 before format 2 (envlog(5),
# FORMAT VERSIONS) and are never rewritten.  Every command that reads them
# must give the canonical output committed beside this script: the fold
# (replay), the full reader (cat --json), verify, status, why, and a
# bundle's inspection and import (the imported environment's fold, with
# the import session's id and times numbered).
#
#   run.sh ENVLOG FIXTURES_DIR [--update]
set -u
ENVLOG=$1
FIX=$2
UPDATE=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 failed=0

# out NAME CMD...: the command's stdout, stderr and exit status, as NAME.
out() {
    local name=$1
    shift
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo "rc $?" >>"$TMP/$name.out"
    cat "$TMP/$name.err" >>"$TMP/$name.out"
    sed -i "s|$TMP|TMP|g; s|$FIX|FIX|g" "$TMP/$name.out"
    if [ -n "$UPDATE" ]; then
        cp "$TMP/$name.out" "$HERE/$name.out"
    elif cmp -s "$TMP/$name.out" "$HERE/$name.out"; then
        pass=$((pass + 1))
    else
        echo "FAIL: $name: the output differs from tests/format1/$name.out"
        diff "$HERE/$name.out" "$TMP/$name.out" | head -20
        failed=$((failed + 1))
    fi
}

# A copy, since reading may take locks and a verify may look for strays.
copy() { rm -rf "$TMP/$1"; cp -r "$FIX/$1" "$TMP/$1"; }

for env in env compacted multiblock; do
    copy $env
    out "$env-replay" "$ENVLOG" -C "$TMP/$env" replay
    out "$env-cat" "$ENVLOG" -C "$TMP/$env" cat --json
    out "$env-verify" "$ENVLOG" -C "$TMP/$env" verify
    out "$env-sessions" "$ENVLOG" -C "$TMP/$env" sessions --json
done
out compacted-why "$ENVLOG" -C "$TMP/compacted" why autotune/triton/3.0.0/sm_90 gemm_64
out env-why "$ENVLOG" -C "$TMP/env" why autotune/triton/3.0.0/sm_90 gemm_64

# Bundles: inspected, then imported into an empty environment.
import_fold() { # BUNDLE: the fold of a fresh environment that imported it
    local dir="$TMP/imp-$1"
    rm -rf "$dir"
    "$ENVLOG" -C "$dir" bundle import "$FIX/$1.envb" >"$TMP/imp.out" || return
    local sid
    sid=$("$ENVLOG" -C "$dir" sessions --json | sed -n 's/.*"session": *"\([0-9a-f]*\)".*/\1/p' | tail -n 1)
    [ -n "$sid" ] || return
    { cat "$TMP/imp.out"; "$ENVLOG" -C "$dir" replay; } | sed "s/$sid/IMPORT/g"
}
for b in main multiblock; do
    out "$b-inspect" "$ENVLOG" bundle inspect "$FIX/$b.envb" --json
    out "$b-import" import_fold "$b"
done

echo "format 1 fixtures: $pass passed, $failed failed"
[ "$failed" = 0 ]
