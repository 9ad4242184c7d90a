# no session with this full id: a system error, exit 2
cd "$FIXTURES/envs" && envlog -C basic cat ffffffffffffffffffffffffffffffff
