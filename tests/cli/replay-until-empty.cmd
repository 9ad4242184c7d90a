# --until a time before every record: an empty state
cd "$FIXTURES/replay" && envlog -C main replay --until 1970-01-02T00:00:00Z
