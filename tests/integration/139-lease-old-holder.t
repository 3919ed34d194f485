#!/usr/bin/env bash
# A gateway that lost a lease never uses the exporter again on its own
# (protocol.md 4.4).  Two gateways on one PostgreSQL, one exporter.
#  - The holder frozen (SIGSTOP) for longer than the lease: the other
#    gateway takes the lease.  Resumed, the old holder finds its deadline
#    passed and lets go at once (its claims released), the new holder
#    claims the devices, and the old one never lists or claims them again.
#  - The holder killed and restarted at once: the new process does not
#    steal the lease the killed one left unexpired; the other gateway
#    takes it after it expires, and the restarted one keeps off.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
. "$(dirname "$0")/../lib/lease.sh"
need_pg
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON"
plan 17
LEASE_S=3

lease_world "$LEASE_S" 'device 1-1 { type storage; }' g1 g2
_claimed_by() {
	lease_snap
	[ "$(lease_where sim1:1-1)" = "$1" ] &&
	    [ "$(lease_holder sim1)" = "$1" ] &&
	    [ "$(sim_state sim1 1-1)" = imported ]
}

lease_launch g1
lease_ready g1 || bail_out "g1 did not start"
wait_for -t 15 _claimed_by g1
check $? "g1 holds sim1 and claims 1-1"
lease_launch g2
lease_ready g2 || bail_out "g2 did not start"
wait_log g2 'exporter sim1: leased by gateway' 10
check $? "g2 leaves it to g1"

# ---- the holder frozen past its lease -----------------------------------
kill -STOP "$(bg_pid g1)"
_g2_has_lease() { [ "$(lease_holder sim1)" = g2 ]; }
wait_for -t $((LEASE_S + 5)) _g2_has_lease
check $? "g1 frozen: g2 takes the expired lease"
# g1's claim connection is still open: the exporter refuses g2 (fenced)
kill -CONT "$(bg_pid g1)"
wait_for -t 10 _claimed_by g2
check $? "g1 resumed: it let go, and g2 claims 1-1"
like "$(cat "$T/g1.log")" 'exporter sim1: (lease not renewed before its deadline|lease taken by gateway)' \
    "g1's log says why it let go"
imp=$(sim_imports sim1 1-1)
req=$(grep -c "cmd=OP_REQ_IMPORT busid=1-1\$" "$T/sim1.pdu")
sleep $((LEASE_S + 1))		# a whole lease of g1's rounds
lease_snap
is "$(lease_where sim1:1-1)" g2 "a lease time later only g2 lists 1-1"
is "$(sim_imports sim1 1-1)" "$imp" "no claim ended or was made again (simulator)"
is "$(grep -c "cmd=OP_REQ_IMPORT busid=1-1\$" "$T/sim1.pdu")" "$req" \
    "g1 made no import attempt after losing the lease"

# ---- the holder killed and restarted at once ----------------------------
old=$(lease_name g2)
epoch=$(pg_sql "SELECT epoch FROM exporter_leases")
t0=$(day_ms)
stop_bg g2 KILL
lease_launch g2		# at once, not waited for: the clock runs
_taken() { _claimed_by g1 || _claimed_by g2; }
wait_for -t $((LEASE_S + 8)) _taken
check $? "the lease goes to a running gateway when it expires ($(lease_holder sim1))"
NEW=$(lease_holder sim1)
# from the new holder's log: the CLI's own latency (ASan) left out
ms=$(gw_log_after_ms "$NEW" 'sim1:1-1: probing -> ' "$t0")
lease_ready g2 || bail_out "g2 did not start again"
grep -q "exporter sim1: leased by gateway $old for" "$T/g2.log"
check $? "the restarted g2 found the killed one's lease unexpired and left it"
diag "takeover after SIGKILL with a restart: $ms ms (lease $((LEASE_S * 1000)) ms)"
num_cmp "$ms" -le $(((LEASE_S + 2) * 1000)) "within lease time + 2 s ($ms ms)"
num_cmp "$ms" -ge $((LEASE_S * 1000 * 2 / 3 - 500)) \
    "not before the killed holder's lease could have expired ($ms ms)"
is "$(pg_sql "SELECT epoch FROM exporter_leases")" $((epoch + 1)) \
    "the epoch grew by one (a new holder)"
stop_bg g1 TERM
is "$RC" 0 "g1 stops (exit 0)"
stop_bg g2 TERM
is "$RC" 0 "g2 stops (exit 0)"
dirty=
for g in $LEASE_GWS; do gw_log_sanitizer_clean "$g" || dirty="$dirty $g"; done
is "$dirty" "" "no sanitizer report in the gateways' logs"
asan_clean "no sanitizer report files"
done_testing
