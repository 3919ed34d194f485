#!/usr/bin/env bash
# usbgw end to end against the real usbgwd with simulator exporters: every
# command, human and JSON output, exit codes, shortened busids, the event
# stream and its latency, and refusals in the audit trail.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

EJ=$USBGW_BUILD/e2e-json
need_prog "$USBGWD" "$USBGW" "$SIM" "$EJ" perl socat

jpath() {
	perl -MJSON::PP -0777 -e 'my $d = decode_json(<STDIN>);
	    for my $k (split /\./, $ARGV[0]) {
	        $d = ref $d eq "ARRAY" ? $d->[$k] : $d->{$k} }
	    if (JSON::PP::is_bool($d)) { print $d ? "true" : "false" }
	    elsif (ref $d) { print JSON::PP->new->canonical->encode($d) }
	    else { print defined $d ? $d : "null" }' "$1"
}
likel() {
	if printf '%s\n' "$1" | grep -Eq -- "$2"; then pass "$3"; else
		fail "$3"
		diag "no line matches '$2' in:"
		_diag_text "$1"
	fi
}

sim_start sim || bail_out "simulator did not start"
sim_start sim2 -c /dev/null || bail_out "second simulator did not start"
SOCK=$T/control.sock
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 300ms
probe-timeout = 2s
EOF
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start: $(cat "$(bg_log gw)")"
U=("$USBGW" -s "$SOCK")

# Five simulated devices, pending.
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' list --state pending --json | \
    '$EJ' count | grep -qx 5" || bail_out "devices did not become pending"

# ---- list ---------------------------------------------------------------
run "${U[@]}" list --json
is "$RC" 0 "list --json"
printf '%s' "$OUT" >"$T/list.json"
is "$("$EJ" count <"$T/list.json")" 5 "five devices"
for f in busid exporter exporter_busid state vid pid serial; do
	"$EJ" get "$f" exporter_busid=1-1 <"$T/list.json" >/dev/null
	is "$?" 0 "device object has $f"
done
n=$(perl -MJSON::PP -0777 -e 'my $n = 0; for (@{decode_json(<STDIN>)}) {
    $n++ if $_->{vid} =~ /^[0-9a-f]{4}$/ && $_->{pid} =~ /^[0-9a-f]{4}$/ }
    print $n' <"$T/list.json")
is "$n" 5 "vid and pid are 4 lowercase hex digits"
KBD=$("$EJ" get busid exporter_busid=1-1 <"$T/list.json")
STOR=$("$EJ" get busid exporter_busid=1-2 <"$T/list.json")
is "$("$EJ" get exporter busid="$KBD" <"$T/list.json")" sim "exporter name"
is "$("$EJ" get state busid="$KBD" <"$T/list.json")" pending "state pending"
num_cmp "${#KBD}" -le 31 "busid at most 31 bytes"

run "${U[@]}" list
is "$RC" 0 "list (human)"
is "$(printf '%s\n' "$OUT" | wc -l)" 6 "header and five rows"
likel "$OUT" "^$KBD +pending +[0-9a-f]{4}:[0-9a-f]{4} +sim +1-1 " "keyboard row"
run "${U[@]}" list --state authorized
is "$OUT" "no devices" "--state filter (none authorized)"
run "${U[@]}" list --exporter sim --state pending --json
is "$(printf '%s' "$OUT" | "$EJ" count)" 5 "--exporter and --state filters"
run "${U[@]}" list --exporter nosuch
is "$RC" 3 "unknown exporter: exit 3"

# ---- show / approve / deny / revoke ---------------------------------------
run "${U[@]}" show "$KBD"
is "$RC" 0 "show"
likel "$OUT" "^busid +$KBD\$" "show: busid"
likel "$OUT" '^interfaces +03:01:01' "show: keyboard interface"
run "${U[@]}" show "${KBD%?}"
is "$RC" 3 "a prefix matching several devices: exit 3"
like "$ERR" 'matches' "ambiguity explained"
run "${U[@]}" show nosuch
is "$RC" 3 "unknown busid: exit 3"
run "${U[@]}" approve "$KBD" -m "ticket 1"
is "$RC" 0 "approve"
likel "$OUT" "^approved $KBD \(.*\) once; now authorized\$" "approve output"
run "${U[@]}" list --json
is "$(printf '%s' "$OUT" | "$EJ" get state busid="$KBD")" authorized \
    "list --json shows authorized"
run "${U[@]}" revoke "$KBD" -m "done"
is "$RC" 0 "revoke"
likel "$OUT" "^revoked $KBD .*; now (pending|blocked)\$" "revoke output"
run "${U[@]}" deny "$STOR" --permanent -m "no storage"
is "$RC" 0 "deny --permanent"
likel "$OUT" "^denied $STOR .* permanently; now blocked\$" "deny output"
run "${U[@]}" approve "$KBD" --for 1h
is "$RC" 0 "approve --for 1h"
run "${U[@]}" show "$KBD" --json
is "$(printf '%s' "$OUT" | jpath state)" authorized "authorized for an hour"

