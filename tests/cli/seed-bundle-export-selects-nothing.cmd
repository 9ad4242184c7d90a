# An export whose prefixes select no tune and no kernel says so, exits 1
# and writes no file; a prefix matches whole components, so
# autotune/triton/3.0 does not take autotune/triton/3.0.0.
envlog -C "$FIXTURES/replay/main" bundle export nightly -o n.envb --namespace autotune/triton/3.0
echo "exit $?"
test -e n.envb && echo "a file was written"
envlog -C "$FIXTURES/seed/empty" bundle export nightly -o - | wc -c
envlog -C "$FIXTURES/replay/main" bundle export nightly -o n.envb --namespace autotune/triton/3.0.0/sm_9
echo "exit $?"
envlog -C "$FIXTURES/replay/main" bundle export nightly -o n.envb --namespace autotune/triton/3.0.0/sm_90 | sed "s/, [0-9]* bytes/, N bytes/"
