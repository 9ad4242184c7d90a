# a clean environment
cd "$FIXTURES/replay" && envlog -C main verify
