#!/bin/bash
# SPDX-License-Identifier: MIT
# The bash completion script, driven as bash drives it (COMP_WORDS and
# COMP_CWORD set, _envlog called): commands, options from each --help,
# bundle's subcommands, directories after -C.
# usage: completion.sh ENVLOG
set -u
bin=$(cd "$(dirname "$1")" && pwd)
PATH=$bin:$PATH
. completion/envlog.bash
fails=0 checks=0
# expect "WORDS..." -- WANT...: completing the last word offers every WANT
expect() {
    local words=() want=()
    while [ "$1" != -- ]; do words+=("$1"); shift; done
    shift
    COMP_WORDS=("${words[@]}")
    COMP_CWORD=$((${#words[@]} - 1))
    _envlog
    local got=" ${COMPREPLY[*]} " w
    checks=$((checks + 1))
    for w in "$@"; do
        case $got in
            *" $w "*) ;;
            *) echo "completion: FAIL: '${words[*]}' offers '${got# }', not '$w'" >&2
               fails=$((fails + 1)); return ;;
        esac
    done
}
none() {
    local words=("$@")
    COMP_WORDS=("${words[@]}")
    COMP_CWORD=$((${#words[@]} - 1))
    _envlog
    checks=$((checks + 1))
    [ ${#COMPREPLY[@]} -eq 0 ] || { echo "completion: FAIL: '${words[*]}' offers '${COMPREPLY[*]}'" >&2; fails=$((fails + 1)); }
}
expect envlog st -- status
expect envlog "" -- status why replay bundle verify compact diff
expect envlog -C /tmp s -- sessions status
expect envlog --json w -- why
expect envlog why --n -- --namespace
expect envlog replay --f -- --force --follow
expect envlog bundle e -- export embed
expect envlog bundle export x --le -- --level
expect envlog compact --evidence "" -- none winners all
expect envlog --ver -- --version
t=$(mktemp -d "${TMPDIR:-/tmp}/envlog-completion-XXXXXX")
mkdir "$t/envdir"
expect envlog -C "$t/env" -- "$t/envdir"
rm -rf "$t"
none envlog zzz
echo "completion: $checks checks, $fails failed"
[ "$fails" = 0 ]
