# SPDX-License-Identifier: MIT
# The golden CLI tests of rebuild, diff and why on the environments under
# fixtures/seed/ (tests/cli/seed-*), run under tests/replay/golden.sh.
# `make fixtures-seed` regenerates fixtures/seed/ (new ids and times) and
# `make goldens-seed` rewrites the expected outputs: by hand only, review
# the diff.  make check builds the generator and runs it into a scratch
# directory, so it cannot rot unnoticed.

SEED_GEN := $(B)/tests/gen_seed_fixtures
SEED_GOLDENS = $(patsubst tests/cli/%.cmd,%,$(wildcard tests/cli/seed-*.cmd))

$(SEED_GEN): $(B)/tests/gen_seed_fixtures.o $(STATIC)
	$(call LINK,$<)

.PHONY: fixtures-seed goldens-seed check-seed-golden

fixtures-seed: $(SEED_GEN)
	rm -rf fixtures/seed
	$(SEED_GEN) fixtures/seed

goldens-seed: $(BIN)
	bash tests/replay/golden.sh $(BIN) fixtures --update $(SEED_GOLDENS)

check-seed-golden: $(BIN) $(SEED_GEN)
	@echo "== seed golden CLI tests (rebuild, diff, why)"
	@set -e; d=$$(mktemp -d "$${TMPDIR:-/tmp}/envlog-seedgen-XXXXXX"); \
	  trap 'rm -rf "$$d"' EXIT; $(SEED_GEN) "$$d/seed"
	@bash tests/replay/golden.sh $(BIN) fixtures $(SEED_GOLDENS)

CHECK_TARGETS += check-seed-golden
