# a miss: attn_256 under its namespace but another tune-set checksum
cd "$FIXTURES/replay" && envlog -C main why attn_256 --namespace autotune/triton/3.0.0/sm_90 --checksum 12345
