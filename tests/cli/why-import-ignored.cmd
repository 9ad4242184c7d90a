# rmsnorm_16: imported, then imported again from a newer bundle; an
# imported value never replaces an entry, even an imported one
cd "$FIXTURES/replay" && envlog -C main why rmsnorm_16
