# status of an environment covering every fold rule
cd "$FIXTURES/replay" && envlog -C main status
