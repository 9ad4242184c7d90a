# SPDX-License-Identifier: MIT
# The benchmark.  `make bench` builds envlog-bench and runs it (BENCH_QUICK=1
# for --quick; BENCH_ARGS passes more options, e.g. --json).  It is never
# part of `make check`'s pass/fail: check-bench-build only compiles it and
# runs its self-test, so the harness cannot rot unnoticed.  It links SQLite
# (Debian's libsqlite3-dev), the baseline it measures envlog against.

BENCH_SRC := $(wildcard bench/*.c)
BENCH_OBJ := $(BENCH_SRC:%.c=$(B)/%.o)
BENCH_BIN := $(B)/envlog-bench
BENCH_TARGETS += $(BENCH_BIN)
CHECK_TARGETS += check-bench-build

.PHONY: check-bench-build

$(B)/bench/%.o: bench/%.c bench/bench.h $(HEADERS) | $(B)/.test-deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(LIB_CPPFLAGS) $(CFLAGS_ALL) -c $< -o $@

$(BENCH_BIN): $(BENCH_OBJ) $(STATIC)
	$(call LINK,$(BENCH_OBJ),-lsqlite3)

bench: $(BENCH_BIN)
	$(BENCH_BIN) $(if $(filter 1,$(BENCH_QUICK)),--quick) $(BENCH_ARGS)

check-bench-build: $(BENCH_BIN)
	@$(BENCH_BIN) --selftest
