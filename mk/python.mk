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

check-python: $(PY_STAMP) $(BIN)
	@echo "== Python package (pytest, python/tests)"
	@PYTHONPATH=$(abspath $(PY_SITE)) ENVLOG_BIN=$(abspath $(BIN)) \
	  PYTHONDONTWRITEBYTECODE=1 $(DEB_PYTHON) -m pytest -q -p no:cacheprovider -rs python/tests

CHECK_TARGETS += check-python

# A prerequisite of `bench`, so it runs first and says so.
bench: bench-python
bench-python: $(PY_STAMP) $(BIN)
	@PYTHONPATH=$(abspath $(PY_SITE)) $(DEB_PYTHON) python/bench/bench_python.py \
	  $(abspath $(BIN)) $(if $(filter 1,$(BENCH_QUICK)),--quick)
