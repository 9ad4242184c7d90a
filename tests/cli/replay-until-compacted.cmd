# --until inside what a compaction folded: the state is what the snapshot
# kept, and the note says what is no longer recorded and which compaction
# removed it; with --evidence all nothing is lost and nothing is said.
cp -r "$FIXTURES/replay/main" env
t=$(envlog -C env sessions --json | head -n 2 | tail -n 1 | sed 's/.*"start":"\([^"]*\)".*/\1/')
envlog -C env compact >/dev/null && envlog -C env compact >/dev/null || exit 1
envlog -C env replay --until "$t" 2>err | wc -l
sed -E 's/[0-9]{4}-[0-9-]{5}T[0-9:.]{12}Z/TIME/' err
cp -r "$FIXTURES/replay/main" all
envlog -C all compact --evidence all >/dev/null && envlog -C all compact --evidence all >/dev/null || exit 1
envlog -C all replay --until "$t" 2>err | wc -l
cat err
