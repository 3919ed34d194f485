#!/usr/bin/env bash
# Per-interface decisions that change while a device is attached (issue
# 17; protocol.md 1.6, "Per-interface enforcement"): the relay judges
# each URB by the decision applied at that moment, so an admin rule inserted first
# that denies the interface stops the next URB, without ending the
# session.  A bulk load on a storage device: once the first refusal is
# audited the exporter receives no more of its URBs and the client sees
# stalls.  An ISO stream (the audio device at alternate setting 1) gets
# its refusals with each packet -EPIPE, as vhci expects them.  Then the
# rule is removed and the next attachment works again.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" socat sqlite3

cat >"$T/sim.conf" <<'CONF'
device 1-1 { type storage; serial "CH-S" }
device 1-2 { type audio; serial "CH-A" }
CONF
gw_sim_world
gwctl gw policy test 'allow serial "X" interface-policy allow { block 08:*:* }'
[ "$RC" = 0 ] || fail_all "the interface-policy rule is accepted (exit $RC): $OUT $ERR"
plan 17
gwctl gw policy add 'allow serial one-of { "CH-S" "CH-A" }'
is "$RC" 0 "both devices allowed whole"
gw_wait_state gw sim1:1-1 authorized 15
gw_wait_state gw sim1:1-2 authorized 15

# submits BUSID: CMD_SUBMITs the exporter logged for BUSID on ep != 0.
submits() {
	grep -c "cmd=CMD_SUBMIT .* ep=[1-9][0-9]* .*busid=$1\$" "$(sim_pdulog sim)"
}
# submits_ge BUSID N: at least N of them.
submits_ge() {
	[ "$(submits "$1")" -ge "$2" ]
}
# settled BUSID: the exporter's count for BUSID stays put for 300 ms.
settled() {
	local a b
	a=$(submits "$1")
	sleep 0.3
	b=$(submits "$1")
	[ "$a" = "$b" ]
}

# ---- bulk: storage denied in the middle of a load ------------------------
start_bg load "$TC" load "$GWA" sim1:1-1 --dir loop --urb 4096 --inflight 4 \
    --seconds 30
wait_for -t 10 submits_ge 1-1 200
check $? "the load runs through the gateway (the exporter saw 200 URBs)"
n0=$(gw_audit_count gw iface-refused)
gwctl gw policy insert 1 'allow serial "CH-S" interface-policy allow { block 08:*:* }'
is "$RC" 0 "a rule denying the storage interface, inserted first"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'iface-refused'" \
    $((n0 + 1)) 10
check $? "the next URB is refused (audited)"
wait_for -t 5 settled 1-1
n1=$(submits 1-1)
wait_bg load 15
isnt "$RC" 0 "the load fails: its URBs stall"
like "$(cat "$T/load.log")" 'status -32' "... with -EPIPE"
is "$(submits 1-1)" "$n1" "the exporter received no URB after the refusals began"
is "$(gw_state gw sim1:1-1)" authorized "the device stays authorized"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'iface-refused'
    AND busid = 'sim1:1-1' ORDER BY seq LIMIT 1")" \
    'endpoint 0x[08][12] of interface 0 .*denies' "the refusal names the endpoint and interface"

# ---- ISO: the streaming interface denied while it streams ---------------
start_bg iso "$TC" iso "$GWA" sim1:1-2 --iterations 100000
wait_for -t 10 submits_ge 1-2 40
check $? "the ISO stream runs through the gateway"
n0=$(gw_audit_count gw iface-refused "busid = 'sim1:1-2'")
gwctl gw policy insert 1 'allow serial "CH-A" interface-policy allow { block 01:02:* }'
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'iface-refused'
    AND busid = 'sim1:1-2'" $((n0 + 1)) 10
check $? "ISO URBs refused after the change"
wait_bg iso 30
like "$(cat "$T/iso.log")" 'ISO (IN|OUT): status -32 .*packets 8' \
    "the client got the refusals as ISO replies (-EPIPE), not a broken stream"
unlike "$(cat "$T/iso.log")" 'malformed|closed|short' "... the session was not broken"

# ---- removed again: the device works whole --------------------------------
gwctl gw policy list --json
id=$(printf '%s' "$OUT" | grep -o '"id": *[0-9]*' | head -n 2 | sed 's/.*: *//')
for i in $id; do gwctl gw policy remove "$i"; done
gw_wait_state gw sim1:1-1 authorized 15
run "$TC" script "$GWA" sim1:1-1
is "$RC" 0 "without the interface-policy the storage device works again"
gw_finish gw
