# layernorm_32: tuned on sm_90, then forgotten; on sm_80 only picked
# without measuring: no entry under either, each for its own reason; exit 1
cd "$FIXTURES/replay" && envlog -C main why layernorm_32
