#!/bin/bash
# SPDX-License-Identifier: MIT
# hostile.sh - runs the hostile-input catalogue through the command.
#
#   hostile.sh ENVLOG MAXRSS FIXTURES_DIR
#
# Each line of FIXTURES_DIR/MANIFEST is
#   NAME | SETUP | COMMAND | EXIT | EXPECT [| MEM_KIB]
# SETUP builds a fresh environment ENV:
#   empty                 a valid environment with no session
#   segment FILE          one session (id 01900000000000000000000000000001)
#                         whose only segment is FILE
#   snapshot FILE         snapshot/current is FILE (also: snapshot-empty,
#                         snapshot-dir: an empty file, a directory)
#   format FILE           the FORMAT marker is FILE
#   session-link          sessions/<id> is a symbolic link to a good session
#                         outside ENV (OUTSIDE/sess)
#   snapshot-link         snapshot/current is a symbolic link to a file
#                         outside (OUTSIDE/segfile)
# COMMAND runs as `envlog -C ENV COMMAND`, with @FILE standing for the
# fixture FILE and @OUT for a scratch path; it must exit EXIT, print EXPECT
# (on stdout or stderr; "-" for nothing in particular), stay under MEM_KIB
# of peak memory (default 32 MiB, plus HOSTILE_MEM_SLACK for sanitizers),
# and never die of a signal.  After every case nothing outside ENV (the
# OUTSIDE directory the links point into) may have changed.
set -u
bin=$1 maxrss=$2 dir=$3
slack=${HOSTILE_MEM_SLACK:-0}
id=01900000000000000000000000000001
tmp=$(mktemp -d "${TMPDIR:-/tmp}/envlog-hostile-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0 peak=0 peak_case=
outside="$tmp/outside"
mkdir -p "$outside/sess"
cp "$dir/seg-good.log" "$outside/sess/00000000-0000000000000000.log"
cp "$dir/seg-good.log" "$outside/segfile"
digest() { (cd "$outside" && find . -printf '%p %y %m %s %T@\n' | sort && find . -type f -exec cksum {} + | sort); }
want_outside=$(digest)

setup() {
    local kind=$1 file=${2:-}
    rm -rf "$tmp/env" "$tmp/out"
    mkdir -p "$tmp/env/sessions"
    chmod 700 "$tmp/env" "$tmp/env/sessions"
    printf 'envlog environment format 1\n' > "$tmp/env/FORMAT"
    case $kind in
    empty) ;;
    segment)
        mkdir -p "$tmp/env/sessions/$id"
        cp "$dir/$file" "$tmp/env/sessions/$id/00000000-0000000000000000.log" ;;
    snapshot)
        mkdir -p "$tmp/env/snapshot"
        cp "$dir/$file" "$tmp/env/snapshot/current" ;;
    snapshot-empty)
        mkdir -p "$tmp/env/snapshot"
        : > "$tmp/env/snapshot/current" ;;
    snapshot-dir)
        mkdir -p "$tmp/env/snapshot/current" ;;
    snapshot-link)
        mkdir -p "$tmp/env/snapshot"
        ln -s "$outside/segfile" "$tmp/env/snapshot/current" ;;
    format)
        cp "$dir/$file" "$tmp/env/FORMAT" ;;
    session-link)
        ln -s "$outside/sess" "$tmp/env/sessions/$id" ;;
    *)
        echo "hostile.sh: unknown setup '$kind'" >&2
        return 1 ;;
    esac
}

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }

while IFS= read -r line; do
    case $line in ''|'#'*) continue ;; esac
    IFS='|' read -r name set cmd code expect mem <<< "$line"
    name=$(trim "$name") set=$(trim "$set") cmd=$(trim "$cmd") code=$(trim "$code")
    expect=$(trim "$expect") mem=$(trim "${mem:-}")
    mem=${mem:-32768}
    if ! setup $set; then fail=$((fail + 1)); continue; fi
    cmd=${cmd//@OUT/$tmp/out}
    args=()
    for w in $cmd; do
        case $w in @*) args+=("$dir/${w#@}") ;; *) args+=("$w") ;; esac
    done
    "$maxrss" $((mem + slack)) "$bin" -C "$tmp/env" "${args[@]}" > "$tmp/stdout" 2> "$tmp/stderr"
    rc=$?
    used=$(sed -n 's/^maxrss \([0-9]*\) KiB$/\1/p' "$tmp/stderr")
    if [ -n "$used" ] && [ "$used" -gt "$peak" ]; then peak=$used peak_case=$name; fi
    why=
    if [ $rc = 98 ]; then
        why="crashed: $(grep '^maxrss:' "$tmp/stderr")"
    elif [ $rc = 99 ]; then
        why="memory: $(grep '^maxrss:' "$tmp/stderr")"
    elif [ "$rc" != "$code" ]; then
        why="exit $rc, want $code"
    elif [ "$expect" != - ] && ! grep -qF -- "$expect" "$tmp/stdout" "$tmp/stderr"; then
        why="output lacks '$expect'"
    elif [ "$(digest)" != "$want_outside" ]; then
        why="something outside the environment changed"
    fi
    if [ -n "$why" ]; then
        fail=$((fail + 1))
        echo "FAIL: $name: envlog $cmd: $why"
        sed -e 's/^/    | /' "$tmp/stdout" "$tmp/stderr" | head -8
    else
        pass=$((pass + 1))
    fi
done < "$dir/MANIFEST"
echo "hostile inputs: $pass passed, $fail failed; peak memory ${peak} KiB ($peak_case)"
[ $fail = 0 ]
