# SPDX-License-Identifier: MIT
# bash completion for envlog: commands, each command's options (read from
# its own --help, so they never drift from it), bundle's subcommands, and
# files or directories where an option takes one.  Installed as
# $DATADIR/bash-completion/completions/envlog.

_envlog_words() {
    # the commands `envlog help` lists: "  NAME  summary" lines
    if [ -z "${1:-}" ]; then
        envlog help 2>/dev/null | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{exit}'
    else
        envlog "$1" --help 2>/dev/null | grep -oE '(^|[[:space:][(|])--?[a-zA-Z][a-zA-Z-]*' |
            sed -E 's/^[[:space:][(|]//' | sort -u
    fi
}

_envlog() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd="" sub="" i=1
    COMPREPLY=()
    # the command: the first word that is neither a global option nor -C's DIR
    while [ "$i" -lt "$COMP_CWORD" ]; do
        case ${COMP_WORDS[i]} in
            -C) i=$((i + 1)) ;;
            -*) ;;
            *) if [ -z "$cmd" ]; then cmd=${COMP_WORDS[i]}
               elif [ "$cmd" = bundle ] && [ -z "$sub" ]; then sub=${COMP_WORDS[i]}; fi ;;
        esac
        i=$((i + 1))
    done
    case $prev in
        -C|--from) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        -o|--out) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --evidence) COMPREPLY=($(compgen -W "none winners all" -- "$cur")); return ;;
        --format) COMPREPLY=($(compgen -W "1 2" -- "$cur")); return ;;
    esac
    if [ -z "$cmd" ]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-C --json --help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$(_envlog_words)" -- "$cur"))
        fi
        return
    fi
    if [ "$cmd" = bundle ] && [ -z "$sub" ] && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W "export import inspect embed" -- "$cur"))
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_envlog_words "$cmd")" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _envlog envlog
