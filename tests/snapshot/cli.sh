#!/bin/bash
# SPDX-License-Identifier: MIT
# The snapshot and bundle commands end to end: compact, bundle export /
# inspect / import / embed, diff (with a golden output), and hostile bundles
# refused with their exit status and nothing imported.
# usage: cli.sh ENVLOG REC_PROGRAM STATIC_LIB CC LDLIBS...
set -u
ENVLOG=$1 REC=$2 LIB=$3 CC=$4
shift 4
LDLIBS="$*"
here=$(cd "$(dirname "$0")" && pwd)
t=$(mktemp -d "${TMPDIR:-/tmp}/envlog-snapcli-XXXXXX")
trap 'rm -rf "$t"' EXIT
fail=0 pass=0
check() { # name expected-status command...
    local name=$1 want=$2; shift 2
    "$@" > "$t/out" 2> "$t/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        echo "FAIL $name: exit $got, want $want"; cat "$t/out" "$t/err"; fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
}

"$REC" "$t/a" 0 1 && "$REC" "$t/b" 2 9 || exit 1
cp -a "$t/a" "$t/a-copy"

# diff: an environment with itself, with a copy, and with one whose winners differ.
check diff-self 0 "$ENVLOG" diff "$t/a" "$t/a"
check diff-copy 0 "$ENVLOG" diff "$t/a" "$t/a-copy"
check diff-winners 1 "$ENVLOG" diff "$t/a" "$t/b"
if ! diff -u "$here/diff-winners.out" <(sed "s#$t/##g" "$t/out"); then
    echo "FAIL diff-winners: output differs from tests/snapshot/diff-winners.out"; fail=$((fail + 1))
fi
check diff-json 1 "$ENVLOG" diff --json "$t/a" "$t/b"
grep -q '"diff":"winner"' "$t/out" && grep -q '"differences":4' "$t/out" ||
    { echo "FAIL diff-json: $(cat "$t/out")"; fail=$((fail + 1)); }

# compact keeps the replayed state; the sessions stay until a second
# compaction, whose kept generation (snapshot/previous) covers them.
"$ENVLOG" -C "$t/a" replay > "$t/before"
nsess=$(ls "$t/a/sessions" | wc -l)
check compact 0 "$ENVLOG" -C "$t/a" compact --evidence all
[ "$(ls "$t/a/sessions" | wc -l)" = "$nsess" ] || { echo "FAIL compact: sessions removed early"; fail=$((fail + 1)); }
grep -q "kept $nsess more until the next compaction" "$t/out" || { echo "FAIL compact: $(cat "$t/out")"; fail=$((fail + 1)); }
check compact-again 0 "$ENVLOG" -C "$t/a" compact --evidence all
[ -z "$(ls "$t/a/sessions")" ] || { echo "FAIL compact: sessions left"; fail=$((fail + 1)); }
[ -f "$t/a/snapshot/previous" ] || { echo "FAIL compact: no snapshot/previous"; fail=$((fail + 1)); }
"$ENVLOG" -C "$t/a" replay > "$t/after"
cmp -s "$t/before" "$t/after" || { echo "FAIL compact: replay changed"; fail=$((fail + 1)); }
check compact-bad-evidence 2 "$ENVLOG" -C "$t/a" compact --evidence some
check diff-after-compact 0 "$ENVLOG" diff "$t/a" "$t/a-copy"

