#!/usr/bin/env bash
# Follow-ups of the decision core:
#  - a permanent approval writes a rule; every present device it matches
#    is decided again at once (two identical sticks: approving one
#    --permanent authorizes its twin; it used to wait for a re-plug);
#  - a denial ends several approvals for different hosts at once;
#  - a policy change that cuts off only the attached host (a block rule
#    with to-host) writes the attached -> authorized row crediting the
#    admin and naming the rule (it said "system" with no rule).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 22

OP=$(id -un)
cat >"$T/sim.conf" <<'EOF2'
device 1-2 { type storage; serial "TWIN"; }
device 1-3 { type storage; serial "TWIN"; }
device 1-4 { type keyboard; }
device 1-5 { type sourcesink; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
for b in 1-2 1-3 1-4 1-5; do
	gw_wait_state gw sim1:$b pending || { gw_diag gw; bail_out "sim1:$b not pending"; }
done

# ---- a permanent approval decides the twin too -------------------------------
is "$(gw_field gw sim1:1-2 hash)" "$(gw_field gw sim1:1-3 hash)" \
    "the twins have one descriptor hash"
gwctl gw approve sim1:1-2 --permanent -m "both sticks"
is "$RC" 0 "approve sim1:1-2 --permanent"
rid=$(gw_sql gw "SELECT rule_id FROM approvals WHERE scope = 'permanent'
    ORDER BY id DESC LIMIT 1")
like "$rid" '^[0-9]+$' "its rule (id $rid)"
is "$(gw_state gw sim1:1-2)" authorized "sim1:1-2 authorized"
is "$(gw_state gw sim1:1-3)" authorized "its twin sim1:1-3 authorized at once by the same rule"
state_row_wait gw sim1:1-3 pending authorized 0 3
is "$(state_row gw sim1:1-3 pending authorized rule_id)" "$rid" \
    "the twin's row names the rule"
is "$(state_row gw sim1:1-3 pending authorized actor_name)" "$OP" \
    "... and credits the operator who wrote it"

# ---- one denial ends approvals for several hosts -------------------------------
gwctl gw approve sim1:1-4 --to 127.0.0.1
is "$RC" 0 "approve sim1:1-4 --to 127.0.0.1"
gwctl gw approve sim1:1-4 --to 127.0.0.2 --for 1h
is "$RC" 0 "approve sim1:1-4 --to 127.0.0.2 --for 1h"
gw_show gw sim1:1-4
is "$(jcount "$(jget "$SHOW" approvals)" decision=allow)" 2 \
    "two approvals stand side by side (different hosts)"
gwctl gw deny sim1:1-4 -m "gone wrong"
is "$RC" 0 "deny sim1:1-4"
gw_wait_sql gw "SELECT count(*) FROM approvals a JOIN devices d ON
    d.id = a.device_id WHERE d.busid = 'sim1:1-4' AND a.decision = 'allow'
    AND a.end_reason = 'denied'" 2 3
is "$(gw_sql gw "SELECT count(*) FROM approvals a JOIN devices d ON
    d.id = a.device_id WHERE d.busid = 'sim1:1-4' AND a.decision = 'allow'
    AND a.ended_at IS NULL")" 0 "the denial ended both approvals"
is "$(gw_sql gw "SELECT group_concat(DISTINCT a.ended_by) FROM approvals a
    JOIN devices d ON d.id = a.device_id WHERE d.busid = 'sim1:1-4' AND
    a.decision = 'allow'")" "$OP" "... each ended by the operator"
gw_show gw sim1:1-4
is "$(jcount "$(jget "$SHOW" approvals)")" 1 "show: the denial is the one decision left"
is "$(gw_state gw sim1:1-4)" blocked "sim1:1-4 blocked"

# ---- cutting off only the attached host ---------------------------------------
gwctl gw approve sim1:1-5
is "$RC" 0 "approve sim1:1-5 (any host)"
hold_start h gw sim1:1-5 || bail_out "the hold did not attach sim1:1-5"
seq0=$(audit_seq gw)
kill -USR1 "$(bg_pid h)" 2>/dev/null
gwctl gw policy add 'block id 1209:0005 to-host 127.0.0.1'
is "$RC" 0 "policy add: block it for 127.0.0.1 only"
brid=$(gw_sql gw "SELECT id FROM rules WHERE text LIKE 'block id 1209:0005%'")
hold_closed h 3
check $? "127.0.0.1's attachment is cut within 2 s"
state_row_wait gw sim1:1-5 attached authorized "$seq0" 3
is "$(state_row gw sim1:1-5 attached authorized actor_name "$seq0")/$(state_row gw sim1:1-5 attached authorized rule_id "$seq0")" \
    "$OP/$brid" "the attached -> authorized row credits the admin and names the rule"

gw_finish gw
