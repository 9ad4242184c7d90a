# The same in JSON: the ranking with percent and stop reason, the runner-up,
# what became of the trials and the compaction that removed them.
envlog -C "$FIXTURES/seed/why" why matmul/1024x1024 --json | grep '"event":"tune"' | head -1 | sed 's/,"record":.*/}/'
envlog -C "$FIXTURES/seed/why-compacted" why matmul/1024x1024 --json | sed 's/,"record":.*/}/'
