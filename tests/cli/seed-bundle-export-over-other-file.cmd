# --force replaces a bundle, never a file that is not one.
echo "my notes" > notes.txt
envlog -C "$FIXTURES/replay/main" bundle export nightly -o notes.txt --force
echo "exit $?"
cat notes.txt
envlog -C "$FIXTURES/replay/main" bundle export nightly -o n.envb > /dev/null
envlog -C "$FIXTURES/replay/main" bundle export nightly -o n.envb --force --namespace nvrtc/12.4 | sed "s/, [0-9]* bytes/, N bytes/"
