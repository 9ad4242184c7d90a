# sessions takes no argument
cd "$FIXTURES/envs" && envlog -C basic sessions extra