# export, inspect, import into an empty environment, import again.
check export 0 "$ENVLOG" -C "$t/a" bundle export "H100 Linux" -o "$t/h100.bundle"
check zstd-opens-it 0 zstd -t -q "$t/h100.bundle"
check inspect 0 "$ENVLOG" bundle inspect "$t/h100.bundle"
grep -q "check        ok" "$t/out" || { echo "FAIL inspect: $(cat "$t/out")"; fail=$((fail + 1)); }
check import 0 "$ENVLOG" -C "$t/c" bundle import "$t/h100.bundle"
grep -q "4 taken, 0 skipped" "$t/out" || { echo "FAIL import: $(cat "$t/out")"; fail=$((fail + 1)); }
check import-again 0 "$ENVLOG" -C "$t/c" bundle import "$t/h100.bundle"
grep -q "0 taken, 4 skipped" "$t/out" || { echo "FAIL import-again: $(cat "$t/out")"; fail=$((fail + 1)); }
check diff-bundle 0 "$ENVLOG" diff "$t/a" "$t/h100.bundle"
# --level: another zstd level, the same entries; a level zstd has not is refused.
check export-level 0 "$ENVLOG" -C "$t/a" bundle export "H100 Linux" -o "$t/fast.bundle" --level 3
check diff-level 0 "$ENVLOG" diff "$t/h100.bundle" "$t/fast.bundle"
check export-bad-level 2 "$ENVLOG" -C "$t/a" bundle export "H100 Linux" -o "$t/x.bundle" --level 23
grep -q "1 to 22" "$t/err" || { echo "FAIL export-bad-level: $(cat "$t/err")"; fail=$((fail + 1)); }
check diff-imported 0 "$ENVLOG" diff "$t/c" "$t/h100.bundle"

# embed: a program with the bundle linked in imports it from memory.
check embed 0 "$ENVLOG" bundle embed "$t/h100.bundle"
cp "$t/out" "$t/bundle.c"
if $CC -std=c11 -I"$here/../../include" -o "$t/embedded" "$here/embed_main.c" "$t/bundle.c" \
        "$LIB" $LDLIBS 2> "$t/cc.err"; then
    check embedded-import 0 "$t/embedded" "$t/d"
    grep -q "4 taken" "$t/out" || { echo "FAIL embedded-import: $(cat "$t/out")"; fail=$((fail + 1)); }
    check diff-embedded 0 "$ENVLOG" diff "$t/d" "$t/h100.bundle"
else
    echo "FAIL embed: the generated C does not compile"; cat "$t/cc.err"; fail=$((fail + 1))
fi

# A path that would close the generated comment stays inside it.
mkdir -p "$t/x *"
cp "$t/h100.bundle" "$t/x */evil.bundle"
check embed-odd-path 0 "$ENVLOG" bundle embed "$t/x */evil.bundle"
cp "$t/out" "$t/odd.c"
if ! $CC -std=c11 -I"$here/../../include" -o "$t/odd" "$here/embed_main.c" "$t/odd.c" \
        "$LIB" $LDLIBS 2> "$t/cc.err" || ! "$t/odd" "$t/odd-env" > /dev/null; then
    echo "FAIL embed-odd-path: the generated C does not compile or run"; cat "$t/cc.err"
    fail=$((fail + 1))
fi

# hostile bundles: each refused with a clear error, nothing imported.
printf 'not a bundle at all' > "$t/junk"
head -c 100 "$t/h100.bundle" > "$t/cut"
printf '\x28\xb5\x2f\xfd\xe0\x00\x00\x00\x80\x00\x00\x00\x00\x01\x00\x00' > "$t/huge"
for bad in junk cut huge; do
    check "hostile-$bad" 3 "$ENVLOG" -C "$t/e" bundle import "$t/$bad"
    grep -q "envlog: error:" "$t/err" || { echo "FAIL hostile-$bad: no error line"; fail=$((fail + 1)); }
    [ ! -d "$t/e/sessions" ] || [ -z "$(ls "$t/e/sessions")" ] ||
        { echo "FAIL hostile-$bad: something was imported"; fail=$((fail + 1)); }
done
check inspect-missing 2 "$ENVLOG" bundle inspect "$t/nope"

# A damaged snapshot: every command says so and keeps the whole state (the
# generation before stands in); compaction refuses; verify names what the
# damaged one lost and --fix puts the whole one back, keeping the other.
"$REC" "$t/g" 0 1 && "$ENVLOG" -C "$t/g" compact > /dev/null && "$REC" "$t/g" 2 3 &&
    "$ENVLOG" -C "$t/g" compact > /dev/null || { echo "FAIL gen setup"; fail=$((fail + 1)); }
