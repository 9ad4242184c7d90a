#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh - sharing through a remote, against a real redis-server.
#
# usage: tests/remote/run.sh BIN REC
#
# Starts redis-server (Debian's; `make deps` installs it) on a free
# 127.0.0.1 port in a scratch directory, runs each case against it, and
# stops it.  A case that could not run is a failure, never a skip: without
# redis-server this script fails, saying so.
# Prints one PASS or FAIL line per check and "N passed, N failed" at the end.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 BIN REC" >&2
    exit 2
fi
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
REC=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
SERVER=${REDIS_SERVER:-redis-server}
CLI=${REDIS_CLI:-redis-cli}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/envlog-remote.XXXXXX") || exit 2
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    [ $# -gt 1 ] && [ -s "$2" ] && sed 's/^/    | /' "$2" | head -n 30
    return 0
}

for tool in "$SERVER" "$CLI"; do
    if ! command -v "$tool" > /dev/null; then
        echo "FAIL: $tool is not installed (make deps installs redis-server): no remote test ran"
        rm -rf "$tmp"
        exit 1
    fi
done

# A real server on a free port; PID in $srv_pid, port in $PORT.
srv_pid=
PORT=
start_server() { # [extra redis-server options...]
    local try
    for try in 1 2 3 4 5 6 7 8 9 10; do
        PORT=$(( (RANDOM % 20000) + 30000 ))
        mkdir -p "$tmp/redis"
        "$SERVER" --port "$PORT" --bind 127.0.0.1 --dir "$tmp/redis" --save '' \
            --appendonly yes --appendfsync always --logfile "$tmp/redis/log" "$@" &
        srv_pid=$!
        local i
        for i in $(seq 1 100); do
            if "$CLI" -p "$PORT" ping 2> /dev/null | grep -q PONG; then
                return 0
            fi
            kill -0 "$srv_pid" 2> /dev/null || break
            sleep 0.05
        done
        kill "$srv_pid" 2> /dev/null
        wait "$srv_pid" 2> /dev/null
    done
    echo "FAIL: redis-server did not start" >&2
    return 1
}
stop_server() {
    if [ -n "$srv_pid" ]; then
        kill -9 "$srv_pid" 2> /dev/null
        wait "$srv_pid" 2> /dev/null
        srv_pid=
    fi
}
cleanup() {
    stop_server
    rm -rf "$tmp"
}
trap cleanup EXIT
r() { "$CLI" -p "$PORT" "$@"; }

if ! start_server; then
    echo "0 passed, 1 failed"
    exit 1
fi
URL=redis://127.0.0.1:$PORT

# Environments of their own: nothing automatic unless a case asks.
newenv() { # DIR [NAME URL]
    "$REC" "$1" 0 x y 0 || return 1
    "$BIN" -C "$1" config auto_compact off > /dev/null || return 1
    "$BIN" -C "$1" remote add "${2:-origin}" "${3:-$URL}"
}
dump() { "$BIN" -C "$1" replay; }
# Compacts twice (the second retires what the first folded) and prints how
# many sealed sessions are left.
sealed_after_compact() {
    "$BIN" -C "$1" compact > /dev/null 2>&1
    "$BIN" -C "$1" compact > /dev/null 2>&1
    "$BIN" -C "$1" sessions | grep -c sealed
}

# ------------------------------------------------------ remote add|list|remove
e=$tmp/cfg
newenv "$e" > "$tmp/out" 2>&1 || fail "remote add" "$tmp/out"
"$BIN" -C "$e" remote add fleet 'redis://ops:s3cret@127.0.0.1:1/2' > "$tmp/out" 2>&1 &&
    "$BIN" -C "$e" remote list > "$tmp/list" 2>&1 &&
    "$BIN" -C "$e" --json remote list > "$tmp/jlist" 2>&1 &&
    "$BIN" -C "$e" config > "$tmp/conf" 2>&1
if grep -q "^origin	$URL$" "$tmp/list" && grep -q 'redis://ops:\*\*\*\*@127.0.0.1:1/2' "$tmp/list" &&
   ! grep -q s3cret "$tmp/list" "$tmp/jlist" "$tmp/conf" && grep -q '"name":"fleet"' "$tmp/jlist"; then
    pass "remote add and list: two remotes, the password shown as ****, never printed"
else
    fail "remote add and list" "$tmp/list"
fi
"$BIN" -C "$e" config compact_sessions 9 > /dev/null 2>&1
if grep -q '^remote.fleet.url = ' "$e/config" && grep -q '^compact_sessions = 9' "$e/config"; then
    pass "envlog config KEY VALUE keeps the remote lines"
else
    fail "envlog config KEY VALUE keeps the remote lines" "$e/config"
fi
"$BIN" -C "$e" remote add origin "$URL" > "$tmp/out" 2>&1; rc1=$?
"$BIN" -C "$e" remote add bad 'http://x:1' > "$tmp/out2" 2>&1; rc2=$?
"$BIN" -C "$e" remote add 'b d' "$URL" > /dev/null 2>&1; rc3=$?
"$BIN" -C "$e" remote set fleet auto_push maybe > /dev/null 2>&1; rc4=$?
if [ $rc1 -ne 0 ] && [ $rc2 -ne 0 ] && [ $rc3 -ne 0 ] && [ $rc4 -ne 0 ] &&
   grep -q 'there already' "$tmp/out" && grep -q 'redis://' "$tmp/out2"; then
    pass "remote add refuses a name twice, a URL that is not redis://, a bad name, a bad value"
