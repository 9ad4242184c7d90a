# SPDX-License-Identifier: MIT
# Tests of the recording core: the Check runner (every tests/check_*.c suite),
# the CLI golden tests, and the interoperability check against python3-cbor2.
# `make fixtures` regenerates fixtures/envs (deterministic; run by hand only).

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)
# Debian's python, which has python3-cbor2 (not whatever python3 is on PATH).
DEB_PYTHON   ?= /usr/bin/python3

TEST_SRC := tests/runner.c tests/testutil.c $(wildcard tests/check_*.c)
TEST_OBJ := $(TEST_SRC:%.c=$(B)/%.o)
TEST_HDR := $(wildcard tests/*.h)
RUNNER   := $(B)/tests/runner

$(B)/tests/%.o: tests/%.c $(HEADERS) $(TEST_HDR) $(DEMO_HDR) | $(B)/.test-deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(LIB_CPPFLAGS) -Itests -Iexamples $(CHECK_CFLAGS) $(CFLAGS_ALL) -c $< -o $@

$(RUNNER): $(TEST_OBJ) $(DEMO_LIB) $(STATIC)
	$(call LINK,$(TEST_OBJ) $(DEMO_LIB),$(CHECK_LIBS))

$(B)/tests/gen_fixtures: $(B)/tests/gen_fixtures.o $(STATIC)
	$(call LINK,$<)

$(B)/tests/interop_rec: $(B)/tests/interop_rec.o $(STATIC)
	$(call LINK,$<)

$(B)/tests/upkeep-long: $(B)/tests/upkeep_long.o $(STATIC)
	$(call LINK,$<)

.PHONY: check-unit check-cli check-interop check-upkeep-long fixtures

# ASan: forked tests and mmap'd segments work with these; a leak fails the
# run.  LeakSanitizer's tracer crashes on some VMs while a test has threads
# running (the cuda suite's tuner test), so that suite runs with leak
# detection off and every other with it on, whatever ASAN_OPTIONS says.
UNIT_ASAN = $${ASAN_OPTIONS:-abort_on_error=0:allow_user_segv_handler=1}
check-unit: $(RUNNER)
	@echo "== unit tests (Check)"
	@ASAN_OPTIONS="$(UNIT_ASAN):detect_leaks=1" $(RUNNER) -cuda
	@ASAN_OPTIONS="$(UNIT_ASAN):detect_leaks=0" $(RUNNER) cuda

check-cli: $(BIN)
	@echo "== CLI golden tests"
	@bash tests/cli/run.sh $(BIN) fixtures

check-interop: $(BIN) $(B)/tests/interop_rec
	@echo "== interoperability (python3-cbor2)"
	@set -e; d=$$(mktemp -d "$${TMPDIR:-/tmp}/envlog-interop-XXXXXX"); \
	  trap 'rm -rf "$$d"' EXIT; \
	  $(B)/tests/interop_rec "$$d/env"; \
	  $(DEB_PYTHON) tests/interop.py $(BIN) "$$d/env" fixtures/envs/basic fixtures/envs/damaged \
	    fixtures/format1/env fixtures/format1/multiblock

fixtures: $(B)/tests/gen_fixtures
	rm -rf fixtures/envs
	$(B)/tests/gen_fixtures fixtures/envs

# An application that only records, for UPKEEP_SESSIONS sessions with the
# default settings: bounded session directories and bytes throughout.
UPKEEP_SESSIONS ?= 5000
check-upkeep-long: $(B)/tests/upkeep-long
	@echo "== self-maintaining environment: $(UPKEEP_SESSIONS) sessions with the default settings"
	@$(B)/tests/upkeep-long -n $(UPKEEP_SESSIONS)

CHECK_TARGETS += check-unit check-cli check-interop check-upkeep-long