"$ENVLOG" -C "$t/g" replay > "$t/g-want"
size=$(stat -c %s "$t/g/snapshot/current")
printf '\377' | dd of="$t/g/snapshot/current" bs=1 seek=$((size - 200)) conv=notrunc status=none
check damaged-status 1 "$ENVLOG" -C "$t/g" status
grep -q "the generation before stands in" "$t/out" || { echo "FAIL damaged-status: $(cat "$t/out")"; fail=$((fail + 1)); }
! grep -q "damage       none" "$t/out" || { echo "FAIL damaged-status: damage none"; fail=$((fail + 1)); }
check damaged-replay 1 "$ENVLOG" -C "$t/g" replay
cmp -s "$t/out" "$t/g-want" || { echo "FAIL damaged-replay: the state changed"; fail=$((fail + 1)); }
grep -q "snapshot/current" "$t/err" || { echo "FAIL damaged-replay: not said"; fail=$((fail + 1)); }
check damaged-compact 1 "$ENVLOG" -C "$t/g" compact
check damaged-verify 1 "$ENVLOG" -C "$t/g" verify
grep -q "snapshot/current   damaged" "$t/out" || { echo "FAIL damaged-verify: $(cat "$t/out")"; fail=$((fail + 1)); }
check damaged-verify-fix 1 "$ENVLOG" -C "$t/g" verify --fix
grep -q "the generation before the damaged one is current again" "$t/out" ||
    { echo "FAIL damaged-verify-fix: $(cat "$t/out")"; fail=$((fail + 1)); }
[ -f "$t/g/snapshot/current.broken" ] || { echo "FAIL damaged-verify-fix: nothing kept"; fail=$((fail + 1)); }
check fixed-verify 0 "$ENVLOG" -C "$t/g" verify
check fixed-replay 0 "$ENVLOG" -C "$t/g" replay
cmp -s "$t/out" "$t/g-want" || { echo "FAIL fixed-replay: the state changed"; fail=$((fail + 1)); }
check fixed-compact 0 "$ENVLOG" -C "$t/g" compact

# FIFOs where envlog's files should be: no command waits (each under a
# timeout), and each says what it found.
for where in snapshot/current FORMAT; do
    rm -rf "$t/f"; cp -a "$t/a-copy" "$t/f"
    "$ENVLOG" -C "$t/f" compact > /dev/null
    rm -f "$t/f/$where"; mkfifo "$t/f/$where"
    for cmd in status replay verify compact cat sessions; do
        timeout 20 "$ENVLOG" -C "$t/f" $cmd > "$t/out" 2> "$t/err"
        rc=$?
        if [ $rc = 124 ]; then
            echo "FAIL fifo $where: $cmd hangs"; fail=$((fail + 1))
        elif [ $rc = 0 ] && [ $cmd != sessions ] && [ $cmd != cat ]; then
            echo "FAIL fifo $where: $cmd says nothing"; fail=$((fail + 1))
        elif ! grep -qi "fifo" "$t/out" "$t/err" && [ $cmd != sessions ] && [ $cmd != cat ]; then
            echo "FAIL fifo $where: $cmd does not name the FIFO: $(cat "$t/err")"; fail=$((fail + 1))
        else
            pass=$((pass + 1))
        fi
    done
done

# A killed replay -o leaves a temporary file of its own: it never blocks the
# next run, which removes it once it is stale.
touch -d '2 hours ago' "$t/dump.json.tmp.999999.abcdef" 2>/dev/null ||
    { printf x > "$t/dump.json.tmp.999999.abcdef"; touch -d '2 hours ago' "$t/dump.json.tmp.999999.abcdef"; }
check replay-out 0 "$ENVLOG" -C "$t/a" replay -o "$t/dump.json"
[ -s "$t/dump.json" ] || { echo "FAIL replay-out: no output"; fail=$((fail + 1)); }
[ ! -e "$t/dump.json.tmp.999999.abcdef" ] || { echo "FAIL replay-out: stale file kept"; fail=$((fail + 1)); }
[ -z "$(ls "$t" | grep 'dump.json.tmp')" ] || { echo "FAIL replay-out: temporary left"; fail=$((fail + 1)); }
check bundle-usage 2 "$ENVLOG" bundle frobnicate

echo "snapshot CLI: $pass passed, $fail failed"
[ "$fail" = 0 ]
