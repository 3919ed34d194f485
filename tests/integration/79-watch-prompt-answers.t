#!/usr/bin/env bash
# usbgw watch --prompt answers with a reason, a duration and a host, as
# usbgw approve takes them (a for 1h to HOST -m REASON, a until TIME, p,
# d -m REASON), and they are what the daemon records (show's approval,
# the audit's reason); a bad answer sends nothing and is asked again.
# At start the dialog asks about the devices ALREADY pending, then
# follows the events, and never asks twice about one device presence:
# ctl-fake -r announces every pending device it lists just before it
# answers the list (the race of a device turning pending between the
# subscription and the list), and each is still asked once.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

EJ=$USBGW_BUILD/e2e-json
CHAT=$USBGW_BUILD/pty-chat
FAKE=$USBGW_BUILD/ctl-fake
need_prog "$USBGWD" "$USBGW" "$SIM" "$EJ" "$CHAT" "$FAKE" socat

cat >"$T/sim.conf" <<EOF
device 1-1 { type keyboard }
device 1-2 { type storage }
device 1-3 { type keyboard }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SOCK=$T/control.sock
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 200ms
EOF
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start"
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' list --state pending --json | \
    '$EJ' count | grep -qx 3" || bail_out "devices did not become pending"
# the dialog asks in the daemon's list order
mapfile -t B < <("$USBGW" -s "$SOCK" list --state pending | awk 'NR > 1 { print $1 }')
is "${#B[@]}" 3 "three devices pending before the dialog starts"
UNTIL=$(( $(date +%s) + 7200 ))
TOMORROW=$(date -d tomorrow +%F)

plug() { echo "sh printf 'plug $1 $2\\n' | socat -t 5 - UNIX-CONNECT:$T/sim.ctl >/dev/null"; }
cat >"$T/chat" <<EOF
expect q or Ctrl-D to quit
expect 3 devices already waiting for approval: asked first
expect   ${B[0]}  1209:0001 usbgw-sim Simulated Keyboard
expect   ${B[1]}  1209:0002 usbgw-sim Simulated Mass Storage
expect   ${B[2]}  1209:0001 usbgw-sim Simulated Keyboard
expect Device waiting for approval since
expect busid       ${B[0]}
expect [q]uit?
send a for 1x
expect nothing sent, answer again
send a for 1h tomorrow
expect unknown word "tomorrow"
send d for 1h
expect deny takes only -m REASON
send a until @$UNTIL for 1h
expect exclude each other
send ?
expect approve for a while
expect [q]uit?
send a for 1h to 127.0.0.1 -m scanner for alice
expect approved ${B[0]} for 1h00m, until
expect for host 127.0.0.1; now authorized
expect busid       ${B[1]}
expect [q]uit?
send a until @$UNTIL to 10.9.8.0/24 -m until the meeting ends
expect approved ${B[1]} until
expect for host 10.9.8.0/24; now authorized
expect busid       ${B[2]}
expect [q]uit?
send s
expect skipped
$(plug 1-9 keyboard)
expect New device waiting for approval:
expect (busid 1-9)
expect [q]uit?
send d -m not on this desk
expect denied
$(plug 1-8 storage)
expect (busid 1-8)
expect [q]uit?
send p --to 127.0.0.1 -m the team's scanner
expect approved sim:1-8 permanently, for host 127.0.0.1; now
$(plug 1-7 keyboard)
expect (busid 1-7)
expect [q]uit?
send a until $TOMORROW 10:00 -m date and time as two words
expect approved sim:1-7 until $TOMORROW 10:00:00
eof
wait
EOF
run -t 60 "$CHAT" -t 15 -o "$T/transcript" -f "$T/chat" \
    "$USBGW" -s "$SOCK" watch --prompt
is "$RC" 0 "the dialog ran to the end and exited 0 on Ctrl-D"
[ "$RC" = 0 ] || { diag "$ERR"; _diag_text "$(tail -n 30 "$T/transcript")"; }
TR=$(cat "$T/transcript")
for b in "${B[@]}" 1-9 1-8 1-7; do
	n=$(printf '%s\n' "$TR" | grep -Ec "^  busid +[^ ]*$b\b")
	is "$n" 1 "asked about $b once"
