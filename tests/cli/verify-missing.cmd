# segment 1 of 3 removed
cd "$FIXTURES/replay" && envlog -C missing verify
