# SPDX-License-Identifier: MIT
# envlog - plain GNU make.  `make help` lists the targets.

PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
BINDIR       ?= $(PREFIX)/bin
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DATADIR      ?= $(PREFIX)/share
DESTDIR      ?=

CC      ?= cc
# Warnings stop the build only where asked (CI: WERROR=-Werror), never for
# a user whose compiler is newer than the tree.
WERROR  ?=
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wcast-qual -Wstrict-prototypes \
           -Wmissing-prototypes -Wundef -Wvla -Wformat=2 -Wwrite-strings $(WERROR)
# Each module of the library sees its own headers and those of the layers
# below it, never one above (core <- log <- replay <- remote; cuda on log):
# an include across the line does not compile, and `make check-layers`
# names it.  The command and the examples see only include/; the tests and
# the benchmark see everything.
INC_core     := -Iinclude -Icore
INC_log      := $(INC_core) -Ilog
INC_replay   := $(INC_log) -Ireplay
INC_remote   := $(INC_replay) -Iremote
INC_cuda     := $(INC_log) -Icuda
LIB_CPPFLAGS := -D_GNU_SOURCE $(INC_remote) -Icuda $(CPPFLAGS)
PUB_CPPFLAGS := -D_GNU_SOURCE -Iinclude $(CPPFLAGS)
# Each object depends on the headers it includes, as the compiler saw them.
DEPFLAGS     := -MMD -MP
CFLAGS_ALL   := $(WARN) -fPIC -fvisibility=hidden -pthread $(CFLAGS)
LDLIBS_ALL   := -lcbor -lxxhash -lzstd -lpthread -ldl -lm $(LDLIBS)

# One version, the header's.
VERSION := $(shell sed -n 's/^\#define ENVLOG_VERSION_STRING "\(.*\)"/\1/p' include/envlog.h)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
B       ?= build

