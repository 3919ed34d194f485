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
#  - approval propagation between gateways (the change feed, protocol.md
#    4.3): two gateways on one PostgreSQL database, an exporter of
#    BENCH_DEVICES (default 20) simulated devices held by one of them (H,
#    its lease); for each device `usbgw approve` at the other (O), then
#    `usbgw revoke` at O, then the same approve and revoke at H itself.
#    Each latency runs from just before the CLI is started to the time
#    stamp of H's approve or revoke event, read from a `usbgw watch
#    --json` at H (the daemon's clock, 1 ms resolution; no polling in the
#    figure).  min/median/p95/max in ms, and propagated/local.
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

# propagation: prints 6 lines "min median p95 max" (ms): approve at O,
# revoke at O, approve at H, revoke at H, then the first two counted from
# the CLI's return (negative: H applied it before O's reply was read).
FEED_URI="postgresql://$PG_USER@/usbgwfeed?host=$PG_DIR"
ND=${BENCH_DEVICES:-20}
ev_wait() {	# ev_wait SKIP TYPE BUSID: H's event time (s) of TYPE BUSID
	local i
	for i in $(seq 2000); do	# 10 s
		tail -n +"$(( $1 + 1 ))" "$T/fd-watch.log" | awk -v t="$2" -v b="$3" '
		    function f(k,  r) {
			if (!match($0, "\"" k "\": *\"?[^\",}]*")) return ""
			r = substr($0, RSTART, RLENGTH); sub(/^[^:]*: *"?/, "", r)
			return r
		    }
		    f("event") == t && f("busid") == b { print f("time"); x = 1; exit }
		    END { exit !x }' && return 0
		sleep 0.005
	done
	return 1
}
timed() {	# timed GW OUT TYPE BUSID ACTION: ACTION at GW, ms to H's event
	local gw=$1 out=$2 type=$3 dev=$4 act=$5 n t0 t1 te
	n=$(wc -l <"$T/fd-watch.log")
	t0=$(date +%s%N)
	"$USBGW" -s "$T/$gw.sock" "$act" "$dev" >/dev/null ||
	    { echo "store: $act $dev at $gw failed" >&2; return 1; }
	t1=$(date +%s%N)
	te=$(ev_wait "$n" "$type" "$dev") ||
	    { echo "store: no $type event for $dev at the holder" >&2; return 1; }
	awk -v a="$te" -v b="$t0" 'BEGIN { printf "%.0f\n", a * 1000 - b / 1e6 }' \
	    >>"$T/fd.$out"
	awk -v a="$te" -v b="$t1" 'BEGIN { printf "%.0f\n", a * 1000 - b / 1e6 }' \
	    >>"$T/fd.$out.after"
}
propagation() {
	local g H= O i dev
	_pg_as "$PG_BIN/createdb" -h "$PG_DIR" -U "$PG_USER" usbgwfeed || return 1
	for i in $(seq "$ND"); do printf 'device 1-%d { type storage; }\n' "$i"; done \
	    >"$T/fd.conf"
	sim_start fd-sim -c "$T/fd.conf" >/dev/null || return 1
	for g in a b; do
		gw_conf "fd$g" "poll-interval = 500ms" "audit-key = $T/fd.key"
	done
	# a first, alone: it makes the schema and the key
	gw_start fda -d "$FEED_URI" -N gw-a >/dev/null || return 1
	gw_start fdb -d "$FEED_URI" -N gw-b >/dev/null || return 1
	"$USBGW" -s "$T/fda.sock" exporter add sim1 "127.0.0.1:$(sim_port fd-sim)" \
	    >/dev/null || return 1
	# the lease decides the holder (as 134 finds it)
	_fd_held() {
		for g in a b; do
			[ "$(gw_state "fd$g" "sim1:1-$ND")" = pending ] &&
			    { H=fd$g; return 0; }
		done
		return 1
	}
	wait_for -t 30 _fd_held || return 1
	O=fda; [ "$H" = fda ] && O=fdb
	for i in $(seq "$ND"); do
		gw_wait_state "$H" "sim1:1-$i" pending 20 || return 1
	done
	start_bg fd-watch "$USBGW" -s "$T/$H.sock" watch --json \
	    --events approve,revoke
	sleep 0.5
	for i in $(seq "$ND"); do
		dev=sim1:1-$i
		timed "$O" ao approve "$dev" approve || return 1
		timed "$O" ro revoke "$dev" revoke || return 1
		timed "$H" ah approve "$dev" approve || return 1
		timed "$H" rh revoke "$dev" revoke || return 1
	done
	prop_stop
	for i in ao ro ah rh ao.after ro.after; do
		sort -n "$T/fd.$i" | awk '{ v[NR] = $1 } END {
		    p = int(NR * 0.95 + 0.999); printf "%d %d %d %d\n",
		    v[1], v[int((NR + 1) / 2)], v[p], v[NR] }'
	done
}
prop_stop() { local n; for n in fd-watch fdb fda fd-sim; do stop_bg "$n"; done; }
if ! prop=$(propagation || { prop_stop; exit 1; }); then
	echo "store: the propagation run failed"
	tail -n 20 "$T"/fd*.log 2>/dev/null
	exit 1
fi

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
printf '\n%s\n' "change feed, PostgreSQL: $ND devices held by one of 2 gateways (ms, CLI start to the holder's event)"
printf '%-44s %6s %6s %6s %6s %12s\n' "" min median p95 max "median ratio"
{ read -r a1 a2 a3 a4; read -r r1 r2 r3 r4; read -r l1 l2 l3 l4; read -r q1 q2 q3 q4
  read -r x1 x2 x3 x4; read -r y1 y2 y3 y4; } <<<"$prop"
printf '%-44s %6s %6s %6s %6s %12s\n' \
    "approve at the holder (local)" "$l1" "$l2" "$l3" "$l4" "" \
    "approve at the other -> authorized at holder" "$a1" "$a2" "$a3" "$a4" \
    "$(ratio "$l2" "$a2") local" \
    "revoke at the holder (local)" "$q1" "$q2" "$q3" "$q4" "" \
    "revoke at the other -> revoked at holder" "$r1" "$r2" "$r3" "$r4" \
    "$(ratio "$q2" "$r2") local" \
    "  approve at the other, from its CLI's return" "$x1" "$x2" "$x3" "$x4" "" \
    "  revoke at the other, from its CLI's return" "$y1" "$y2" "$y3" "$y4" ""
exit 0
