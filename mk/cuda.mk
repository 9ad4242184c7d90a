# SPDX-License-Identifier: MIT
# mk/cuda.mk - the CUDA integration's build steps: the stand-in driver, the
# rebuild check, and the CUDA benchmark.

# A CPU stand-in for libcuda.so.1, so the driver glue and the GPU tests of
# the cuda suite run on machines without a GPU (tests/fake_cuda.c).
CUDA_FAKE_DRIVER := $(B)/tests/libfake_cuda.so

$(CUDA_FAKE_DRIVER): tests/fake_cuda.c | $(B)/.test-deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CFLAGS_ALL) -shared -fvisibility=hidden $(LDFLAGS) -o $@ $<

$(B)/tests/runner: $(CUDA_FAKE_DRIVER)

# `envlog rebuild`, end to end (skips, saying so, without NVRTC).
CUDA_REBUILD_ENV := $(B)/tests/cuda_rebuild_env

$(CUDA_REBUILD_ENV): $(B)/tests/cuda_rebuild_env.o $(DEMO_LIB) $(STATIC)
	$(call LINK,$< $(DEMO_LIB))

.PHONY: check-cuda-rebuild
check-cuda-rebuild: $(BIN) $(CUDA_REBUILD_ENV)
	@echo "== envlog rebuild (tests/cuda-rebuild.sh)"
	@bash tests/cuda-rebuild.sh $(BIN) $(CUDA_REBUILD_ENV)

CHECK_TARGETS += check-cuda-rebuild

# envlog-cuda(3): its example compiled and run, its coverage, its rendering.
.PHONY: check-cuda-man
check-cuda-man: $(STATIC)
	@echo "== envlog-cuda(3) (tests/cuda-man.sh)"
	@CC="$(CC)" MAN_CFLAGS="$(CFLAGS) $(LDFLAGS)" bash tests/cuda-man.sh $(STATIC)

CHECK_TARGETS += check-cuda-man

# envlog-cuda-bench: recording overhead at BASIC against OFF on the demo
# workload, and the COMPILE_ONLY batch speed-up on 1, 2 and 4 threads.  It
# prints ratios and asserts nothing.  BENCH_QUICK=1 passes --quick.
CUDA_BENCH := $(B)/envlog-cuda-bench
BENCH_TARGETS += $(CUDA_BENCH)

$(B)/bench/cuda/%.o: bench/cuda/%.c $(HEADERS) $(DEMO_HDR) | $(B)/.test-deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(PUB_CPPFLAGS) -Iexamples $(CFLAGS_ALL) -c $< -o $@

$(CUDA_BENCH): $(B)/bench/cuda/cuda_bench.o $(DEMO_LIB) $(STATIC)
	$(call LINK,$< $(DEMO_LIB))

.PHONY: bench-cuda
bench-cuda: $(CUDA_BENCH)
	$(CUDA_BENCH) $(if $(filter 1,$(BENCH_QUICK)),--quick) $(BENCH_ARGS)

# The GPU checks in one run, for a machine with a GPU (tests/cuda-gpu.sh);
# not part of `make check`, whose cuda suite runs the GPU tests anyway where
# there is a GPU.
.PHONY: check-cuda-gpu
check-cuda-gpu: $(BIN) $(B)/tests/runner $(B)/cuda_demo
	@bash tests/cuda-gpu.sh $(BIN) $(B)/tests/runner $(B)/cuda_demo