LIB_SRC := $(wildcard core/*.c log/*.c replay/*.c remote/*.c cuda/*.c)
CLI_SRC := $(wildcard cli/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/%.o)
HEADERS := $(wildcard include/*.h core/*.h log/*.h replay/*.h remote/*.h cuda/*.h)
MODULES := core log replay remote cuda

STATIC := $(B)/libenvlog.a
# The one link of a program: its objects, the static library, then extra
# libraries before the four the library needs.  $(call LINK,OBJECTS[,LIBS])
LINK = @echo "  LD  $@"; $(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(1) $(STATIC) $(2) $(LDLIBS_ALL)
SHARED := $(B)/libenvlog.so.$(VERSION)
BIN    := $(B)/envlog
# The examples' kernels (examples/demo_kernels.h), not the library's: the
# demo, the CUDA tests and the CUDA benchmark link them (mk/demo.mk).
DEMO_LIB := $(B)/examples/libdemo_kernels.a
DEMO_HDR := examples/demo_kernels.h

# The library and the command need these only; `check` and `bench` also
# the test packages.
BUILD_PKGS := libcbor-dev libxxhash-dev libzstd-dev
TEST_PKGS  := check pkg-config python3-cbor2 python3-xxhash zstd libsqlite3-dev \
              python3-dev python3-setuptools python3-pip python3-pytest python3-numpy \
              python3-jsonschema python3-matplotlib redis-server libhiredis-dev
DEB_PKGS   := $(BUILD_PKGS) $(TEST_PKGS)

.PHONY: all deps deps-build check demo bench install uninstall clean asan ubsan tsan \
        checksymbols dist distcheck help FORCE

all: $(STATIC) $(SHARED) $(BIN)

help:
	@echo "make [all|deps|check|demo|bench|install|uninstall|clean|asan|ubsan|tsan|checksymbols|dist|distcheck|fuzz]"
	@echo "  PREFIX=$(PREFIX) LIBDIR INCLUDEDIR BINDIR MANDIR DATADIR DESTDIR; CFLAGS, LDFLAGS are respected;"
	@echo "  WERROR=-Werror makes warnings errors"

# Installs what a fresh Debian machine lacks when run as root; otherwise says
# exactly what to run.  `deps` is everything `check` and `bench` need;
# `deps-build` what the library and the command need (checked before the
# first compile, so `make` alone never asks for a test package).
deps: PKGS = $(DEB_PKGS)
deps-build: PKGS = $(BUILD_PKGS)
deps deps-build:
	@missing=""; for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "envlog: installing$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || \
	      { echo "envlog: apt-get install$$missing failed" >&2; exit 1; }; \
	  else \
	    echo "envlog: missing Debian packages; run: sudo apt-get install$$missing" >&2; exit 1; \
	  fi; \
	fi

# Libraries that compile and link (from Debian or not) need no package.
$(B)/.deps-ok:
	@mkdir -p $(B)
	@printf '#include <cbor.h>\n#include <xxhash.h>\n#include <zstd.h>\nint main(void) { return 0; }\n' | \
	  $(CC) $(CPPFLAGS) -x c - $(LDFLAGS) -lcbor -lxxhash -lzstd -o $(B)/.deps-probe 2>/dev/null || \
	  $(MAKE) --no-print-directory deps-build
	@rm -f $(B)/.deps-probe && touch $@
$(B)/.test-deps-ok: | $(B)/.deps-ok
	@$(MAKE) --no-print-directory deps
	@mkdir -p $(B) && touch $@

$(B)/cli/%.o: cli/%.c | $(B)/.deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(PUB_CPPFLAGS) $(CFLAGS_ALL) $(DEPFLAGS) -c $< -o $@

define module_rule
$(B)/$(1)/%.o: $(1)/%.c | $(B)/.deps-ok
	@mkdir -p $$(dir $$@)
	@echo "  CC  $$<"
	@$$(CC) -D_GNU_SOURCE $$(INC_$(1)) $$(CPPFLAGS) $$(CFLAGS_ALL) $$(DEPFLAGS) -c $$< -o $$@
endef
$(foreach m,$(MODULES),$(eval $(call module_rule,$(m))))

# Other objects (tests, benchmark, examples): their fragment's rules.
$(B)/%.o: %.c $(HEADERS) | $(B)/.deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(LIB_CPPFLAGS) $(CFLAGS_ALL) -c $< -o $@

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
# An object made before it had its .d (an older build directory) depends on
# every header until its next compile writes one.
$(foreach o,$(LIB_OBJ) $(CLI_OBJ),$(if $(wildcard $(o:.o=.d)),,$(eval $(o): $(HEADERS))))

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	@echo "  AR  $@"
	@$(AR) rcs $@ $^

# The shared library exports what the public headers declare, no more.
PUB_HEADERS := include/envlog.h include/envlog_cuda.h include/envlog_remote.h
$(B)/envlog.map: mk/public-symbols.sh $(PUB_HEADERS) | $(B)/.deps-ok
	@echo "  GEN $@"
	@syms=$$(bash mk/public-symbols.sh "$(CC)" $(PUB_HEADERS)) && [ -n "$$syms" ] && \
	  { echo "ENVLOG_$(SOMAJOR) {"; echo "  global:"; printf '    %s;\n' $$syms; \
	    echo "  local: *;"; echo "};"; } > $@.tmp && mv $@.tmp $@

$(SHARED): $(LIB_OBJ) $(B)/envlog.map
	@echo "  LD  $@"
	@$(CC) -shared -Wl,-soname,libenvlog.so.$(SOMAJOR) -Wl,--version-script=$(B)/envlog.map \
	  $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(LIB_OBJ) $(LDLIBS_ALL)
	@ln -sf libenvlog.so.$(VERSION) $(B)/libenvlog.so.$(SOMAJOR)
	@ln -sf libenvlog.so.$(VERSION) $(B)/libenvlog.so

$(BIN): $(CLI_OBJ) $(STATIC)
	$(call LINK,$(CLI_OBJ))

# The shared library exports exactly the functions the public headers
# declare; every global symbol of the static library carries the envlog_
# prefix.
checksymbols: $(STATIC) $(SHARED)
	@bad=$$(nm -g --defined-only $(STATIC) | awk 'NF==3 && $$2 ~ /[TDBR]/ {print $$3}' | \
	  grep -v '^envlog_' | grep -Ev '^__(odr_asan|asan|ubsan|sancov)' || true); \
	if [ -n "$$bad" ]; then echo "envlog: exported symbols without the envlog_ prefix:" >&2; echo "$$bad" >&2; exit 1; fi; \
	bash mk/public-symbols.sh "$(CC)" $(PUB_HEADERS) > $(B)/syms.want; \
	nm -D --defined-only $(SHARED) | awk 'NF==3 && $$2 ~ /[TDBRVWiu]/ {sub(/@.*/, "", $$3); print $$3}' | \
	  grep -v '^ENVLOG_' | grep -Ev '^__(odr_asan|asan|ubsan|sancov)' | sort -u > $(B)/syms.have; \
	extra=$$(comm -13 $(B)/syms.want $(B)/syms.have); missing=$$(comm -23 $(B)/syms.want $(B)/syms.have); \
	n=$$(wc -l < $(B)/syms.want); rm -f $(B)/syms.want $(B)/syms.have; \
	[ -z "$$extra" ] || { echo "envlog: $(SHARED) exports what no public header declares:" >&2; echo "$$extra" >&2; }; \
	[ -z "$$missing" ] || { echo "envlog: $(SHARED) lacks what the public headers declare:" >&2; echo "$$missing" >&2; }; \
	[ -z "$$extra$$missing" ] || exit 1; \
	echo "checksymbols: $(SHARED) exports the $$n functions the public headers declare, no more; every global symbol has the envlog_ prefix"

# Made again whenever the install's directories change.
$(B)/pc-vars: FORCE
	@mkdir -p $(B)
	@echo '$(PREFIX)|$(LIBDIR)|$(INCLUDEDIR)|$(VERSION)' | cmp -s - $@ 2>/dev/null || \
	  echo '$(PREFIX)|$(LIBDIR)|$(INCLUDEDIR)|$(VERSION)' > $@
