# --until TIME: before the cleanup session forgot layernorm_32 and before
# the second import brought rmsnorm_16
cd "$FIXTURES/replay" && envlog -C main replay --until 2026-12-02T17:55:48.060Z
