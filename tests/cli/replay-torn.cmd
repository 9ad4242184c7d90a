# a torn tail: reported with its place on stderr, exit 1, the records
# before it folded
cd "$FIXTURES/replay" && envlog -C torn replay
