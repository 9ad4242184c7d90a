# bundle export --from: several environments into one bundle, folded as one
# (the fixtures share no key, so every entry of each is there), the manifest
# listing every source; a --from that is not an environment is refused.
envlog -C "$FIXTURES/replay/main" bundle export both -o b.envb --from "$FIXTURES/envs/basic" | sed -E "s/[0-9]+ bytes/N bytes/"
envlog bundle inspect b.envb | sed "s|$FIXTURES|FIXTURES|g" | grep -E '^(sources|entries| +FIXTURES)'
envlog bundle inspect b.envb --json | sed "s|$FIXTURES|FIXTURES|g" | grep -o '"sources":[^]]*]'
envlog -C new bundle import b.envb 2>/dev/null | head -n 1
envlog -C "$FIXTURES/replay/main" bundle export x -o c.envb --from nowhere
echo "rc $?, $(ls c.envb 2>&1 | sed 's/.*: //')"
