# status --json: one object
cd "$FIXTURES/replay" && envlog --json -C main status
