# SPDX-License-Identifier: MIT
# mk/cuda.mk - the CUDA integration's build steps: kernel sources embedded
# into the library, the rebuild check, and the CUDA benchmark.

# Each cuda/kernels/<name>.cu becomes a C string literal, <name>.cu.inc,
# which cuda/builtins.c includes.  Backslashes, quotes and '?' (trigraphs)
# are escaped; every line keeps its newline.
CUDA_KERNEL_SRC := $(sort $(wildcard cuda/kernels/*.cu))
CUDA_GEN        := $(B)/gen/cuda
CUDA_KERNEL_INC := $(CUDA_KERNEL_SRC:cuda/kernels/%.cu=$(CUDA_GEN)/%.cu.inc)

$(CUDA_GEN)/%.cu.inc: cuda/kernels/%.cu
	@mkdir -p $(dir $@)
	@echo "  GEN $@"
	@sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/"/' -e 's/$$/\\n"/' \
	  $< > $@.tmp && mv $@.tmp $@

$(B)/cuda/builtins.o: $(CUDA_KERNEL_INC)
$(B)/cuda/builtins.o: LIB_CPPFLAGS += -I$(CUDA_GEN)

# `envlog rebuild`, end to end (skips, saying so, without NVRTC).
CUDA_REBUILD_ENV := $(B)/tests/cuda_rebuild_env

$(CUDA_REBUILD_ENV): $(B)/tests/cuda_rebuild_env.o $(STATIC)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

.PHONY: check-cuda-rebuild
check-cuda-rebuild: $(BIN) $(CUDA_REBUILD_ENV)
	@echo "== envlog rebuild (tests/cuda-rebuild.sh)"
	@bash tests/cuda-rebuild.sh $(BIN) $(CUDA_REBUILD_ENV)

CHECK_TARGETS += check-cuda-rebuild
