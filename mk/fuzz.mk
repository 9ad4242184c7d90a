# SPDX-License-Identifier: MIT
# Fuzzing.  `make fuzz` builds each target with clang, libFuzzer, ASan and
# UBSan in build-fuzz/ and runs it for FUZZ_SECONDS (default 60) on its
# corpus (tests/fuzz/corpus/<target>, where new finds are kept);
# `make check` replays every stored input with the normal build.
# `make fuzz-seeds` seeds the corpora from fixtures/.

FUZZ_TARGETS := frames event snapshot bundle bundle2
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
FUZZ_B       := build-fuzz
# The fuzzed code is core, log and replay; cuda is not reachable from them.
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_B)/%.o,$(wildcard core/*.c log/*.c replay/*.c))
.SECONDARY:

$(FUZZ_B)/%.o: %.c $(HEADERS) tests/fuzz/fuzz.h tests/fold_agree.h
	@mkdir -p $(dir $@)
	@echo "  CC  $< (fuzz)"
	@$(FUZZ_CC) $(LIB_CPPFLAGS) -Itests/fuzz -std=c11 -D_GNU_SOURCE $(FUZZ_FLAGS) -c $< -o $@

$(FUZZ_B)/fuzz-%: $(FUZZ_B)/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	@echo "  LD  $@"
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS_ALL)

# The corpus replay: the target's entry point and a plain main.
$(B)/fuzz/replay-%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h tests/fold_agree.h $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(LIB_CPPFLAGS) -Itests/fuzz $(CFLAGS_ALL) $(LDFLAGS) -o $@ \
	  tests/fuzz/fuzz_$*.c tests/fuzz/replay.c $(STATIC) $(LDLIBS_ALL)

.PHONY: fuzz fuzz-seeds check-fuzz-corpus

fuzz: $(FUZZ_TARGETS:%=$(FUZZ_B)/fuzz-%)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p tests/fuzz/corpus/$$t tests/fuzz/out/$$t; \
	  echo "== fuzzing $$t for $(FUZZ_SECONDS)s"; \
	  $(FUZZ_B)/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -max_len=262144 -timeout=10 \
	    -rss_limit_mb=2048 -artifact_prefix=tests/fuzz/out/$$t/ \
	    tests/fuzz/corpus/$$t 2>&1 | tail -n 3 || exit 1; \
	done

fuzz-seeds: $(B)/tests/fuzz/gen_seeds
	@for e in fixtures/envs/*/; do \
	  $(B)/tests/fuzz/gen_seeds "$$e" tests/fuzz/corpus || exit 1; done
	@ls tests/fuzz/corpus/* | wc -l

$(B)/tests/fuzz/gen_seeds: tests/fuzz/gen_seeds.c tests/fuzz/fuzz.h $(STATIC)
	@mkdir -p $(dir $@)
	@$(CC) $(LIB_CPPFLAGS) -Itests/fuzz $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

check-fuzz-corpus: $(FUZZ_TARGETS:%=$(B)/fuzz/replay-%)
	@echo "== fuzz corpora replayed"
	@for t in $(FUZZ_TARGETS); do \
	  $(B)/fuzz/replay-$$t tests/fuzz/corpus/$$t || exit 1; done

CHECK_TARGETS += check-fuzz-corpus
