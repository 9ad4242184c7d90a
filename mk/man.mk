# SPDX-License-Identifier: MIT
# mk/man.mk - the man pages checked against the code (tests/man-examples.sh):
# envlog(1)'s examples run against an environment filled by
# examples/record.c, envlog(3)'s example program compiled and run, the
# pages' coverage of the API and of the commands, envlog(5)'s CDDL against
# the schema tables, and `man -l' rendering each page without a warning.
# The programs are built with the same CC, CFLAGS and LDFLAGS as the library
# (so `make asan' checks them under the sanitizers too).

CHECK_TARGETS += check-man

.PHONY: check-man

check-man: $(BIN) $(STATIC)
	@echo "== man page examples"
	@CC="$(CC)" MAN_CFLAGS="$(CFLAGS) $(LDFLAGS)" bash tests/man-examples.sh $(BIN) $(STATIC)
