# usbgw — GNU make build.  See README.md.
#
# Conventions (the build reads the tree; adding a file needs no edit here):
#   gateway/*/*.c          library modules (libusbgw.a), one folder per layer
#                          (gateway/README.md, gateway/LAYERS), except the
#                          daemon's main
#   gateway/daemon/usbgwd.c  usbgwd's main()
#   client/*.c             the usbgw CLI (one command per cmd-*.c file)
#   client/attach/*.c      usbgw-attach (the vhci host's side: socketpair relay,
#                          follow mode; attach.c has its main)
#   client/agent/*.c       usbgw-agent (agent.c: its main; the rest also in
#                          libusbgw-agent.a, linked into tests/unit/test_agent_*)
#   contrib/sim/*.c        usbgw-sim, the USB/IP device simulator
#   tests/tools/*.c        one test program per file (usbip-tc, ...)
#   tests/unit/test_*.c    one TAP unit test per file
#   tests/integration/*.t  TAP integration scripts (bash)
#   tests/fuzz/fuzz_*.c    libFuzzer harnesses, corpus in tests/fuzz/corpus/NAME/
#   tests/bench/*.c        benchmark programs, driven by tests/bench/run.sh
#   tests/preload/*.c      LD_PRELOAD shims for tests, one NAME.so per file

PREFIX    ?= /usr/local
DESTDIR   ?=
SBINDIR   ?= $(PREFIX)/sbin
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc

CC        ?= cc
PKGS      := libevent sqlite3 libpq libusb-1.0 libssl libcrypto jansson
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN      := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
	     -Wwrite-strings -Wpointer-arith -Wformat=2 -Werror=format-security \
	     -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN      += -Werror
endif

# SANITIZE=1 builds everything with ASan+UBSan into build-asan/.
ifeq ($(SANITIZE),1)
B         ?= build-asan
SANFLAGS  := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT       ?= -O1 -g
else
B         ?= build
SANFLAGS  :=
OPT       ?= -O2 -g
endif

CPPFLAGS  += -D_GNU_SOURCE -Igateway $(PKG_CFLAGS)
CFLAGS    += -std=gnu11 $(OPT) $(WARN) $(SANFLAGS) -pthread -fPIE -fstack-protector-strong -D_FORTIFY_SOURCE=2
LDFLAGS   += $(SANFLAGS) -pthread -pie -Wl,-z,relro,-z,now
LDLIBS    += $(PKG_LIBS) -lm

