# A mistyped command or option gets the closest one; -- ends the options;
# -C after the command is told where it goes.
envlog staus; echo "rc $?"
envlog --jsn status; echo "rc $?"
envlog -C "$FIXTURES/envs/basic" why --namspace x k; echo "rc $?"
envlog -C "$FIXTURES/envs/basic" replay --froce; echo "rc $?"
envlog -C "$FIXTURES/envs/basic" verify --fxi; echo "rc $?"
envlog -C "$FIXTURES/envs/basic" compact --zzzzzz; echo "rc $?"
envlog -C "$FIXTURES/envs/basic" why -- --namespace; echo "rc $?"
envlog status -C "$FIXTURES/envs/basic"; echo "rc $?"
