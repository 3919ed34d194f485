#!/bin/sh
# `make bench`: every benchmark of the project, one section each.  Not a
# test: figures are printed (and compared with their targets) for the
# closing notes.  USBGW_BUILD is the build directory (build/ or build-asan/).
# Each section is independent; add yours below with a header line.
set -u
B=${USBGW_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
rc=0

section() {
	printf '\n== %s\n' "$1"
}

# --- policy decisions (owner: policy) ---------------------------------
# 10,000 rules x 10,000 devices; target: median decision <= 20 us.
section "policy: decision time"
if [ -x "$B/bench/bench_policy" ]; then
	"$B/bench/bench_policy" 10000 10000 || rc=1
else
	echo "bench_policy not built"; rc=1
fi

# --- audit log writes (owner: policy) --------------------------------
# Cost of audit_append (paid on the event loop) and of audit_flush per
# row for batches of 1..1000 rows, and verification speed.
section "audit: write cost"
if [ -x "$B/bench/bench_audit" ]; then
	"$B/bench/bench_audit" "${TMPDIR:-/tmp}" || rc=1
else
	echo "bench_audit not built"; rc=1
fi

exit $rc
