# Importing into an environment with no entry of the bundle's runtime
# versions warns, an empty one too; into one that has them, nothing is said.
envlog -C "$FIXTURES/replay/main" bundle export nightly -o n.envb > /dev/null
envlog -C fresh bundle import n.envb | sed 's/session [0-9a-f]*/session ID/'
cp -r "$FIXTURES/replay/main" same
envlog -C same bundle import n.envb
envlog -C "$FIXTURES/replay/main" bundle export k -o k.envb --namespace nvrtc > /dev/null
envlog -C "$FIXTURES/replay/main" bundle export t -o t.envb --namespace autotune > /dev/null
envlog -C tunes bundle import t.envb > /dev/null 2>&1
envlog -C tunes bundle import k.envb --json | sed 's/"session":"[0-9a-f]*"/"session":"00000000000000000000000000000000"/'
