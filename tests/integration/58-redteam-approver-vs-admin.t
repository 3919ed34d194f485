#!/usr/bin/env bash
# Red team: a user with only the approve privilege against an admin's
# permanent decisions.  A permanent decision writes a rule tied to the
# device row, and db_rule_set_device() replaces the device's rule,
# whoever wrote it and in whichever tier:
#  A. The admin allows an admin-blocked device with
#     `approve --override --permanent` (an admin-tier rule, first).  The
#     approver's `approve --permanent` (no --override) is not refused --
#     admin_blocking_rule() sees the admin's override rule allow -- and
#     it unlinks the admin's rule (removed_by: the approver), putting an
#     operator rule in its place.  An approver deletes an admin rule
#     (protocol.md: "removes nothing an admin wrote"); the device falls
#     back to blocked, so this is an approver undoing an admin's override,
#     not a grant -- but the admin tier was edited by a non-admin.
#  B. The admin's `deny --permanent` (an operator-tier block rule: the
#     admin's denial carries no rank) is replaced by the approver's
#     `approve --permanent`: the approver authorizes a device an admin
#     denied permanently (spec-conformant today -- "a new permanent
#     decision for the same device replaces the old rule" -- but it is
#     the lower privilege outranking the higher one).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 useradd \
    userdel groupadd groupdel runuser
[ "$(id -u)" = 0 ] || skip_all "needs root to create a user with the approve privilege"
plan 11

tag=$$
G_SOCK=urk$tag
APP=urp$tag
cleanup_users() {
	userdel "$APP" 2>/dev/null
	groupdel "$G_SOCK" 2>/dev/null
}
trap '_st=$?; cleanup_users; (exit $_st); _cleanup' EXIT
groupadd "$G_SOCK" || bail_out "groupadd failed"
useradd -M -N -g nogroup -G "$G_SOCK" -d /nonexistent -s /usr/sbin/nologin \
    "$APP" || bail_out "useradd failed"
UGW=$(for_users "$USBGW") || bail_out "cannot copy usbgw"

cat >"$T/sim.conf" <<'EOF2'
device 1-2 { type storage; }
device 1-5 { type sourcesink; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "control-group = $G_SOCK" \
    "control-socket-mode = 0660" "allow-approve = $APP"
gw_start gw || bail_out "usbgwd did not start"
for d in 1-2 1-5; do
	gw_wait_state gw sim1:$d pending || { gw_diag gw; bail_out "sim1:$d not pending"; }
done
as_app() { run runuser -u "$APP" -- "$UGW" -s "$(gw_sock gw)" "$@"; }
rule_of_device() {	# the active rule tied to BUSID's device row
	gw_sql gw "SELECT r.id || ' ' || r.origin FROM rules r JOIN devices d
	    ON d.id = r.device_id WHERE d.busid = '$1' AND r.position IS NOT NULL"
}

# ---- A: the admin's permanent override -----------------------------------
gwctl gw policy add 'block id 1209:0002'
gw_wait_state gw sim1:1-2 blocked 5
gwctl gw approve sim1:1-2 --override --permanent -m "admin says yes"
is "$RC" 0 "admin: approve --override --permanent of the admin-blocked stick"
RO=$(rule_of_device sim1:1-2)
like "$RO" '^[0-9]+ admin$' "... an admin-tier rule ($RO)"
gw_wait_state gw sim1:1-2 authorized 3

as_app approve sim1:1-2 --permanent -m "mine now"
is "$RC" 1 "approver: approve --permanent is refused (the device's rule is an admin's)"
is "$(gw_sql gw "SELECT IFNULL(removed_by, '') FROM rules WHERE id = ${RO%% *}")" "" \
    "... the admin's override rule was not removed by the approver"
is "$(rule_of_device sim1:1-2)" "$RO" "... and it is still the device's rule"

# ---- B: the admin's permanent denial ---------------------------------------------
gwctl gw deny sim1:1-5 --permanent -m "admin says no"
is "$RC" 0 "admin: deny --permanent sim1:1-5"
gw_wait_state gw sim1:1-5 blocked 3
as_app approve sim1:1-5 --permanent -m "I say yes"
is "$RC" 1 "approver: approve --permanent of a device an admin denied permanently is refused"
sleep 0.3
is "$(gw_state gw sim1:1-5)" blocked "... it stays blocked"

gw_finish gw
done_testing
