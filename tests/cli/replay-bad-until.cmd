# --until that is neither a time nor SESSION:SEQ
cd "$FIXTURES/replay" && envlog -C main replay --until yesterday
