# --out FILE: the dump goes to the file, nothing to stdout
envlog -C "$FIXTURES/replay/main" replay --out dump.json && cmp dump.json - < <(envlog -C "$FIXTURES/replay/main" replay) && ls
