# verify --json of the torn tail
cd "$FIXTURES/replay" && envlog -C torn verify --json
