# One machine's tunes under runtime 0.10.0 against the same keys under
# 0.11.0: each key is one line saying what changed (runtime, device,
# candidates), a winner change within noise is labelled so, tune times that
# changed are shown; a key only B tuned stays "only in B".
envlog diff "$FIXTURES/seed/diff-a" "$FIXTURES/seed/diff-b" | sed "s|$FIXTURES|FIXTURES|"
echo "exit ${PIPESTATUS[0]}"
