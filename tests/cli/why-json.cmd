# --json: one object per event
cd "$FIXTURES/replay" && envlog --json -C main why softmax_64
