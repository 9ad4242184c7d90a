# records before the damage are printed; the damage goes to stderr; exit 1
cd "$FIXTURES/envs" && envlog -C damaged cat
