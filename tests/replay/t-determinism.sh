#!/bin/bash
# SPDX-License-Identifier: MIT
# Determinism: each fixture environment copied 20 times, its session
# directories created one by one in a shuffled order (so the directory lists
# them in other orders), replays to byte-identical output, damage reports
# included.  The copies go to a tmpfs when there is one: there a directory
# lists entries by creation, while ext4 lists them by a hash of the name,
# whatever the order they were made in.
. "$(dirname "$0")/lib.sh"

base=$TMP
if [ -d /dev/shm ] && [ -w /dev/shm ] && stat -f -c %T /dev/shm 2>/dev/null | grep -q tmpfs; then
    base=$(mktemp -d /dev/shm/envlog-determinism-XXXXXX) || base=$TMP
fi
[ "$base" = "$TMP" ] || trap 'rm -rf "$base"' EXIT

for fx in main torn flipped missing; do
    src=$FIX/$fx
    "$ENVLOG" -C "$src" replay >"$TMP/ref.out" 2>"$TMP/ref.err"
    rc0=$?
    [ "$fx" != main ] || [ "$rc0" = 0 ] || fail "$fx: replay exited $rc0"
    [ "$fx" = main ] || [ "$rc0" = 1 ] || fail "$fx: replay of damage exited $rc0, want 1"
    [ -s "$TMP/ref.out" ] || fail "$fx: empty replay"
    sessions=($(ls "$src/sessions"))
    [ ${#sessions[@]} -ge 2 ] || fail "$fx: too few sessions to shuffle"
    listings=()
    for i in $(seq 1 20); do
        RANDOM=$i # reproducible shuffles
        perm=("${sessions[@]}")
        for ((k = ${#perm[@]} - 1; k > 0; k--)); do
            j=$((RANDOM % (k + 1)))
            t=${perm[k]}; perm[k]=${perm[j]}; perm[j]=$t
        done
        d=$base/$fx-$i
        mkdir -p "$d/sessions"
        for f in "$src"/*; do
            [ "$(basename "$f")" = sessions ] || cp -r "$f" "$d/"
        done
        for s in "${perm[@]}"; do
            cp -r "$src/sessions/$s" "$d/sessions/$s"
        done
        listings+=("$(ls -f "$d/sessions" | grep -v '^\.' | tr '\n' ' ')")
        "$ENVLOG" -C "$d" replay >"$TMP/got.out" 2>"$TMP/got.err"
        rc=$?
        [ "$rc" = "$rc0" ] || fail "$fx copy $i: exit $rc, want $rc0"
        if ! cmp -s "$TMP/ref.out" "$TMP/got.out" || ! cmp -s "$TMP/ref.err" "$TMP/got.err"; then
            diff "$TMP/ref.out" "$TMP/got.out"
            diff "$TMP/ref.err" "$TMP/got.err"
            fail "$fx copy $i (sessions made in the order ${perm[*]}) replays otherwise"
        fi
        rm -rf "$d"
    done
    distinct=$(printf '%s\n' "${listings[@]}" | sort -u | wc -l)
    note "$fx: 20 copies, $distinct distinct directory listing orders, one output"
    if [ "$base" != "$TMP" ] && [ "$distinct" -lt 2 ]; then
        fail "$fx: the tmpfs listed every copy in one order; the shuffle did nothing"
    fi
done
