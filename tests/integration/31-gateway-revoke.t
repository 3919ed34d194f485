#!/bin/bash
# Revoke and deny while a vhci host is moving data through the gateway:
# the client sees the disconnect within 1 s of the operator's command,
# the device is reclaimed fresh at the exporter and shows its new state,
# nothing more reaches it, and every step is in the audit log.  With
# USBGW_ASAN=1 the daemon also ends without a sanitizer report.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 44

cat >"$T/sim.conf" <<'EOF'
device 1-2 { type storage; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

gw_conf gw "exporter sim1 $SIMA" "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw sim1:1-2 pending
gw_wait_state gw sim1:1-5 pending

# since_ms NAME: the DISCONNECT line's since_marker_ms of a usbip-tc run.
since_ms() {
	sed -n 's/^DISCONNECT .*since_marker_ms=\([0-9.]*\).*/\1/p' "$(bg_log "$1")"
}

# start_load NAME BUSID ARGS...: a load that expects to be cut off.
start_load() {
	local name=$1 busid=$2
	shift 2
	rm -f "$T/$name.ready"
	start_bg "$name" "$TC" load "$GWA" "$busid" --seconds 60 \
	    --expect-disconnect --within 1000 --ready-file "$T/$name.ready" "$@"
	wait_file "$T/$name.ready" 10 "$name"
}

# ---- revoke during a bulk loopback -------------------------------------------
gwctl gw approve sim1:1-2
is "$RC" 0 "approve sim1:1-2 (this presence)"
imports0=$(sim_dev_field sim 1-2 imports)

start_load load1 sim1:1-2 --dir loop
check $? "loopback load running through the gateway"
sleep 0.5
is "$(gw_state gw sim1:1-2)" attached "while the load runs: attached"
bytes0=$(sim_dev_field sim 1-2 bytes_out)
num_cmp "${bytes0:-0}" -gt 0 "data is reaching the device ($bytes0 bytes)"

kill -USR1 "$(bg_pid load1)"
gwctl gw revoke sim1:1-2 -m "stolen laptop"
is "$RC" 0 "usbgw revoke sim1:1-2 during the transfer"
like "$OUT" 'now pending' "revoke says: now pending"
wait_bg load1 10
is "$RC" 0 "the client saw the disconnect in time (--expect-disconnect --within 1000)"
ms=$(since_ms load1)
num_cmp "${ms:-9999}" -lt 1000 "disconnect within 1 s of the revoke ($ms ms)"
like "$(cat "$(bg_log load1)")" 'verified=yes' "the data that did flow was verified"

is "$(gw_state gw sim1:1-2)" pending "list --json: revoked device is pending"
wait_for -t 10 eval '[ "$(sim_dev_field sim 1-2 imports)" = $((imports0 + 1)) ]'
is "$(sim_dev_field sim 1-2 state)/$(sim_dev_field sim 1-2 imports)" \
    "imported/$((imports0 + 1))" "the device was reset and reclaimed by the gateway"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 11 "revoked device: import refused with ST_NA"
sleep 0.3
urbs1=$(sim_dev_field sim 1-2 urbs)
run "$TC" import "$GWA" sim1:1-2
sleep 0.3
same "$(sim_dev_field sim 1-2 urbs)" "$urbs1" "no URB reaches the revoked device"
run "$TC" list "$GWA"
unlike "$OUT" 'sim1:1-2' "revoked device left the gateway's DEVLIST"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND old_state = 'attached' AND new_state = 'pending' AND actor = 'operator'" 1
is "$(gw_sql gw "SELECT reason FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND old_state = 'attached' AND new_state = 'pending' AND actor = 'operator'")" \
    "revoked: stolen laptop" "audit: attached -> pending by the operator, with the reason"

gwctl gw revoke sim1:1-2
is "$RC" 1 "revoke of a pending device is refused (exit 1)"

# ---- approve again, deny while attached ---------------------------------------------
gwctl gw approve sim1:1-2
is "$RC" 0 "approve the revoked device again"
gw_wait_state gw sim1:1-2 authorized 5
start_load load2 sim1:1-2 --dir loop --urb 16K
check $? "loopback load with 16 KiB URBs running"
sleep 0.3
kill -USR1 "$(bg_pid load2)"
gwctl gw deny sim1:1-2 -m "not this one"
is "$RC" 0 "usbgw deny while attached"
like "$OUT" 'now blocked' "deny says: now blocked"
wait_bg load2 10
is "$RC" 0 "deny: client disconnected in time"
ms=$(since_ms load2)
num_cmp "${ms:-9999}" -lt 1000 "deny: disconnect within 1 s ($ms ms)"
is "$(gw_state gw sim1:1-2)" blocked "list --json: blocked"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 11 "blocked device: import refused with ST_NA"
wait_for -t 10 eval '[ "$(sim_dev_field sim 1-2 state)" = imported ]'
is "$(sim_dev_field sim 1-2 state)" imported "blocked device stays claimed (nobody else can import it)"
run "$TC" import "$SIMA" 1-2
is "$RC" 12 "direct import of the blocked device at the exporter: ST_DEV_BUSY"

# ---- revoke of a permanent approval (a rule) ---------------------------------------
gwctl gw approve sim1:1-5 --permanent -m "bench device"
is "$RC" 0 "approve --permanent sim1:1-5"
is "$(gw_state gw sim1:1-5)" authorized "authorized by the new rule"
gwctl gw policy list
like "$OUT" '1209:0005' "the permanent approval is a rule naming the device"
start_load load3 sim1:1-5 --dir in
check $? "IN load on the rule-authorized device"
sleep 0.3
kill -USR1 "$(bg_pid load3)"
gwctl gw revoke sim1:1-5
is "$RC" 0 "revoke the rule-authorized device"
wait_bg load3 10
is "$RC" 0 "revoke of a rule's device: client disconnected in time"
ms=$(since_ms load3)
num_cmp "${ms:-9999}" -lt 1000 "disconnect within 1 s ($ms ms)"
is "$(gw_state gw sim1:1-5)" pending "revoked despite the rule: pending"
run "$TC" import "$GWA" sim1:1-5
is "$RC" 11 "revoked rule-authorized device: ST_NA"

# ---- revoke of an idle authorized device ---------------------------------------------
gwctl gw approve sim1:1-5
is "$RC" 0 "approve sim1:1-5 again"
ok "a short transfer works again" "$TC" load "$GWA" sim1:1-5 --dir in --bytes 8M
gw_wait_state gw sim1:1-5 authorized 5
gwctl gw revoke sim1:1-5
is "$RC" 0 "revoke an idle authorized device"
is "$(gw_state gw sim1:1-5)" pending "idle revoked device: pending"

ok "audit verify" "$USBGW" -s "$(gw_sock gw)" audit verify
is "$(gw_state gw sim1:1-2)/$(gw_state gw sim1:1-5)" blocked/pending \
    "final states as the operator left them"

gw_finish gw
done_testing
