#!/bin/bash
# reject keeps the claim (issue 12, item 11).  With stock usbipd, a claim
# released is a device anybody who reaches the exporter can import.  A
# reject rule blocks the device and hides it from vhci hosts (OP_REQ_IMPORT
# answers ST_NODEV, it is in no device list) while the gateway keeps its
# claim: the exporter shows it imported by the gateway and refuses a
# direct import (ST_DEV_BUSY).  The reject is audited.  When the rule
# goes the device is decided again (pending), on the same claim.  A
# block rule, for comparison, refuses with ST_NA.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 25

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type storage; }
device 1-2 { type keyboard; keys ""; }
device 1-3 { type sourcesink; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMP=$(sim_port sim)
gw_conf gw "exporter sim1 127.0.0.1:$SIMP" "poll-interval = 300ms" \
    "show-pending = yes" "attach-pending-wait = 20s"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-3; do gw_wait_state gw sim1:$d pending; done
peer0=$(sim_dev_field sim 1-1 peer)
imports0=$(sim_dev_field sim 1-1 imports)

gwctl gw policy add 'reject with-interface 08:*:*' --json
is "$RC" 0 "policy add: reject with-interface 08:*:*"
RID=$(jget "$OUT" id)
gw_wait_state gw sim1:1-1 blocked 5
is "$(gw_state gw sim1:1-1)" blocked "sim1:1-1 is blocked (rule $RID)"
# several polls: a released claim would show as the device listed again
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'exporter-up'" 1
sleep 1
is "$(sim_dev_field sim 1-1 state)" imported "the exporter still shows the device imported"
is "$(sim_dev_field sim 1-1 peer)" "$peer0" "... by the gateway's claim (the same connection)"
is "$(sim_dev_field sim 1-1 imports)" "$imports0" "... never released and taken again"
is "$(usbip_import_status "$SIMP" 1-1)" 2 "a direct import at the exporter gets ST_DEV_BUSY"
run "$TC" import "$GWA" sim1:1-1
is "$RC" 14 "through the gateway the device has vanished: ST_NODEV"
run "$TC" list "$GWA"
unlike "$OUT" 'sim1:1-1' "it is in no device list (show-pending = yes)"
like "$OUT" 'sim1:1-2' "... where the pending keyboard is"
is "$(gw_audit_count gw reject "busid = 'sim1:1-1' AND rule_id = $RID")" 1 \
    "one audit row: reject, with the rule"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'reject' AND busid = 'sim1:1-1'")" \
    'claim kept' "... saying the claim is kept"
gwctl gw approve sim1:1-1
is "$RC" 1 "an operator cannot approve what an admin rule rejects"

# ---- the rule goes: decided again, on the same claim -----------------------------
gwctl gw policy remove "$RID"
is "$RC" 0 "policy remove $RID"
gw_wait_state gw sim1:1-1 pending 5
is "$(gw_state gw sim1:1-1)" pending "sim1:1-1 is pending again"
is "$(sim_dev_field sim 1-1 state) $(sim_dev_field sim 1-1 peer)" "imported $peer0" \
    "... still claimed, on the same connection"
is "$(gw_audit_count gw unreject "busid = 'sim1:1-1'")" 1 "the end of the reject is audited"

# ---- block, for comparison: ST_NA, claim kept -----------------------------------
gwctl gw policy add 'block with-interface 03:*:*' --json
is "$RC" 0 "policy add: block with-interface 03:*:*"
gw_wait_state gw sim1:1-2 blocked 5
run "$TC" import "$GWA" sim1:1-2
is "$RC" 11 "a blocked device is refused with ST_NA"
is "$(sim_dev_field sim 1-2 state)" imported "... and stays claimed"

# ---- a held import of a pending device, then a reject rule: ST_NODEV --------------
start_bg held "$TC" import "$GWA" sim1:1-3 -t 30000
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE busid = 'sim1:1-3' AND outcome = 'waiting'" 1
gwctl gw policy add 'reject with-interface ff:*:*' --json
is "$RC" 0 "policy add: reject with-interface ff:*:*"
wait_bg held 10
is "$RC" 14 "the held import is answered ST_NODEV: the device vanished"
is "$(sim_dev_field sim 1-3 state)" imported "... and the gateway still holds it"
gw_finish gw
done_testing
