#!/bin/bash
# SPDX-License-Identifier: MIT
# Every module of the library includes only its own headers and those of
# the layers below it (core <- log <- replay <- remote; cuda on log; the
# command on the public headers): an #include "..." of a header from a layer
# above is named, with its file and line, and the check fails.
# usage: check-layers.sh [ROOT]
set -u
root=${1:-.}
declare -A allow=(
    [core]="include core"
    [log]="include core log"
    [replay]="include core log replay"
    [remote]="include core log replay remote"
    [cuda]="include core log cuda"
    [cli]="include cli"
)
bad=0 n=0
for m in core log replay remote cuda cli; do
    [ -d "$root/$m" ] || continue
    for f in "$root/$m"/*.c "$root/$m"/*.h; do
        [ -e "$f" ] || continue
        while IFS=: read -r line inc; do
            h=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<< "$inc")
            n=$((n + 1))
            owner=""
            for d in include core log replay remote cuda cli; do
                [ -e "$root/$d/$h" ] && { owner=$d; break; }
            done
            [ -n "$owner" ] || continue # not a header of the tree (a .inc of its own dir is)
            case " ${allow[$m]} " in
                *" $owner "*) ;;
                *) echo "layers: ${f#$root/}:$line includes $owner/$h, a layer above $m" >&2
                   bad=$((bad + 1)) ;;
            esac
        done < <(grep -n '#include "' "$f")
    done
done
echo "layers: $n includes of core, log, replay, remote, cuda and cli checked, $bad across a layer"
[ "$bad" = 0 ]
