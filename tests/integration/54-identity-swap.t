#!/usr/bin/env bash
# A decision names the identity it is about.  The exporter swaps the
# device at a busid for another one (the simulator's reload: the old
# device unplugged, a different one plugged at the same busid, with no
# `gone` in between): approve/deny/revoke --identity of the old device
# (its id, or a prefix of its descriptor hash) are refused naming the
# device now there, and change nothing; the bare commands act on the new
# device and say which identity they hit.  In `usbgw watch --prompt` a
# question about a device whose identity then changes is withdrawn and
# asked anew about the new device, and the answer goes to the new one.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

CHAT=$USBGW_BUILD/pty-chat
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" "$CHAT" socat sqlite3
plan 31

base='device 1-1 { type keyboard; keys ""; }'
dev_a='device 1-9 { type keyboard; keys ""; product_name "Keyboard A"; serial "SWAP-A"; }'
dev_b='device 1-9 { type storage; product_name "Storage B"; serial "SWAP-B"; }'
prompt_a='device 1-8 { type keyboard; keys ""; product 0x0018; product_name "Prompt Keyboard"; serial "PROMPT-A"; }'
prompt_b='device 1-8 { type storage; product 0x0028; product_name "Prompt Storage"; serial "PROMPT-B"; }'
printf '%s\n' "$base" "$dev_a" >"$T/sim.conf"
printf '%s\n' "$base" "$dev_b" >"$T/conf.b"
printf '%s\n' "$base" "$dev_b" "$prompt_a" >"$T/conf.pa"
printf '%s\n' "$base" "$dev_b" "$prompt_b" >"$T/conf.pb"

sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
B=sim1:1-9
gw_wait_state gw $B pending || { gw_diag gw; bail_out "no pending device"; }

# swap_to FILE: the simulator's configuration becomes FILE (a reload).
swap_to() {
	cp "$1" "$T/sim.conf" && sim_ctl sim reload
}

gw_show gw $B
H_A=$(jget "$SHOW" hash)
ID_A=$(jget "$SHOW" id)
like "$H_A/$ID_A" '^[0-9a-f]{64}/[0-9]+$' "device A at $B: hash ${H_A:0:12}..., id $ID_A"

# ---- the swap -------------------------------------------------------------------
swap_to "$T/conf.b"
is "$RC" 0 "the simulator swaps the device at 1-9 (reload)"
new_identity() {
	local h
	h=$(gw_field gw $B hash)
	[ -n "$h" ] && [ "$h" != "$H_A" ] && [ "$(gw_state gw $B)" = pending ]
}
wait_for -t 10 -p gw new_identity
check $? "the gateway probed the new device at $B (pending)"
gw_show gw $B
H_B=$(jget "$SHOW" hash)
ID_B=$(jget "$SHOW" id)
like "$H_B/$ID_B" '^[0-9a-f]{64}/[0-9]+$' "device B at $B: hash ${H_B:0:12}..., id $ID_B"
isnt "$H_B" "$H_A" "... a different identity"
# the refusal must name the device now at the busid
names_b="${H_B:0:8}|Storage B|SWAP-B|1209:0002|(id|identity|device)[ =:#]*$ID_B([^0-9]|\$)"

gwctl gw approve $B --identity "${H_A:0:12}"
is "$RC" 1 "approve --identity <A's hash prefix> is refused (exit 1)"
like "$ERR" "$names_b" "... naming the device now at $B"
is "$(gw_state gw $B)" pending "... B is not authorized"
gwctl gw deny $B --identity "$ID_A"
is "$RC" 1 "deny --identity <A's id> is refused (exit 1)"
like "$ERR" "$names_b" "... naming the device now at $B"
is "$(gw_state gw $B)" pending "... B is not blocked"
is "$(gw_sql gw "SELECT count(*) FROM approvals WHERE device_id IN
    (${ID_A:-0}, ${ID_B:-0})")" 0 "no decision was recorded for A or B"

gwctl gw approve $B
is "$RC" 0 "a bare approve goes through"
like "$OUT" "${H_B:0:8}|(id|identity|device)[ =:#]*$ID_B([^0-9]|\$)" \
    "... and its output names the identity it hit (B)"
is "$(gw_state gw $B)" authorized "B is authorized"
gwctl gw revoke $B --identity "${H_A:0:12}"
is "$RC" 1 "revoke --identity <A's hash prefix> is refused (exit 1)"
is "$(gw_state gw $B)" authorized "... B stays authorized"
I_B=$(gw_field gw $B identity)
gwctl gw revoke $B --identity "${I_B:0:8}" --json
is "$RC" 0 "revoke --identity <B's 8-digit identity prefix> goes through"
is "$(jget "$OUT" hash)/$(jget "$OUT" id)" "$H_B/$ID_B" "... its reply is device B (hash, id)"
is "$(gw_state gw $B)" pending "B is pending again"
gwctl gw approve $B --identity "$ID_B"
is "$RC" 0 "approve --identity <B's id> goes through"
is "$(gw_state gw $B)" authorized "... B is authorized"

# ---- watch --prompt: a question about an identity that changes --------------------
CTL=$(sim_ctlpath sim)
reload_sh() {	# a chat line: the simulator's configuration becomes $1
	echo "sh cp '$1' '$T/sim.conf' && printf 'reload\\n' | socat -t 5 - UNIX-CONNECT:'$CTL' >/dev/null"
}
cat >"$T/chat" <<EOF
expect q or Ctrl-D to quit
expect 1 device already waiting for approval
expect [q]uit?
send s
expect skipped
$(reload_sh "$T/conf.pa")
expect Prompt Keyboard
expect (busid 1-8)
expect [q]uit?
$(reload_sh "$T/conf.pb")
expect Prompt Storage
expect [q]uit?
send d
expect denied
eof
wait
EOF
run -t 60 "$CHAT" -t 10 -o "$T/transcript" -f "$T/chat" \
    "$USBGW" -s "$(gw_sock gw)" watch --prompt
is "$RC" 0 "prompt: the question was asked anew about the new device and answered"
[ "$RC" = 0 ] || { diag "$ERR"; _diag_text "$(cat "$T/transcript" 2>/dev/null)"; }
tr=$(cat "$T/transcript" 2>/dev/null)
like "$tr" $'Prompt Keyboard[^\a]*Prompt Storage[^\a]*\\[q\\]uit\\?' \
    "prompt: the new identity (Prompt Storage) is shown after the old one"
P=sim1:1-8
gw_show gw $P
PID_B=$(jget "$SHOW" id)
is "$(jget "$SHOW" product)/$(gw_state gw $P)" "Prompt Storage/blocked" \
    "the answer (d) went to the new device: blocked"
PID_A=$(gw_sql gw "SELECT id FROM devices WHERE busid = '$P' AND
    product = 'Prompt Keyboard'")
like "$PID_A" '^[0-9]+$' "the old device's row (id $PID_A)"
is "$(gw_sql gw "SELECT count(*) FROM approvals WHERE device_id = ${PID_A:-0}")" 0 \
    "no decision was recorded for the old device"
is "$(gw_sql gw "SELECT count(*) FROM approvals WHERE device_id = ${PID_B:-0} AND
    decision = 'deny'")" 1 "the denial is recorded for the new device"

gw_finish gw
done_testing
