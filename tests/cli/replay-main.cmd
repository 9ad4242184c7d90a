# the canonical dump: entries by (table, namespace, key, checksum), then
# user records; softmax_64 local over imported, conv_3x3 the first local
# (tuner-2 tuned it before tuner-1, which began earlier), layernorm_32
# forgotten, matmul_128 not replaced by the unmeasured pick, rmsnorm_16 the
# first of two imported values, swiglu_8 imported
cd "$FIXTURES/replay" && envlog -C main replay
