# a torn tail: where each segment is good to, and the tail with its place
cd "$FIXTURES/replay" && envlog -C torn verify
