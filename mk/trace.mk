# SPDX-License-Identifier: MIT
# mk/trace.mk - `envlog trace` end to end (tests/trace/run.sh): traces of
# environments written from several threads and by a real two-thread NVRTC
# batch, held to the Trace Event Format and to their records
# (tests/trace/check_trace.py), and drawn with matplotlib into
# $(B)/trace/*.png (tests/trace/draw_trace.py) for a person to look at.

TRACE_ENV := $(B)/tests/trace/trace_env

$(TRACE_ENV): $(B)/tests/trace/trace_env.o $(DEMO_LIB) $(STATIC)
	$(call LINK,$< $(DEMO_LIB))

.PHONY: check-trace
check-trace: $(BIN) $(TRACE_ENV)
	@echo "== envlog trace (tests/trace/run.sh)"
	@PY=$(DEB_PYTHON) bash tests/trace/run.sh $(BIN) $(TRACE_ENV) $(B)/trace fixtures/replay

CHECK_TARGETS += check-trace
