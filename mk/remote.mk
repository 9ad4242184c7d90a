# SPDX-License-Identifier: MIT
# mk/remote.mk - sharing through a remote (remote/, envlog(5) REMOTES): the
# remote tests start a real redis-server on a free 127.0.0.1 port, run
# push, pull, automatic sharing and the fault cases against it
# (tests/remote/run.sh), and stop it.  tests/remote/rec is a runtime that
# records and never calls the remote API, linked against the shared
# library as a runtime is.

REMOTE_REC := $(B)/tests/remote/rec

# The remote module's own header, and the public one.
$(patsubst %.c,$(B)/%.o,$(wildcard remote/*.c)): $(wildcard remote/*.h)

$(REMOTE_REC): tests/remote/remote_rec.c include/envlog.h $(SHARED) | $(B)/.test-deps-ok
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(PUB_CPPFLAGS) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< -L$(B) -lenvlog \
	  -Wl,-rpath,$(abspath $(B))

.PHONY: check-remote

check-remote: $(BIN) $(REMOTE_REC)
	@echo "== remotes: push, pull and faults against a real redis-server"
	@bash tests/remote/run.sh $(BIN) $(REMOTE_REC)

CHECK_TARGETS += check-remote
