# --checksum in hex, as why prints it: the entry stands
cd "$FIXTURES/replay" && envlog -C main why attn_256 --namespace autotune/triton/3.0.0/sm_90 --checksum 0xe0a2871213fbdce2
