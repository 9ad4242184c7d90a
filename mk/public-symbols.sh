#!/bin/bash
# SPDX-License-Identifier: MIT
# Prints, one per line and sorted, the functions the public headers declare:
# what the shared library exports, no more (its version script is made from
# this list, and `make checksymbols` holds the library to it).
# usage: public-symbols.sh CC HEADER...
set -euo pipefail
cc=$1
shift
pre=$(for h in "$@"; do $cc -E -P -D_GNU_SOURCE -Iinclude -x c "$h"; done)
# Type names (typedefs, function pointer types) also meet "name (".
types=$(grep -oE '(typedef[^;]*|[}])[[:space:]]*\(?\*?[[:space:]]*envlog_[A-Za-z0-9_]+[[:space:]]*[;)]' <<< "$pre" |
            grep -oE 'envlog_[A-Za-z0-9_]+' | sort -u)
grep -oE '\benvlog_[A-Za-z0-9_]+[[:space:]]*\(' <<< "$pre" | tr -d ' \t(' | sort -u |
    comm -23 - <(printf '%s\n' "$types" | grep -v '^$' | sort -u) |
    while read -r name; do
        # a declaration, not a type used before "(" as a return type
        if grep -qE "typedef[^;]*\b$name\b[[:space:]]*;|}[[:space:]]*$name[[:space:]]*;" <<< "$pre"; then
            continue
        fi
        echo "$name"
    done
