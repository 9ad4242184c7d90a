# An existing file is refused without --force and stays as it was; with
# --force it is replaced.
envlog -C "$FIXTURES/envs/basic" bundle export b -o b.envb >/dev/null || exit 1
echo keep > dump.json
envlog -C "$FIXTURES/envs/basic" replay -o dump.json; echo "replay: $?"
cat dump.json
envlog -C "$FIXTURES/envs/basic" bundle export b -o dump.json; echo "export: $?"
cat dump.json
envlog -C "$FIXTURES/envs/basic" trace -o dump.json; echo "trace: $?"
cat dump.json
envlog -C "$FIXTURES/envs/basic" replay -o dump.json --force; echo "replay --force: $?"
envlog -C "$FIXTURES/envs/basic" replay > want.json
cmp dump.json want.json && echo "replaced by the dump"
envlog -C "$FIXTURES/envs/basic" bundle export b -f -o b.envb | sed "s/[0-9]* bytes/N bytes/"; echo "export -f: ${PIPESTATUS[0]}"
ls
