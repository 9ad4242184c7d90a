# SPDX-License-Identifier: MIT
# mk/json.mk - every command's --json lines, and the canonical dump of
# replay, held to the JSON Schemas of schemas/ (envlog(1), JSON OUTPUT) with
# Debian's python3-jsonschema: lines made here from the fixtures, the
# demo's job and a rebuild environment, the CLI goldens, and a line that
# must be refused (a checksum as a number).

.PHONY: check-json
CHECK_TARGETS += check-json
check-json: $(BIN) $(CUDA_REBUILD_ENV) $(B)/cuda_demo
	@echo "== --json output against schemas/ (python3-jsonschema)"
	@set -e; d=$$(mktemp -d "$${TMPDIR:-/tmp}/envlog-json-XXXXXX"); trap 'rm -rf "$$d"' EXIT; \
	  bash tests/json/collect.sh $(BIN) fixtures "$$d/lines" $(CUDA_REBUILD_ENV) $(B)/cuda_demo; \
	  $(DEB_PYTHON) tests/json/validate.py schemas "$$d/lines"; \
	  $(DEB_PYTHON) tests/json/validate.py schemas --goldens $$(ls tests/cli/*.out | grep -v '/trace-'); \
	  printf '%s\n' '{"type":"why","schema_version":1,"event":"none","checksum":1236310323511534043}' > "$$d/bad"; \
	  if $(DEB_PYTHON) tests/json/validate.py schemas "$$d/bad" > "$$d/bad.out"; then \
	    echo "json: a checksum as a number was not refused" >&2; exit 1; fi; \
	  grep -q "checksum: 1236310323511534043 is not of type 'string'" "$$d/bad.out" || \
	    { echo "json: the refusal does not name the field:" >&2; cat "$$d/bad.out" >&2; exit 1; }; \
	  echo "json: a checksum as a number is refused"
