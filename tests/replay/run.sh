#!/bin/bash
# SPDX-License-Identifier: MIT
# run.sh - runs every tests/replay/t-*.sh, each in a scratch directory of
# its own, and says which failed (with its output).
#
#   run.sh ENVLOG GEN_REPLAY_FIXTURES REPLAY_HOLDER FIXTURES_REPLAY [TEST...]
#
# REPLAY_VERBOSE=1 shows the output of passing tests too.
set -u
if [ $# -lt 4 ]; then
    echo "usage: run.sh ENVLOG GEN HOLDER FIXTURES [TEST...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
ENVLOG=$(realpath "$1") GEN=$(realpath "$2") HOLDER=$(realpath "$3") FIX=$(realpath "$4")
shift 4
PY=${DEB_PYTHON:-/usr/bin/python3}
export ENVLOG GEN HOLDER FIX PY
# No test may fall back on the user's own environment.
unset ENVLOG_DIR
root=$(mktemp -d "${TMPDIR:-/tmp}/envlog-replay-XXXXXX")
export XDG_CACHE_HOME=$root/xdg
trap 'rm -rf "$root"' EXIT
pass=0
failed=()
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=($(cd "$here" && ls t-*.sh | sed 's/\.sh$//'))
for name in "${tests[@]}"; do
    mkdir -p "$root/$name"
    if (cd "$root/$name" && TMP="$root/$name" bash "$here/$name.sh") \
        >"$root/$name.log" 2>&1; then
        pass=$((pass + 1))
        [ -z "${REPLAY_VERBOSE:-}" ] || sed "s/^/    $name: /" "$root/$name.log"
    else
        failed+=("$name")
        echo "FAIL: $name"
        sed 's/^/    /' "$root/$name.log"
    fi
done
echo "replay scripts: $pass passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
