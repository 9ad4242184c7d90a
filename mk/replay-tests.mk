# SPDX-License-Identifier: MIT
# Tests of replay and the commands that explain it: the replay suite runs
# inside the shared Check runner (tests/check_replay.c); this file adds the
# fixture generator, the live-writer helper and the script tests
# (tests/replay/*.sh: determinism, trace, verify --fix, the live session).
# The golden CLI tests tests/cli/{replay,why,verify,trace,status,forget}-*
# run under tests/replay/golden.sh.
#
# `make fixtures-replay` regenerates fixtures/replay/ (new ids and times),
# then `make goldens-replay` rewrites the expected outputs: run both by hand
# only, review the diff, and commit the output.  tests/replay/golden.sh
# runs the goldens (see there for what a .cmd may assume).

REPLAY_GEN    := $(B)/tests/gen_replay_fixtures
REPLAY_HOLDER := $(B)/tests/replay_holder

$(REPLAY_GEN): $(B)/tests/gen_replay_fixtures.o $(STATIC)
	$(call LINK,$<)

$(REPLAY_HOLDER): $(B)/tests/replay_holder.o $(STATIC)
	$(call LINK,$<)

.PHONY: fixtures-replay goldens-replay check-replay-scripts check-replay-golden

fixtures-replay: $(REPLAY_GEN)
	rm -rf fixtures/replay
	$(REPLAY_GEN) fixtures/replay

# Rewrites the expected outputs of the replay goldens (review the diff).
goldens-replay: $(BIN)
	bash tests/replay/golden.sh $(BIN) fixtures --update

check-replay-golden: $(BIN)
	@echo "== replay golden CLI tests"
	@bash tests/replay/golden.sh $(BIN) fixtures

check-replay-scripts: $(BIN) $(REPLAY_GEN) $(REPLAY_HOLDER)
	@echo "== replay script tests"
	@bash tests/replay/run.sh $(BIN) $(REPLAY_GEN) $(REPLAY_HOLDER) fixtures/replay

CHECK_TARGETS += check-replay-golden check-replay-scripts
