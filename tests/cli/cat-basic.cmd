# every record of every session, as text, in seq order
cd "$FIXTURES/envs" && envlog -C basic cat
