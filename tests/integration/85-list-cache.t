#!/bin/bash
# `usbgw list` after issue 13's fast path (the daemon writes each device's
# JSON text into the reply frame, the CLI checks and rewrites the array
# without a tree): what it shows is what `show` shows, member for member
# and in the same order, in every state; a change (approve, revoke, deny,
# a policy rule added and removed, attach, detach, unplug, an exporter
# removed) is in the very next `list`, with no wait (a view that lagged
# would show an operator "pending" for an attached device); --json is
# jansson's indented form and the table agrees with it; and what a daemon
# sends that is not valid JSON is refused, never printed.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat python3
CTLPY=$TOP/tests/tools/scale-ctl.py

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type sourcesink; }
device 1-4 { type composite; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
cat >"$T/sim2.conf" <<'EOF2'
device 2-1 { type sourcesink; }
device 2-2 { type sourcesink; }
EOF2
sim_start sim2 -c "$T/sim2.conf" || bail_out "second simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" \
    "exporter sim2 127.0.0.1:$(sim_port sim2)" "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in sim1:1-1 sim1:1-2 sim1:1-3 sim1:1-4 sim2:2-1 sim2:2-2; do
	gw_wait_state gw "$d" pending || bail_out "$d did not become pending"
done
U=("$USBGW" -s "$(gw_sock gw)")

# list_is_show DESC: every device of `list --json` is, member for member
# and in order, what `show --json` gives for it (without "history"); the
# counters of an attachment move between the two calls and are left out.
list_is_show() {
	local b out bad
	"${U[@]}" list --json >"$T/l.json" 2>"$T/l.err" ||
	    { fail "$1: list --json"; _diag_text "$(cat "$T/l.err")"; return; }
	rm -f "$T"/show-*.json
	for b in $(python3 -c 'import json,sys
for d in json.load(open(sys.argv[1])): print(d["busid"])' "$T/l.json"); do
		"${U[@]}" show "$b" --json >"$T/show-$b.json" 2>/dev/null
	done
	out=$(python3 - "$T" <<'PY'
import glob, json, sys
t = sys.argv[1]
moving = ("bytes_to_host", "bytes_to_device", "urbs")
listed = json.load(open(t + "/l.json"))
bad = []
for d in listed:
    s = json.load(open("%s/show-%s.json" % (t, d["busid"])))
    s.pop("history", None)
    a = [(k, v) for k, v in d.items() if k not in moving]
    b = [(k, v) for k, v in s.items() if k not in moving]
    if a != b:
        bad.append("%s: list %s / show %s" % (d["busid"], json.dumps(d),
                                              json.dumps(s)))
print("devices=%d differ=%d" % (len(listed), len(bad)))
for x in bad[:3]:
    print(x)
PY
)
	if [ "$(printf '%s\n' "$out" | head -n 1 | sed 's/.*differ=//')" = 0 ] &&
	    ! printf '%s\n' "$out" | grep -q '^devices=0 '; then
		pass "$1: list is show for each device ($(printf '%s\n' "$out" | head -n 1))"
	else
		fail "$1: list is show for each device"
		_diag_text "$out"
	fi
}

# now BUSID PATH: PATH (a.b) of BUSID in one `list --json` made now (no
# wait): the value, "null", or "absent"
now() {
	"${U[@]}" list --json | python3 -c 'import json, sys
for d in json.load(sys.stdin):
    if d["busid"] != sys.argv[1]:
        continue
    for k in sys.argv[2].split("."):
        if not isinstance(d, dict) or k not in d:
            print("absent"); sys.exit(0)
        d = d[k]
    print("null" if d is None else d)' "$1" "$2"
}

list_is_show "at rest, all pending"

# ---- the output itself ----------------------------------------------------
run "${U[@]}" list --json
printf '%s' "$OUT" >"$T/out.json"
is "$(python3 -c 'import json,sys
t = open(sys.argv[1], encoding="utf-8").read()
print(json.dumps(json.loads(t), indent=2, ensure_ascii=False) == t.rstrip("\n"))' "$T/out.json")" \
    True "list --json is the indented form (2 spaces, \": \", one member a line)"
run "${U[@]}" list
is "$RC" 0 "list (table)"
is "$(printf '%s\n' "$OUT" | wc -l)" 7 "table: a header and six rows"
printf '%s\n' "$OUT" | grep -Eq '^sim1:1-1 +pending +1209:0001 +sim1 +1-1 +[0-9]+s ago +usbgw-sim Simulated Keyboard \[SIM-1-1\]$'
check $? "table: a row as before (busid, state, id, exporter, upstream, since, strings)"
run "${U[@]}" list --state pending --exporter sim2 --json
is "$(printf '%s' "$OUT" | "$EJSON" count)" 2 "--state and --exporter filter"
run "${U[@]}" list --state bogus
is "$RC" 2 "an unknown state: usage error"

# ---- every change is in the next list -----------------------------------
gwctl gw approve sim1:1-3
is "$(now sim1:1-3 state)" authorized "approve: authorized in the next list"
is "$(now sim1:1-3 decision.by)" approval "... decided by the approval"
gwctl gw revoke sim1:1-3
is "$(now sim1:1-3 state)" pending "revoke: pending in the next list"
is "$(now sim1:1-3 decision.by)" revocation "... decided by the revocation"
gwctl gw deny sim1:1-1
is "$(now sim1:1-1 state)" blocked "deny: blocked in the next list"
gwctl gw policy add 'allow id 1209:0002'
RID=$(printf '%s' "$OUT" | grep -Eo '[0-9]+' | head -n 1)
is "$(now sim1:1-2 state)" authorized "policy add: authorized in the next list"
is "$(now sim1:1-2 approval.scope)" rule "... the rule allows it"
list_is_show "after approve, revoke, deny, a rule"
gwctl gw policy remove "$RID"
is "$RC" 0 "policy remove $RID"
is "$(now sim1:1-2 state)" pending "policy remove: pending in the next list"

# attach, through the gateway
gwctl gw approve sim1:1-2
start_bg load "$TC" load "$GWA" sim1:1-2 --dir loop --seconds 60 \
    --expect-disconnect --ready-file "$T/load.ready"
wait_file "$T/load.ready" 10 load
check $? "a loopback load through the gateway"
is "$(now sim1:1-2 state)" attached "attach: attached in the next list"
like "$(now sim1:1-2 attached_to)" '^127\.0\.0\.1' "... attached_to the host"
list_is_show "with an attachment"
gwctl gw revoke sim1:1-2
is "$(now sim1:1-2 state)" pending "revoke of the attached device: pending in the next list"
is "$(now sim1:1-2 attached_to)" absent "... and attached to nothing"
wait_bg load 10

# unplug: once the daemon has logged it, list has it
sim_ctl sim unplug 1-4
is "$RC" 0 "simulator: unplug 1-4"
wait_log gw 'sim1:1-4: [a-z]+ -> gone' 10
check $? "the daemon saw the unplug"
is "$(now sim1:1-4 state)" gone "unplug: gone in the next list"

gwctl gw exporter remove sim2
is "$RC" 0 "exporter remove sim2"
run "${U[@]}" list --json
is "$(printf '%s' "$OUT" | "$EJSON" count exporter=sim2)" 0 \
    "exporter removed: none of its devices in the next list"
list_is_show "at the end"

# ---- a daemon's answer that is not valid JSON is never printed --------------
# (scale-ctl.py serve answers every request with the frame in a file)
fake() {		# fake NAME TEXT: serve TEXT as the answer; run list --json
	printf '%s' "$2" >"$T/$1.frame"
	start_bg "$1" python3 "$CTLPY" "$T/$1.sock" serve "$T/$1.frame"
	wait_for -t 10 test -S "$T/$1.sock"
	run "$USBGW" -s "$T/$1.sock" list --json
	local rc=$RC
	stop_bg "$1"
	RC=$rc
}
fake f1 '{"v":1,"id":1,"ok":true,"result":[{"busid":"a"},]}'
is "$RC" 5 "malformed result: exit 5"
is "$OUT" "" "... nothing printed"
like "$ERR" 'malformed JSON at byte 48' "... the error names the byte"
fake f2 $'{"v":1,"id":1,"ok":true,"result":[{"busid":"\xff"}]}'
is "$RC" 5 "invalid UTF-8 in the result: exit 5"
is "$OUT" "" "... nothing printed"
fake f3 '{"v":1,"id":1,"ok":true,"result":["\u0000"]}'
is "$RC" 5 "\\u0000 in the result: exit 5"
fake f4 '{"v":1,"id":1,"ok":true,"result":[{"busid":"a"}]} x'
is "$RC" 5 "bytes after the message: exit 5"
fake f5 '{"v":1,"id":1,"ok":true,"result":["\u0041\/\u00e9",1E2,-0]}'
is "$RC" 0 "escapes and numbers: accepted"
is "$OUT" $'[\n  "A/\xc3\xa9",\n  100.0,\n  0\n]' "... written as jansson writes them"
fake f6 '{"v":1,"id":1,"ok":false,"error":{"code":"limit","message":"too big"}}'
is "$RC" 5 "an error reply: exit 5"
like "$ERR" 'too big' "... its message shown"
fake f7 '{"v":1,"id":1,"ok":true,"result":[],}'
is "$RC $OUT" "5 " "a trailing comma in the message: exit 5, nothing printed"
fake f8 '{"v":1,"id":1,"ok":true,"result":[],"result":[{"busid":"x"}]}'
is "$RC $OUT" "5 " "a second result member: exit 5, nothing printed"

gw_finish gw
done_testing
