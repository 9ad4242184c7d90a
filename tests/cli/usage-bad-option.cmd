# an unknown global option
envlog --bogus sessions 2>err; rc=$?; head -n 2 err >&2; exit $rc
