#!/usr/bin/env bash
# Admin rules outrank operators.  A user with only the approve privilege
# cannot allow what an admin rule blocks or rejects: `approve
# --permanent` there is refused naming the rule, and the device stays
# blocked, also after a re-plug; neither may they --override.  Their
# --permanent on a pending device writes an operator rule that ranks
# after every admin rule: a block rule the admin appends later blocks
# the device at once.  An admin's `approve --override` allows a device
# an admin rule blocks, and says so in the audit log.  `policy test`
# predicts ("would") exactly the state `policy add`/`insert` of the same
# rule produces, operator approvals included.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 useradd \
    userdel groupadd groupdel runuser
[ "$(id -u)" = 0 ] || skip_all "needs root to create a user with the approve privilege"
plan 45

ADMIN=$(id -un)		# root: the admin privilege
tag=$$
G_SOCK=ugk$tag		# may open the control socket
APP=ugp$tag		# the approve privilege only
cleanup_users() {
	userdel "$APP" 2>/dev/null
	groupdel "$G_SOCK" 2>/dev/null
}
trap '_st=$?; cleanup_users; (exit $_st); _cleanup' EXIT
groupadd "$G_SOCK" || bail_out "groupadd failed"
useradd -M -N -g nogroup -G "$G_SOCK" -d /nonexistent -s /usr/sbin/nologin \
    "$APP" || bail_out "useradd failed"