# ---- policy -----------------------------------------------------------------
run "${U[@]}" policy add 'allow id 1209:0005'
is "$RC" 0 "policy add"
likel "$OUT" '^added rule [0-9]+ at position [0-9]+$' "policy add output"
run "${U[@]}" policy list --json
n=$(printf '%s' "$OUT" | "$EJ" count rule='allow id 1209:0005')
is "$n" 1 "rule listed"
RID=$(printf '%s' "$OUT" | "$EJ" get id rule='allow id 1209:0005')
run "${U[@]}" policy test 'block with-interface 03:*:*'
is "$RC" 0 "policy test"
likel "$OUT" "^$KBD .* yes +block +blocked\$" "policy test: the keyboard would be blocked"
likel "$OUT" 'nothing was changed$' "policy test changes nothing"
run "${U[@]}" list --json
is "$(printf '%s' "$OUT" | "$EJ" get state busid="$KBD")" authorized \
    "keyboard still authorized after policy test"
run "${U[@]}" policy add 'allow frobnicate'
is "$RC" 2 "malformed rule: exit 2"
run "${U[@]}" policy remove "$RID"
is "$RC" 0 "policy remove"
run "${U[@]}" policy remove 99999
is "$RC" 3 "unknown rule: exit 3"

# ---- exporters -----------------------------------------------------------------
run "${U[@]}" exporter add sim2 "127.0.0.1:$(sim_port sim2)"
is "$RC" 0 "exporter add NAME HOST:PORT"
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' exporter list --json | \
    '$EJ' get name name=sim2 >/dev/null"
run "${U[@]}" exporter list
likel "$OUT" '^NAME +ADDRESS +STATUS' "exporter list header"
likel "$OUT" "^sim2 +127.0.0.1:$(sim_port sim2) " "new exporter listed"
run "${U[@]}" exporter add sim2 "127.0.0.1:$(sim_port sim2)"
num_cmp "$RC" -ne 0 "adding it twice fails"
run "${U[@]}" exporter remove sim2
is "$RC" 0 "exporter remove"
run "${U[@]}" exporter remove sim2
is "$RC" 3 "removing an unknown exporter: exit 3"

# ---- status, audit ---------------------------------------------------------------
run "${U[@]}" status
is "$RC" 0 "status"
likel "$OUT" '^daemon +usbgwd .*, pid [0-9]+, up ' "status: daemon"
likel "$OUT" '^exporters +1 \(1 up, 0 down\)$' "status: exporters"
likel "$OUT" '^devices +5: ' "status: devices"
likel "$OUT" '^you +root \(uid 0\), privilege admin$' "status: caller"
run "${U[@]}" status --json
num_cmp "$(printf '%s' "$OUT" | jpath devices.authorized)" -ge 1 \
    "status --json counts devices per state"
run "${U[@]}" audit --device "$KBD"
is "$RC" 0 "audit --device"
likel "$OUT" "$KBD +approve .*root \(uid 0\) +ticket 1" "audit: approve with actor and message"
run "${U[@]}" audit verify
is "$RC" 0 "audit verify"
likel "$OUT" '^audit trail intact' "audit verify output"

# ---- watch --------------------------------------------------------------------
start_bg watch "$USBGW" -s "$SOCK" watch --json
start_bg watchh "$USBGW" -s "$SOCK" watch
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' status --json | grep -q '\"watchers\": 2'"
t0=$(date +%s%N)
"$USBGW" -s "$SOCK" revoke "$KBD" >/dev/null
wait_for -t 5 grep -q "\"event\":\"revoke\".*$KBD" "$(bg_log watch)"
check $? "watcher got the revoke event"
t1=$(date +%s%N)
diag "revoke command to watcher event: $(( (t1 - t0) / 1000000 )) ms"
num_cmp $(( (t1 - t0) / 1000000 )) -lt 1000 "event delivered promptly (loose)"
wait_log watchh "revoke +$KBD " 5
check $? "human watcher line"
sim_ctl sim plug 1-9 keyboard
wait_for -t 10 grep -q '"event":"pending".*"exporter_busid":"1-9"' "$(bg_log watch)"
check $? "a plugged device is announced pending"

# ---- refusals are audited (root cannot be refused; use nobody) -------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	UGW=$(for_users "$USBGW") || bail_out "cannot copy usbgw"
	cat >>"$T/gw.conf" <<EOF
control-socket-mode = 0666
allow-read = nobody
EOF
	stop_bg gw
	start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
	    -l 127.0.0.1:0 -P "$T/gw.port2" -p "$T/gw.pid"
	wait_file "$T/gw.port2" 10 gw
	run setpriv --reuid=nobody --regid=nogroup --clear-groups \
	    "$UGW" -s "$SOCK" approve "$KBD"
	is "$RC" 1 "nobody (read) cannot approve: exit 1"
	like "$ERR" 'approve requires the approve privilege' "refusal explained"
	run setpriv --reuid=nobody --regid=nogroup --clear-groups \
	    "$UGW" -s "$SOCK" list
	is "$RC" 0 "nobody can list"
	run "${U[@]}" audit --json --limit 10000
	n=$(printf '%s' "$OUT" | "$EJ" count action=refused actor_uid=65534)
	num_cmp "$n" -ge 1 "the refusal is in the audit trail"
else
	skip 5 "needs root and setpriv"
fi
asan_clean "no sanitizer reports"
done_testing
