# Compacted at evidence none: the tune that set the entry keeps its
# verdict, winner and wall time, and says its trials were compacted away
# (and by which compaction) instead of "no trials ran"; the losing tune is
# no longer recorded, and a line says so.
envlog -C "$FIXTURES/seed/why-compacted" why matmul/1024x1024