else
    fail "remote add refuses bad input" "$tmp/out"
fi
"$BIN" -C "$e" remote remove fleet > /dev/null 2>&1 && "$BIN" -C "$e" remote list > "$tmp/list" 2>&1
if ! grep -q fleet "$tmp/list" "$e/config" && grep -q '^origin' "$tmp/list" &&
   ! "$BIN" -C "$e" remote remove fleet > /dev/null 2>&1; then
    pass "remote remove takes the remote's lines out, and refuses one not there"
else
    fail "remote remove" "$tmp/list"
fi
printf 'remote.origin.url = redis://127.0.0.1:1\nremote.origin.url = redis://127.0.0.1:2\n' >> "$e/config"
"$BIN" -C "$e" config --check > "$tmp/out" 2>&1; rc1=$?
"$BIN" -C "$e" remote list > "$tmp/out2" 2>&1; rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 3 ] && grep -q 'given twice' "$tmp/out2"; then
    pass "a remote given twice in the config is refused, naming the line"
else
    fail "a remote given twice in the config is refused" "$tmp/out2"
fi

# ---------------------------------------- three machines push, a fourth pulls
for m in 1 2 3; do
    newenv "$tmp/m$m" > /dev/null 2>&1
    "$REC" "$tmp/m$m" 4 "autotune/rt/1.0/gpu$m" "m$m" 2048 || fail "recording on machine $m"
done
"$REC" "$tmp/m1" 1 "autotune/rt/1.0/h100" "m1h" 2048
ok=1
for m in 1 2 3; do
    "$BIN" -C "$tmp/m$m" --json push > "$tmp/push$m" 2>&1 || ok=0
done
if [ $ok = 1 ] && grep -q '"sessions":5,' "$tmp/push1" && grep -q '"sessions":4,' "$tmp/push3"; then
    pass "three machines push their sessions"
else
    fail "three machines push their sessions" "$tmp/push1"
fi
"$BIN" -C "$tmp/m1" --json push > "$tmp/again" 2>&1
if grep -q '"sessions":0,.*"present":5' "$tmp/again" && [ "$(r hlen envlog:sessions)" = 13 ]; then
    pass "pushing twice changes nothing (13 sessions on the remote)"
else
    fail "pushing twice changes nothing" "$tmp/again"
fi
newenv "$tmp/m4" > /dev/null 2>&1
"$BIN" -C "$tmp/m4" pull > "$tmp/pull" 2>&1; rc=$?
mkdir -p "$tmp/union" && "$REC" "$tmp/union" 0 x y 0 &&
    for m in 1 2 3; do cp -r "$tmp/m$m"/sessions/* "$tmp/union/sessions/"; done
if [ $rc -eq 0 ] && dump "$tmp/m4" > "$tmp/d4" && dump "$tmp/union" > "$tmp/du" &&
   cmp -s "$tmp/d4" "$tmp/du" && [ -s "$tmp/d4" ] && "$BIN" -C "$tmp/m4" verify > /dev/null; then
    pass "a fourth machine pulls: its state is the fold of the union, byte for byte"
else
    fail "a fourth machine pulls the union" "$tmp/pull"
fi
"$BIN" -C "$tmp/m4" --json pull > "$tmp/again" 2>&1
if grep -q '"sessions":0,.*"present":13' "$tmp/again" && dump "$tmp/m4" | cmp -s - "$tmp/d4"; then
    pass "pulling twice changes nothing"
else
    fail "pulling twice changes nothing" "$tmp/again"
fi
newenv "$tmp/h" > /dev/null 2>&1
"$BIN" -C "$tmp/h" --json pull --namespace autotune/rt/1.0/h100 > "$tmp/pull" 2>&1
if grep -q '"sessions":1,.*"filtered":12' "$tmp/pull" && [ "$(ls "$tmp/h/sessions" | wc -l)" = 1 ]; then
    pass "a namespace filter limits what a pull takes (1 of 13)"
else
    fail "a namespace filter limits what a pull takes" "$tmp/pull"
fi
"$BIN" -C "$tmp/m2" --json push --dry-run > "$tmp/dry" 2>&1
"$BIN" -C "$tmp/h" --json pull --dry-run > "$tmp/dry2" 2>&1
if grep -q '"dry_run":true' "$tmp/dry" && grep -q '"sessions":12' "$tmp/dry2" &&
   [ "$(ls "$tmp/h/sessions" | wc -l)" = 1 ]; then
    pass "dry runs move nothing"
else
    fail "dry runs move nothing" "$tmp/dry2"
fi

# ------------------------------------------------- two pushes at once
newenv "$tmp/p" origin "$URL/3" > /dev/null 2>&1
"$REC" "$tmp/p" 12 autotune/rt/1.0/conc pc 65536
"$BIN" -C "$tmp/p" --json push > "$tmp/c1" 2>&1 & p1=$!
"$BIN" -C "$tmp/p" --json push > "$tmp/c2" 2>&1 & p2=$!
"$BIN" -C "$tmp/m1" push "origin" > /dev/null 2>&1
wait $p1; rc1=$?
wait $p2; rc2=$?
s1=$(sed -n 's/.*"sessions":\([0-9]*\),.*/\1/p' "$tmp/c1")
s2=$(sed -n 's/.*"sessions":\([0-9]*\),.*/\1/p' "$tmp/c2")
newenv "$tmp/pc" origin "$URL/3" > /dev/null 2>&1
"$BIN" -C "$tmp/pc" pull > "$tmp/out" 2>&1; rc3=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ] && [ $((s1 + s2)) -eq 12 ] &&
   [ "$(r -n 3 hlen envlog:sessions)" = 12 ] && dump "$tmp/p" | cmp -s - <(dump "$tmp/pc"); then
    pass "two processes push at once: every session once ($s1 + $s2), all of it pulled back"
