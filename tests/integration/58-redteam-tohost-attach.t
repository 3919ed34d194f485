#!/usr/bin/env bash
# Red team: an attachment that only a rule with to-host allows.
# The device's standing decision (no host) is pending, since a rule with
# to-host never matches without a host; ds_import() then moves it
# pending -> authorized itself, crediting "system" with no rule (the
# audit row does not say which rule allowed it), and attaches it.  From
# then on every re-decision of the device (device_reeval: standing
# decision pending != attached) tears the attachment down although the
# attached host is still allowed:
#  - the vhci host's own SET_CONFIGURATION (device_config_changed), which
#    every host does at enumeration: `usbip-tc script` fails;
#  - any policy change, even a rule about another device.
# And the reverse: when a later admin rule blocks the device
# (`allow id X to-host H` first, `block id X` after it: "only H"), the
# standing decision is blocked, and ds_import() refuses a blocked device
# without deciding for the asking host: H is refused too.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 11

cat >"$T/sim.conf" <<'EOF2'
device 1-4 { type keyboard; keys ""; }
device 1-5 { type sourcesink; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
D=sim1:1-5
gw_wait_state gw $D pending || { gw_diag gw; bail_out "$D not pending"; }
gw_wait_state gw sim1:1-4 pending || { gw_diag gw; bail_out "sim1:1-4 not pending"; }

gwctl gw policy add 'allow id 1209:0005 to-host 127.0.0.0/8' --json
rid=$(jget "$OUT" id)
like "$rid" '^[0-9]+$' "admin rule $rid allows $D to 127.0.0.0/8 only"

# ---- SET_CONFIGURATION by the allowed host ----------------------------------
run "$TC" script "$GWA" $D --bytes 64K --skip unlink,unlink-pending,unlink-completed,interrupt,iso
is "$RC" 0 "127.0.0.1 runs its script (SET_CONFIGURATION included) on $D"
grep -q 'set-configuration' <<<"$(gw_sql gw "SELECT event FROM audit_log
    WHERE busid = '$D'")" && diag "(the gateway saw the SET_CONFIGURATION)"
is "$(state_row gw $D pending authorized rule_id)" "$rid" \
    "the pending -> authorized row names rule $rid"
isnt "$(state_row gw $D pending authorized actor)" system \
    "... and does not credit 'system'"

# ---- an unrelated policy change ------------------------------------------------
gw_wait_state gw $D pending 5 || gw_wait_state gw $D authorized 5
hold_start h1 gw $D 2000 || diag "hold did not start"
gwctl gw policy add 'block id 1209:0004'
is "$RC" 0 "the admin adds a rule about another device (1209:0004)"
sleep 0.5
is "$(gw_state gw $D)" attached "$D stays attached to the host its rule allows"
stop_bg h1 TERM

# ---- "only 127.0.0.0/8": an allow with to-host, then a block --------------------
gwctl gw policy insert 1 'allow id 1209:0001 to-host 127.0.0.0/8'
gwctl gw policy add 'block id 1209:0001'
is "$RC" 0 "admin: sim1:1-4 to 127.0.0.0/8 (rule 1), blocked for everyone else"
sleep 0.5
run "$TC" import "$GWA" sim1:1-4
is "$RC" 0 "127.0.0.1 imports sim1:1-4 (the first matching rule for it allows)"

gw_finish gw
done_testing
