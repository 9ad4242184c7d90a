# damage with --json: data on stdout, the damage line on stderr
cd "$FIXTURES/envs" && envlog -C damaged cat --json 018fd0a2
