# Each tune's trials ranked by cost with their percent of the winner's, why
# each stopped sampling (converged, dropped as too slow, the sample limit,
# an error), the runner-up named and the tune's wall time; the second tune
# (a winner within noise) lost to the first.
envlog -C "$FIXTURES/seed/why" why matmul/1024x1024
