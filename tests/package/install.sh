#!/bin/bash
# SPDX-License-Identifier: MIT
# The install, use and uninstall round trip (make check-install): two
# installs under different prefixes into DESTDIRs, each checked for its
# files, their modes and an envlog.pc naming its own prefix; a program built
# with pkg-config against each and run from there (LD_LIBRARY_PATH) says
# the library's version; uninstall leaves nothing it made and keeps what
# was there before.
# usage: install.sh BUILD_DIR
set -uo pipefail
b=$1
root=$(mktemp -d "${TMPDIR:-/tmp}/envlog-install.XXXXXX")
trap 'rm -rf "$root"' EXIT
fails=0 checks=0
ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "install: FAIL: $*" >&2; }
version=$(sed -n 's/^#define ENVLOG_VERSION_STRING "\(.*\)"/\1/p' include/envlog.h)
number=$(awk '/^#define ENVLOG_VERSION_(MAJOR|MINOR|PATCH) /{v[$2]=$3}
              END{print v["ENVLOG_VERSION_MAJOR"]*10000+v["ENVLOG_VERSION_MINOR"]*100+v["ENVLOG_VERSION_PATCH"]}' include/envlog.h)

# One install: PREFIX, LIBDIR (relative to DESTDIR), what was there before.
round() {
    local name=$1 prefix=$2 libdir=$3
    local d=$root/$name
    mkdir -p "$d"
    # Something of another package's, in a directory the install shares.
    mkdir -p "$d$prefix/share/man/man1"
    echo other > "$d$prefix/share/man/man1/other.1"
    if ! make --no-print-directory -s B="$b" DESTDIR="$d" PREFIX="$prefix" LIBDIR="$libdir" \
        install > "$root/$name.log" 2>&1; then
        bad "$name: make install failed"; cat "$root/$name.log" >&2; return
    fi
    ok
    local f mode
    for f in "$libdir/libenvlog.a" "$libdir/libenvlog.so.$version" "$prefix/include/envlog.h" \
        "$prefix/include/envlog_cuda.h" "$libdir/pkgconfig/envlog.pc" \
        "$prefix/share/man/man1/envlog.1" "$prefix/share/man/man3/envlog.3" \
        "$prefix/share/man/man5/envlog.5" "$prefix/share/envlog/schemas/record.schema.json" \
        "$prefix/share/envlog/schemas/common.schema.json" \
        "$prefix/share/bash-completion/completions/envlog"; do
        mode=$(stat -c %a "$d$f" 2>/dev/null)
        [ "$mode" = 644 ] && ok || bad "$name: $f is ${mode:-missing}, not 0644"
    done
    mode=$(stat -c %a "$d$prefix/bin/envlog" 2>/dev/null)
    [ "$mode" = 755 ] && ok || bad "$name: bin/envlog is ${mode:-missing}, not 0755"
    [ "$(readlink "$d$libdir/libenvlog.so")" = "libenvlog.so.$version" ] && ok ||
        bad "$name: libenvlog.so does not link to libenvlog.so.$version"
    local pc=$d$libdir/pkgconfig/envlog.pc
    grep -qx "prefix=$prefix" "$pc" && grep -qx "libdir=$libdir" "$pc" &&
        grep -qx "includedir=$prefix/include" "$pc" && grep -qx "Version: $version" "$pc" && ok ||
        { bad "$name: envlog.pc does not name $prefix and $libdir"; cat "$pc" >&2; }
    # A program built against the install, run from there.
    cat > "$root/$name.c" <<'C'
#include <envlog.h>
#include <stdio.h>
int main(void)
{
    printf("%u %s %d\n", envlog_version(), envlog_version_string(),
           envlog_version() == ENVLOG_VERSION_NUMBER);
    return 0;
}
C
    local flags
    if ! flags=$(PKG_CONFIG_PATH="$d$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$d" \
        pkg-config --cflags --libs envlog 2>"$root/$name.pkgerr"); then
        bad "$name: pkg-config: $(cat "$root/$name.pkgerr")"; return
    fi
    # shellcheck disable=SC2086
    # The build's own CFLAGS and LDFLAGS: a sanitizer build's library needs
    # its runtime in the program too.
    if ${CC:-cc} ${CFLAGS:-} -o "$root/$name.prog" "$root/$name.c" $flags ${LDFLAGS:-} \
        2>"$root/$name.ccerr"; then
        ok
        local out
        out=$(LD_LIBRARY_PATH="$d$libdir" "$root/$name.prog")
        [ "$out" = "$number $version 1" ] && ok || bad "$name: the program said '$out'"
        # It runs with the installed library, not a static copy.
        # (ldd's whole output first: grep -q stopping early would make the
        # pipe fail under pipefail)
        local libs
        libs=$(LD_LIBRARY_PATH="$d$libdir" ldd "$root/$name.prog")
        grep -q "$d$libdir/libenvlog.so" <<< "$libs" && ok ||
            bad "$name: the program does not load $d$libdir/libenvlog.so: $libs"
    else
        bad "$name: building against the install failed: $(cat "$root/$name.ccerr")"
    fi
    grep -q "^envlog $version " <<< "$("$d$prefix/bin/envlog" --version)" && ok ||
        bad "$name: the installed envlog --version"
    # Only what the exports declare: an internal function is not there.
    if nm -D --defined-only "$d$libdir/libenvlog.so.$version" | grep -q ' envlog__'; then
        bad "$name: the installed library exports internal functions"
    else ok; fi
    if ! make --no-print-directory -s B="$b" DESTDIR="$d" PREFIX="$prefix" LIBDIR="$libdir" \
        uninstall > "$root/$name.log" 2>&1; then
        bad "$name: make uninstall failed"; cat "$root/$name.log" >&2; return
    fi
    local left
    left=$(cd "$d" && find . -mindepth 1 | sort | tr '\n' ' ')
    local want=""
    local p=$prefix/share/man/man1
    while [ "$p" != / ]; do want=".$p $want"; p=$(dirname "$p"); done
    want="$want.$prefix/share/man/man1/other.1 "
    want=$(echo "$want" | tr ' ' '\n' | grep -v '^$' | sort | tr '\n' ' ')
    [ "$left" = "$want" ] && ok ||
        { bad "$name: after uninstall: $left"; echo "install:   expected: $want" >&2; }
}

round a /opt/envlog-a /opt/envlog-a/lib
round b /usr/local/envlog-b /usr/local/envlog-b/lib64
echo "install: $checks checks, $fails failed (two prefixes: install, pkg-config, a program run against each, uninstall)"
[ "$fails" = 0 ]
