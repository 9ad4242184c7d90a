# a miss: attn_256 asked on sm_80, tuned only on sm_90
cd "$FIXTURES/replay" && envlog -C main why attn_256 --namespace autotune/triton/3.0.0/sm_80
