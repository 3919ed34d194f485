#!/usr/bin/env bash
# Three gateways on one PostgreSQL start at once (protocol.md 4.4,
# issue 16): each exporter is leased by exactly one of them, and only
# that one polls and claims its devices.  Five rounds of a simultaneous
# start; in each, every device is listed by exactly one gateway, that
# gateway holds the exporter's unexpired lease in exporter_leases, and
# the simulator (the exporters' own view) saw exactly one import per
# device and no import refused as busy (a second gateway's claim).
# The last round then waits out a whole lease: nothing changes hands.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
. "$(dirname "$0")/../lib/lease.sh"
need_pg
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" "$USBGW_BUILD/tests/test_leasedb"
ROUNDS=${LEASE_ROUNDS:-5}
plan $((ROUNDS * 6 + 10))

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
# the lease statements themselves first (the unit test empties the db)
run -t 60 env USBGW_PG_URI="$PG_URI" "$USBGW_BUILD/tests/test_leasedb"
is "$RC" 0 "test_leasedb passes on PostgreSQL"
[ "$RC" = 0 ] || _diag_text "$(grep -E '^(not ok|#)' <<<"$OUT" | head -n 30)"
num_cmp "$(grep -c '^ok' <<<"$OUT")" -ge 22 "and ran all its checks ($(grep -c '^ok' <<<"$OUT"))"
pg_sql "DROP SCHEMA public CASCADE; CREATE SCHEMA public" >/dev/null 2>&1
cat >"$T/sim.conf" <<'CONF'
device 1-1 { type storage; }
device 1-2 { type keyboard; }
CONF
EXPS="sim1 sim2 sim3"
BUSIDS="1-1 1-2"
exps=()
for s in $EXPS; do
	sim_start "$s" -c "$T/sim.conf" || bail_out "simulator $s did not start"
	exps+=("exporter $s 127.0.0.1:$(sim_port "$s")")
done
LEASE_GWS="g1 g2 g3"
for g in $LEASE_GWS; do
	gw_conf "$g" "poll-interval = 300ms" "lease-time = 3s" \
	    "audit-key = $T/site.key" "${exps[@]}"
done

# a first start alone: the schema and the site's audit key made
lease_launch g1
lease_ready g1 || bail_out "usbgwd did not start on PostgreSQL"
stop_bg g1 TERM

declare -A imp0 req0
# every device listed by exactly one running gateway, which holds the
# lease, and imported at the simulator
_all_claimed() {
	local s b w
	lease_snap
	for s in $EXPS; do
		for b in $BUSIDS; do
			w=$(lease_where "$s:$b")
			[ -n "$w" ] && [ "${w// /}" = "$w" ] || return 1
			[ "$(lease_holder "$s")" = "$w" ] || return 1
			[ "$(sim_state "$s" "$b")" = imported ] || return 1
		done
	done
}

for round in $(seq 1 $ROUNDS); do
	for s in $EXPS; do
		for b in $BUSIDS; do
			imp0[$s:$b]=$(sim_imports "$s" "$b")
			req0[$s:$b]=$(sim_import_reqs "$s" "$b")
		done
	done
	t0=$(date +%s%N)
	for g in $LEASE_GWS; do lease_launch "$g"; done
	ok=0
	for g in $LEASE_GWS; do lease_ready "$g" || ok=1; done
	check $ok "round $round: three gateways started at once"
	wait_for -t 20 _all_claimed
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	check $rc "round $round: every device claimed, by its lease holder ($ms ms)"
	bad=0 where="" busy=0 extra=0
	lease_snap
	for s in $EXPS; do
		h=$(lease_holder "$s")
		for b in $BUSIDS; do
			w=$(lease_where "$s:$b")
			where="$where $s:$b@${w:-none}"
			[ "$w" = "$h" ] && [ -n "$h" ] && [ "$h" != "?" ] ||
			    bad=$((bad + 1))
			n=$(($(sim_imports "$s" "$b") - ${imp0[$s:$b]}))
			r=$(($(sim_import_reqs "$s" "$b") - ${req0[$s:$b]}))
			[ "$n" = 1 ] || extra=$((extra + 1))
			[ "$r" = "$n" ] || busy=$((busy + 1))
		done
	done
	is "$bad" 0 "round $round: each device at exactly one gateway, the lease's ($where )"
	is "$extra" 0 "round $round: the simulator saw exactly one import per device"
	is "$busy" 0 "round $round: no import attempt by a gateway without the lease (the simulator refused none)"
	if [ "$round" = "$ROUNDS" ]; then
		# a whole lease and more: renewals keep every lease where it is
		sleep 4
		changed=0
		for s in $EXPS; do
			for b in $BUSIDS; do
				n=$(($(sim_imports "$s" "$b") - ${imp0[$s:$b]}))
				[ "$n" = 1 ] || changed=$((changed + 1))
				[ "$(sim_state "$s" "$b")" = imported ] ||
				    changed=$((changed + 1))
			done
		done
		is "$changed" 0 "after a whole lease time more: no claim ended or was made again"
		_all_claimed
		check $? "and every device is still at its lease holder"
		run "$USBGW" -s "$T/g1.sock" exporter list
		like "$OUT" 'HOLDER' "exporter list shows a HOLDER column on PostgreSQL"
		h=$(lease_holder sim1)
		like "$OUT" "sim1 .* $(lease_name "$h") " "and sim1's holder is $h's name"
		n=$(pg_sql "SELECT count(*) FROM exporter_leases")
		is "$n" 3 "one lease row per exporter"
	fi
	stopped=0
	for g in $LEASE_GWS; do
		stop_bg "$g" TERM
		[ "$RC" = 0 ] && stopped=$((stopped + 1))
	done
	is "$stopped" 3 "round $round: the three stop cleanly (exit 0)"
done
left=$(pg_sql "SELECT count(*) FROM exporter_leases WHERE expires_ms >
    (extract(epoch FROM now()) * 1000)::bigint")
is "$left" 0 "after clean stops no lease is left unexpired"
dirty=
for g in $LEASE_GWS; do gw_log_sanitizer_clean "$g" || dirty="$dirty $g"; done
is "$dirty" "" "no sanitizer report in the gateways' logs"
asan_clean "no sanitizer report files"
done_testing
