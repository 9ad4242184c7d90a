# not a session id at all
cd "$FIXTURES/envs" && envlog -C basic cat not-an-id
