# a key never tuned
cd "$FIXTURES/replay" && envlog -C main why no_such_key
