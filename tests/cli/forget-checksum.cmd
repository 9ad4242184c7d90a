# --checksum in 0x hex (as why prints it) and in decimal (as replay does);
# the checksum alone still matches both namespaces
cp -r "$FIXTURES/replay/main" env
envlog -C env forget gemm_64 --checksum 0x641ad8f84ac8bd66
echo "== exit $?"
envlog -C env forget gemm_64 --json --namespace autotune/triton/3.0.0/sm_90 --checksum 7213295707748590694 |
    sed -E "s/\"session\":\"[0-9a-f]{32}\"/\"session\":\"NEW\"/"
envlog -C env forget gemm_64 --checksum 64z