UGW=$(for_users "$USBGW") || bail_out "cannot copy usbgw"

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type composite; keys ""; }
device 1-4 { type audio; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "control-group = $G_SOCK" \
    "control-socket-mode = 0660" "allow-approve = $APP"
gw_start gw || bail_out "usbgwd did not start"
for d in 1-1 1-2 1-3 1-4 1-5; do
	gw_wait_state gw sim1:$d pending || { gw_diag gw; bail_out "sim1:$d not pending"; }
done

# as_app ARGS...: usbgw as the user with the approve privilege only.
as_app() { run runuser -u "$APP" -- "$UGW" -s "$(gw_sock gw)" "$@"; }
add_rule() {
	gwctl gw policy add "$1" --json
	[ "$RC" = 0 ] && jget "$OUT" id
}

as_app status
like "$OUT" "privilege approve" "$APP holds the approve privilege (only)" ||
    bail_out "$APP cannot use the control socket ($ERR); can other users reach $T?"

RB=$(add_rule 'block id 1209:0002')
RR=$(add_rule 'reject id 1209:0004')
like "$RB $RR" '^[0-9]+ [0-9]+$' "admin rules: block id 1209:0002 ($RB), reject id 1209:0004 ($RR)"
gw_wait_state gw sim1:1-2 blocked 5
is "$(gw_state gw sim1:1-2)" blocked "the admin block rule blocks the storage device"
gw_wait_state gw sim1:1-4 blocked 5
is "$(gw_state gw sim1:1-4)" blocked "the admin reject rule rejects the audio device"

# ---- the approver against an admin block -----------------------------------------
allow_rules() {		# active allow rules naming VID:PID
	gw_sql gw "SELECT count(*) FROM rules WHERE position IS NOT NULL AND
	    target = 'allow' AND text LIKE '%$1%'"
}
as_app approve sim1:1-2 --permanent -m "I need it"
is "$RC" 1 "approver: approve --permanent of an admin-blocked device is refused (exit 1)"
like "$ERR" "rule #?$RB([^0-9]|\$)|block id 1209:0002" "... the message names the admin rule"
sleep 0.3
is "$(gw_state gw sim1:1-2)" blocked "... the device stays blocked"
is "$(allow_rules 1209:0002)" 0 "... and no allow rule was written"

as_app approve sim1:1-4 --permanent
is "$RC" 1 "approver: approve --permanent of an admin-rejected device is refused (exit 1)"
like "$ERR" "rule #?$RR([^0-9]|\$)|reject id 1209:0004" "... the message names the reject rule"
is "$(allow_rules 1209:0004)" 0 "... no allow rule was written"

as_app approve sim1:1-2
sleep 0.3
is "$(gw_state gw sim1:1-2)" blocked "approver: a plain approve does not authorize an admin-blocked device"

as_app approve sim1:1-2 --override
is "$RC" 1 "approver: approve --override is refused (exit 1: the admin privilege)"
like "$ERR" "admin" "... explained: it needs the admin privilege"
is "$(gw_state gw sim1:1-2)" blocked "... still blocked"

sim_ctl sim unplug 1-2
is "$RC" 0 "unplug the storage device"
gw_wait_state gw sim1:1-2 gone 10
sim_ctl sim plug 1-2 storage
gw_wait_state gw sim1:1-2 blocked 10
sleep 0.3
is "$(gw_state gw sim1:1-2)" blocked "after a re-plug it is still blocked"

# ---- the admin's override ----------------------------------------------------------------
seq0=$(audit_seq gw)
gwctl gw approve sim1:1-2 --override -m "audit this"
is "$RC" 0 "admin: approve --override"
gw_wait_state gw sim1:1-2 authorized 3
is "$(gw_state gw sim1:1-2)" authorized "... authorizes the admin-blocked device"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'approve' AND
    busid = 'sim1:1-2' AND seq > $seq0" 1 3
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'approve' AND
    busid = 'sim1:1-2' AND seq > $seq0 AND actor_name = '$ADMIN' AND
    detail LIKE '%override%'")" 1 "... audited: the approve row by $ADMIN says override"
A=$(show_approvals gw sim1:1-2)
is "$(jcount "$A" decision=allow override=true)" 1 "show: one active approval with override true"

# ---- the approver's permanent approval ranks after the admin rules ------------------
as_app approve sim1:1-5 --permanent -m "bench"
is "$RC" 0 "approver: approve --permanent of a pending device"
gw_wait_state gw sim1:1-5 authorized 3
is "$(gw_state gw sim1:1-5)" authorized "... authorized"
is "$(show_decision gw sim1:1-5 by)" operator-rule "show: decided by an operator rule"
seq0=$(audit_seq gw)
R5=$(add_rule 'block id 1209:0005')
like "$R5" '^[0-9]+$' "admin appends 'block id 1209:0005' (rule $R5)"
gw_wait_state gw sim1:1-5 blocked 2
is "$(gw_state gw sim1:1-5)" blocked "... the device is blocked at once"
state_row_wait gw sim1:1-5 authorized blocked "$seq0"
is "$(state_row gw sim1:1-5 authorized blocked rule_id "$seq0")" "${R5:-none}" \
    "audit: authorized -> blocked by rule $R5"
is "$(show_decision gw sim1:1-5 by)" admin-rule "show: decided by the admin rule"

# ---- policy test predicts policy add --------------------------------------------------------
gwctl gw approve sim1:1-1 -m "operator approval"
is "$RC" 0 "admin: approve sim1:1-1 (an operator approval, once)"
is "$(gw_state gw sim1:1-1)" authorized "... authorized"

# would_check RULE POSITION: `policy test RULE` (at POSITION, or
# appended when empty), then the same rule added for real; every
# device's "would" is its state afterwards.
declare -A WOULD
would_check() {
	local rule=$1 pos=$2 d
	if [ -n "$pos" ]; then
		gwctl gw policy test "$rule" --position "$pos" --json
	else
		gwctl gw policy test "$rule" --json
	fi
	is "$RC" 0 "policy test '$rule'${pos:+ --position $pos}"
	J=$OUT
	is "$(jcount "$J")" 5 "... lists the five present devices"
	for d in 1-1 1-2 1-3 1-4 1-5; do
		WOULD[$d]=$(jget "$J" would busid=sim1:$d)
	done
	if [ -n "$pos" ]; then
		gwctl gw policy insert "$pos" "$rule"
	else
		gwctl gw policy add "$rule"
	fi
	is "$RC" 0 "... then the rule added for real"
	sleep 0.5
	got='' want=''
	for d in 1-1 1-2 1-3 1-4 1-5; do
		got="$got $d=$(gw_state gw sim1:$d)"
		want="$want $d=${WOULD[$d]:-?}"
	done
	is "$got" "$want" "... every device is in the state policy test said it would be"
}
gwctl gw policy test 'block id 1209:0001' --json
is "$(jget "$OUT" would busid=sim1:1-1)" blocked \
    "policy test: an admin block rule would block the operator-approved keyboard"
is "$(jget "$OUT" by busid=sim1:1-1)" admin-rule "... decided by the admin rule"
would_check 'block id 1209:0001' ""
is "$(gw_state gw sim1:1-1)" blocked "the block rule blocked the operator-approved keyboard"
would_check 'allow id 1209:0003' 1
is "$(gw_state gw sim1:1-3)" authorized "the inserted allow rule authorized the composite device"

gw_finish gw
done_testing
