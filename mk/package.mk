# SPDX-License-Identifier: MIT
# mk/package.mk - what a packager runs: the install round trip (make
# check-install, part of make check), the release tarball (make dist) and
# its proof (make distcheck: unpacked elsewhere, it builds, passes make
# check and installs and uninstalls cleanly).

DIST_NAME := envlog-$(VERSION)
DIST_TAR  := $(DIST_NAME).tar.gz

.PHONY: check-install check-completion
CHECK_TARGETS += check-install checksymbols check-completion
check-completion: $(BIN)
	@echo "== bash completion"
	@bash tests/package/completion.sh $(BIN)

.PHONY: check-progress
CHECK_TARGETS += check-progress
check-progress: $(BIN) $(CUDA_REBUILD_ENV)
	@echo "== progress on a pseudo-terminal, none on a pipe"
	@$(DEB_PYTHON) tests/package/progress.py $(BIN) fixtures $(CUDA_REBUILD_ENV)

check-install: all $(B)/envlog.pc
	@echo "== install, use and uninstall under two prefixes"
	@CC="$(CC)" CFLAGS="$(CFLAGS)" LDFLAGS="$(LDFLAGS)" bash tests/package/install.sh $(B)

# The tracked files of the tree as they are now (a file deleted and not yet
# committed is left out).
dist:
	@git rev-parse --is-inside-work-tree >/dev/null 2>&1 || \
	  { echo "envlog: make dist needs the git checkout (it packs the tracked files)" >&2; exit 1; }
	@rm -rf $(B)/$(DIST_NAME) && mkdir -p $(B)/$(DIST_NAME)
	@git ls-files -z | xargs -0 sh -c 'for f; do [ ! -e "$$f" ] || printf "%s\0" "$$f"; done' - | \
	  tar --null -T - -cf - | tar -xf - -C $(B)/$(DIST_NAME)
	@tar -C $(B) --owner=0 --group=0 --numeric-owner --sort=name -czf $(DIST_TAR) $(DIST_NAME)
	@rm -rf $(B)/$(DIST_NAME)
	@echo "dist: $(DIST_TAR) ($$(tar -tzf $(DIST_TAR) | grep -vc '/$$') files)"

DISTCHECK_DIR := $(B)/distcheck
distcheck: dist
	@rm -rf $(DISTCHECK_DIR) && mkdir -p $(DISTCHECK_DIR)
	@tar -xzf $(DIST_TAR) -C $(DISTCHECK_DIR)
	@echo "== distcheck: $(DIST_TAR) unpacked in $(DISTCHECK_DIR), make check there"
	@$(MAKE) --no-print-directory -C $(DISTCHECK_DIR)/$(DIST_NAME) check
	@$(MAKE) --no-print-directory -C $(DISTCHECK_DIR)/$(DIST_NAME) \
	  DESTDIR=$(abspath $(DISTCHECK_DIR))/root PREFIX=/usr install uninstall
	@left=$$(find $(DISTCHECK_DIR)/root -mindepth 1); \
	  [ -z "$$left" ] || { echo "distcheck: uninstall left: $$left" >&2; exit 1; }
	@rm -rf $(DISTCHECK_DIR)
	@echo "distcheck: $(DIST_TAR) builds, passes make check, installs and uninstalls"

# The layers the build enforces (the include paths of each module's
# compile), named file by file; and proof the check can fail.
.PHONY: check-layers
CHECK_TARGETS += check-layers
check-layers:
	@echo "== layers: core <- log <- replay <- remote, cuda on log, cli on the public headers"
	@bash mk/check-layers.sh .
	@set -e; t=$$(mktemp -d "$${TMPDIR:-/tmp}/envlog-layers-XXXXXX"); trap 'rm -rf "$$t"' EXIT; \
	  mkdir -p "$$t/core" "$$t/replay"; touch "$$t/replay/replay_int.h"; \
	  echo '#include "replay_int.h"' > "$$t/core/up.c"; \
	  if bash mk/check-layers.sh "$$t" 2>/dev/null; then \
	    echo "layers: an include from core of replay_int.h was not caught" >&2; exit 1; fi; \
	  echo "layers: an include from core of replay's header is caught"
