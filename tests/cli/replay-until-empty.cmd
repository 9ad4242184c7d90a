# --until a time before every record: an empty state
cd "$FIXTURES/replay" && envlog -C main replay --until 2026-12-02T17:55:47.000Z
