# --until SESSION:SEQ: up to tuner-2 replacing the imported softmax_64;
# the imported softmax_kernel still stands (tuner-2 replaces it next)
cd "$FIXTURES/replay" && envlog -C main replay --until 01a237e5f8ab43742ae0f790daa04956:3
