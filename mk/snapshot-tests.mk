# SPDX-License-Identifier: MIT
# Snapshot and bundle tests outside the Check runner: the CLI end to end
# (with the golden diff output), the upkeep commands, and the bundle read by
# zstd and cbor2 (both bundle formats).

$(B)/tests/snapshot-rec: tests/snapshot/snapshot_rec.c $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(PUB_CPPFLAGS) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

.PHONY: check-snapshot-cli check-upkeep-cli check-bundle-interop

check-snapshot-cli: $(BIN) $(B)/tests/snapshot-rec
	@echo "== snapshot and bundle commands"
	@bash tests/snapshot/cli.sh $(BIN) $(B)/tests/snapshot-rec $(STATIC) "$(CC) $(LDFLAGS)" $(LDLIBS_ALL)

check-upkeep-cli: $(BIN) $(B)/tests/snapshot-rec
	@echo "== upkeep commands (config, automatic compaction, prune, gc, forget --namespace)"
	@bash tests/snapshot/upkeep.sh $(BIN) $(B)/tests/snapshot-rec

check-bundle-interop: $(BIN) $(B)/tests/snapshot-rec
	@echo "== bundle interoperability (zstd -d, python3-cbor2)"
	@set -e; d=$$(mktemp -d "$${TMPDIR:-/tmp}/envlog-binterop-XXXXXX"); \
	  trap 'rm -rf "$$d"' EXIT; \
	  $(B)/tests/snapshot-rec "$$d/env" 1 5; \
	  $(BIN) -C "$$d/env" bundle export "interop" -o "$$d/b.bundle" --evidence all >/dev/null; \
	  /usr/bin/python3 tests/bundle_interop.py $(BIN) "$$d/env" "$$d/b.bundle" 2; \
	  $(BIN) -C "$$d/env" bundle export "interop" -o "$$d/b1.bundle" --evidence all \
	    --format 1 >/dev/null; \
	  /usr/bin/python3 tests/bundle_interop.py $(BIN) "$$d/env" "$$d/b1.bundle" 1

CHECK_TARGETS += check-snapshot-cli check-upkeep-cli check-bundle-interop
