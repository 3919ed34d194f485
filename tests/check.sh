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
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
FUZZ_SMOKE=${FUZZ_SMOKE:-8}
stage() { printf '\n=== %s\n' "$*"; }
t0=$(date +%s)

stage "build (gcc, -Werror)"
make -s -j"$JOBS" WERROR=1 all
stage "build (clang, -Werror)"
make -s -j"$JOBS" WERROR=1 CC=clang B=build-clang all

units() { ls "$1"/tests/test_* 2>/dev/null | grep -v '\.d$' || true; }
integ() { ls tests/integration/*.t 2>/dev/null | sort || true; }

stage "unit + integration (build/)"
USBGW_BUILD=$PWD/build prove -f $(units build) $(integ)

stage "build (ASan+UBSan)"
make -s -j"$JOBS" WERROR=1 SANITIZE=1 all
stage "unit + integration under ASan+UBSan (build-asan/)"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
USBGW_BUILD=$PWD/build-asan USBGW_ASAN=1 prove -f $(units build-asan) $(integ)

stage "fuzz smoke (${FUZZ_SMOKE}s per harness)"
make -s -j"$JOBS" fuzz-build
USBGW_FUZZ_SMOKE=$FUZZ_SMOKE prove -f tests/fuzz/smoke.t

if [ "${USBGW_SKIP_E2E:-0}" != 1 ] && [ -f tests/e2e/run.t ]; then
	stage "end-to-end: Debian's kernel in qemu"
	USBGW_BUILD=$PWD/build prove -f tests/e2e/run.t
fi
stage "all stages passed in $(( $(date +%s) - t0 )) s"
