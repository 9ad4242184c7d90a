# flipped bits mid-segment: the rest of that block is lost, the fold
# resumes in the next segment, the other session is whole
cd "$FIXTURES/replay" && envlog -C flipped replay
