# flipped bits in the middle of segment 1
cd "$FIXTURES/replay" && envlog -C flipped verify
