# SPDX-License-Identifier: MIT
# mk/reliability.mk - the reliability harness outside the Check runner
# (the "reliability" suite, tests/check_reliability.c, runs inside it):
#  - the kill -9 loop (tests/crash/crash_driver.c killing tests/crash/writer.c),
#    CRASH_KILLS kills (200 in `make check`);
#  - the concurrency run (tests/crash/conc.c): 16 writer processes, a
#    compaction loop and a reader loop for CONC_SECONDS (10 in `make check`);
#  - the hostile-input catalogue (fixtures/hostile/MANIFEST) through the
#    command, with peak memory measured (tests/crash/hostile.sh).
# `make torture` runs the long forms: 10,000 kills and 60 seconds.
# `make fixtures-hostile` regenerates fixtures/hostile/*.bin by hand.

CRASH_KILLS  ?= 200
# Sanitizer builds take more memory for themselves (shadow, quarantine).
HOSTILE_MEM_SLACK := $(if $(findstring -fsanitize,$(CFLAGS)),262144,0)
CONC_SECONDS ?= 10
CRASH_DIR    := $(B)/tests/crash
CRASH_WRITER := $(CRASH_DIR)/crash-writer
CRASH_DRIVER := $(CRASH_DIR)/crash-driver
CRASH_CONC   := $(CRASH_DIR)/crash-conc
CRASH_MAXRSS := $(CRASH_DIR)/maxrss
HOSTILE_GEN  := $(CRASH_DIR)/gen-hostile
CRASH_HDR    := $(wildcard tests/crash/*.h)

$(CRASH_DIR)/%.o: tests/crash/%.c $(HEADERS) $(CRASH_HDR) | $(B)/.test-deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(PUB_CPPFLAGS) -Itests/crash $(CFLAGS_ALL) -c $< -o $@

# The hostile-input generator frames records itself and the concurrency
# run folds a reference state itself: they need the internal headers.
$(CRASH_DIR)/gen_hostile.o $(CRASH_DIR)/conc.o: $(CRASH_DIR)/%.o: tests/crash/%.c $(HEADERS) $(CRASH_HDR) | $(B)/.test-deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(LIB_CPPFLAGS) -Itests/crash $(CFLAGS_ALL) -c $< -o $@

$(CRASH_WRITER): $(CRASH_DIR)/writer.o $(STATIC)
	$(call LINK,$(filter-out $(STATIC),$^))

$(CRASH_DRIVER): $(CRASH_DIR)/crash_driver.o $(CRASH_DIR)/verify.o $(STATIC)
	$(call LINK,$(filter-out $(STATIC),$^))

$(CRASH_CONC): $(CRASH_DIR)/conc.o $(CRASH_DIR)/verify.o $(STATIC)
	$(call LINK,$(filter-out $(STATIC),$^))

$(CRASH_MAXRSS): $(CRASH_DIR)/maxrss.o
	@echo "  LD  $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $^

$(HOSTILE_GEN): $(CRASH_DIR)/gen_hostile.o $(STATIC)
	$(call LINK,$(filter-out $(STATIC),$^))

.PHONY: check-crash check-conc check-hostile fixtures-hostile torture

check-crash: $(BIN) $(CRASH_WRITER) $(CRASH_DRIVER)
	@echo "== kill -9 loop ($(CRASH_KILLS) kills)"
	@$(CRASH_DRIVER) -e $(BIN) -w $(CRASH_WRITER) -n $(CRASH_KILLS)

check-conc: $(CRASH_CONC)
	@echo "== concurrency: 16 writers, compaction and reader loops, automatic compactions killed at random ($(CONC_SECONDS) s)"
	@$(CRASH_CONC) -t $(CONC_SECONDS) -w 16

check-hostile: $(BIN) $(CRASH_MAXRSS)
	@echo "== hostile inputs (fixtures/hostile/MANIFEST)"
	@HOSTILE_MEM_SLACK=$(HOSTILE_MEM_SLACK) bash tests/crash/hostile.sh $(BIN) $(CRASH_MAXRSS) fixtures/hostile

# Regenerates the catalogue's files (by hand; review and commit them).
fixtures-hostile: $(HOSTILE_GEN)
	rm -f fixtures/hostile/*.log fixtures/hostile/*.bundle fixtures/hostile/*.bin
	$(HOSTILE_GEN) fixtures/hostile

CHECK_TARGETS += check-crash check-conc check-hostile

torture: all
	@$(MAKE) --no-print-directory check-crash CRASH_KILLS=10000
	@$(MAKE) --no-print-directory check-conc CONC_SECONDS=60

# The reliability suite shares the generator with the drivers.
$(B)/tests/check_reliability.o: $(CRASH_HDR)
