# bundle export --anonymous: no session record, no host or label in the
# manifest; the entries, their records and the devices go as they are (the
# fixture was recorded on a host named "vm": the CBOR text "bvm").
envlog -C "$FIXTURES/replay/main" bundle export x -o plain.envb >/dev/null || exit 1
envlog -C "$FIXTURES/replay/main" bundle export x -o anon.envb --anonymous >/dev/null || exit 1
# (whether the bytes zstd -d gives hold them: in bundle format 2 the column
# image, whose strings are whole but not repeated, so no count is kept)
some() { if [ "$1" -gt 0 ]; then echo some; else echo none; fi; }
for b in plain anon; do
    printf '%s: hosts %s, labels %s\n' "$b" \
        "$(some "$(zstd -dqc "$b.envb" | grep -ac 'bvm')")" \
        "$(some "$(zstd -dqc "$b.envb" | grep -ac 'tuner-2')")"
done
envlog bundle inspect anon.envb | grep -E '^(captured on|  |entries|check)' | sed -E 's/content hash [0-9a-f]+/content hash H/'
envlog -C new bundle import anon.envb 2>/dev/null | head -n 1
envlog -C new replay | wc -l
envlog -C "$FIXTURES/replay/main" replay | wc -l
