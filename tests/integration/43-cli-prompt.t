#!/usr/bin/env bash
# usbgw watch --prompt, the pairing dialog, driven through a pseudo-
# terminal against the real daemon: the devices already pending are
# asked first (and skipped); a device plugged at the simulator is
# asked about and approved; another denied; an access request from a vhci
# host (the test client) is shown with the requesting host and skipped; a
# question another operator answers meanwhile is withdrawn; Ctrl-D quits.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

EJ=$USBGW_BUILD/e2e-json
CHAT=$USBGW_BUILD/pty-chat
need_prog "$USBGWD" "$USBGW" "$SIM" "$TC" "$EJ" "$CHAT" socat

sim_start sim || bail_out "simulator did not start"
SOCK=$T/control.sock
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 200ms
EOF
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start"
GWPORT=$(cat "$T/gw.port")
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' list --state pending --json | \
    '$EJ' count | grep -qx 5" || bail_out "devices did not become pending"
KBD=$("$USBGW" -s "$SOCK" list --json | "$EJ" get busid exporter_busid=1-1)

run "$USBGW" -s "$SOCK" watch --prompt
is "$RC" 2 "--prompt without a terminal: usage error"
like "$ERR" 'needs a terminal' "explained"

# busid of the device the simulator has as $1, once the gateway lists it.
cat >"$T/busid.sh" <<EOF
#!/bin/sh
for i in \$(seq 50); do
	b=\$('$USBGW' -s '$SOCK' list --json | '$EJ' get busid exporter_busid=\$1) &&
	    { echo "\$b"; exit 0; }
	sleep 0.1
done
exit 1
EOF
chmod +x "$T/busid.sh"
plug() { echo "sh printf 'plug $1 $2\\n' | socat -t 5 - UNIX-CONNECT:$T/sim.ctl >/dev/null"; }

# the five devices pending before it starts are asked first: skipped
cat >"$T/chat" <<EOF
expect q or Ctrl-D to quit
expect 5 devices already waiting for approval: asked first
$(for i in 1 2 3 4 5; do printf 'expect [q]uit?\nsend s\nexpect skipped\n'; done)
$(plug 1-9 keyboard)
expect New device waiting for approval:
expect (busid 1-9)
expect [q]uit?
send a
expect approved
expect once; now authorized
$(plug 1-8 storage)
expect (busid 1-8)
expect [q]uit?
send maybe
expect please answer a, p, d, s or q
send d
expect denied
sh '$TC' import 127.0.0.1:$GWPORT '$KBD' >/dev/null 2>&1
expect Access request for a pending device:
expect requested   by 127.0.0.1
expect [q]uit?
send s
expect skipped
$(plug 1-7 keyboard)
expect (busid 1-7)
expect [q]uit?
sh '$USBGW' -s '$SOCK' approve "\$('$T/busid.sh' 1-7)" -m elsewhere >/dev/null
expect approve by
expect meanwhile
eof
wait
EOF
run -t 60 "$CHAT" -t 15 -o "$T/transcript" -f "$T/chat" \
    "$USBGW" -s "$SOCK" watch --prompt
is "$RC" 0 "pairing dialog ran to the end and exited 0 on Ctrl-D"
[ "$RC" = 0 ] || { diag "$ERR"; _diag_text "$(cat "$T/transcript")"; }
like "$(cat "$T/transcript")" 'interfaces  03:01:01 \(HID keyboard\)' \
    "the question names a keyboard as such"

run "$USBGW" -s "$SOCK" list --json
printf '%s' "$OUT" >"$T/list.json"
is "$("$EJ" get state exporter_busid=1-9 <"$T/list.json")" authorized \
    "answered a: authorized"
is "$("$EJ" get state exporter_busid=1-8 <"$T/list.json")" blocked \
    "answered d: blocked"
is "$("$EJ" get state exporter_busid=1-1 <"$T/list.json")" pending \
    "skipped access request: still pending"
is "$("$EJ" get state exporter_busid=1-7 <"$T/list.json")" authorized \
    "approved elsewhere"
run "$USBGW" -s "$SOCK" audit --json --limit 10000
n=$(printf '%s' "$OUT" | "$EJ" count action=approve reason='answered at usbgw watch --prompt')
[ "$n" = 1 ] || n=$(printf '%s' "$OUT" | grep -c 'answered at usbgw watch --prompt')
num_cmp "$n" -ge 1 "the prompt's answer is audited with its message"

# q quits too, with nothing pending.
printf 'expect q or Ctrl-D to quit\nsend q\nwait\n' >"$T/chat2"
run "$CHAT" -t 10 -f "$T/chat2" "$USBGW" -s "$SOCK" watch --prompt
is "$RC" 0 "q quits"
asan_clean "no sanitizer reports"
done_testing
