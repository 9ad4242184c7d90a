# SPDX-License-Identifier: MIT
# lib.sh - what the replay script tests share (sourced; run.sh sets ENVLOG,
# GEN, HOLDER, FIX, PY and TMP).
set -u
[ -z "${REPLAY_VERBOSE:-}" ] || set -x

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

note() {
    echo "# $*"
}

# expect_rc WANT CMD...: runs CMD (stdout to $TMP/out, stderr to $TMP/err)
# and fails unless it exits WANT.
expect_rc() {
    local want=$1
    shift
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "--- stdout"; cat "$TMP/out"; echo "--- stderr"; cat "$TMP/err"
        fail "'$*' exited $rc, want $want"
    fi
}

# grep_out PATTERN [FILE]: fails unless FILE (default $TMP/out) matches.
grep_out() {
    grep -q -e "$1" "${2:-$TMP/out}" || {
        cat "${2:-$TMP/out}"
        fail "no line matching '$1' in ${2:-stdout}"
    }
}

# copy_env NAME DST: a writable copy of fixture NAME.
copy_env() {
    rm -rf "$2"
    cp -r "$FIX/$1" "$2"
    chmod -R u+w "$2"
}

# tree_sum DIR: one checksum line per file under DIR, sorted by path.
tree_sum() {
    (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}