else
    fail "two processes push at once ($s1 + $s2)" "$tmp/c2"
fi

# ----------------------------------------------------- an altered object
newenv "$tmp/alt" > /dev/null 2>&1
victim=$(r hget envlog:sessions "$(ls "$tmp/m2/sessions" | head -1)")
seg=$(r get "envlog:obj:$victim" > /dev/null; "$BIN" -C "$tmp/m2" sessions --json | head -1)
# The object a segment is: the first obj key that is not a manifest.
segkey=
for k in $(r keys 'envlog:obj:*'); do
    if [ "$(r strlen "$k")" -gt 2000 ]; then segkey=$k; break; fi
done
r setrange "$segkey" 100 XXXX > /dev/null
"$BIN" -C "$tmp/alt" pull > "$tmp/out" 2>&1; rc=$?
n=$(ls "$tmp/alt/sessions" | wc -l)
if [ $rc -eq 1 ] && grep -q 'refused' "$tmp/out" && grep -q 'does not hash to its name' "$tmp/out" &&
   [ "$n" = 12 ] && "$BIN" -C "$tmp/alt" verify > /dev/null; then
    pass "an altered segment object is refused, naming it; the other 12 sessions are taken"
else
    fail "an altered segment object is refused ($n sessions)" "$tmp/out"
fi
r set "envlog:obj:$victim" "not a manifest" > /dev/null
"$BIN" -C "$tmp/alt" pull > "$tmp/out" 2>&1
r hset envlog:sessions 0123 "zz" > /dev/null
"$BIN" -C "$tmp/alt" pull > "$tmp/out2" 2>&1; rc=$?
if grep -q 'refused' "$tmp/out" && [ $rc -eq 1 ] && grep -q 'not a session id' "$tmp/out2" &&
   [ "$(ls "$tmp/alt/sessions" | wc -l)" = 12 ]; then
    pass "a replaced manifest and a malformed index entry are refused, nothing taken"
else
    fail "a replaced manifest and a malformed index entry are refused" "$tmp/out2"
fi
r hdel envlog:sessions 0123 > /dev/null
r set envlog:huge:sessions x > /dev/null
"$BIN" -C "$tmp/alt" remote set origin prefix envlog:huge > /dev/null
"$BIN" -C "$tmp/alt" pull > "$tmp/out" 2>&1; rc=$?
"$BIN" -C "$tmp/alt" remote set origin prefix envlog > /dev/null
if [ $rc -ne 0 ] && grep -q 'another type' "$tmp/out"; then
    pass "a remote key of another type is refused as not envlog's"
else
    fail "a remote key of another type is refused" "$tmp/out"
fi

# ---------------------------------------------- ACL user, wrong password
r acl setuser fleet on '>right-pw' '~*' '+@all' > /dev/null
newenv "$tmp/acl" fleet "redis://fleet:wrong-pw@127.0.0.1:$PORT/5" > /dev/null 2>&1
"$REC" "$tmp/acl" 2 autotune/rt/1.0/acl acl 1024
before=$(r -n 5 dbsize)
"$BIN" -C "$tmp/acl" push > "$tmp/out" 2>&1; rc=$?
if [ $rc -ne 0 ] && grep -q 'authentication refused' "$tmp/out" && ! grep -q wrong-pw "$tmp/out" &&
   [ "$(r -n 5 dbsize)" = "$before" ]; then
    pass "an ACL user with a wrong password is refused; the password is not printed"
else
    fail "an ACL user with a wrong password is refused" "$tmp/out"
fi
"$BIN" -C "$tmp/acl" remote set fleet url "redis://fleet@127.0.0.1:$PORT/5" > /dev/null
"$BIN" -C "$tmp/acl" remote set fleet password_env FLEET_PW > /dev/null
"$BIN" -C "$tmp/acl" push > "$tmp/out" 2>&1; rc1=$?
FLEET_PW=right-pw "$BIN" -C "$tmp/acl" push > "$tmp/out2" 2>&1; rc2=$?
if [ $rc1 -ne 0 ] && grep -q 'FLEET_PW' "$tmp/out" && [ $rc2 -eq 0 ] &&
   grep -q '2 sessions sent' "$tmp/out2" && ! grep -rq right-pw "$tmp/acl"; then
    pass "the password from an environment variable: refused unset, taken set, stored nowhere"