done

# What the daemon recorded: show's approval and the audit's reasons.
# jget JSON FIELD: a member of an object (e2e-json reads arrays: wrapped)
jget() { printf '[%s]' "$1" | "$EJ" get "$2" 2>/dev/null; }
show_f() { jget "$("$USBGW" -s "$SOCK" show --json "$1")" "$2"; }
appr() { jget "$(show_f "$1" approval)" "$2"; }
is "$(appr "${B[0]}" scope)" for "a for 1h: scope for"
is "$(appr "${B[0]}" to)" 127.0.0.1 "a ... to HOST: the approval's host"
exp0=$(appr "${B[0]}" expires_at)
now=$(date +%s)
num_cmp "$exp0" -gt $((now + 3500)) "for 1h: expires in about an hour (low)"
num_cmp "$exp0" -le $((now + 3600)) "for 1h: expires in about an hour (high)"
is "$(appr "${B[1]}" scope)" until "a until: scope until"
is "$(appr "${B[1]}" expires_at)" "$UNTIL" "a until @T: expires at T"
is "$(appr "${B[1]}" to)" 10.9.8.0/24 "a until ... to CIDR"
is "$(show_f "${B[2]}" state)" pending "skipped: still pending"
is "$(show_f sim:1-9 state)" blocked "d: blocked"
is "$(appr sim:1-7 expires_at)" "$(date -d "$TOMORROW 10:00" +%s)" \
    "a until DATE TIME (two words): expires then (local time)"
# p to HOST writes an allow rule bound to the host: pending until it asks
run "$USBGW" -s "$SOCK" policy list
likel() { printf '%s\n' "$1" | grep -Eq -- "$2" && pass "$3" || { fail "$3"; _diag_text "$1"; }; }
likel "$OUT" 'allow .*serial "SIM-1-8".*to-host 127\.0\.0\.1' \
    "p to HOST: a permanent allow rule for that host"
run "$USBGW" -s "$SOCK" audit --json --limit 1000
printf '%s' "$OUT" >"$T/audit.json"
reason_of() {	# reason_of BUSID ACTION: the reason of its audit row
	"$EJ" get reason busid="$1" action="$2" <"$T/audit.json" 2>/dev/null
}
is "$(reason_of "${B[0]}" approve)" "scanner for alice" "the reason is audited (a)"
is "$(reason_of "${B[1]}" approve)" "until the meeting ends" "the reason is audited (a until)"
is "$(reason_of sim:1-9 deny)" "not on this desk" "the reason is audited (d)"
like "$(reason_of sim:1-8 approve)" "the team's scanner" "the reason is audited (p)"
is "$("$EJ" count busid="${B[2]}" action=approve <"$T/audit.json")/$("$EJ" count \
    busid="${B[2]}" action=deny <"$T/audit.json")" 0/0 "the skipped device: no decision"

# ---- the race: pending in the list and in an event -----------------------
FSOCK=$T/fake.sock
start_bg fake "$FAKE" -r -s "$FSOCK" -p "$T/fake.pid"
wait_file "$T/fake.pid" 10 fake || bail_out "ctl-fake did not start"
wait_for -t 10 test -S "$FSOCK" || bail_out "no control socket"
cat >"$T/chat2" <<EOF
expect 1 device already waiting for approval
expect (busid 1-1)
expect [q]uit?
send s
expect skipped
sh kill -USR1 \$(cat '$T/fake.pid')
expect (busid 9-1)
expect [q]uit?
send a -m new one
expect approved fk:9-1 once
eof
wait
EOF
run -t 60 "$CHAT" -t 15 -o "$T/transcript2" -f "$T/chat2" \
    "$USBGW" -s "$FSOCK" watch --prompt
is "$RC" 0 "race dialog ran to the end"
[ "$RC" = 0 ] || { diag "$ERR"; _diag_text "$(tail -n 30 "$T/transcript2")"; }
is "$(grep -c '(busid 1-1)' "$T/transcript2")" 1 \
    "a device both listed and announced is asked once"
is "$(grep -c '(busid 9-1)' "$T/transcript2")" 1 "the new device asked once"
asan_clean "no sanitizer reports"
done_testing
