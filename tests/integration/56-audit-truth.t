#!/usr/bin/env bash
# The database tells what happened.  A --permanent approval's row says
# scope 'permanent' and names the rule it wrote; a revoked approval's
# row says when, why ('revoked...') and by whom; an access request held
# and then granted names the operator who decided and the approval that
# let it in, a denied one the operator; access requests and attachments
# record the vhci host's verified name ("localhost" for 127.0.0.1).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 29

OP=$(id -un)
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type composite; keys ""; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 8s"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-3 1-5; do
	gw_wait_state gw sim1:$d pending || { gw_diag gw; bail_out "sim1:$d not pending"; }
done
dev_id() { gw_field gw "$1" id; }

# ---- a permanent approval ---------------------------------------------------------------
gwctl gw approve sim1:1-5 --permanent -m "bench"
is "$RC" 0 "approve sim1:1-5 --permanent"
D5=$(dev_id sim1:1-5)
is "$(gw_sql gw "SELECT decision || ' ' || scope FROM approvals WHERE
    device_id = ${D5:-0} ORDER BY id DESC LIMIT 1")" "allow permanent" \
    "approvals: the row says scope 'permanent'"
r5=$(gw_sql gw "SELECT rule_id FROM approvals WHERE device_id = ${D5:-0}
    ORDER BY id DESC LIMIT 1")
like "$r5" '^[0-9]+$' "... and names a rule (rule_id $r5)"
is "$(gw_sql gw "SELECT target FROM rules WHERE id = ${r5:-0} AND
    removed_at IS NULL")" allow "... an active allow rule"

# ---- a revoked approval ------------------------------------------------------------------
gwctl gw approve sim1:1-2 -m "for a minute"
is "$RC" 0 "approve sim1:1-2"
D2=$(dev_id sim1:1-2)
a2=$(gw_sql gw "SELECT id FROM approvals WHERE device_id = ${D2:-0} AND
    decision = 'allow' ORDER BY id DESC LIMIT 1")
like "$a2" '^[0-9]+$' "... its approvals row (id $a2)"
gwctl gw revoke sim1:1-2 -m "stolen"
is "$RC" 0 "revoke sim1:1-2"
is "$(gw_sql gw "SELECT ended_at IS NOT NULL FROM approvals WHERE id = ${a2:-0}")" 1 \
    "approvals: the revoked approval has ended_at"
like "$(gw_sql gw "SELECT end_reason FROM approvals WHERE id = ${a2:-0}")" '^revoked' \
    "... its end_reason starts with 'revoked'"
is "$(gw_sql gw "SELECT ended_by FROM approvals WHERE id = ${a2:-0}")" "$OP" \
    "... ended_by is the operator ($OP)"

# ---- access requests -----------------------------------------------------------------------
waiting() {	# waiting BUSID: until an access request for it is held
	gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE busid = '$1'
	    AND outcome = 'waiting'" 1 5
}
start_bg imp1 "$TC" import "$GWA" sim1:1-1 -t 15000
waiting sim1:1-1
check $? "an import of pending sim1:1-1 is held"
gwctl gw approve sim1:1-1 -m "asked for it"
is "$RC" 0 "the operator approves it"
wait_bg imp1 10
is "$RC" 0 "the held import succeeds"
D1=$(dev_id sim1:1-1)
a1=$(gw_sql gw "SELECT id FROM approvals WHERE device_id = ${D1:-0} AND
    decision = 'allow' ORDER BY id DESC LIMIT 1")
like "$a1" '^[0-9]+$' "... the approval's row (id $a1)"
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE busid = 'sim1:1-1'
    AND outcome != 'waiting'" 1 3
q1="SELECT %s FROM access_requests WHERE busid = 'sim1:1-1' ORDER BY id DESC LIMIT 1"
is "$(gw_sql gw "$(printf "$q1" outcome)")" granted "access request: outcome granted"
is "$(gw_sql gw "$(printf "$q1" decided_by)")" "$OP" "... decided_by the operator ($OP)"
is "$(gw_sql gw "$(printf "$q1" approval_id)")" "${a1:-none}" \
    "... approval_id is the approval that granted it"

start_bg imp3 "$TC" import "$GWA" sim1:1-3 -t 15000
waiting sim1:1-3
check $? "an import of pending sim1:1-3 is held"
gwctl gw deny sim1:1-3 -m "no"
is "$RC" 0 "the operator denies it"
wait_bg imp3 10
is "$RC" 11 "the held import is refused (ST_NA)"
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE busid = 'sim1:1-3'
    AND outcome != 'waiting'" 1 3
q3="SELECT %s FROM access_requests WHERE busid = 'sim1:1-3' ORDER BY id DESC LIMIT 1"
is "$(gw_sql gw "$(printf "$q3" outcome)")" denied "access request: outcome denied"
is "$(gw_sql gw "$(printf "$q3" decided_by)")" "$OP" "... decided_by the operator ($OP)"

# ---- the host's name --------------------------------------------------------------------------
gw_wait_sql gw "SELECT count(*) FROM attachments WHERE device_id = ${D1:-0}
    AND ended_at IS NOT NULL" 1 5
is "$(gw_sql gw "SELECT host_addr FROM attachments WHERE device_id = ${D1:-0}
    ORDER BY id DESC LIMIT 1")" 127.0.0.1 "the granted import's attachment records 127.0.0.1"
if localhost_resolves; then
	is "$(gw_sql gw "SELECT group_concat(DISTINCT IFNULL(host_name, 'NULL'))
	    FROM access_requests")" localhost "access_requests.host_name: localhost"
	is "$(gw_sql gw "SELECT IFNULL(host_name, 'NULL') FROM attachments
	    WHERE device_id = ${D1:-0} ORDER BY id DESC LIMIT 1")" localhost \
	    "attachments.host_name: localhost"
else
	skip 2 "getent hosts 127.0.0.1 does not say localhost"
fi

ok "audit verify" "$USBGW" -s "$(gw_sock gw)" audit verify
gw_finish gw
done_testing