FORCE:

$(B)/envlog.pc: $(B)/pc-vars
	@printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: envlog\nDescription: %s\nVersion: %s\nLibs: -L$${libdir} -lenvlog\nLibs.private: %s\nRequires.private: libcbor libxxhash libzstd\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' 'Records how a GPU compute environment was built' \
	  '$(VERSION)' '-lpthread -ldl -lm' > $@

# install records the directories it had to make (DATADIR/envlog/created),
# so uninstall removes those, once empty, and no others.
INSTALL_DIRS := $(LIBDIR) $(INCLUDEDIR) $(BINDIR) $(PKGCONFIGDIR) $(MANDIR)/man1 \
                $(MANDIR)/man3 $(MANDIR)/man5 $(DATADIR)/envlog $(DATADIR)/envlog/schemas \
                $(DATADIR)/bash-completion/completions
CREATED      := $(DATADIR)/envlog/created

install: all $(B)/envlog.pc
	@set -e; made=""; for d in $(INSTALL_DIRS); do \
	  while [ -n "$$d" ] && [ "$$d" != / ] && [ ! -d "$(DESTDIR)$$d" ]; do made="$$made $$d"; d=$$(dirname "$$d"); done; \
	done; \
	install -d $(addprefix $(DESTDIR),$(INSTALL_DIRS)); \
	{ [ ! -f "$(DESTDIR)$(CREATED)" ] || cat "$(DESTDIR)$(CREATED)"; printf '%s\n' $$made; } | \
	  grep -v '^$$' | sort -u > "$(DESTDIR)$(CREATED).tmp"; \
	chmod 644 "$(DESTDIR)$(CREATED).tmp"; mv "$(DESTDIR)$(CREATED).tmp" "$(DESTDIR)$(CREATED)"
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libenvlog.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libenvlog.so.$(SOMAJOR)
	ln -sf libenvlog.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libenvlog.so
	install -m 644 include/envlog*.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/
	install -m 644 $(B)/envlog.pc $(DESTDIR)$(PKGCONFIGDIR)/
	install -m 644 man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 man/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 644 schemas/*.schema.json $(DESTDIR)$(DATADIR)/envlog/schemas/
	install -m 644 completion/envlog.bash $(DESTDIR)$(DATADIR)/bash-completion/completions/envlog

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libenvlog.a $(DESTDIR)$(LIBDIR)/libenvlog.so \
	  $(DESTDIR)$(LIBDIR)/libenvlog.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libenvlog.so.$(VERSION) \
	  $(DESTDIR)$(BINDIR)/envlog $(DESTDIR)$(PKGCONFIGDIR)/envlog.pc \
	  $(addprefix $(DESTDIR)$(INCLUDEDIR)/,$(notdir $(PUB_HEADERS))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(wildcard man/*.1))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(wildcard man/*.3))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(wildcard man/*.5))) \
	  $(addprefix $(DESTDIR)$(DATADIR)/envlog/schemas/,$(notdir $(wildcard schemas/*.schema.json))) \
	  $(DESTDIR)$(DATADIR)/bash-completion/completions/envlog
	@if [ -f "$(DESTDIR)$(CREATED)" ]; then \
	  dirs=$$(awk '{print length($$0) " " $$0}' "$(DESTDIR)$(CREATED)" | sort -rn | cut -d' ' -f2-); \
	  rm -f "$(DESTDIR)$(CREATED)"; \
	  for d in $$dirs; do rmdir "$(DESTDIR)$$d" 2>/dev/null || true; done; \
	fi

# Sanitizer builds: the same suite, in their own build directories.
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all
# Check's timeouts stretch with the sanitizers' cost.
asan:
	CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-4} $(MAKE) B=build-asan \
	  CFLAGS="$(SAN_FLAGS) -fsanitize=address,undefined" UPKEEP_SESSIONS=1000 \
	  LDFLAGS="-fsanitize=address,undefined" check
ubsan:
	CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-2} $(MAKE) B=build-ubsan CFLAGS="$(SAN_FLAGS) -fsanitize=undefined" \
	  LDFLAGS="-fsanitize=undefined" check
# ThreadSanitizer over the suites whose code runs threads: the fold's and an
# import's read-ahead, sessions recorded from many threads, the imports of
# the reliability harness (about 10 minutes on 2 CPUs).
tsan:
	$(MAKE) B=build-tsan CFLAGS="$(SAN_FLAGS) -fsanitize=thread" LDFLAGS="-fsanitize=thread" \
	  build-tsan/tests/runner
	CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-10} \
	  TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1 $${TSAN_OPTIONS:-}" \
	  build-tsan/tests/runner replay session snapshot reliability

clean:
	rm -rf build build-asan build-ubsan build-tsan build-fuzz

# Each mk/*.mk fragment adds its test targets to CHECK_TARGETS, its demo
# steps to DEMO_TARGETS and its programs to BENCH_TARGETS.
CHECK_TARGETS :=
include $(sort $(wildcard mk/*.mk))

check: all $(CHECK_TARGETS)
	@echo "envlog: all checks passed"
