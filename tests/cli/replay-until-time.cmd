# --until TIME (ISO 8601): as of the start of the cleanup session, before it
# forgot layernorm_32 and before the second import brought swiglu_8
cd "$FIXTURES/replay"
at=$(envlog -C main sessions | awk '$3 == "cleanup" {print $2}')
envlog -C main replay --until "$at"
