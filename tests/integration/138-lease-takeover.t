#!/usr/bin/env bash
# Exporter leases change hands (protocol.md 4.4, 4.7): three gateways on
# one PostgreSQL, one exporter.  A vhci host importing at a gateway that
# does not hold the device is refused, with an import-elsewhere audit row
# naming the holder.  The holder SIGKILLed: another gateway claims the
# devices after the lease expires, within lease time + 2 s, and not
# before it could have expired.  The new holder stopped with SIGTERM:
# its leases are released and the third gateway takes over at its next
# round, without waiting for an expiry.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
. "$(dirname "$0")/../lib/lease.sh"
need_pg
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON"
plan 24
LEASE_S=4

lease_world "$LEASE_S" 'device 1-1 { type storage; }
device 1-2 { type keyboard; }' g1 g2 g3

# the device claimed by gateway $1 alone (its list, the lease, the sim)
_claimed_by() {
	lease_snap
	[ "$(lease_where sim1:1-1)" = "$1" ] &&
	    [ "$(lease_where sim1:1-2)" = "$1" ] &&
	    [ "$(lease_holder sim1)" = "$1" ] &&
	    [ "$(sim_state sim1 1-1)" = imported ] &&
	    [ "$(sim_state sim1 1-2)" = imported ]
}
# claimed by one gateway of $@; sets NEW
_claimed_by_one_of() {
	local g
	for g in "$@"; do
		_claimed_by "$g" && { NEW=$g; return 0; }
	done
	return 1
}

lease_launch g1
lease_ready g1 || bail_out "g1 did not start"
wait_for -t 15 _claimed_by g1
check $? "g1, started first, holds sim1 and claims its devices"
# a vhci host attached through g1 (an attachment row open in the store)
"$USBGW" -s "$T/g1.sock" approve sim1:1-1 -m "for the test" >/dev/null 2>&1
gw_wait_state g1 sim1:1-1 authorized
usbip_open 5 "$(gw_port g1)"
usbip_send_import 5 sim1:1-1
is "$(usbip_read_hex 5 8)" 0111000300000000 "a vhci host imports sim1:1-1 through g1 (ST_OK)"
_open_att() { [ "$(pg_sql "SELECT count(*) FROM attachments WHERE ended_at IS NULL")" = "$1" ]; }
wait_for -t 10 _open_att 1
check $? "its attachment row is open"
lease_launch g2
lease_launch g3
lease_ready g2 && lease_ready g3
check $? "g2 and g3 started"
_open_att 1
check $? "the others' start left g1's attachment open (they close only an exporter's rows they take over)"
is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'restart-closed'")" 0 \
    "no restart-closed row"
wait_log g2 'exporter sim1: leased by gateway' 10
wait_log g3 'exporter sim1: leased by gateway' 10
_claimed_by g1
check $? "g2 and g3 leave sim1 to g1 (they list none of its devices)"
run "$USBGW" -s "$T/g2.sock" exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get status name=sim1)" elsewhere \
    "g2's exporter list: sim1 elsewhere"
is "$(printf '%s' "$OUT" | "$EJSON" get holder name=sim1)" "$(lease_name g1)" \
    "and names g1 as the holder"

# ---- an import at a gateway that does not hold the device ---------------
run "$TC" import "$(gw_addr g2)" sim1:1-1
like "$OUT" 'RESULT status=ST_NA' "an import at g2 (not the holder) is refused"
_elsewhere() {
	[ "$(pg_sql "SELECT count(*) FROM audit_log WHERE event =
	    'import-elsewhere' AND busid = 'sim1:1-1' AND detail LIKE
	    '%$(lease_name g1)%'")" -ge 1 ]
}
wait_for -t 10 _elsewhere
check $? "an import-elsewhere audit row names the holder g1 ($(lease_name g1))"

# ---- the holder killed ---------------------------------------------------
t0=$(day_ms)
stop_bg g1 KILL
wait_for -t $((LEASE_S + 8)) _claimed_by_one_of g2 g3
check $? "after SIGKILL of g1 another gateway claims sim1's devices ($NEW)"
# from the new holder's log: the CLI's own latency (ASan) left out
ms=$(gw_log_after_ms "$NEW" 'sim1:1-[12]: probing -> ' "$t0")
diag "takeover after SIGKILL: $ms ms (lease $((LEASE_S * 1000)) ms)"
num_cmp "$ms" -le $(((LEASE_S + 2) * 1000)) "within lease time + 2 s ($ms ms)"
# the killed holder renewed at most lease/3 before it died: the lease
# cannot expire sooner than that, nor may anyone claim before it does
num_cmp "$ms" -ge $((LEASE_S * 1000 * 2 / 3 - 500)) \
    "not before the lease could have expired ($ms ms)"
h=$NEW
other=g2; [ "$h" = g2 ] && other=g3
exec 5>&-
wait_for -t 10 _open_att 0
check $? "$h, the new holder, closed the attachment the killed g1 left open"
is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'restart-closed'
    AND detail LIKE '%sim1%' OR event = 'restart-closed' AND busid = 'sim1:1-1'")" 1 \
    "with one restart-closed row for sim1:1-1"

# ---- the holder stopped cleanly -----------------------------------------
t0=$(day_ms)
stop_bg "$h" TERM
is "$RC" 0 "$h stops on SIGTERM (exit 0)"
like "$(cat "$T/$h.log")" 'exporter leases released' "$h released its leases"
wait_for -t $((LEASE_S + 8)) _claimed_by "$other"
check $? "$other takes sim1 over"
ms=$(gw_log_after_ms "$other" 'sim1:1-[12]: probing -> ' "$t0")
diag "takeover after SIGTERM: $ms ms (a lease round is $((LEASE_S * 1000 / 3)) ms)"
num_cmp "$ms" -lt $((LEASE_S * 1000)) "without waiting for an expiry: within the lease time ($ms ms)"
is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'lease-taken'")" 3 \
    "three lease-taken audit rows (g1, then $h, then $other)"
stop_bg "$other" TERM
is "$RC" 0 "$other stops on SIGTERM (exit 0)"
dirty=
for g in $LEASE_GWS; do gw_log_sanitizer_clean "$g" || dirty="$dirty $g"; done
is "$dirty" "" "no sanitizer report in the gateways' logs"
asan_clean "no sanitizer report files"
done_testing
