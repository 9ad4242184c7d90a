# layernorm_32: tuned, then forgotten: no entry, exit 1
cd "$FIXTURES/replay" && envlog -C main why layernorm_32
