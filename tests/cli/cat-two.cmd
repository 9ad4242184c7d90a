# two sessions named: each under a heading
cd "$FIXTURES/envs" && envlog -C basic cat 018fcf2b 018fcf2a7c404a1b9c3d4e5f60718293
