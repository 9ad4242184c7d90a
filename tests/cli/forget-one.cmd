# --namespace picks one; replay shows the other still standing
cp -r "$FIXTURES/replay/main" env
envlog -C env forget gemm_64 --namespace autotune/triton/3.0.0/sm_80 | sed -E "s/tombstone [0-9a-f]{32}:/tombstone NEW:/"
envlog -C env replay | grep gemm_64
envlog -C env sessions | awk "END {print \$3, \$5, \$7}"
