# SPDX-License-Identifier: MIT
# Format 1 still reads: fixtures/format1 holds environments (sessions, a
# compacted one, multi-block records) and bundles written by envlog 0.1.0
# in format 1; tests/format1/run.sh holds every reading command's output
# to the canonical output committed beside it.  The fixtures are never
# regenerated: format 1 is no longer written.

.PHONY: check-format1

check-format1: $(BIN)
	@echo "== format 1 fixtures (written by envlog 0.1.0)"
	@bash tests/format1/run.sh $(BIN) fixtures/format1

CHECK_TARGETS += check-format1
