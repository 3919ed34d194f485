#!/usr/bin/env bash
# Issue 17, the operator view of per-interface verdicts, with the
# simulator's composite device (keyboard 03:01:01 + storage 08:06:50):
#  1. an allow rule with interface-policy: show lists each interface
#     with allow/deny, --json has decision.interfaces with decision and
#     policy; a device without one lists its interfaces with the
#     device's verdict (per_interface false).
#  2. every interface denied: allowed, and show says nothing is usable.
#  3. policy test: per-interface results per device (JSON and table).
#  4. an ask rule's policy: pending shows what an approval gives; the
#     approval keeps it; watch lines name the interfaces denied.
#  5. the grammar's errors reach the operator with the column.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$USBGWD" "$USBGW" python3 socat
plan 40

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type keyboard; serial "K11"; }
device 1-3 { type composite; keys ""; serial "S13"; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-3 pending
gw_wait_state gw sim1:1-1 pending

# jq-like: python3 reads JSON on stdin and prints the expression's value
jx() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
show_json() { "$USBGW" -s "$(gw_sock gw)" show "$1" --json; }
ifaces_of() {
	show_json "$1" | jx '" ".join(i["class"] + ":" + i["decision"] for i in d["decision"]["interfaces"])'
}
rule_id() {	# rule_id TEXT-FRAGMENT: the id of the rule whose text has it
	"$USBGW" -s "$(gw_sock gw)" policy list --json |
	    jx "[r['id'] for r in d if '''$1''' in r['rule']][0]"
}

# ---- 1. allow with interface-policy --------------------------------------
gwctl gw policy add 'allow id 1209:0003 interface-policy allow { block 08:*:* }'
is "$RC" 0 "policy add: allow the composite, its storage interface denied"
gw_wait_state gw sim1:1-3 authorized
gwctl gw show sim1:1-3
is "$RC" 0 "show"
like "$OUT" 'per interface +config 1 interface 0 alt 0  03:01:01 \(HID keyboard\)  allow \(interface-policy: allow\)' \
    "show: the keyboard interface allowed"
like "$OUT" 'config 1 interface 1 alt 0  08:06:50 \(mass storage\)  deny \(interface-policy: deny\)' \
    "show: the storage interface denied"
like "$OUT" 'interface-policy: 1 of 2 interface descriptors denied' "show: the decision's why counts them"
unlike "$OUT" 'nothing on it is usable' "show: something is usable"
J=$(show_json sim1:1-3)
is "$(jx 'd["decision"]["per_interface"]' <<<"$J")" True "JSON: decision.per_interface"
is "$(jx '" ".join("%d.%d/%d:%s:%s:%s" % (i["config"], i["number"], i["alt"], i["class"], i["decision"], i["policy"]) for i in d["decision"]["interfaces"])' <<<"$J")" \
    "1.0/0:03:01:01:allow:allow 1.1/0:08:06:50:deny:deny" "JSON: decision.interfaces, each with decision and policy"
J=$(show_json sim1:1-1)
is "$(jx '(d["decision"]["per_interface"], [(i["class"], i["decision"], "policy" in i) for i in d["decision"]["interfaces"]])' <<<"$J")" \
    "(False, [('03:01:01', 'deny', False)])" "JSON: no interface-policy: the pending keyboard's interface follows the device"
J=$("$USBGW" -s "$(gw_sock gw)" list --json)
is "$(jx '[x["decision"]["interfaces"][1]["decision"] for x in d if x["busid"] == "sim1:1-3"][0]' <<<"$J")" deny \
    "list --json: the same decision object"

# ---- 2. every interface denied ------------------------------------------------
R=$(rule_id 'block 08:*:*')
gwctl gw policy remove "$R"
gwctl gw policy add 'allow id 1209:0003 interface-policy block { allow ff:*:* }'
is "$RC" 0 "a policy that allows no interface of the device"
wait_for -t 10 sh -c "'$USBGW' -s '$(gw_sock gw)' show sim1:1-3 | grep -q 'nothing on it is usable'"
gwctl gw show sim1:1-3
like "$OUT" 'state +authorized' "the device verdict stays allow"
like "$OUT" 'every interface is denied: the device is allowed but nothing on it is usable' \
    "show says nothing is usable"
like "$OUT" 'interface-policy: every interface denied, nothing usable' "... and the decision's why"
is "$(show_json sim1:1-3 | jx '[i["decision"] for i in d["decision"]["interfaces"]]')" "['deny', 'deny']" \
    "JSON: both interfaces denied"

# ---- 3. policy test ---------------------------------------------------------------
gwctl gw policy test 'allow id 1209:0003 interface-policy allow { block 03:*:* }' --position 1 --json
is "$RC" 0 "policy test --json"
is "$(jx '[(x["would"], [(i["class"], i["decision"]) for i in x["interfaces"]]) for x in d if x["busid"] == "sim1:1-3"][0]' <<<"$OUT")" \
    "('authorized', [('03:01:01', 'deny'), ('08:06:50', 'allow')])" \
    "policy test: the tested rule's per-interface results"
is "$(jx '[x["per_interface"] for x in d if x["busid"] == "sim1:1-1"][0]' <<<"$OUT")" False \
    "policy test: a device it does not match has no per-interface verdicts"
gwctl gw policy test 'allow id 1209:0003 interface-policy allow { block 03:*:* }' --position 1
like "$OUT" 'INTERFACES DENIED' "policy test table: a column for the interfaces denied"
like "$OUT" 'sim1:1-3 .*authorized +1\.0/0 03:01:01' "... the keyboard interface of sim1:1-3"
gwctl gw policy test 'allow id 1209:0003 interface-policy block { allow 0e:*:* }' --position 1
like "$OUT" 'sim1:1-3 .*1\.0/0 03:01:01 1\.1/0 08:06:50 \(all: nothing usable\)' "... every interface denied, said so"
gwctl gw policy test 'allow id 1209:0003' --position 1
unlike "$OUT" 'INTERFACES DENIED' "no interface-policy: the table as before"

# ---- 4. ask rule's policy, approval keeps it, watch ---------------------------------
start_bg watch "$USBGW" -s "$(gw_sock gw)" watch
wait_for -t 10 sh -c "'$USBGW' -s '$(gw_sock gw)' status --json | grep -q '\"watchers\": 1'"
R=$(rule_id 'allow ff:*:*')
gwctl gw policy remove "$R"
gwctl gw policy add 'ask id 1209:0003 interface-policy allow { block 08:*:* }'
is "$RC" 0 "an ask rule with an interface-policy"
gw_wait_state gw sim1:1-3 pending
J=$(show_json sim1:1-3)
is "$(jx '[(i["decision"], i["policy"]) for i in d["decision"]["interfaces"]]' <<<"$J")" \
    "[('deny', 'allow'), ('deny', 'deny')]" "pending: nothing allowed, the policy says what an approval gives"
gwctl gw show sim1:1-3
like "$OUT" '03:01:01 \(HID keyboard\)  deny \(interface-policy: allow\)' "show: pending keyboard interface, allow once approved"
gwctl gw approve sim1:1-3
is "$RC" 0 "approve"
gw_wait_state gw sim1:1-3 authorized
J=$(show_json sim1:1-3)
is "$(jx '(d["decision"]["by"], [(i["class"], i["decision"]) for i in d["decision"]["interfaces"]])' <<<"$J")" \
    "('approval', [('03:01:01', 'allow'), ('08:06:50', 'deny')])" \
    "the approval keeps the rule's interface-policy (storage still denied)"
wait_log watch 'sim1:1-3 .*\[pending -> authorized\].*\[interfaces denied: 1\.1/0 08:06:50\]' 10
check $? "watch: the line names the interfaces denied"
unlike "$(grep 'sim1:1-1' "$(bg_log watch)")" 'interfaces denied' "watch: nothing about interfaces for a device without a policy"

# ---- 5. errors ---------------------------------------------------------------------
gwctl gw policy add 'block id 1209:0003 interface-policy allow { block 08:*:* }'
isnt "$RC" 0 "a block rule with an interface-policy is refused"
like "$ERR" "column 20: 'interface-policy' only in an allow or ask rule" "... with the column and why"
gwctl gw policy add 'allow interface-policy allow { block 08:*:* index 300 }'
isnt "$RC" 0 "an interface number over 255 is refused"
like "$ERR" "column 51: expected an interface number 0..255 after 'index', got '300'" "... with the column"
gwctl gw policy list
like "$OUT" "ask id 1209:0003 interface-policy allow \{ block 08:\*:\* \}" "policy list prints the rule back canonically"

# ---- 6. watch --prompt: what an approval would deny, before the question -----------
if [ -x "$USBGW_BUILD/pty-chat" ]; then
	cat >"$T/chat" <<EOF2
expect q or Ctrl-D to quit
sh printf 'plug 1-6 composite serial=S16\\n' | socat -t 5 - UNIX-CONNECT:$T/sim.ctl >/dev/null
expect (busid 1-6)
expect [q]uit?
send a
expect once; now authorized
eof
wait
EOF2
	run -t 60 "$USBGW_BUILD/pty-chat" -t 15 -o "$T/transcript" -f "$T/chat" \
	    "$USBGW" -s "$(gw_sock gw)" watch --prompt
	is "$RC" 0 "watch --prompt: the composite under the ask rule asked and approved"
	[ "$RC" = 0 ] || { diag "$ERR"; _diag_text "$(cat "$T/transcript")"; }
	like "$(cat "$T/transcript")" 'interface-policy, once approved: denied 1\.1/0 08:06:50' \
	    "the question says which interfaces the approval leaves denied"
	is "$(ifaces_of sim1:1-6)" "03:01:01:allow 08:06:50:deny" "approved at the prompt: the policy's verdicts"
else
	skip 3 "pty-chat not built"
fi

stop_bg watch
gw_finish gw
done_testing
