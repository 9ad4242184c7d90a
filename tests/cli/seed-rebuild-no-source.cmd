# Kernels compiled below FULL before sources were recorded on their own:
# none can be checked.
envlog -C "$FIXTURES/replay/main" rebuild --verify
