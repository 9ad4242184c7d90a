# --fix cuts the torn tail (exit 1: damage was found), keeps the .broken
# copy byte for byte, and verify is then clean
cp -r "$FIXTURES/replay/torn" env
envlog -C env verify --fix
echo "== exit $?"
cmp "$FIXTURES/replay/torn/sessions/01a237e5f8fd6e8c285c6f768820d3ca/00000002-0000000000000011.log" \
    env/sessions/01a237e5f8fd6e8c285c6f768820d3ca/00000002-0000000000000011.log.broken && echo "== .broken is the original"
ls env/sessions/01a237e5f8fd6e8c285c6f768820d3ca
envlog -C env verify
