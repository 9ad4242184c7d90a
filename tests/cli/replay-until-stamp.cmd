# --until SESSION:SEQ: up to tuner-2 replacing the imported softmax_64 (its
# seq 3); the imported softmax_kernel still stands (tuner-2 replaces it next)
cd "$FIXTURES/replay"
t2=$(envlog -C main sessions | awk '$3 == "tuner-2" {print $1}')
envlog -C main replay --until "$t2:3"
