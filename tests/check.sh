#!/usr/bin/env bash
# The whole test suite, as CI runs it (`make check`):
#   1. warning-clean builds with gcc and clang (-Werror);
#   2. unit and integration tests on the normal build;
#   3. the same tests on an ASan+UBSan build;
#   4. a short pass of every libFuzzer harness (FUZZ_SMOKE seconds each);
#   5. the real-kernel end-to-end suite in qemu (tests/e2e), unless
#      USBGW_SKIP_E2E=1.
# Each stage runs its tests through prove; the script stops at the first
# failing stage.  Summary lines at the end.
#
# Unit and integration tests run JOBS at a time (prove -j; default: the
# number of CPUs, at least 2): each test has its own temp dir, ports and
# sockets, and takes a machine-wide lock (tests/lib/common.sh: with_lock)
# for what only one may do at a time.  The known slow tests start first,
# so that the stage ends soon after the longest one.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$JOBS" -ge 2 ] 2>/dev/null || JOBS=2
FUZZ_SMOKE=${FUZZ_SMOKE:-8}
stage() { printf '\n=== %s\n' "$*"; }
t0=$(date +%s)

stage "build (gcc, -Werror)"
make -s -j"$JOBS" WERROR=1 all
stage "build (clang, -Werror)"
make -s -j"$JOBS" WERROR=1 CC=clang B=build-clang all

units() { ls "$1"/tests/test_* 2>/dev/null | grep -v '\.d$' || true; }
# The integration tests, slowest first (a static list: prove --state has
# nothing to go on in a fresh clone), then the others in name order.
# Wall times, one at a time, normal build: 45 26 s, 66 16 s, 36 14 s, 50 and 60
# 12 s, 48 11 s, 10 and 41 10 s, 20 9 s, 30-35 7-8 s; the rest 1-6 s.
# 63 19 s, 64 13 s; 80 4 s (19 s under ASan); 81 21 s, 82 19 s (SIGSTOP
# choreography), 83 5 s; 84 17 s, 85 17 s; 107 8-13 s, 109 9 s (enrollment);
# 120 21 s (issue 17 views); 123 19 s (a session per request), 125 9 s
# (600000 URBs); 130 12 s, 131 6 s, 132 12 s, 133 9-13 s (a PostgreSQL server each).
# 127 (make deb, lintian, install, start, purge) 110-170 s, make deb 50-100 s of it.
SLOW="127-deb-package 137-lease-race 138-lease-takeover 139-lease-old-holder 45-policy-time 117-follow-bounds 80-scale-1k 70-relay-descriptors 63-relay-stall 66-claims-survive-polls 64-control-reserve 36-gateway-access 50-local 60-bench-relay
    48-control-lookup 10-sim-client 41-cli-fake 20-tshark 32-gateway-unplug
    31-gateway-revoke 30-gateway-claim 34-gateway-restart 35-gateway-malformed
    81-busy-gateway 82-busy-exporter 85-list-cache 84-probe-deadline
    120-iface-view 83-probe-queue 95-agent-evil 97-agent-hello-hog 98-agent-hostile-gateway 110-agent-tls-dialout
    89-agent-hostile-listen 107-enroll-revoke 109-enroll-agent-prompt
    123-relay-iface 125-relay-iface-flood 134-feed-approve 135-feed-rules-revoke 136-feed-audit-chain
    130-pg-unit-db 132-pg-daemon 133-pg-restart 140-pg-store-loss 141-pg-store-loss-keep 142-feed-exporters 143-feed-agent-revoke 144-pg-revoke-in-loss 146-pg-start-race"
integ() {
	local n f
	for n in $SLOW; do
		[ -f "tests/integration/$n.t" ] && echo "tests/integration/$n.t"
	done
	for f in $(ls tests/integration/*.t 2>/dev/null | sort); do
		case " $(echo $SLOW) " in
		*" $(basename "$f" .t) "*) ;;
		*) echo "$f" ;;
		esac
	done
}

stage "unit + integration (build/, $JOBS at a time)"
USBGW_BUILD=$PWD/build prove -f -j"$JOBS" $(integ) $(units build)

stage "build (ASan+UBSan)"
make -s -j"$JOBS" WERROR=1 SANITIZE=1 all
stage "unit + integration under ASan+UBSan (build-asan/, $JOBS at a time)"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
USBGW_BUILD=$PWD/build-asan USBGW_ASAN=1 prove -f -j"$JOBS" $(integ) $(units build-asan)

stage "fuzz smoke (${FUZZ_SMOKE}s per harness)"
make -s -j"$JOBS" fuzz-build
USBGW_FUZZ_SMOKE=$FUZZ_SMOKE prove -f tests/fuzz/smoke.t

if [ "${USBGW_SKIP_E2E:-0}" != 1 ] && [ -f tests/e2e/run.t ]; then
	stage "end-to-end: Debian's kernel in qemu"
	USBGW_BUILD=$PWD/build prove -f tests/e2e/run.t
fi
stage "all stages passed in $(( $(date +%s) - t0 )) s"