LIB_SRCS  := $(filter-out gateway/daemon/usbgwd.c,$(wildcard gateway/*/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(B)/%.o)
LIB       := $(B)/libusbgw.a
# schema.sql and gateway/db/schema_pg.sql are compiled into the library
# (gateway/db/db.c: usbgw_schema_sql, usbgw_schema_pg_sql).
LIB_OBJS  += $(B)/gen/schema_sql.o $(B)/gen/schema_pg_sql.o

GWD_SRCS  := gateway/daemon/usbgwd.c
CLI_SRCS  := $(wildcard client/*.c)
AGENT_SRCS := $(wildcard client/agent/*.c)
AGENT_LIB_SRCS := $(filter-out client/agent/agent.c,$(AGENT_SRCS))
AGENT_LIB := $(B)/libusbgw-agent.a
SIM_SRCS  := $(wildcard contrib/sim/*.c)
TOOL_SRCS := $(wildcard tests/tools/*.c)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
BENCH_SRCS := $(wildcard tests/bench/*.c)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
PRELOAD_SRCS := $(wildcard tests/preload/*.c)

PROGS     := $(if $(wildcard $(GWD_SRCS)),$(B)/usbgwd) \
	     $(if $(CLI_SRCS),$(B)/usbgw) \
	     $(if $(SIM_SRCS),$(B)/usbgw-sim) \
	     $(if $(wildcard client/agent/agent.c),$(B)/usbgw-agent) \
	     $(if $(wildcard client/attach/attach.c),$(B)/usbgw-attach) \
	     $(TOOL_SRCS:tests/tools/%.c=$(B)/%)
UNITS     := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)
BENCHES   := $(BENCH_SRCS:tests/bench/%.c=$(B)/bench/%)
FUZZERS   := $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/%)
PRELOADS  := $(PRELOAD_SRCS:tests/preload/%.c=$(B)/preload/%.so)

.PHONY: all check test unit integration asan fuzz fuzz-smoke bench bench-compare bench-agent e2e install install-agent clean deps demo ci deb
.DEFAULT_GOAL := all

all: $(PROGS) $(UNITS) $(BENCHES) $(PRELOADS)

# Shims are loaded into sanitized programs too: built without sanitizers.
$(B)/preload/%.so: tests/preload/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) -std=gnu11 -O2 -g $(WARN) -fPIC -shared -o $@ $< -ldl

ifeq ($(V),1)
Q :=
else
Q := @
endif

$(B)/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# A schema as a C array (od + sed: no xxd needed), NUL-terminated:
# $(call embed,FILE,SYMBOL).
define embed
	@mkdir -p $(@D)
	$(Q){ echo '/* Generated from $(1) by the Makefile: do not edit. */'; \
	  echo 'extern const char $(2)[];'; \
	  echo 'const char $(2)[] = {'; \
	  od -An -v -tx1 $(1) | \
	    sed -e 's/\([0-9a-f][0-9a-f]\)/0x\1,/g' -e 's/^ *//'; \
	  echo '0x00 };'; } > $@.tmp && mv $@.tmp $@
endef

%/gen/schema_sql.c: schema.sql
	$(call embed,schema.sql,usbgw_schema_sql)

%/gen/schema_pg_sql.c: gateway/db/schema_pg.sql
	$(call embed,gateway/db/schema_pg.sql,usbgw_schema_pg_sql)

$(B)/gen/%.o: $(B)/gen/%.c
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(B)/usbgwd: $(B)/gateway/daemon/usbgwd.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/usbgw: $(CLI_SRCS:%.c=$(B)/%.o) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/usbgw-sim: $(SIM_SRCS:%.c=$(B)/%.o) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(AGENT_LIB): $(AGENT_LIB_SRCS:%.c=$(B)/%.o)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(B)/usbgw-agent: $(B)/client/agent/agent.o $(AGENT_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/usbgw-attach: $(patsubst %.c,$(B)/%.o,$(wildcard client/attach/*.c)) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/test_agent_%: $(B)/tests/unit/test_agent_%.o $(AGENT_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/%: $(B)/tests/tools/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/test_%: $(B)/tests/unit/test_%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/bench/%: $(B)/tests/bench/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# --- tests -------------------------------------------------------------
# `make check` runs the unit and integration suites on the normal build,
# then again under ASan+UBSan, a short fuzz pass, and the qemu end-to-end
# suite when it exists.  Output is TAP through prove.
PROVE     ?= prove
PROVEFLAGS ?= -f

unit: all
	$(PROVE) $(PROVEFLAGS) $(UNITS)

integration: all
	USBGW_BUILD=$(abspath $(B)) $(PROVE) $(PROVEFLAGS) $(sort $(wildcard tests/integration/*.t))

# The whole suite as CI runs it: see tests/check.sh.
check:
	tests/check.sh

# Unit and integration tests on this build only (quick).
test: all
	USBGW_BUILD=$(abspath $(B)) $(PROVE) $(PROVEFLAGS) $(UNITS) $(sort $(wildcard tests/integration/*.t))

asan:
	$(MAKE) SANITIZE=1 all

# --- fuzzing (clang libFuzzer) ----------------------------------------
FUZZ_CC     ?= clang
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
	       -D_GNU_SOURCE -Igateway $(PKG_CFLAGS) \
	       -fsanitize-coverage-ignorelist=tests/fuzz/nocov.txt
FUZZ_LIB    := build-fuzz/libusbgw.a
FUZZ_OBJS   := $(LIB_SRCS:%.c=build-fuzz/%.o) build-fuzz/gen/schema_sql.o \
	       build-fuzz/gen/schema_pg_sql.o
# `make fuzz` runs each harness until FUZZ_RUNS executions or FUZZ_TIME
# seconds, whichever comes first.  Budget: on one free core every harness
# reaches 10 M executions in under 520 s (the slowest, fuzz_config, at
# ~19.5 k/s once its corpus has grown; measured under nice -n 10 on the
# shared 2-core machine), the whole pass in about 33 minutes; FUZZ_TIME
# leaves a 70 % margin for a busier machine.  README, Fuzzing, has the
# table.
FUZZ_RUNS   ?= 10000000
FUZZ_TIME   ?= 900

# The library is instrumented once (fuzzer-no-link); each harness links it.
build-fuzz/%.o: %.c tests/fuzz/nocov.txt
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@

build-fuzz/gen/%.o: build-fuzz/gen/%.c
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@

$(FUZZ_LIB): $(FUZZ_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_LIB) $(PKG_LIBS) -lm

# The simulator's config parser is compiled into its harness.
build-fuzz/fuzz_simconf: contrib/sim/conf.c contrib/sim/sim.h
# So are usbgw-agent's config parser and keep-list.
build-fuzz/fuzz_agentconf: client/agent/aconf.c client/agent/aconf.h client/agent/keep.c client/agent/keep.h

# Each harness over the corpus it grows (build-fuzz/corpus/NAME) and the
# committed one, with its dictionary (tests/fuzz/NAME.dict) and extra
# libFuzzer flags (tests/fuzz/NAME.options, one line) if it has them.
# csr.options turns leak detection off: OpenSSL's caches grow with each new
# kind of input and LSan's checks then cut fuzz_csr to ~180 runs/s (no leak:
# steady memory over 20,000 runs; test_tlsid runs under LSan in make check).
fuzz: $(FUZZERS)
	@set -e; for f in $(FUZZERS); do n=$${f#build-fuzz/fuzz_}; \
	  mkdir -p build-fuzz/corpus/$$n; \
	  d=; [ ! -f tests/fuzz/$$n.dict ] || d=-dict=tests/fuzz/$$n.dict; \
	  o=; [ ! -f tests/fuzz/$$n.options ] || o=$$(cat tests/fuzz/$$n.options); \
	  echo "== $$f ($(FUZZ_RUNS) runs or $(FUZZ_TIME) s) $$o"; \
	  $$f -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_TIME) -timeout=10 \
	      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/ \
	      $$d $$o build-fuzz/corpus/$$n tests/fuzz/corpus/$$n; \
	done

fuzz-build: $(FUZZERS)

bench: all
	USBGW_BUILD=$(abspath $(B)) tests/bench/run.sh

# The relay and scale benchmarks of BASE=REV and of this tree, side by
# side in one run (tests/bench/compare.sh): for a change that must not
# move them.
bench-compare: all
	USBGW_BUILD=$(abspath $(B)) BASE=$(BASE) tests/bench/compare.sh

# issue 14's item 9 over several qemu runs (BENCH_AGENT_RUNS, default 10;
# about 2 minutes each): the agent's read ratio to usbip-host as medians.
bench-agent: all
	USBGW_BUILD=$(abspath $(B)) tests/bench/agent-qemu.sh

e2e: all
	USBGW_BUILD=$(abspath $(B)) $(PROVE) $(PROVEFLAGS) tests/e2e/run.t

deps:
	tests/deps.sh

# The main job on the embedded SQLite default: simulator, gateway, client.
demo: all
	contrib/demo.sh $(B)

# usbgw-agent's udev rule and unit (paths in the unit follow SBINDIR);
# its example configuration is not installed over an existing one.
UDEVRULESDIR   ?= $(PREFIX)/lib/udev/rules.d
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
install-agent: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(UDEVRULESDIR) $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/usbgw
	install -m 0755 $(B)/usbgw-agent $(DESTDIR)$(SBINDIR)/usbgw-agent
	install -m 0644 contrib/70-usbgw-agent.rules $(DESTDIR)$(UDEVRULESDIR)/70-usbgw-agent.rules
	sed 's|/usr/local/sbin/|$(SBINDIR)/|g' contrib/usbgw-agent.service >$(DESTDIR)$(SYSTEMDUNITDIR)/usbgw-agent.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/usbgw-agent.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/usbgw/usbgw-agent.conf ] || install -m 0644 contrib/usbgw-agent.conf $(DESTDIR)$(SYSCONFDIR)/usbgw/usbgw-agent.conf

install: all $(if $(wildcard client/agent/agent.c),install-agent)
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	$(if $(wildcard $(B)/usbgwd),install -m 0755 $(B)/usbgwd $(DESTDIR)$(SBINDIR)/usbgwd)
	$(if $(wildcard $(B)/usbgw),install -m 0755 $(B)/usbgw $(DESTDIR)$(BINDIR)/usbgw)
	$(if $(wildcard $(B)/usbgw-sim),install -m 0755 $(B)/usbgw-sim $(DESTDIR)$(BINDIR)/usbgw-sim)
	$(if $(wildcard $(B)/usbgw-attach),install -m 0755 $(B)/usbgw-attach $(DESTDIR)$(SBINDIR)/usbgw-attach)
	for m in $(wildcard contrib/man/*.[1-8]); do s=$${m##*.}; install -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done

# --- Debian packages ---------------------------------------------------
# `make deb`: the binary packages usbgw, usbgw-agent and usbgw-attach for
# Debian 12, built by dpkg-buildpackage from contrib/debian in a copy of
# the source tree (build-deb/usbgw-VERSION/, contrib/debian as its
# debian/).  The .debs, .buildinfo and .changes land in build-deb/; their
# names are printed last.  The version is contrib/debian/changelog's.
DEB_DIR      := build-deb
DEB_JOBS     ?= 2
DEB_VERSION   = $(shell dpkg-parsechangelog -l contrib/debian/changelog -S Version)
DEB_SRC_PATHS := Makefile schema.sql README.md protocol.md gateway client contrib
deb:
	@command -v dpkg-buildpackage >/dev/null 2>&1 || { \
	  echo "make deb: dpkg-buildpackage not found (sh tests/deps.sh installs dpkg-dev and debhelper)" >&2; exit 1; }
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_DIR)/usbgw-$(DEB_VERSION)
	tar -cf - $(DEB_SRC_PATHS) | tar -xf - -C $(DEB_DIR)/usbgw-$(DEB_VERSION)
	cp -R contrib/debian $(DEB_DIR)/usbgw-$(DEB_VERSION)/debian
	cd $(DEB_DIR)/usbgw-$(DEB_VERSION) && dpkg-buildpackage -us -uc -b -J$(DEB_JOBS)
	@ls -1 $(DEB_DIR)/*.deb

clean:
	rm -rf build build-asan build-fuzz build-deb build-compare

-include $(shell find $(B) build-fuzz -name '*.d' 2>/dev/null)
