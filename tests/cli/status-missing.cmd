# a missing middle segment: damage, exit 1
cd "$FIXTURES/replay" && envlog -C missing status
