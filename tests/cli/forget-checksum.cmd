# --checksum (decimal, or 0x hex) and --json
cp -r "$FIXTURES/replay/main" env
envlog -C env forget gemm_64 --json --checksum 0x641b8d0bc2b1e266 && exit 9
envlog -C env forget gemm_64 --json --namespace autotune/triton/3.0.0/sm_90 --checksum 7213295707748590694 |
    sed -E "s/\"session\":\"[0-9a-f]{32}\"/\"session\":\"NEW\"/"
