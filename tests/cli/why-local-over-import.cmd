# softmax_64: imported, replaced by a local tune, then imported again
# (ignored)
cd "$FIXTURES/replay" && envlog -C main why softmax_64
