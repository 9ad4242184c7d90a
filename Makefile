# SPDX-License-Identifier: MIT
# envlog - plain GNU make.  `make help` lists the targets.

PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
BINDIR       ?= $(PREFIX)/bin
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR      ?=

CC      ?= cc
WERROR  ?= -Werror
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wcast-qual -Wstrict-prototypes \
           -Wmissing-prototypes -Wundef -Wvla -Wformat=2 -Wwrite-strings $(WERROR)
# The library's modules see each other's internal headers; the command and
# the examples see only include/.
LIB_CPPFLAGS := -D_GNU_SOURCE -Iinclude -Icore -Ilog -Ireplay -Icuda $(CPPFLAGS)
PUB_CPPFLAGS := -D_GNU_SOURCE -Iinclude $(CPPFLAGS)
CFLAGS_ALL   := $(WARN) -fPIC -pthread $(CFLAGS)
LDLIBS_ALL   := -lcbor -lxxhash -lzstd -lpthread -ldl -lm $(LDLIBS)

VERSION := 0.1.0
SOMAJOR := 0
B       ?= build

LIB_SRC := $(wildcard core/*.c log/*.c replay/*.c cuda/*.c)
CLI_SRC := $(wildcard cli/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/%.o)
HEADERS := $(wildcard include/*.h core/*.h log/*.h replay/*.h cuda/*.h)

STATIC := $(B)/libenvlog.a
SHARED := $(B)/libenvlog.so.$(VERSION)
BIN    := $(B)/envlog

DEB_PKGS := libcbor-dev libxxhash-dev libzstd-dev check pkg-config \
            python3-cbor2 python3-xxhash zstd libsqlite3-dev

.PHONY: all deps check demo bench install uninstall clean asan ubsan \
        checksymbols help

all: $(STATIC) $(SHARED) $(BIN)

help:
	@echo "make [all|deps|check|demo|bench|install|uninstall|clean|asan|ubsan|checksymbols|fuzz]"
	@echo "  PREFIX=$(PREFIX) LIBDIR INCLUDEDIR BINDIR MANDIR DESTDIR; CFLAGS are respected"

# Installs what a fresh Debian machine lacks when run as root; otherwise says
# exactly what to run.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
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

$(B)/.deps-ok:
	@$(MAKE) --no-print-directory deps
	@mkdir -p $(B) && touch $@

$(B)/cli/%.o: cli/%.c $(HEADERS) | $(B)/.deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(PUB_CPPFLAGS) $(CFLAGS_ALL) -c $< -o $@

$(B)/%.o: %.c $(HEADERS) | $(B)/.deps-ok
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(LIB_CPPFLAGS) $(CFLAGS_ALL) -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	@echo "  AR  $@"
	@$(AR) rcs $@ $^

$(SHARED): $(LIB_OBJ)
	@echo "  LD  $@"
	@$(CC) -shared -Wl,-soname,libenvlog.so.$(SOMAJOR) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)
	@ln -sf libenvlog.so.$(VERSION) $(B)/libenvlog.so.$(SOMAJOR)
	@ln -sf libenvlog.so.$(VERSION) $(B)/libenvlog.so

$(BIN): $(CLI_OBJ) $(STATIC)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(CLI_OBJ) $(STATIC) $(LDLIBS_ALL)

# Every exported symbol carries the envlog_ prefix.
checksymbols: $(STATIC)
	@bad=$$(nm -g --defined-only $(STATIC) | awk 'NF==3 && $$2 ~ /[TDBR]/ {print $$3}' | grep -v '^envlog_' || true); \
	if [ -n "$$bad" ]; then echo "envlog: exported symbols without the envlog_ prefix:" >&2; echo "$$bad" >&2; exit 1; fi; \
	echo "checksymbols: every exported symbol has the envlog_ prefix"

$(B)/envlog.pc: Makefile
	@printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: envlog\nDescription: %s\nVersion: %s\nLibs: -L$${libdir} -lenvlog\nLibs.private: %s\nRequires.private: libcbor libxxhash libzstd\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' 'Records how a GPU compute environment was built' \
	  '$(VERSION)' '-lpthread -ldl -lm' > $@

install: all $(B)/envlog.pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
	  $(DESTDIR)$(MANDIR)/man5
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libenvlog.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libenvlog.so.$(SOMAJOR)
	ln -sf libenvlog.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libenvlog.so
	install -m 644 include/envlog*.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/
	install -m 644 $(B)/envlog.pc $(DESTDIR)$(PKGCONFIGDIR)/
	for m in man/*.1; do [ -f $$m ] && install -m 644 $$m $(DESTDIR)$(MANDIR)/man1/ || true; done
	for m in man/*.3; do [ -f $$m ] && install -m 644 $$m $(DESTDIR)$(MANDIR)/man3/ || true; done
	for m in man/*.5; do [ -f $$m ] && install -m 644 $$m $(DESTDIR)$(MANDIR)/man5/ || true; done

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libenvlog.a $(DESTDIR)$(LIBDIR)/libenvlog.so* \
	  $(DESTDIR)$(BINDIR)/envlog $(DESTDIR)$(PKGCONFIGDIR)/envlog.pc \
	  $(DESTDIR)$(INCLUDEDIR)/envlog.h $(DESTDIR)$(INCLUDEDIR)/envlog_cuda.h
	rm -f $(DESTDIR)$(MANDIR)/man1/envlog*.1 $(DESTDIR)$(MANDIR)/man3/envlog*.3 \
	  $(DESTDIR)$(MANDIR)/man5/envlog*.5

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

clean:
	rm -rf build build-asan build-ubsan build-fuzz

# Each mk/*.mk fragment adds its test targets to CHECK_TARGETS, its demo
# steps to DEMO_TARGETS and its programs to BENCH_TARGETS.
CHECK_TARGETS :=
include $(sort $(wildcard mk/*.mk))

check: all $(CHECK_TARGETS)
	@echo "envlog: all checks passed"
