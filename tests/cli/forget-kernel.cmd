# --kernel by name: both matmul_kernel builds match; one by namespace
cp -r "$FIXTURES/replay/main" env
envlog -C env forget --kernel matmul_kernel
echo "== exit $?"
envlog -C env forget --kernel matmul_kernel --namespace nvrtc/12.4/sm_80 | sed -E "s/tombstone [0-9a-f]{32}:/tombstone NEW:/"
envlog -C env replay | grep -o "\"name\":\"[a-z_]*\",\"arch\":\"sm_[0-9]*\""
