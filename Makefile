# SPDX-License-Identifier: MIT
# envlog - plain GNU make.  `make help` lists the targets.

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR    ?=

CC      ?= cc
WERROR  ?= -Werror
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wcast-qual -Wstrict-prototypes \
           -Wmissing-prototypes -Wundef -Wvla -Wformat=2 -Wwrite-strings $(WERROR)
CPPFLAGS_ALL := -D_GNU_SOURCE -Iinclude -Icore -Ilog -Ireplay $(CPPFLAGS)
CFLAGS_ALL   := $(WARN) -fPIC -pthread $(CFLAGS)
LDLIBS_ALL   := -lcbor -lxxhash -lzstd -lpthread -ldl -lm $(LDLIBS)

VERSION := 0.1.0
SOMAJOR := 0
B       ?= build

CORE_SRC := $(wildcard core/*.c)
LOG_SRC  := $(wildcard log/*.c)
LIB_SRC  := $(CORE_SRC) $(LOG_SRC)
CLI_SRC  := $(wildcard cli/*.c)

LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/%.o)

STATIC := $(B)/libenvlog.a
SHARED := $(B)/libenvlog.so.$(VERSION)
BIN    := $(B)/envlog

DEB_PKGS := libcbor-dev libxxhash-dev libzstd-dev check pkg-config python3-cbor2 zstd

.PHONY: all deps check demo bench install uninstall clean asan ubsan \
        checksymbols help unit golden interop

all: $(STATIC) $(SHARED) $(BIN)

help:
	@echo "targets: all deps check demo bench install uninstall clean asan ubsan checksymbols"

# Installs what a fresh Debian machine lacks when run as root; otherwise says
# exactly what to run.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "envlog: installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "envlog: missing packages; run: sudo apt-get install$$missing" >&2; exit 1; \
	  fi; \
	fi

$(B)/%.o: %.c $(wildcard include/*.h core/*.h log/*.h) | deps
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(SHARED): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libenvlog.so.$(SOMAJOR) $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)
	ln -sf libenvlog.so.$(VERSION) $(B)/libenvlog.so.$(SOMAJOR)
	ln -sf libenvlog.so.$(VERSION) $(B)/libenvlog.so

$(BIN): $(CLI_OBJ) $(STATIC)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(CLI_OBJ) $(STATIC) $(LDLIBS_ALL)

clean:
	rm -rf build build-asan build-ubsan

-include tests/tests.mk
