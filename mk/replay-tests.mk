# SPDX-License-Identifier: MIT
# Tests of replay and the commands that explain it: the replay suite runs
# inside the shared Check runner (tests/check_replay.c); this file adds the
# fixture generator, the live-writer helper and the script tests
# (tests/replay/*.sh: determinism, trace, verify --fix, the live session).
# The golden CLI tests named replay-*, why-*, verify-*, trace-*, status-*
# and forget-* run with the others in tests/cli/.
#
# `make fixtures-replay` regenerates fixtures/replay/ (new ids and times:
# the goldens must then be regenerated too); run by hand only, and commit
# its output.

REPLAY_GEN    := $(B)/tests/gen_replay_fixtures
REPLAY_HOLDER := $(B)/tests/replay_holder

$(REPLAY_GEN): $(B)/tests/gen_replay_fixtures.o $(STATIC)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

$(REPLAY_HOLDER): $(B)/tests/replay_holder.o $(STATIC)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

.PHONY: fixtures-replay check-replay-scripts

fixtures-replay: $(REPLAY_GEN)
	rm -rf fixtures/replay
	$(REPLAY_GEN) fixtures/replay

check-replay-scripts: $(BIN) $(REPLAY_GEN) $(REPLAY_HOLDER)
	@echo "== replay script tests"
	@bash tests/replay/run.sh $(BIN) $(REPLAY_GEN) $(REPLAY_HOLDER) fixtures/replay

CHECK_TARGETS += check-replay-scripts
