# nothing stands under that key: exit 1
cp -r "$FIXTURES/replay/main" env
envlog -C env forget layernorm_32
