# a unique prefix of a session id, in either case
cd "$FIXTURES/envs" && envlog -C basic cat 018fcf2b && envlog -C basic cat 018FCF2B1E
