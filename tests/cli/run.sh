#!/bin/bash
# SPDX-License-Identifier: MIT
# run.sh - the golden CLI tests of `envlog sessions` and `envlog cat`:
# tests/cli/{sessions,cat,usage}-*.cmd (other prefixes belong to other
# runners, e.g. tests/replay/golden.sh).
#
#   run.sh ENVLOG FIXTURES [--update] [NAME...]
#
# Each NAME.cmd is a bash snippet run in a fresh scratch directory with
# ENVLOG (the binary's absolute path) and FIXTURES (the fixtures directory's
# absolute path) set, `envlog` first on PATH and no default environment.
# Its stdout must equal NAME.out, its stderr NAME.err (empty when there is
# none) and its exit status NAME.rc; a difference is shown as a diff.
# Fixtures are read in place and must never be written (checked).
# --update rewrites the expected files from what the commands print now:
# review that diff before committing it.
set -u
if [ $# -lt 2 ]; then
    echo "usage: run.sh ENVLOG FIXTURES [--update] [NAME...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
ENVLOG=$(realpath "$1")
FIXTURES=$(realpath "$2")
shift 2
update=
if [ "${1:-}" = --update ]; then
    update=1
    shift
fi
root=$(mktemp -d "${TMPDIR:-/tmp}/envlog-cli-XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir "$root/bin"
ln -s "$ENVLOG" "$root/bin/envlog"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$here"/{sessions,cat,usage,output,text}-*.cmd; do
        [ -e "$f" ] && names+=("$(basename "$f" .cmd)")
    done
fi
[ ${#names[@]} -gt 0 ] || { echo "cli: no tests found in $here" >&2; exit 2; }
sums() { (cd "$FIXTURES" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(sums)
pass=0
failed=()
for name in "${names[@]}"; do
    cmd=$here/$name.cmd
    [ -f "$cmd" ] || { echo "cli: no $cmd" >&2; exit 2; }
    work=$root/work-$name
    mkdir "$work"
    (cd "$work" && env -u ENVLOG_DIR PATH="$root/bin:$PATH" ENVLOG="$ENVLOG" \
        FIXTURES="$FIXTURES" XDG_CACHE_HOME="$work/.cache" HOME="$work" LC_ALL=C.UTF-8 \
        bash "$cmd") >"$root/$name.out" 2>"$root/$name.err" </dev/null
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
    : >"$root/empty"
    for part in out err rc; do
        want=$here/$name.$part
        [ "$part" = err ] && [ ! -f "$want" ] && want=$root/empty
        if ! cmp -s "$want" "$root/$name.$part"; then
            [ $ok = 0 ] || echo "FAIL: $name"
            ok=0
            diff -u --label "expected $name.$part" --label "got $name.$part" \
                "$want" "$root/$name.$part" | head -60 | sed 's/^/    /'
        fi
    done
    if [ $ok = 1 ]; then pass=$((pass + 1)); else failed+=("$name"); fi
done
if [ "$before" != "$(sums)" ]; then
    echo "FAIL: a test changed files under $FIXTURES"
    failed+=("(fixtures changed)")
fi
if [ -n "$update" ]; then
    echo "cli: updated ${#names[@]} tests; review the diff"
    exit 0
fi
echo "cli goldens: $pass passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
