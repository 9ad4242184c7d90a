# --json for a checksum miss
cd "$FIXTURES/replay" && envlog -C main why attn_256 --json --namespace autotune/triton/3.0.0/sm_90 --checksum 7
