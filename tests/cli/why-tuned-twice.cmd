# matmul_128: tuned by tuner-1, then picked without measuring by tuner-2
# (not stored); the first stands
cd "$FIXTURES/replay" && envlog -C main why matmul_128
