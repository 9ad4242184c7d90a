#!/bin/bash
# SPDX-License-Identifier: MIT
# golden.sh - the golden CLI tests of replay and the commands that explain
# it: tests/cli/{replay,why,verify,trace,status,forget}-*.cmd.
#
#   golden.sh ENVLOG FIXTURES [--update] [NAME...]
#
# Each NAME.cmd is a bash script run in a fresh scratch directory, with
# `envlog` (ENVLOG) first on PATH and FIXTURES set to the absolute path of
# the fixtures directory.  Its stdout must equal NAME.out, its stderr
# NAME.err (empty when there is no NAME.err) and its exit status NAME.rc.
# Fixtures are read in place and must never be written: a test that
# changes an environment copies it first.  --update rewrites the expected
# files from what the commands print now (then review the diff).
set -u
if [ $# -lt 2 ]; then
    echo "usage: golden.sh ENVLOG FIXTURES [--update] [NAME...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")/../cli" && pwd)
ENVLOG=$(realpath "$1")
FIXTURES=$(realpath "$2")
shift 2
update=
if [ "${1:-}" = --update ]; then
    update=1
    shift
fi
root=$(mktemp -d "${TMPDIR:-/tmp}/envlog-golden-XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir "$root/bin"
ln -s "$ENVLOG" "$root/bin/envlog"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$here"/{replay,why,verify,trace,status,forget}-*.cmd; do
        [ -e "$f" ] && names+=("$(basename "$f" .cmd)")
    done
fi
# The fixtures these tests read must come out as they went in: the same
# files and directories, the same bytes.
tree_state() {
    (cd "$FIXTURES/replay" && find . | LC_ALL=C sort &&
        find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}
before=$(tree_state)
pass=0
failed=()
for name in "${names[@]}"; do
    cmd=$here/$name.cmd
    [ -f "$cmd" ] || { echo "golden: no $cmd" >&2; exit 2; }
    work=$root/$name
    mkdir "$work"
    (cd "$work" && PATH="$root/bin:$PATH" FIXTURES="$FIXTURES" ENVLOG_DIR= \
        XDG_CACHE_HOME="$work/.cache" HOME="$work" bash "$cmd") \
        >"$root/$name.out" 2>"$root/$name.err"
    echo $? >"$root/$name.rc"
    if [ -n "$update" ]; then
        cp "$root/$name.out" "$here/$name.out"
        cp "$root/$name.rc" "$here/$name.rc"
        if [ -s "$root/$name.err" ]; then
            cp "$root/$name.err" "$here/$name.err"
        else
            rm -f "$here/$name.err"
        fi
        continue
    fi
    ok=1
    [ -f "$here/$name.err" ] || : >"$root/$name.noerr"
    for part in out err rc; do
        want=$here/$name.$part
        [ "$part" = err ] && [ ! -f "$want" ] && want=$root/$name.noerr
        if ! cmp -s "$want" "$root/$name.$part"; then
            [ $ok = 0 ] || echo "FAIL: $name"
            ok=0
            diff -u --label "expected $name.$part" --label "got" "$want" "$root/$name.$part" |
                head -40 | sed 's/^/    /'
        fi
    done
    if [ $ok = 1 ]; then pass=$((pass + 1)); else failed+=("$name"); fi
done
if [ "$before" != "$(tree_state)" ]; then
    echo "FAIL: a test changed files under $FIXTURES/replay"
    failed+=("(fixtures changed)")
fi
[ -n "$update" ] && { echo "golden: updated ${#names[@]} tests"; exit 0; }
echo "replay goldens: $pass passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
