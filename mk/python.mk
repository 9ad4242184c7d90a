# SPDX-License-Identifier: MIT
# mk/python.mk - the Python package (python/): `make python` builds and
# installs it under $(B)/python/site with Debian's pip, offline, against this
# tree's static library (ENVLOG_STATIC); `make check` runs its pytest suite
# there against the freshly built tree (check-python); `make bench` also
# runs its benchmark (bench-python: reading and lookups from Python beside
# `envlog cat --json` piped into Python's json).

PY_BUILD := $(B)/python
PY_SITE  := $(PY_BUILD)/site
PY_STAMP := $(PY_SITE)/.installed
PY_SRC   := $(wildcard python/src/*.c python/src/*.h python/envlog/*.py python/envlog/*.pyi) \
            python/setup.py python/pyproject.toml
# Debian's python (tests.mk names it too): its packages are the ones here.
DEB_PYTHON ?= /usr/bin/python3

.PHONY: python check-python bench-python python-ldlibs

$(PY_STAMP): $(STATIC) $(PY_SRC) | $(B)/.test-deps-ok
	@echo "  PIP python/ -> $(PY_SITE)"
	@rm -rf $(PY_SITE) && mkdir -p $(PY_BUILD)
	@ENVLOG_STATIC=$(abspath $(STATIC)) ENVLOG_LIBS="$(LDLIBS_ALL)" ENVLOG_PY_BUILD=$(abspath $(PY_BUILD))/build \
	  $(DEB_PYTHON) -m pip install --no-build-isolation --no-index --no-deps --quiet \
	  --disable-pip-version-check --root-user-action=ignore --target $(PY_SITE) ./python
	@touch $@

# What python/setup.py links the extension with when make did not say.
python-ldlibs:
	@echo $(LDLIBS_ALL)

python: $(PY_STAMP)
	@echo "python: the envlog package is in $(PY_SITE): PYTHONPATH=$(abspath $(PY_SITE)) $(DEB_PYTHON)"

# A sanitizer build's extension calls into the sanitizers' runtimes: the
# interpreter, built without them, gets them preloaded, and the memory
# growth tests say they do not run (the sanitizers' allocator keeps what is
# freed, so the process's size says nothing of leaks).
PY_SANITIZE := $(filter -fsanitize=%,$(CFLAGS))
PY_PRELOAD  := $(if $(findstring address,$(PY_SANITIZE)),$(shell $(CC) -print-file-name=libasan.so)) \
               $(if $(findstring undefined,$(PY_SANITIZE)),$(shell $(CC) -print-file-name=libubsan.so))
PY_RUN_ENV  := $(if $(PY_SANITIZE),LD_PRELOAD="$(strip $(PY_PRELOAD))" \
               ASAN_OPTIONS="$${ASAN_OPTIONS:+$$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0" \
               ENVLOG_PY_SANITIZED=1)

check-python: $(PY_STAMP) $(BIN)
	@echo "== Python package (pytest, python/tests)"
	@$(PY_RUN_ENV) PYTHONPATH=$(abspath $(PY_SITE)) ENVLOG_BIN=$(abspath $(BIN)) \
	  PYTHONDONTWRITEBYTECODE=1 $(DEB_PYTHON) -m pytest -q -p no:cacheprovider -rs python/tests

CHECK_TARGETS += check-python

# A prerequisite of `bench`, so it runs first and says so.
bench: bench-python
bench-python: $(PY_STAMP) $(BIN)
	@PYTHONPATH=$(abspath $(PY_SITE)) $(DEB_PYTHON) python/bench/bench_python.py \
	  $(abspath $(BIN)) $(if $(filter 1,$(BENCH_QUICK)),--quick)
