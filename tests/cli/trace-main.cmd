# the Chrome trace: a process per session, slices for spans, tunes and
# compiles, instants for marks
cd "$FIXTURES/replay" && envlog -C main trace
