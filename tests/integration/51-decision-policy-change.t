#!/usr/bin/env bash
# Every policy change decides every present device again, attached ones
# included: a device the new rules no longer allow is torn down at once
# (the vhci host sees its connection close within 2 s of the command)
# and the audit row of its state change carries the id of the rule that
# caused it.  One attached device per kind of change: policy insert (a
# block rule first), remove (of the allow rule that authorized it), move
# (a block rule above that allow rule), apply (after a block rule was
# written into the database directly) and import --replace.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 36

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type storage; product 0x0013; }
device 1-5 { type sourcesink; }
device 1-6 { type sourcesink; product 0x0016; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
for d in 1-1 1-2 1-3 1-5 1-6; do
	gw_wait_state gw sim1:$d pending || { gw_diag gw; bail_out "sim1:$d not pending"; }
done

# add_rule RULE: append RULE; prints its id.
add_rule() {
	gwctl gw policy add "$1" --json
	[ "$RC" = 0 ] && jget "$OUT" id
}
Ra=$(add_rule 'allow id 1209:0001')
Rb=$(add_rule 'allow id 1209:0002')
Rc=$(add_rule 'allow id 1209:0013')
Rd=$(add_rule 'block id 1209:0013')
Rf=$(add_rule 'allow id 1209:0016')
Re=$(add_rule 'allow id 1209:0005')
like "$Ra $Rb $Rc $Rd $Rf $Re" '^[0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+$' \
    "six admin rules added (ids $Ra $Rb $Rc $Rd $Rf $Re)"
ok=0
for d in 1-1 1-2 1-3 1-5 1-6; do
	gw_wait_state gw sim1:$d authorized 5 && ok=$((ok + 1))
done
is "$ok" 5 "the rules authorize all five devices"

# ---- policy insert: a block rule in front ----------------------------------------
hold_start h1 gw sim1:1-1
check $? "a vhci host holds sim1:1-1 (HID keyboard)"
seq0=$(audit_seq gw)
kill -USR1 "$(bg_pid h1)"
gwctl gw policy insert 1 'block with-interface one-of { 03:*:* }' --json
is "$RC" 0 "policy insert 1 'block with-interface one-of { 03:*:* }'"
r1=$(jget "$OUT" id)
gw_wait_state gw sim1:1-1 blocked 2
is "$(gw_state gw sim1:1-1)" blocked "insert: the keyboard is blocked (at once)"
hold_closed h1
is "$RC" 0 "insert: the vhci host's connection closed within 2 s"
state_row_wait gw sim1:1-1 attached blocked "$seq0"
is "$(state_row gw sim1:1-1 attached blocked rule_id "$seq0")" "${r1:-none}" \
    "insert: audit attached -> blocked carries the new rule's id ($r1)"
run "$TC" import "$(gw_addr gw)" sim1:1-1
is "$RC" 11 "insert: the keyboard cannot be imported again (ST_NA)"

# ---- policy remove: the allow rule that authorized it ---------------------------------
hold_start h2 gw sim1:1-2
check $? "a vhci host holds sim1:1-2"
seq0=$(audit_seq gw)
kill -USR1 "$(bg_pid h2)"
gwctl gw policy remove "$Rb"
is "$RC" 0 "policy remove $Rb (allow id 1209:0002)"
gw_wait_state gw sim1:1-2 pending 2
is "$(gw_state gw sim1:1-2)" pending "remove: no rule left for it: pending (at once)"
hold_closed h2
is "$RC" 0 "remove: the vhci host's connection closed within 2 s"
state_row_wait gw sim1:1-2 attached pending "$seq0"
is "$(state_row gw sim1:1-2 attached pending rule_id "$seq0")" "$Rb" \
    "remove: audit attached -> pending carries the removed rule's id"

# ---- policy move: the block rule above the allow rule -------------------------------
is "$(gw_state gw sim1:1-3)" authorized "sim1:1-3 authorized by rule $Rc (first match)"
hold_start h3 gw sim1:1-3
check $? "a vhci host holds sim1:1-3"
seq0=$(audit_seq gw)
kill -USR1 "$(bg_pid h3)"
gwctl gw policy move "$Rd" 1
is "$RC" 0 "policy move $Rd 1 (block id 1209:0013 first)"
gw_wait_state gw sim1:1-3 blocked 2
is "$(gw_state gw sim1:1-3)" blocked "move: blocked (at once)"
hold_closed h3
is "$RC" 0 "move: the vhci host's connection closed within 2 s"
state_row_wait gw sim1:1-3 attached blocked "$seq0"
is "$(state_row gw sim1:1-3 attached blocked rule_id "$seq0")" "$Rd" \
    "move: audit attached -> blocked carries the moved rule's id"

# ---- policy apply, after a rule written into the database directly -------------------
hold_start h4 gw sim1:1-6
check $? "a vhci host holds sim1:1-6"
rsql=$(gw_sql_rw gw "BEGIN IMMEDIATE;
    UPDATE rules SET position = position + 1 WHERE position IS NOT NULL;
    INSERT INTO rules (position, text, target, origin, created_at, created_by)
	VALUES (1, 'block id 1209:0016', 'block', 'admin',
	CAST(strftime('%s', 'now') AS INTEGER), 'sqlite3');
    SELECT last_insert_rowid();
    COMMIT;")
like "$rsql" '^[0-9]+$' "a block rule written into the rules table by hand (id $rsql)"
seq0=$(audit_seq gw)
kill -USR1 "$(bg_pid h4)"
gwctl gw policy apply --json
is "$RC" 0 "policy apply"
is "$(jget "$OUT" rule_id busid=sim1:1-6)" "${rsql:-none}" \
    "apply reports sim1:1-6 changed by that rule"
gw_wait_state gw sim1:1-6 blocked 2
is "$(gw_state gw sim1:1-6)" blocked "apply: blocked (at once)"
hold_closed h4
is "$RC" 0 "apply: the vhci host's connection closed within 2 s"
state_row_wait gw sim1:1-6 attached blocked "$seq0"
is "$(state_row gw sim1:1-6 attached blocked rule_id "$seq0")" "${rsql:-none}" \
    "apply: audit attached -> blocked carries the rule's id"

# ---- policy import --replace -------------------------------------------------------------
hold_start h5 gw sim1:1-5
check $? "a vhci host holds sim1:1-5"
printf '%s\n' 'block id 1209:0005' 'allow id 1209:0016' >"$T/rules.conf"
seq0=$(audit_seq gw)
kill -USR1 "$(bg_pid h5)"
gwctl gw policy import --replace "$T/rules.conf"
is "$RC" 0 "policy import --replace (block id 1209:0005 first)"
gwctl gw policy list --json
rimp=$(jget "$OUT" id rule='block id 1209:0005')
like "$rimp" '^[0-9]+$' "the imported block rule (id $rimp)"
gw_wait_state gw sim1:1-5 blocked 2
is "$(gw_state gw sim1:1-5)" blocked "import: blocked (at once)"
hold_closed h5
is "$RC" 0 "import: the vhci host's connection closed within 2 s"
state_row_wait gw sim1:1-5 attached blocked "$seq0"
is "$(state_row gw sim1:1-5 attached blocked rule_id "$seq0")" "${rimp:-none}" \
    "import: audit attached -> blocked carries the imported rule's id"
gw_wait_state gw sim1:1-6 authorized 5
is "$(gw_state gw sim1:1-6)" authorized \
    "import --replace: the other device is decided again too (authorized)"

gw_finish gw
done_testing
