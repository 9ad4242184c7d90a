# one JSON object per line, by the option after the command or before it
cd "$FIXTURES/envs" && envlog -C basic sessions --json && envlog --json -C basic sessions
