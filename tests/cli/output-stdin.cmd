# "-" is standard input for a bundle read: inspect, verify, embed, diff
# and import.
envlog -C "$FIXTURES/envs/basic" bundle export b -o b.envb >/dev/null || exit 1
envlog bundle inspect - < b.envb | grep -E '^(bundle|check)' | sed 's/content hash [0-9a-f]*/content hash H/'
envlog verify - < b.envb | sed 's/  .*//'
envlog bundle embed - --name shipped < b.envb | head -n 1
envlog bundle embed b.envb --name shipped | tail -n +2 > from-file.c
envlog bundle embed - --name shipped < b.envb | tail -n +2 > from-stdin.c
cmp from-file.c from-stdin.c && echo "embed: the same bytes"
envlog diff "$FIXTURES/envs/basic" - < b.envb >/dev/null; echo "diff: $?"
envlog diff - - < b.envb; echo "diff - -: $?"
envlog -C new bundle import - < b.envb | head -n 1
envlog -C new replay | wc -l
envlog bundle inspect - < /dev/null; echo "empty input: $?"
