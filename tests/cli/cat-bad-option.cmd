# an option cat does not have
cd "$FIXTURES/envs" && envlog -C basic cat --bogus
