# an unknown command: exit 2, the reason first on stderr (the usage
# that follows lists the commands, which grow: only its first line is kept)
envlog frobnicate 2>err; rc=$?; head -n 2 err >&2; exit $rc
