# a checksum that is not a number: usage error, never a silent other key
cd "$FIXTURES/replay" && envlog -C main why attn_256 --checksum e0a2871213fbdce2
