#!/usr/bin/env bash
# Red team: --identity by descriptor hash does not tell apart identities
# that differ only in their strings.  A device's identity (its devices
# row, what is approved) is the descriptor hash AND the serial,
# manufacturer and product strings (store_device_identity: another
# serial at the same busid is another device, its old row goes gone).
# But device_check_identity() compares a hash (prefix) only, and
# `usbgw watch --prompt` answers with the full hash.  An exporter that
# swaps stick A (serial SER-A, the one the operator looked at) for an
# identical-model stick B (serial SER-B) between the question and the
# answer gets B approved: `approve --identity <A's hash>` goes through
# and approves device B, a different identity (id), which the operator
# never saw.  (--identity <A's id> is refused, as it should be.)
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 10

printf '%s\n' 'device 1-9 { type storage; serial "SER-A"; }' >"$T/sim.conf"
printf '%s\n' 'device 1-9 { type storage; serial "SER-B"; }' >"$T/conf.b"
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
B=sim1:1-9
gw_wait_state gw $B pending || { gw_diag gw; bail_out "no pending device"; }
gw_show gw $B
H_A=$(jget "$SHOW" hash)
ID_A=$(jget "$SHOW" id)
is "$(jget "$SHOW" serial)" SER-A "the operator looks at stick A (id $ID_A)"

# the exporter swaps in stick B: same model, another serial
cp "$T/conf.b" "$T/sim.conf" && sim_ctl sim reload
new_identity() {
	[ "$(gw_field gw $B serial)" = SER-B ] && [ "$(gw_state gw $B)" = pending ]
}
wait_for -t 10 -p gw new_identity
check $? "the gateway probed stick B at $B (pending)"
gw_show gw $B
ID_B=$(jget "$SHOW" id)
isnt "$ID_B" "$ID_A" "B is another identity (id $ID_B), with the same descriptor hash"
is "$(jget "$SHOW" hash)" "$H_A" "... (the hash does not cover the strings)"

gwctl gw approve $B --identity "$ID_A"
is "$RC" 1 "approve --identity <A's id> is refused"
gwctl gw approve $B --identity "$H_A"
is "$RC" 1 "approve --identity <A's full hash> is refused too (B stands there now)"
is "$(gw_state gw $B)" pending "... and stick B is still pending"

gw_finish gw
done_testing
