# An environment that recorded no compile: there is nothing to verify, and
# that is not a pass.
envlog -C "$FIXTURES/seed/empty" rebuild --verify
