#!/usr/bin/env bash
# A denial ends every approval of the device: `approve --for 1h --to
# 127.0.0.1` then `deny`; once the device has been unplugged and plugged
# again it is pending and 127.0.0.1 cannot import it (the host-limited
# approval used to outlive the denial and let it in).  show --json lists
# the one active decision, the denial, credited to the operator, and
# says the denial decided; every audit row of the denial names the
# operator, and no row after it authorizes the device again.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 28

OP=$(id -un)
B=sim1:1-2

cat >"$T/sim.conf" <<'EOF'
device 1-2 { type storage; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw $B pending || { gw_diag gw; bail_out "no pending device"; }

# ---- an approval limited to 127.0.0.1, for an hour -------------------------
gwctl gw approve $B --for 1h --to 127.0.0.1 -m "bench"
is "$RC" 0 "approve --for 1h --to 127.0.0.1"
gw_wait_state gw $B authorized 5
is "$(gw_state gw $B)" authorized "approved: authorized"
run "$TC" import "$GWA" $B
is "$RC" 0 "before the denial 127.0.0.1 may import the device"
gw_wait_state gw $B authorized 10
is "$(gw_state gw $B)" authorized "released by the test client: authorized again"
allow_id=$(gw_sql gw "SELECT id FROM approvals WHERE decision = 'allow'
    ORDER BY id DESC LIMIT 1")
like "$allow_id" '^[0-9]+$' "the approval's row (id $allow_id)"

# ---- deny ------------------------------------------------------------------------
seq0=$(audit_seq gw)
gwctl gw deny $B -m "lost"
is "$RC" 0 "deny"
is "$(gw_state gw $B)" blocked "denied: blocked"

gw_show gw $B
is "$RC" 0 "show --json"
A=$(jget "$SHOW" approvals)
is "$(jcount "$A")" 1 "show: exactly one active decision"
is "$(jcount "$A" decision=deny)" 1 "... the denial"
is "$(jget "$A" by decision=deny)" "$OP" "... credited to the operator ($OP)"
deny_id=$(jget "$A" id decision=deny)
like "$deny_id" '^[0-9]+$' "... with its approval id"
D=$(jget "$SHOW" decision)
is "$(jget "$D" verdict)" block "show: decision.verdict block"
is "$(jget "$D" by)" denial "show: decided by the denial"
is "$(jget "$D" approval_id)" "${deny_id:-none}" "show: decision.approval_id is the denial's"

is "$(gw_sql gw "SELECT count(*) FROM approvals WHERE id = ${allow_id:-0} AND
    ended_at IS NOT NULL")" 1 "the denial ended the host-limited approval (ended_at set)"
state_row_wait gw $B authorized blocked "$seq0"
is "$(state_row gw $B authorized blocked actor_name "$seq0")" "$OP" \
    "audit: authorized -> blocked credited to $OP"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE seq > $seq0 AND
    busid = '$B' AND actor_name = 'system' AND event IN ('state', 'deny')
    AND new_state IN ('blocked', 'authorized')")" 0 \
    "audit: nothing about the denial is credited to system"

# ---- unplug, plug again --------------------------------------------------------------
sim_ctl sim unplug 1-2
is "$RC" 0 "simulator: unplug 1-2"
gw_wait_state gw $B gone 10
sim_ctl sim plug 1-2 storage
is "$RC" 0 "simulator: plug 1-2 again (same device)"
gw_wait_state gw $B pending 10
# a decision to authorize would come with the probe: give it a moment
sleep 0.5
is "$(gw_state gw $B)" pending "after the re-plug: pending"
run "$TC" import "$GWA" $B
is "$RC" 11 "after the re-plug 127.0.0.1 may not import it (ST_NA)"
sleep 0.3
isnt "$(gw_state gw $B)" attached "the device is not attached"
is "$(jcount "$(show_approvals gw $B)")" 0 "show: no active decision after the re-plug"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'state' AND
    busid = '$B' AND seq > $seq0 AND new_state IN ('authorized', 'attached')")" 0 \
    "audit: no state change after the denial authorized the device again"

gw_finish gw
done_testing
