# the damage in numbers: records kept, bytes dropped
cd "$FIXTURES/envs" && envlog -C damaged sessions --json
