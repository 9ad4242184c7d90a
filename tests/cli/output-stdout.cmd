# "-" is standard output: the same bytes a file gets; no file named "-";
# export's report goes to standard error.
envlog -C "$FIXTURES/envs/basic" replay -o - > a.json || exit 1
envlog -C "$FIXTURES/envs/basic" replay > b.json || exit 1
cmp a.json b.json && echo "replay -o -: the dump"
envlog -C "$FIXTURES/envs/basic" trace -o - > t.json || exit 1
envlog -C "$FIXTURES/envs/basic" trace > u.json || exit 1
cmp t.json u.json && echo "trace -o -: the trace"
envlog -C "$FIXTURES/envs/basic" bundle export b -o - > b.envb 2>report || exit 1
sed 's/[0-9]* bytes/N bytes/' report
envlog bundle inspect b.envb | grep '^check'
envlog -C "$FIXTURES/envs/basic" bundle export b -o - --json > c.envb 2>/dev/null || exit 1
envlog bundle inspect c.envb | grep '^check'
[ -e ./- ] && echo "a file named -"
ls
