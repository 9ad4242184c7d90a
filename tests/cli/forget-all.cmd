# --all forgets every match, in one new session
cp -r "$FIXTURES/replay/main" env
envlog -C env forget gemm_64 --all | sed -E "s/tombstone [0-9a-f]{32}:/tombstone NEW:/"
envlog -C env replay | grep -c gemm_64
envlog -C env sessions | wc -l