else
    fail "the password from an environment variable" "$tmp/out2"
fi

# ---------------------------------------------------------- a full server
newenv "$tmp/full" origin "$URL/6" > /dev/null 2>&1
"$REC" "$tmp/full" 6 autotune/rt/1.0/full full 400000
used=$(r info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p' | tr -d '\r')
r config set maxmemory $((used + 1000000)) > /dev/null
r config set maxmemory-policy noeviction > /dev/null
"$BIN" -C "$tmp/full" push > "$tmp/out" 2>&1; rc=$?
visible=$(r -n 6 hlen envlog:sessions)
complete=1
newenv "$tmp/fullpull" origin "$URL/6" > /dev/null 2>&1
"$BIN" -C "$tmp/fullpull" pull > "$tmp/out2" 2>&1 || complete=0
r config set maxmemory 0 > /dev/null
if [ $rc -ne 0 ] && grep -q 'full (maxmemory)' "$tmp/out" && [ "$visible" -lt 6 ] && [ $complete = 1 ] &&
   [ "$(ls "$tmp/fullpull/sessions" | wc -l)" = "$visible" ]; then
    pass "a full server (maxmemory): a clear error, $visible whole sessions visible, none half"
else
    fail "a full server (maxmemory) ($visible visible)" "$tmp/out"
fi
"$BIN" -C "$tmp/full" push > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && [ "$(r -n 6 hlen envlog:sessions)" = 6 ]; then
    pass "once there is room, the next push catches up"
else
    fail "once there is room, the next push catches up" "$tmp/out"
fi

# ------------------------------------------------- a snapshot on the remote
U7=$URL/9
for m in s1 s2 s3; do newenv "$tmp/$m" origin "$U7" > /dev/null 2>&1; done
"$REC" "$tmp/s1" 3 autotune/rt/1.0/snap1 s1a 2048
"$REC" "$tmp/s2" 2 autotune/rt/1.0/snap2 s2a 2048
"$BIN" -C "$tmp/s1" push > /dev/null 2>&1
"$BIN" -C "$tmp/s2" push > /dev/null 2>&1
"$BIN" -C "$tmp/s1" pull > /dev/null 2>&1
mkdir -p "$tmp/su" && "$REC" "$tmp/su" 0 x y 0 && cp -r "$tmp/s1"/sessions/* "$tmp/su/sessions/"
"$BIN" -C "$tmp/s1" compact > /dev/null 2>&1
"$BIN" -C "$tmp/s1" --json push --snapshot > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q '"snapshot":{"moved":true' "$tmp/out" && grep -q '"retired":5' "$tmp/out" &&
   [ "$(r -n 9 hlen envlog:sessions)" = 0 ] && [ "$(r -n 9 hlen envlog:retired)" = 5 ] &&
   [ "$(r -n 9 dbsize)" = 3 ]; then
    pass "push --snapshot: the snapshot goes up, the 5 sessions it holds leave the remote (3 keys left)"
else
    fail "push --snapshot retires what it holds" "$tmp/out"
fi
"$REC" "$tmp/s2" 1 autotune/rt/1.0/snap2 s2b 2048
"$BIN" -C "$tmp/s2" --json push > "$tmp/out" 2>&1
cp -r "$tmp/s2"/sessions/* "$tmp/su/sessions/"
newenv "$tmp/s4" origin "$U7" > /dev/null 2>&1
"$BIN" -C "$tmp/s4" pull > "$tmp/out2" 2>&1; rc=$?
if grep -q '"sessions":1,.*"present":2' "$tmp/out" && [ $rc -eq 0 ] &&
   grep -q "took the remote's snapshot" "$tmp/out2" && [ "$(ls "$tmp/s4/sessions" | wc -l)" = 1 ] &&
   dump "$tmp/s4" > "$tmp/d4" && dump "$tmp/su" | cmp -s - "$tmp/d4" && [ -s "$tmp/d4" ] &&
   "$BIN" -C "$tmp/s4" verify > /dev/null 2>&1; then
    pass "a new machine pulls one snapshot and the 1 newer session: the fold of all 6, byte for byte"
else
    fail "a new machine pulls the snapshot and the newer sessions" "$tmp/out2"
fi
"$BIN" -C "$tmp/s2" pull > "$tmp/out" 2>&1
"$BIN" -C "$tmp/s4" --json pull > "$tmp/out2" 2>&1
if dump "$tmp/s2" | cmp -s - "$tmp/d4" && grep -q '"sessions":0,.*"moved":false' "$tmp/out2"; then
    pass "a machine whose sessions left the remote takes its snapshot; pulling twice changes nothing"
else
    fail "the snapshot for a machine that lacks retired sessions" "$tmp/out"
fi
# s3 compacts twice: its session lives only in its own snapshot.
"$REC" "$tmp/s3" 1 autotune/rt/1.0/snap3 s3a 2048
"$BIN" -C "$tmp/s3" compact > /dev/null 2>&1
"$BIN" -C "$tmp/s3" compact > /dev/null 2>&1
cp "$tmp/s3/snapshot/current" "$tmp/s3cur"
"$BIN" -C "$tmp/s3" pull > "$tmp/out" 2>&1; rc1=$?
"$BIN" -C "$tmp/s3" push --snapshot > "$tmp/out2" 2>&1; rc2=$?
if [ $rc1 -eq 0 ] && grep -q 'not taken: it lacks 1 session only this environment' "$tmp/out" &&
   cmp -s "$tmp/s3/snapshot/current" "$tmp/s3cur" && [ $rc2 -eq 0 ] &&
   grep -q 'not pushed: the remote.s snapshot holds 5 sessions this one does not' "$tmp/out2" &&
   [ "$(r -n 9 hlen envlog:retired)" = 5 ]; then
    pass "two snapshots that each hold what the other lacks: neither replaces the other, saying why"
else
    fail "incomparable snapshots are kept apart" "$tmp/out"
fi
snap=$(r -n 9 get envlog:snapshot | cut -d' ' -f1)
r -n 9 setrange "envlog:obj:$snap" 700 XXXX > /dev/null
newenv "$tmp/s5" origin "$U7" > /dev/null 2>&1
"$BIN" -C "$tmp/s5" pull > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "snapshot was refused: .*does not hash to its name" "$tmp/out" &&
   [ ! -e "$tmp/s5/snapshot/current" ] && [ "$(ls "$tmp/s5/sessions" | wc -l)" = 1 ]; then
    pass "an altered snapshot on the remote is refused, nothing of it kept; the sessions still come"
else
    fail "an altered snapshot on the remote is refused" "$tmp/out"
fi
r -n 9 set envlog:snapshot "$snap 99999999999" > /dev/null
"$BIN" -C "$tmp/s5" pull > "$tmp/out" 2>&1; rc1=$?
r -n 9 set envlog:snapshot "junk" > /dev/null
"$BIN" -C "$tmp/s5" pull > "$tmp/out2" 2>&1; rc2=$?
if [ $rc1 -ne 0 ] && [ $rc2 -ne 0 ] && grep -q "not a snapshot's hash and size" "$tmp/out" &&
   grep -q "not a snapshot's hash and size" "$tmp/out2" && [ ! -e "$tmp/s5/snapshot/current" ]; then
    pass "a snapshot pointer beyond the size limit, or not a hash and size, is refused"
else
    fail "a bad snapshot pointer is refused" "$tmp/out"
fi

# ------------------------------------------------ a hostile remote's sizes
# A manifest of 2 MiB; a segment object of 32 MiB where its manifest says
# about 3 KiB: each refused as it is sized or as it arrives.
for d in 10 11; do
    newenv "$tmp/hs$d" origin "$URL/$d" > /dev/null 2>&1
    newenv "$tmp/hd$d" origin "$URL/$d" > /dev/null 2>&1
    "$REC" "$tmp/hs$d" 1 autotune/rt/1.0/hostile "hs$d" 2048
    "$BIN" -C "$tmp/hs$d" push > /dev/null 2>&1
done
m=$(r -n 10 hget envlog:sessions "$(ls "$tmp/hs10/sessions")")
head -c 2097152 /dev/zero | r -n 10 -x set "envlog:obj:$m" > /dev/null
for k in $(r -n 11 keys 'envlog:obj:*'); do
    if [ "$(r -n 11 strlen "$k")" -gt 2000 ]; then
        head -c 33554432 /dev/zero | r -n 11 -x set "$k" > /dev/null
    fi
done
"$BIN" -C "$tmp/hd10" pull > "$tmp/out" 2>&1; rc1=$?
"$BIN" -C "$tmp/hd11" pull > "$tmp/out2" 2>&1; rc2=$?
if [ $rc1 -ne 0 ] && grep -q 'larger than 1 MiB' "$tmp/out" && [ $rc2 -ne 0 ] &&
   [ -z "$(ls "$tmp/hd10/sessions")$(ls "$tmp/hd11/sessions")" ] &&
   [ "$(du -sk "$tmp/hd11" | cut -f1)" -lt 1024 ] && "$BIN" -C "$tmp/hd11" verify > /dev/null 2>&1; then
    pass "a hostile remote's oversized manifest and segment are refused on the way, nothing written"
else
    fail "a hostile remote's oversized objects are refused" "$tmp/out2"
fi


# ------------------------------------- the server killed during push and pull
kills=${REMOTE_KILLS:-8}
newenv "$tmp/k" origin "$URL/7" > /dev/null 2>&1
"$REC" "$tmp/k" 30 autotune/rt/1.0/kill kill 200000
dump "$tmp/k" > "$tmp/dk"
bad=0
for i in $(seq 1 "$kills"); do
    "$BIN" -C "$tmp/k" push > /dev/null 2>&1 & pp=$!
    sleep "0.0$((RANDOM % 10))"
    kill -9 "$srv_pid" 2> /dev/null; wait "$srv_pid" 2> /dev/null; srv_pid=
    wait $pp
    # The same data directory: what the server had acknowledged is back.
    "$SERVER" --port "$PORT" --bind 127.0.0.1 --dir "$tmp/redis" --save '' --appendonly yes \
        --appendfsync always --logfile "$tmp/redis/log" & srv_pid=$!
    for j in $(seq 1 100); do r ping 2> /dev/null | grep -q PONG && break; sleep 0.05; done
    rm -rf "$tmp/kp"
    newenv "$tmp/kp" origin "$URL/7" > /dev/null 2>&1
    "$BIN" -C "$tmp/kp" --json pull > "$tmp/kout" 2>&1 || { bad=1; cp "$tmp/kout" "$tmp/kbad"; }
    grep -q '"refused":0' "$tmp/kout" || { bad=1; cp "$tmp/kout" "$tmp/kbad"; }
    [ "$(ls "$tmp/kp/sessions" | wc -l)" = "$(r -n 7 hlen envlog:sessions)" ] || bad=1
    "$BIN" -C "$tmp/kp" verify > /dev/null 2>&1 || bad=1
done
dump "$tmp/k" | cmp -s - "$tmp/dk" || bad=1
"$BIN" -C "$tmp/k" verify > /dev/null 2>&1 || bad=1
if [ $bad = 0 ]; then
    pass "the server killed at random moments of a push ($kills times): every visible session whole, the pusher unchanged"
else
    fail "the server killed during a push" "$tmp/kbad"
fi
"$BIN" -C "$tmp/k" push > /dev/null 2>&1
bad=0
for i in $(seq 1 "$kills"); do
    rm -rf "$tmp/kp"
    newenv "$tmp/kp" origin "$URL/7" > /dev/null 2>&1
    "$BIN" -C "$tmp/kp" pull > /dev/null 2>&1 & pp=$!
    sleep "0.0$((RANDOM % 10))"
    kill -9 "$srv_pid" 2> /dev/null; wait "$srv_pid" 2> /dev/null; srv_pid=
    wait $pp
    "$BIN" -C "$tmp/kp" verify > "$tmp/kout" 2>&1 || { bad=1; cp "$tmp/kout" "$tmp/kbad"; }
    for s in "$tmp/kp"/sessions/*; do
        [ -e "$s" ] || continue
        cmp -s <(ls "$s") <(ls "$tmp/k/sessions/$(basename "$s")") || bad=1
    done
    "$SERVER" --port "$PORT" --bind 127.0.0.1 --dir "$tmp/redis" --save '' --appendonly yes \
        --appendfsync always --logfile "$tmp/redis/log" & srv_pid=$!
    for j in $(seq 1 100); do r ping 2> /dev/null | grep -q PONG && break; sleep 0.05; done
    "$BIN" -C "$tmp/kp" pull > "$tmp/kout" 2>&1 || { bad=1; cp "$tmp/kout" "$tmp/kbad"; }
    dump "$tmp/kp" | cmp -s - "$tmp/dk" || bad=1
done
if [ $bad = 0 ]; then
    pass "the server killed at random moments of a pull ($kills times): only whole sessions taken, the next pull completes it"
else
    fail "the server killed during a pull" "$tmp/kbad"
fi

# ----------------------------------------------------- automatic sharing
newenv "$tmp/a1" > /dev/null 2>&1
newenv "$tmp/a2" > /dev/null 2>&1
for a in a1 a2; do
    "$BIN" -C "$tmp/$a" remote set origin auto_push on > /dev/null
    "$BIN" -C "$tmp/$a" remote set origin auto_pull on > /dev/null
done
"$REC" "$tmp/a1" 2 autotune/rt/1.0/auto auto1 1024 > "$tmp/out" 2>&1
# The detached pusher: wait (bounded) for it to be done, no timing asserted.
for j in $(seq 1 200); do
    grep -q 'automatic push: ok' "$tmp/a1/remotes/origin.push" 2> /dev/null &&
        [ "$(wc -l < "$tmp/a1/remotes/origin.sent" 2> /dev/null)" = 2 ] && break
    sleep 0.05
done
if "$REC" "$tmp/a2" 0 autotune/rt/1.0/auto x 0 auto1-1-2; then
    pass "automatic sharing: a runtime's sessions are pushed at session end, another's open pulls them"
else
    fail "automatic sharing" "$tmp/a1/remotes/origin.push"
fi
stop_server
"$REC" "$tmp/a1" 3 autotune/rt/1.0/auto auto2 1024 > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && "$REC" "$tmp/a1" 0 autotune/rt/1.0/auto x 0 auto2-2-0 2> "$tmp/out2" &&
   [ "$(grep -c 'automatic push failed' "$tmp/out")" -le 1 ] &&
   [ "$(grep -c 'automatic pull failed' "$tmp/out" "$tmp/out2" | awk -F: '{s += $2} END {print s}')" -le 1 ]; then
    pass "with the server down a runtime records, ends and reads as ever, and says so once"
else
    fail "with the server down a runtime records" "$tmp/out"
fi
"$BIN" -C "$tmp/a1" config auto_compact on > /dev/null
"$BIN" -C "$tmp/a1" compact > /dev/null 2>&1
"$BIN" -C "$tmp/a1" compact > "$tmp/out" 2>&1
if "$BIN" -C "$tmp/a1" sessions | grep -c sealed | grep -qx 3 && "$BIN" -C "$tmp/a1" status > /dev/null &&
   "$BIN" -C "$tmp/a1" verify > /dev/null 2>&1; then
    pass "compaction keeps the 3 sessions automatic push has not delivered, and everything local works"
else
    fail "compaction keeps what automatic push has not delivered" "$tmp/out"
fi
"$BIN" -C "$tmp/a1" push > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q 'cannot connect' "$tmp/out"; then
    pass "push to a server that is down: a clear error (cannot connect)"
else
    fail "push to a server that is down" "$tmp/out"
fi
start_server > /dev/null
URL2=redis://127.0.0.1:$PORT
"$BIN" -C "$tmp/a1" remote set origin url "$URL2" > /dev/null
"$BIN" -C "$tmp/a1" push > /dev/null 2>&1
n=$(sealed_after_compact "$tmp/a1")
if [ "$n" = 0 ]; then
    pass "once pushed, compaction retires them"
else
    fail "once pushed, compaction retires them ($n left)"
fi
ENVLOG_HIREDIS=/nonexistent/libhiredis.so "$BIN" -C "$tmp/a1" push > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q 'remotes are unavailable: cannot load' "$tmp/out" &&
   ENVLOG_HIREDIS=/nonexistent/libhiredis.so "$REC" "$tmp/a1" 1 autotune/rt/1.0/auto nohr 64 &&
   ENVLOG_HIREDIS=/nonexistent/libhiredis.so "$BIN" -C "$tmp/a1" verify > /dev/null 2>&1; then
    pass "without hiredis: remotes say why they are unavailable, everything local works"
else
    fail "without hiredis" "$tmp/out"
fi

# ------------------------------- automatic sharing from the options of a runtime
# Remotes whose config says nothing automatic (auto_push, auto_pull off)
# unless a case sets it; --wait makes rec wait for the pushers its session
# ends start, so what they did (or that none ran) is read without polling.
U=redis://127.0.0.1:$PORT/12
newenv "$tmp/o1" origin "$U" > /dev/null 2>&1
newenv "$tmp/o2" origin "$U" > /dev/null 2>&1
newenv "$tmp/o3" origin "$U" > /dev/null 2>&1
"$BIN" -C "$tmp/o2" remote set origin auto_push on > /dev/null
"$REC" --wait --push 1 "$tmp/o1" 2 autotune/rt/1.0/opt opt1 1024 > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && [ "$(r -n 12 hlen envlog:sessions)" = 2 ] &&
   grep -q 'automatic push: ok' "$tmp/o1/remotes/origin.push" &&
   [ "$(wc -l < "$tmp/o1/remotes/asked")" = 2 ]; then
    pass "the session option auto_push 1 pushes at session end with the config's auto_push off"
else
    fail "the session option auto_push 1 pushes with the config off" "$tmp/out"
fi
"$REC" --wait --push -1 "$tmp/o2" 2 autotune/rt/1.0/opt opt2 1024 > "$tmp/out" 2>&1; rc=$?
"$REC" --wait "$tmp/o1" 1 autotune/rt/1.0/opt opt1b 1024 >> "$tmp/out" 2>&1
if [ $rc -eq 0 ] && [ "$(r -n 12 hlen envlog:sessions)" = 2 ] && [ ! -e "$tmp/o2/remotes/origin.push" ]; then
    pass "auto_push -1 starts no push with the config's auto_push on; 0 follows the config (off)"
else
    fail "auto_push -1 starts no push" "$tmp/out"
fi
"$REC" "$tmp/o3" 0 autotune/rt/1.0/opt x 0 opt1-1-2; rc1=$?
"$REC" --pull "$tmp/o3" 0 autotune/rt/1.0/opt x 0 opt1-1-2 2> "$tmp/out"; rc2=$?
if [ $rc1 -eq 1 ] && [ $rc2 -eq 0 ] && [ ! -s "$tmp/out" ] && [ "$(ls "$tmp/o3/sessions" | wc -l)" = 2 ]; then
    pass "ENVLOG_OPEN_PULL pulls at open with the config's auto_pull off (without it, nothing)"
else
    fail "ENVLOG_OPEN_PULL pulls at open" "$tmp/out"
fi
"$REC" --pull --wait "$tmp/o3" 0 autotune/rt/1.0/opt x 0 opt2-1-2; rc1=$?
ENVLOG_REMOTE_AUTO=off "$REC" --wait --push 1 "$tmp/o2" 1 autotune/rt/1.0/opt opt2b 1024; rc2=$?
if [ $rc1 -eq 1 ] && [ $rc2 -eq 0 ] && [ "$(r -n 12 hlen envlog:sessions)" = 2 ] &&
   [ ! -e "$tmp/o2/remotes/asked" ]; then
    pass "a session auto_push -1 left stays local; ENVLOG_REMOTE_AUTO=off overrides the options"
else
    fail "auto_push -1 and ENVLOG_REMOTE_AUTO=off keep sessions local"
fi
"$REC" --push 2 "$tmp/o3" 1 autotune/rt/1.0/opt bad 64 > "$tmp/out" 2>&1; rc1=$?
"$REC" --pull --readonly "$tmp/o3" 0 autotune/rt/1.0/opt x 0 opt1-1-2 > "$tmp/out2" 2>&1; rc2=$?
if [ $rc1 -eq 2 ] && grep -q 'auto_push is -1, 0 or 1, not 2' "$tmp/out" && [ $rc2 -eq 2 ] &&
   grep -q 'ENVLOG_OPEN_PULL writes: not with ENVLOG_OPEN_READONLY' "$tmp/out2" &&
   [ "$(ls "$tmp/o3/sessions" | wc -l)" = 2 ]; then
    pass "auto_push 2, and ENVLOG_OPEN_PULL with ENVLOG_OPEN_READONLY, are refused (invalid argument)"
else
    fail "bad automatic sharing options are refused" "$tmp/out2"
fi
# The server down (killed), then stalled (SIGSTOP: connections are accepted,
# nothing answers): `timeout` only catches a hang, nothing is timed.
for a in o1 o3; do "$BIN" -C "$tmp/$a" remote set origin timeout 1s > /dev/null; done
stop_server
timeout 60 "$REC" --wait --push 1 "$tmp/o1" 1 autotune/rt/1.0/opt opt1c 1024 > "$tmp/out" 2>&1; rc1=$?
timeout 60 "$REC" --wait --push 1 "$tmp/o1" 1 autotune/rt/1.0/opt opt1d 1024 >> "$tmp/out" 2>&1; rc2=$?
timeout 60 "$REC" --pull "$tmp/o3" 0 autotune/rt/1.0/opt x 0 opt1-1-2 > "$tmp/out2" 2>&1; rc3=$?
timeout 60 "$REC" --pull "$tmp/o3" 0 autotune/rt/1.0/opt x 0 opt1-0-0 >> "$tmp/out2" 2>&1; rc4=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ] && [ $rc4 -eq 0 ] &&
   [ "$(grep -c 'automatic push failed' "$tmp/out")" = 1 ] &&
   [ "$(grep -c 'automatic pull failed' "$tmp/out2")" = 1 ] &&
   grep -q 'automatic push failed.*cannot connect' "$tmp/o1/remotes/origin.push"; then
    pass "the server down: the options' push and pull neither fail nor hang, and say so once each"
else
    fail "the server down: the options' push and pull" "$tmp/out"
fi
"$REC" --wait --push 0 "$tmp/o1" 1 autotune/rt/1.0/opt opt1e 1024 > /dev/null 2>&1
"$BIN" -C "$tmp/o1" config auto_compact on > /dev/null
n=$(sealed_after_compact "$tmp/o1")
if [ "$n" = 2 ] && "$BIN" -C "$tmp/o1" verify > "$tmp/out" 2>&1; then
    pass "compaction keeps the 2 sessions whose option asked for a push the remote lacks, folds the rest"
else
    fail "compaction keeps the asked sessions the remote lacks" "$tmp/out"
fi
start_server > /dev/null
"$BIN" -C "$tmp/o1" remote set origin url "redis://127.0.0.1:$PORT/12" > /dev/null
"$BIN" -C "$tmp/o3" remote set origin url "redis://127.0.0.1:$PORT/12" > /dev/null
kill -STOP "$srv_pid"
timeout 60 "$REC" --push 1 "$tmp/o1" 1 autotune/rt/1.0/opt opt1f 1024 > "$tmp/out" 2>&1; rc1=$?
timeout 60 "$REC" --pull "$tmp/o3" 0 autotune/rt/1.0/opt x 0 opt1-1-2 > "$tmp/out2" 2>&1; rc2=$?
kill -CONT "$srv_pid"
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q 'automatic pull failed.*timed out' "$tmp/out2"; then
    pass "the server stalled: the session end does not wait, the pull at open gives up at its timeout"
else
    fail "the server stalled" "$tmp/out2"
fi
"$BIN" -C "$tmp/o1" push > /dev/null 2>&1
n=$(sealed_after_compact "$tmp/o1")
if [ "$n" = 0 ]; then
    pass "once the remote has them, compaction folds the asked sessions"
else
    fail "once the remote has them, compaction folds the asked sessions ($n left)"
fi

# ------------------------------------------------------------------ TLS
"$BIN" -C "$tmp/o1" remote add tls rediss://cache.internal:6380 > "$tmp/out" 2>&1; rc1=$?
"$BIN" -C "$tmp/o1" remote set origin url rediss://127.0.0.1:6380 > "$tmp/out2" 2>&1; rc2=$?
if [ $rc1 -ne 0 ] && [ $rc2 -ne 0 ] && grep -q 'rediss://' "$tmp/out" &&
   grep -q 'stunnel' "$tmp/out" && grep -q 'stunnel' "$tmp/out2" &&
   ! grep -q rediss "$tmp/o1/config" && "$BIN" -C "$tmp/o1" remote list | grep -q "^origin	redis://"; then
    pass "a rediss:// URL is refused, naming the TLS tunnel to use instead; the config unchanged"
else
    fail "a rediss:// URL is refused" "$tmp/out"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
