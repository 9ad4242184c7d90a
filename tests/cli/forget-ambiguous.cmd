# gemm_64 stands on sm_90 and sm_80: forget refuses without --all
cp -r "$FIXTURES/replay/main" env
envlog -C env forget gemm_64
