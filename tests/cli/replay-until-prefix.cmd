# --until with a session id prefix: the same point as replay-until-stamp
cd "$FIXTURES/replay" && envlog -C main replay --until 01a237e5f8ab:3
