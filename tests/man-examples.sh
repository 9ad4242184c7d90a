#!/bin/bash
# SPDX-License-Identifier: MIT
#
# man-examples.sh - the man pages' examples, run as tests.
#
# usage: tests/man-examples.sh BIN STATIC
#        (CC and MAN_CFLAGS, if set, build the example programs)
#
# A page that shows a command or a program shows what it does, so the pages
# are checked against the code they describe:
#  - envlog(1): each example between `.\" example-begin status=N' and
#    `.\" example-end' runs in a fresh copy of an environment filled by
#    examples/record.c (at ~/.cache/envlog/default, HOME pointing into a
#    scratch directory); its "$ " lines run in order in one bash, each must
#    exit 0 or N and the last N; the other lines of its .EX blocks must each
#    match a line of the output once hex strings and numbers are set aside
#    ("..." stands for anything); its text must say "status N".
#  - envlog(3): the program in the first .EX block of its example compiles
#    with -Wall -Wextra -Werror against STATIC, runs, exits with the status
#    the text gives, and prints the lines of the second block.
#  - README.md: its C example compiles the same way and records; its second
#    one, with a bundle of the example environment embedded by `envlog
#    bundle embed', imports it into an empty environment, then finds it all
#    there the second time.
#  - every function of include/envlog.h is described in envlog(3) and every
#    command of `envlog --help' has its sections in envlog(1), titled with
#    the usage lines its --help prints, each option its --help names
#    described there, unless the page lists it in a
#    `.\" not-yet-documented:' comment; every error code is in ERRORS.
#  - the CDDL schema of envlog(5) gives every key of core/schema.c,
#    log/frame.c and replay/snapfmt.c, under the right rule, with its JSON
#    name, in the order the code encodes them, "(fold)" on the fold fields.
#  - `man -l' renders each page without a warning (skipped without man).
# Prints one PASS or FAIL line per check and "N passed, N failed" at the end.
#
# $CC, $MAN_CFLAGS and $LIBS are word lists on purpose (SC2086); the printf
# formats write shell code for later (SC2016).
# shellcheck disable=SC2086,SC2016

set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 BIN STATIC" >&2
    exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
STATIC=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
CC=${CC:-cc}
MAN_CFLAGS=${MAN_CFLAGS:-}
LIBS="-lcbor -lxxhash -lzstd -lpthread -ldl -lm"
MAN1=$ROOT/man/envlog.1
MAN3=$ROOT/man/envlog.3
MAN5=$ROOT/man/envlog.5

tmp=$(mktemp -d "${TMPDIR:-/tmp}/envlog-man.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    [ $# -gt 1 ] && [ -s "$2" ] && sed 's/^/    | /' "$2" | head -n 40
    return 0
}

