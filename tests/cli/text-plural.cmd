# One of a thing is singular, any other count plural.
envlog -C "$FIXTURES/envs/basic" bundle export one -o b.envb >/dev/null || exit 1
envlog -C new bundle import b.envb >/dev/null || exit 1
envlog -C new status | grep -E '^(sessions|snapshot|entries)'
# (the import record holds the manifest, whose sources name the fixture's
# path: the offset depends on where the tree is)
envlog -C new verify | sed -E 's/^[0-9a-f]{32}/ID/; s/good to offset [0-9]+/good to offset N/'
