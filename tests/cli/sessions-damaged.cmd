# a damaged and a torn session: listed with their state, exit status 1
cd "$FIXTURES/envs" && envlog -C damaged sessions
