# SPDX-License-Identifier: MIT
# mk/demo.mk - `make demo`: the CUDA integration's job, end to end, in the
# default environment ($ENVLOG_DIR when set): a COMPILE_ONLY pass compiling
# every kernel variant for sm_80 and sm_90 with NVRTC, a real CPU autotune,
# a GPU autotune and launch where there is a GPU, then what the envlog
# command says about it.  A second `make demo` finds everything cached and
# its session leaves nothing on disk; the demo prints that it did.
#
# The envlog commands are shown only where `envlog help` lists them, so the
# demo never fails for a command that is not there yet.  Its files (a bundle,
# a trace) go to $(DEMO_OUT).

DEMO_OUT     := $(B)/demo
DEMO_WHY_KEY := matmul-cpu/m=128,n=128,k=128
EXAMPLE_BINS := $(B)/cuda_demo $(B)/record

$(B)/examples/%.o: examples/%.c $(HEADERS) $(DEMO_HDR) | $(B)/.deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(PUB_CPPFLAGS) $(DEMO_INC) $(CFLAGS_ALL) -c $< -o $@

# Each examples/kernels/<name>.cu becomes a C string literal, <name>.cu.inc,
# which examples/demo_kernels.c includes.  Backslashes, quotes and '?'
# (trigraphs) are escaped; every line keeps its newline.
DEMO_KERNEL_SRC := $(sort $(wildcard examples/kernels/*.cu))
DEMO_GEN        := $(B)/gen/examples
DEMO_KERNEL_INC := $(DEMO_KERNEL_SRC:examples/kernels/%.cu=$(DEMO_GEN)/%.cu.inc)

$(DEMO_GEN)/%.cu.inc: examples/kernels/%.cu
	@mkdir -p $(dir $@)
	@echo "  GEN $@"
	@sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/"/' -e 's/$$/\\n"/' \
	  $< > $@.tmp && mv $@.tmp $@

$(B)/examples/demo_kernels.o: $(DEMO_KERNEL_INC)
$(B)/examples/demo_kernels.o: DEMO_INC := -I$(DEMO_GEN)

$(DEMO_LIB): $(B)/examples/demo_kernels.o $(B)/examples/demo_cpu.o
	@rm -f $@
	@echo "  AR  $@"
	@$(AR) rcs $@ $^

$(B)/cuda_demo $(B)/record: $(B)/%: $(B)/examples/%.o $(DEMO_LIB) $(STATIC)
	$(call LINK,$< $(DEMO_LIB))

.PHONY: examples
examples: $(EXAMPLE_BINS)

demo: all $(EXAMPLE_BINS)
	$(if $(strip $(DEMO_TARGETS)),@$(MAKE) --no-print-directory $(DEMO_TARGETS))
	@$(B)/cuda_demo
	@mkdir -p $(DEMO_OUT); \
	cmds=$$($(BIN) help 2>/dev/null); \
	has() { printf '%s\n' "$$cmds" | grep -q "^  $$1 "; }; \
	show() { echo; echo "\$$ envlog $$*"; $(BIN) "$$@" || echo "(envlog $$1 exited $$?)"; }; \
	if has status; then show status; else echo "(envlog status: not in this build)"; fi; \
	if has why; then show why '$(DEMO_WHY_KEY)'; else echo "(envlog why: not in this build)"; fi; \
	if has bundle; then show bundle export cuda-demo --force -o $(DEMO_OUT)/cuda-demo.bundle; \
	  else echo "(envlog bundle: not in this build)"; fi; \
	if has trace; then show trace --force -o $(DEMO_OUT)/cuda-demo-trace.json && \
	  echo "trace: $(DEMO_OUT)/cuda-demo-trace.json (open it in https://ui.perfetto.dev)"; \
	  else echo "(envlog trace: not in this build)"; fi
