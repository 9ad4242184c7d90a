# a prefix that names two sessions is refused
cd "$FIXTURES/envs" && envlog -C basic cat 018fcf2