# The text of roff lines: escapes back to characters, font changes dropped.
unroff() {
    sed -e 's/\\e/\x01/g' -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" \
        -e 's/\\(dq/"/g' -e 's/\\(ti/~/g' -e 's/\\(ha/^/g' -e 's/\\(ga/`/g' \
        -e 's/\\(em/--/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g' -e 's/\x01/\\/g'
}

# Splits the marked examples of page $1 into $2/N.status, N.text (the prose),
# N.b1, N.b2, ... (the lines of each .EX block, still in roff).
split_examples() {
    mkdir -p "$2"
    awk -v dir="$2" '
        /^\.\\" example-begin/ {
            n++; inex = 1; blk = 0; code = 0
            st = $0; sub(/.*status=/, "", st); sub(/[^0-9].*/, "", st)
            print st > (dir "/" n ".status"); close(dir "/" n ".status")
            printf "" > (dir "/" n ".text")
            next
        }
        /^\.\\" example-end/ { inex = 0; next }
        !inex { next }
        /^\.EX/ { code = 1; blk++; printf "" > (dir "/" n ".b" blk); next }
        /^\.EE/ { code = 0; next }
        code { print > (dir "/" n ".b" blk); next }
        /^\.\\"/ { next }
        { line = $0; sub(/^\.[A-Z][A-Z]* */, "", line); print line >> (dir "/" n ".text") }
    ' "$1"
}

# What output comparison leaves of a line: runs of blanks become one, times
# become T, and hex strings of 8 or more digits (ids, hashes) and numbers
# become N; digits that end a name (tile64x32, sm_90) stay.
normalize() {
    sed -E -e 's/[[:space:]]+/ /g' -e 's/^ //' -e 's/ $//' \
        -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z/T/g' \
        -e 's/[0-9a-f]{8,}/N/g' -e 's/(^|[^A-Za-z_0-9])[0-9]+/\1N/g'
}

# Checks that every expected line ($1, normalized, "..." a wildcard) matches
# some line of the output ($2, normalized); prints the ones that do not.
match_lines() {
    awk '
        function glob(s, p,    parts, k, i, at) {
            k = split(p, parts, /\.\.\./)
            if (k == 1) return s == p
            if (substr(s, 1, length(parts[1])) != parts[1]) return 0
            s = substr(s, length(parts[1]) + 1)
            for (i = 2; i < k; i++) {
                if (parts[i] == "") continue
                at = index(s, parts[i]); if (!at) return 0
                s = substr(s, at + length(parts[i]))
            }
            return length(parts[k]) == 0 || (length(s) >= length(parts[k]) &&
                   substr(s, length(s) - length(parts[k]) + 1) == parts[k])
        }
        FNR == NR { out[++n] = $0; next }
        $0 == "" || $0 == "..." { next }
        { ok = 0; for (i = 1; i <= n && !ok; i++) ok = glob(out[i], $0)
          if (!ok) { print "no output line matches: " $0; bad = 1 } }
        END { exit bad }
    ' "$2" "$1"
}

# Runs the "$ " lines of $1 (roff) as a bash script in the current
# directory; every command must exit 0 or $2, the last $2.  Output in $3.
run_commands() {
    local script=$tmp/script.sh cmds=$tmp/cmds.txt
    unroff < "$1" | awk '
        cont { print; cont = /\\$/; next }
        /^\$ / { sub(/^\$ /, ""); print; cont = /\\$/ }
    ' > "$cmds"
    {
        echo 'set -o pipefail'
        local k=0 cmd
        while IFS= read -r cmd; do
            printf '%s\n' "$cmd"
            case $cmd in *\\) continue ;; esac
            k=$((k + 1))
            printf '__rc=$?; if [ $__rc -ne 0 ] && [ $__rc -ne %s ]; then echo "man-examples: command %s exited $__rc" >&2; exit 99; fi\n' "$2" "$k"
        done < "$cmds"
        echo 'exit $__rc'
    } > "$script"
    bash "$script" > "$3" 2>&1
}

# ------------------------------------------------------------ the programs

mkdir -p "$tmp/bin"
ln -s "$BIN" "$tmp/bin/envlog"
# Built here from the source, so the examples run against what
# examples/record.c records now, whatever was built before.
record=$tmp/record-example
if ! $CC $MAN_CFLAGS -std=c11 -D_GNU_SOURCE -I"$ROOT/include" "$ROOT/examples/record.c" \
        "$STATIC" $LIBS -o "$record" 2> "$tmp/cc.err"; then
    fail "examples/record.c builds" "$tmp/cc.err"
    echo "$passed passed, $failed failed"
    exit 1
fi
master=$tmp/master-home
mkdir -p "$master/.cache/envlog"
if "$record" "$master/.cache/envlog/default" > "$tmp/record.out" 2>&1; then
    pass "examples/record.c fills the example environment"
else
    fail "examples/record.c fills the example environment" "$tmp/record.out"
fi

# ------------------------------------------------------ envlog(1) examples

split_examples "$MAN1" "$tmp/ex1"
n1=$(find "$tmp/ex1" -name "*.status" | wc -l)
if [ "$n1" -gt 0 ]; then
    pass "envlog(1) has $n1 marked examples"
else
    fail "envlog(1) has marked examples"
fi
for n in $(seq 1 "$n1"); do
    st=$tmp/ex1/$n.status
    want=$(cat "$st")
    what="envlog(1) example $n (status $want)"
    if ! unroff < "$tmp/ex1/$n.text" | tr '\n' ' ' | grep -qi "status $want\b"; then
        fail "$what: its text does not say \"status $want\""
        continue
    fi
    rm -rf "${tmp:?}/home" "${tmp:?}/work"
    cp -a "$master" "$tmp/home"
    mkdir "$tmp/work"
    cat "$tmp/ex1/$n".b* > "$tmp/blocks"
    rc=0
    (cd "$tmp/work" && unset ENVLOG_DIR XDG_CACHE_HOME &&
        HOME=$tmp/home PATH=$tmp/bin:$PATH run_commands "$tmp/blocks" "$want" "$tmp/out") ||
        rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "exit status $rc, the page says $want" >> "$tmp/out"
        fail "$what" "$tmp/out"
        continue
    fi
    unroff < "$tmp/blocks" | awk '/^\$ / { c = /\\$/; next } c { c = /\\$/; next } { print }' |
        normalize > "$tmp/want"
    normalize < "$tmp/out" > "$tmp/got"
    if match_lines "$tmp/want" "$tmp/got" > "$tmp/diff"; then
        pass "$what"
    else
        cat "$tmp/out" >> "$tmp/diff"
        fail "$what: output differs from the page" "$tmp/diff"
    fi
done

# ------------------------------------------------------ envlog(3) example

split_examples "$MAN3" "$tmp/ex3"
if [ -f "$tmp/ex3/1.b1" ] && [ -f "$tmp/ex3/1.b2" ]; then
    want=$(cat "$tmp/ex3/1.status")
    what="envlog(3) example program (status $want)"
    mkdir -p "$tmp/cex"
    unroff < "$tmp/ex3/1.b1" > "$tmp/cex/example.c"
    if ! unroff < "$tmp/ex3/1.text" | tr '\n' ' ' | grep -qi "status $want\b"; then
        fail "$what: its text does not say \"status $want\""
    elif ! $CC $MAN_CFLAGS -std=c11 -Wall -Wextra -Werror -I"$ROOT/include" "$tmp/cex/example.c" \
            "$STATIC" $LIBS -o "$tmp/cex/example" 2> "$tmp/cex/cc.err"; then
        fail "$what: compiles" "$tmp/cex/cc.err"
    else
        pass "envlog(3) example program compiles with -Wall -Wextra -Werror"
        rc=0
        mkdir -p "$tmp/cex/env"
        (cd "$tmp/cex" && ENVLOG_DIR="$tmp/cex/env" ./example > out 2>&1) || rc=$?
        unroff < "$tmp/ex3/1.b2" | awk '!/^\$ /' | normalize > "$tmp/cex/want"
        normalize < "$tmp/cex/out" > "$tmp/cex/got"
        if [ "$rc" -ne "$want" ]; then
            echo "exit status $rc, the page says $want" >> "$tmp/cex/out"
            fail "$what" "$tmp/cex/out"
        elif ! match_lines "$tmp/cex/want" "$tmp/cex/got" > "$tmp/cex/diff"; then
            cat "$tmp/cex/out" >> "$tmp/cex/diff"
            fail "$what: output differs from the page" "$tmp/cex/diff"
        elif ! "$BIN" -C "$tmp/cex/env" sessions > "$tmp/cex/sessions" 2>&1 ||
             ! grep -q ' example .* sealed ' "$tmp/cex/sessions"; then
            fail "$what: envlog sessions shows its session" "$tmp/cex/sessions"
        else
            pass "$what"
        fi
    fi
else
    fail "envlog(3) has a marked example with a program and its output"
fi

# ------------------------------------------------------ README.md example

awk '/^```c$/ { on = 1; next } on && /^```/ { exit } on' "$ROOT/README.md" > "$tmp/readme.c"
if [ ! -s "$tmp/readme.c" ]; then
    fail "README.md has a C example"
elif ! $CC $MAN_CFLAGS -std=c11 -Wall -Wextra -Werror -I"$ROOT/include" "$tmp/readme.c" \
        "$STATIC" $LIBS -o "$tmp/readme" 2> "$tmp/readme.err"; then
    fail "README.md's C example compiles with -Wall -Wextra -Werror" "$tmp/readme.err"
elif ! (mkdir -p "$tmp/readme-env" && ENVLOG_DIR="$tmp/readme-env" "$tmp/readme") \
        > "$tmp/readme.out" 2>&1 ||
     ! "$BIN" -C "$tmp/readme-env" cat > "$tmp/readme.cat" 2>&1 ||
     ! grep -q ' CHANGED ' "$tmp/readme.cat"; then
    cat "$tmp/readme.cat" >> "$tmp/readme.out" 2> /dev/null
    fail "README.md's C example records a CHANGED record" "$tmp/readme.out"
else
    pass "README.md's C example compiles, runs and records a CHANGED record"
fi

# The second C example of README.md imports a bundle compiled into the
# program: export one from the example environment, embed it, build both,
# run it twice against an empty environment (taken, then all present).
awk '/^```c$/ { n++; if (n == 2) { on = 1; next } } on && /^```/ { exit } on' "$ROOT/README.md" \
    > "$tmp/readme-embed.c"
what="README.md's embedded-bundle example compiles, imports, and imports nothing the second time"
mkdir -p "$tmp/embed"
if [ ! -s "$tmp/readme-embed.c" ]; then
    fail "README.md has a second C example (an embedded bundle)"
elif ! "$BIN" -C "$master/.cache/envlog/default" bundle export "H100 Linux" \
        -o "$tmp/embed/h100.envb" > "$tmp/embed/out" 2>&1 ||
     ! "$BIN" bundle embed "$tmp/embed/h100.envb" --name h100_bundle \
        > "$tmp/embed/h100_bundle.c" 2> "$tmp/embed/out"; then
    fail "$what: export and embed" "$tmp/embed/out"
elif ! $CC $MAN_CFLAGS -std=c11 -Wall -Wextra -Werror -I"$ROOT/include" "$tmp/readme-embed.c" \
        "$tmp/embed/h100_bundle.c" "$STATIC" $LIBS -o "$tmp/embed/app" 2> "$tmp/embed/cc.err"; then
    fail "$what: compiles with -Wall -Wextra -Werror" "$tmp/embed/cc.err"
else
    mkdir -p "$tmp/embed/env"
    rc=0
    for _ in 1 2; do
        (ENVLOG_DIR="$tmp/embed/env" "$tmp/embed/app") >> "$tmp/embed/run" 2>&1 || rc=$?
    done
    "$BIN" -C "$tmp/embed/env" sessions >> "$tmp/embed/run" 2>&1
    if [ "$rc" -eq 0 ] &&
       [ "$(grep -c ' entries taken, ' "$tmp/embed/run")" -eq 2 ] &&
       grep -q '^[1-9][0-9]* entries taken, 0 already present, 0 rejected$' "$tmp/embed/run" &&
       grep -q '^0 entries taken, [1-9][0-9]* already present, 0 rejected$' "$tmp/embed/run" &&
       grep -q ' import: H100 Linux ' "$tmp/embed/run"; then
        pass "$what"
    else
        echo "exit status $rc" >> "$tmp/embed/run"
        fail "$what" "$tmp/embed/run"
    fi
fi

# ------------------------------------------------------------ coverage

# What a page lists in `.\" not-yet-documented: NAME ...' comments: the names
# it knows it does not describe yet.  A name that is neither described nor
# listed fails, and so does a listed one that is described or gone.
pending() {
    sed -n 's/^\.\\" not-yet-documented: *//p' "$1" | tr -s ' \t' '\n' | grep . | sort -u
}
# $1 page, $2 file of names that exist, $3 how to tell a name is described
# (a grep -E pattern with NAME in it), $4 what the names are.
coverage() {
    local page=$1 names=$2 how=$3 what=$4 name missing="" stale="" later=""
    grep -v '^\.\\"' "$page" | unroff > "$tmp/body"
    pending "$page" > "$tmp/pending"
    while read -r name; do
        if grep -qE "${how//NAME/$name}" "$tmp/body"; then
            grep -qx "$name" "$tmp/pending" && stale="$stale $name"
        elif grep -qx "$name" "$tmp/pending"; then
            later="$later $name"
        else
            missing="$missing $name"
        fi
    done < "$names"
    while read -r name; do
        grep -qx "$name" "$names" || stale="$stale $name"
    done < "$tmp/pending"
    if [ -n "$missing" ] || [ -n "$stale" ]; then
        {
            [ -n "$missing" ] && echo "not described (describe them, or list them in a" \
                "'.\\\" not-yet-documented:' comment):$missing"
            [ -n "$stale" ] && echo "listed as not yet documented, but described or gone:$stale"
        } > "$tmp/coverage"
        fail "$(basename "$page") describes every $what" "$tmp/coverage"
    else
        pass "$(basename "$page") describes every $what"
    fi
    [ -n "$later" ] && echo "NOTE: $(basename "$page") does not describe yet:$later"
    return 0
}

grep -oE '\benvlog_[a-z0-9_]+[[:space:]]*\(' "$ROOT/include/envlog.h" |
    sed -E 's/[[:space:]]*\($//' | grep -v '^envlog_write_fn$' | sort -u > "$tmp/functions"
coverage "$MAN3" "$tmp/functions" '(^|[^a-z0-9_])NAME([^a-z0-9_]|$)' \
    "function of include/envlog.h"
sed -n '/typedef enum envlog_err/,/} envlog_err;/p' "$ROOT/include/envlog.h" |
    grep -oE 'ENVLOG_[A-Z_]+' | sort -u > "$tmp/codes"
missing=$(while read -r c; do grep -q "^\.BR $c \"" "$MAN3" || echo "$c"; done < "$tmp/codes")
if [ -z "$missing" ]; then
    pass "envlog(3) ERRORS lists every error code"
else
    echo "$missing" > "$tmp/missing"
    fail "envlog(3) ERRORS lists every error code; missing:" "$tmp/missing"
fi

"$BIN" --help | awk '/^commands:/ { on = 1; next } on && NF == 0 { exit } on { print $1 }' \
    > "$tmp/commands"
if [ -s "$tmp/commands" ]; then
    pass "envlog --help lists $(wc -l < "$tmp/commands") commands"
else
    fail "envlog --help lists commands"
fi
grep -E '^\.SS "envlog ' "$MAN1" | sed -e 's/^\.SS "//' -e 's/"$//' | unroff > "$tmp/titles"
coverage "$MAN1" "$tmp/commands" '^\.SS "envlog NAME( |")' "command of envlog --help"
squash() { tr '[:upper:]' '[:lower:]' | tr -d ' \t'; }
squash < "$tmp/titles" > "$tmp/titles.squashed"
grep -v '^\.\\"' "$MAN1" | unroff > "$tmp/page1"
while read -r c; do
    grep -qE "^envlog $c( |$)" "$tmp/titles" || continue
    # Each form of its usage (a line "usage: envlog ...", the lines under it
    # that begin "envlog ", and their indented continuations) is the title
    # of a section, less "[-C DIR]".
    "$BIN" "$c" --help | awk '
        NR == 1 { sub(/^usage: */, ""); cur = $0; next }
        NF == 0 { exit }
        /^ +envlog / { print cur; sub(/^ +/, ""); cur = $0; next }
        /^ / { sub(/^ +/, ""); cur = cur " " $0; next }
        END { print cur }
    ' | sed 's/\[-C DIR\] //' > "$tmp/forms"
    : > "$tmp/usage"
    while IFS= read -r form; do
        grep -qxF "$(echo "$form" | squash)" "$tmp/titles.squashed" ||
            printf 'help: %s\n' "$form" >> "$tmp/usage"
    done < "$tmp/forms"
    if [ -s "$tmp/usage" ]; then
        { echo "no section is titled so; the page's titles:"; grep -E "^envlog $c( |$)" "$tmp/titles"; } \
            >> "$tmp/usage"
        fail "envlog(1) sections of $c match its --help usage" "$tmp/usage"
    else
        pass "envlog(1) sections of $c match its --help usage ($(wc -l < "$tmp/forms") form(s))"
    fi
    # Every option its --help names is described in its sections.
    awk -v c="$c" '
        /^\.SS "envlog / { on = ($0 ~ ("^\\.SS \"envlog " c "( |\")")); next }
        /^\.S[HS] / { on = 0 }
        on
    ' "$tmp/page1" > "$tmp/section"
    "$BIN" "$c" --help | grep -oE -- '(^|[^a-zA-Z0-9-])--?[a-zA-Z][a-zA-Z0-9-]*' |
        sed 's/^[^-]*//' | grep -vxE -- '-C|-h|--help' | sort -u > "$tmp/options"
    missing=$(while read -r o; do
        grep -qE -- "(^|[^a-zA-Z0-9-])$o([^a-zA-Z0-9-]|$)" "$tmp/section" || echo "$o"
    done < "$tmp/options" | tr '\n' ' ')
    if [ -z "$missing" ]; then
        pass "envlog(1) describes every option of envlog $c --help"
    else
        echo "$missing" > "$tmp/missing"
        fail "envlog(1) describes every option of envlog $c --help; missing:" "$tmp/missing"
    fi
done < "$tmp/commands"

# README.md names every command and the Debian packages the Makefile installs.
missing=$(while read -r c; do grep -q "^| \`$c\` " "$ROOT/README.md" || echo "$c"; done \
    < "$tmp/commands")
if [ -z "$missing" ]; then
    pass "README.md lists every command of envlog --help"
else
    echo "$missing" > "$tmp/missing"
    fail "README.md lists every command of envlog --help; missing:" "$tmp/missing"
fi
for v in BUILD_PKGS TEST_PKGS; do
    # the assignment and its continuation lines
    awk -v v="$v" '$0 ~ "^" v " *:?=" {on = 1; sub("^" v " *:?=", "")}
                   on {c = sub(/\\$/, ""); print; if (!c) on = 0}' "$ROOT/Makefile" |
        tr -s ' \t' '\n' | grep . | sort > "$tmp/pkgs.mk"
    tr '\n' ' ' < "$ROOT/README.md" | sed -n "s/.*\`$v\` of the Makefile: \`\([^\`]*\)\`.*/\1/p" |
        tr -s ' ' '\n' | grep . | sort > "$tmp/pkgs.readme"
    if [ -s "$tmp/pkgs.mk" ] && cmp -s "$tmp/pkgs.mk" "$tmp/pkgs.readme"; then
        pass "README.md names the Makefile's $v"
    else
        diff "$tmp/pkgs.mk" "$tmp/pkgs.readme" > "$tmp/pkgs.diff"
        fail "README.md names the Makefile's $v (< Makefile, > README.md)" "$tmp/pkgs.diff"
    fi
done

# ---------------------------------------------- envlog(5) schema vs code

awk '/^\.\\" cddl-begin/ { on = 1; next } /^\.\\" cddl-end/ { on = 0 }
     on && !/^\./' "$MAN5" | unroff > "$tmp/schema.cddl"
# Every field line of the tables, in table order (the order writers encode
# them): "key json-name macro"; "@table" starts a table.
{
    for src in core/schema.c log/frame.c replay/snapfmt.c; do
        sed -n -E 's/^static const envlog_field ([a-z]+)_f\[\].*/@\1/p
                   s/^ *([A-Z]+)\(([0-9]+), *(ENVLOG_F_[A-Z0-9]+, *)?"([a-z_0-9]+)".*/\2 \4 \1/p
                   s/^ *(SF)\(([0-9]+), *"([a-z_0-9]+)".*/\2 \3 \1/p' "$ROOT/$src"
    done
} > "$tmp/fields"
# The CDDL rule(s) of each table; a field is a fold field (encoded first,
# envlog(5) "Key order") when its macro is FO, FOARR or FOENUM, and the
# CDDL says so with "(fold)" in its comment.
awk '
    FNR == NR {
        if ($0 ~ /^[a-z][a-z0-9-]* = [{[]/) { rule = $1; nk[rule] = 0; next }
        if ($0 ~ /^[}\]]/) { rule = ""; next }
        if (rule != "" && match($0, /^ *\?? *[0-9]+:/)) {
            k = $0; sub(/^ *\?? */, "", k); sub(/:.*/, "", k)
            nm = $0; sub(/^[^;]*; */, "", nm); fo = nm ~ /^[a-z_0-9]+ \(fold\)/
            sub(/[:( ].*/, "", nm)
            key[rule, k] = nm; fold[rule, k] = fo; order[rule, ++nk[rule]] = k
        }
        next
    }
    /^@/ {
        t = substr($0, 2)
        r = t
        if (t ~ /^(session|tune|compile|span|mark|import|forget|user)$/) r = t "-rec"
        else if (t == "manifest" || t == "index") r = t "-rec"
        else if (t == "item") r = "entry-rec evidence-rec"
        else if (t == "env") r = "environment"
        else if (t == "wm") r = "watermark"
        nr = split(r, rules, " ")
        for (i = 1; i <= nr; i++) { tables[rules[i]] = 1; n[rules[i]] = 0 }
        next
    }
    {
        for (i = 1; i <= nr; i++) {
            q = rules[i]
            code[q, ++n[q]] = $1
            if (!((q, $1) in key)) { print q ": key " $1 " (" $2 ") is not in the CDDL"; bad = 1; continue }
            if (key[q, $1] != $2) {
                print q ": key " $1 " is " $2 " in the code, " key[q, $1] " in the CDDL"; bad = 1
            }
            f = $3 ~ /^FO/
            if (f && !fold[q, $1]) { print q ": key " $1 " (" $2 ") is a fold field; the CDDL does not say (fold)"; bad = 1 }
            if (!f && fold[q, $1]) { print q ": key " $1 " (" $2 ") is marked (fold) in the CDDL, not in the code"; bad = 1 }
            seen[q, $1] = 1
        }
    }
    END {
        for (rk in key) {
            split(rk, p, SUBSEP)
            if (!seen[p[1], p[2]] && p[2] != 0) {
                print p[1] ": key " p[2] " (" key[rk] ") is in the CDDL, not in the code"; bad = 1
            }
        }
        # The CDDL lists the keys in the order of the table (key 0 of an
        # event rule, which the tables leave to the envelope, aside).
        for (q in tables) {
            if (!(q in nk)) { print q ": no CDDL rule"; bad = 1; continue }
            s1 = ""; s2 = ""
            for (i = 1; i <= nk[q]; i++) if (seen[q, order[q, i]]) s1 = s1 " " order[q, i]
            for (i = 1; i <= n[q]; i++) s2 = s2 " " code[q, i]
            if (s1 != s2) { print q ": the CDDL lists keys" s1 ", the code encodes" s2; bad = 1 }
        }
        exit bad
    }
' "$tmp/schema.cddl" "$tmp/fields" > "$tmp/schema.diff"
rc=$?
if [ "$(grep -c -v '^@' "$tmp/fields")" -lt 100 ]; then
    echo "only $(grep -c -v '^@' "$tmp/fields") fields read from the code" >> "$tmp/schema.diff"
    rc=1
fi
what="envlog(5) CDDL matches core/schema.c, log/frame.c and replay/snapfmt.c key for key, in encoding order"
if [ $rc -eq 0 ]; then
    pass "$what"
else
    fail "$what" "$tmp/schema.diff"
fi

# ------------------------------------------------------------ rendering

if command -v man > /dev/null 2>&1; then
    for page in "$MAN1" "$MAN3" "$MAN5"; do
        name=$(basename "$page")
        if MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$page" > "$tmp/page.txt" 2> "$tmp/page.err" &&
           [ ! -s "$tmp/page.err" ] && [ -s "$tmp/page.txt" ]; then
            pass "man -l $name renders without warnings"
        else
            fail "man -l $name renders without warnings" "$tmp/page.err"
        fi
    done
else
    echo "SKIP: man is not installed; the pages' rendering is not checked"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
