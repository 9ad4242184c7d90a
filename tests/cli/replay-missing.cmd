# a missing middle segment
cd "$FIXTURES/replay" && envlog -C missing replay
