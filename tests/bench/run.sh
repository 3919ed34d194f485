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

# --- the URB relay (owner: gateway tests) ----------------------------
# Bulk throughput and URB round-trip latency: client -> simulator,
# client -> usbgwd -> simulator, client -> socat -> simulator, with the
# ratios; targets: gateway >= 0.9x direct and >= socat, added median
# latency <= 30 us.  BENCH_SECONDS, BENCH_REPEAT, BENCH_ITERATIONS.
section "relay: throughput and latency (direct, gateway, socat)"
USBGW_BUILD=$B bash "$(dirname "$0")/relay.sh" || rc=1

# The same over shaped links between three network namespaces (root
# only; skipped otherwise): is the gateway what limits a deployment?
# BENCH_LINK_RATES: tc rates, one section each.
for rate in ${BENCH_LINK_RATES:-1gbit 10gbit}; do
	section "relay over $rate links: direct vs gateway (network namespaces)"
	BENCH_LINK_RATE=$rate USBGW_BUILD=$B bash "$(dirname "$0")/relay-link.sh" || rc=1
done

# --- TLS for vhci hosts (owner: issue 15) ------------------------------
# The same bulk and latency workloads over plain USB/IP, stunnel in front
# of the plain listener (stunnel4, TLS 1.3, the gateway's certificates)
# and the gateway's own tls-listen (usbip-tc --tls-dir); target: native
# >= 1.3x stunnel's throughput, median latency no worse.  BENCH_SECONDS,
# BENCH_REPEAT, BENCH_ITERATIONS.
section "tls: plain, stunnel and native TLS (throughput and latency)"
USBGW_BUILD=$B bash "$(dirname "$0")/tls.sh" || rc=1

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
# row for batches of 1 to AUDIT_QUEUE_MAX rows, and verification speed.
section "audit: write cost"
if [ -x "$B/bench/bench_audit" ]; then
	"$B/bench/bench_audit" "${TMPDIR:-/tmp}" || rc=1
else
	echo "bench_audit not built"; rc=1
fi

# --- the store: SQLite vs PostgreSQL (owner: issue 16) ------------------
# Audit append rate and decision latency on both back ends side by side,
# with the ratios; approval propagation between gateways once the change
# feed exists.  BENCH_DECISIONS.
section "store: SQLite vs PostgreSQL"
USBGW_BUILD=$B bash "$(dirname "$0")/store.sh" || rc=1

# --- watch latency (owner: control plane) -----------------------------
# From an operator's request to the event at a `usbgw watch` connection;
# target: within 100 ms.  Over control.c with a fake core, then through a
# real usbgwd (approve/revoke of a simulated device) when both are built.
section "control: watch event latency"
if [ -x "$B/bench/bench_watch" ]; then
	"$B/bench/bench_watch" 2000 || rc=1
	if [ -x "$B/usbgwd" ] && [ -x "$B/usbgw-sim" ]; then
		w=$(mktemp -d "${TMPDIR:-/tmp}/bench_watch.XXXXXX")
		"$B/usbgw-sim" -l 127.0.0.1:0 -p "$w/sim.port" >"$w/sim.log" 2>&1 &
		simpid=$!
		i=0
		while [ ! -s "$w/sim.port" ] && [ $i -lt 100 ]; do
			sleep 0.1; i=$((i + 1))
		done
		printf 'exporter sim 127.0.0.1:%s\npoll-interval = 500ms\n' \
		    "$(cat "$w/sim.port")" >"$w/gw.conf"
		"$B/usbgwd" -f -c "$w/gw.conf" -d "$w/gw.db" -s "$w/c.sock" \
		    -l 127.0.0.1:0 -P "$w/gw.port" -v warning >"$w/gw.log" 2>&1 &
		gwpid=$!
		i=0
		dev=
		while [ -z "$dev" ] && [ $i -lt 100 ]; do
			sleep 0.1; i=$((i + 1))
			dev=$("$B/usbgw" -s "$w/c.sock" list --state pending \
			    2>/dev/null | awk 'NR == 2 { print $1 }')
		done
		"$B/bench/bench_watch" "$w/c.sock" "$dev" 400 || rc=1
		kill "$gwpid" "$simpid" 2>/dev/null
		wait "$gwpid" "$simpid" 2>/dev/null
		rm -rf "$w"
	fi
else
	echo "bench_watch not built"; rc=1
fi

# --- scale (owner: issue 13) -------------------------------------------
# 1,000 and 10,000 devices (10 per exporter, one usbgw-sim): time to all
# pending, gateway CPU and RSS per device, control latency during the
# claim storm and at rest, list --json; 100 concurrent verified bulk
# streams through the gateway.  SCALE_DEVICES=1000 for a quick run.
section "scale: 1,000 and 10,000 devices, 100 concurrent streams"
USBGW_BUILD=$B bash "$(dirname "$0")/scale.sh" || rc=1

# --- list (owner: issue 13) ---------------------------------------------
# `usbgw list --json` and `usbgw list` of 1,000 and 10,000 devices at
# rest: the whole command, the gateway's side (request to last byte) and
# the CLI alone (against a fake daemon replaying the gateway's reply);
# target: list --json of 10,000 <= 100 ms.  LIST_DEVICES, LIST_REPEAT.
section "list: usbgw list and list --json at 1,000 and 10,000 devices"
USBGW_BUILD=$B bash "$(dirname "$0")/list.sh" || rc=1

# --- anything else -----------------------------------------------------
# Benchmarks without a section above: tests/bench/bench_*.sh scripts and
# built benchmark programs, run without arguments.
ran_above=" bench_policy bench_audit bench_watch "
for f in "$(dirname "$0")"/bench_*.sh; do
	[ -f "$f" ] || continue
	section "$(basename "$f" .sh)"
	USBGW_BUILD=$B sh "$f" || rc=1
done
for f in "$B"/bench/*; do
	[ -x "$f" ] && [ -f "$f" ] || continue
	case $ran_above in *" $(basename "$f") "*) continue ;; esac
	section "$(basename "$f")"
	"$f" || rc=1
done

exit $rc
