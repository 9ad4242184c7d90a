# The same in JSON: "paired" differences with what changed and both sides.
envlog diff "$FIXTURES/seed/diff-a" "$FIXTURES/seed/diff-b" --json | grep '"type":"diff"'
