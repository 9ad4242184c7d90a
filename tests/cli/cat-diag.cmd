# the stored CBOR in diagnostic notation (RFC 8949 section 8)
cd "$FIXTURES/envs" && envlog -C basic cat --diag 018fcf2a7c404a1b9c3d4e5f60718293
