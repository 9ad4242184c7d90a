# --fix cuts the torn tail (exit 1: damage was found), keeps the .broken
# copy byte for byte, and verify is then clean
cp -r "$FIXTURES/replay/torn" env
envlog -C env verify --fix
echo "== exit $?"
for b in env/sessions/*/*.broken; do
    orig=$FIXTURES/replay/torn/${b#env/}
    cmp "${orig%.broken}" "$b" && echo "== $(basename "$b") is the original, byte for byte"
done
(cd env/sessions && ls -R)
envlog -C env verify
