# --fix leaves damage other than a torn tail alone
cp -r "$FIXTURES/replay/flipped" env
envlog -C env verify --fix
