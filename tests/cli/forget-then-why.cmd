# why shows the tombstone that forget recorded
cp -r "$FIXTURES/replay/main" env
envlog -C env forget softmax_64 >/dev/null
new=$(envlog -C env sessions --json | tail -1 | sed 's/.*"session":"\([0-9a-f]*\)".*/\1/')
envlog -C env why softmax_64 | sed -n "/^forget/,\$p" | sed -e "s/$new/NEW/" -E -e "s/[0-9]{4}-[0-9-]{5}T[0-9:.]{12}Z/TIME/"
