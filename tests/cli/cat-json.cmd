# one JSON object per line; unknown keys would show as "k<N>"
cd "$FIXTURES/envs" && envlog -C basic cat --json
