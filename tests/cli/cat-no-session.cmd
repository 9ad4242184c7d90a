# no session with this prefix
cd "$FIXTURES/envs" && envlog -C basic cat ffff
