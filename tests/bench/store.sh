#!/usr/bin/env bash
# The store's cost, SQLite vs PostgreSQL side by side in one run (issue 16
# item 7), with the ratios:
#  - audit append rate: bench_audit's flush cost per row, one row per
#    transaction and batches of AUDIT_QUEUE_MAX (256), on a SQLite file
#    and on a PostgreSQL server of its own (tests/lib/pg.sh: Unix socket,
#    fsync off, synchronous_commit on);
#  - decision latency: `usbgw approve` + `usbgw revoke` of a simulated
#    device through a running usbgwd, the CLI's round trip (the decision
#    is committed before the reply: control_set_commit), median and p90
#    of BENCH_DECISIONS (default 30) pairs;
#  - approval propagation between two gateways: needs the change feed
#    (protocol.md 4.3, branch i16-feed); printed as not measured until
#    it lands.
# USBGW_BUILD is the build directory.  Skipped without PostgreSQL.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
export USBGW_BUILD=${USBGW_BUILD:-$HERE/../../build}
. "$HERE/../lib/common.sh" >/dev/null
. "$HERE/../lib/sim.sh"
. "$HERE/../lib/gw.sh"
. "$HERE/../lib/pg.sh"
B=$USBGW_BUILD
N=${BENCH_DECISIONS:-30}

if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
	echo "store: PostgreSQL not installed: skipped"
	exit 0
fi
pg_start "$T/pg" >/dev/null || { echo "store: PostgreSQL did not start"; exit 1; }

# us/row for a batch size from bench_audit's output
audit_cost() {	# audit_cost TARGET SIZE
	sed -n "s/^audit: flush of *$2 rows: *\([0-9.]*\) us\/row.*/\1/p" \
	    "$T/audit.$1"
}
"$B/bench/bench_audit" "$T" >"$T/audit.sqlite" 2>&1 || { cat "$T/audit.sqlite"; exit 1; }
"$B/bench/bench_audit" "$PG_URI" >"$T/audit.pg" 2>&1 || { cat "$T/audit.pg"; exit 1; }

# decision latency through a daemon on each back end
decisions() {	# decisions NAME [-d DB]: prints "median p90" in ms
	local name=$1 i t0 t1 dev=sim1:1-2
	shift
	sim_start "$name-sim" -c "$T/sim.conf" >/dev/null || return 1
	gw_conf "$name" "poll-interval = 500ms" "audit-key = $T/$name.key" \
	    "exporter sim1 127.0.0.1:$(sim_port "$name-sim")"
	gw_start "$name" "$@" >/dev/null || return 1
	gw_wait_state "$name" "$dev" pending 20 || return 1
	: >"$T/$name.ms"
	for i in $(seq "$N"); do
		t0=$(date +%s%N)
		"$USBGW" -s "$T/$name.sock" approve "$dev" >/dev/null || return 1
		t1=$(date +%s%N)
		echo $(( (t1 - t0) / 1000 )) >>"$T/$name.ms"
		t0=$(date +%s%N)
		"$USBGW" -s "$T/$name.sock" revoke "$dev" >/dev/null || return 1
		t1=$(date +%s%N)
		echo $(( (t1 - t0) / 1000 )) >>"$T/$name.ms"
	done
	stop_bg "$name"
	stop_bg "$name-sim"
	sort -n "$T/$name.ms" | awk '{ v[NR] = $1 } END {
	    printf "%.2f %.2f\n", v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.9)] / 1000 }'
}
printf 'device 1-2 { type storage; }\n' >"$T/sim.conf"
dsq=$(decisions sq) || { echo "store: the SQLite daemon failed"; exit 1; }
dpg=$(decisions pg -d "$PG_URI") || { echo "store: the PostgreSQL daemon failed"; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.1fx", b / a; else print "-" }'; }
printf '%-44s %12s %12s %8s\n' "store" "SQLite" "PostgreSQL" "PG/SQLite"
for s in 1 256; do
	a=$(audit_cost sqlite "$s"); b=$(audit_cost pg "$s")
	printf '%-44s %9s us %9s us %8s\n' "audit row, flushed $s per transaction" \
	    "$a" "$b" "$(ratio "$a" "$b")"
	printf '%-44s %9.0f/s %9.0f/s\n' "  = audit append rate" \
	    "$(awk -v x="$a" 'BEGIN { print (x > 0 ? 1e6 / x : 0) }')" \
	    "$(awk -v x="$b" 'BEGIN { print (x > 0 ? 1e6 / x : 0) }')"
done
set -- $dsq; sm=$1 s9=$2
set -- $dpg; pm=$1 p9=$2
printf '%-44s %9s ms %9s ms %8s\n' "decision (approve/revoke round trip), median" \
    "$sm" "$pm" "$(ratio "$sm" "$pm")"
printf '%-44s %9s ms %9s ms %8s\n' "decision, p90" "$s9" "$p9" "$(ratio "$s9" "$p9")"
printf '%-44s %s\n' "approval propagation A -> B" \
    "NOT MEASURED: needs the change feed (protocol.md 4.3, i16-feed)"
exit 0
