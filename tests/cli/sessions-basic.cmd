# every session of a small environment, oldest first
cd "$FIXTURES/envs" && envlog -C basic sessions
