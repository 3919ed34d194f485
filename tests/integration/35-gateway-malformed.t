#!/bin/bash
# Malformed PDUs from either side of the relay (the classes of
# PROTOCOL-NOTES.md: unknown command, devid mismatch, endpoint out of
# range or absent, huge or negative transfer_buffer_length, bogus
# number_of_packets, ISO offsets outside the buffer; from the exporter:
# a reply for a seqnum never sent, an unknown command, actual_length
# over the request, a bad ISO descriptor) close only the offending
# session, with an audit row each, while another device's verified
# loopback keeps running through the same gateway.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 dd od
plan 56

cat >"$T/sim.conf" <<'EOF'
device 1-2 { type storage; }
device 1-4 { type audio; }
device 1-5 { type sourcesink; }
device 1-6 { type storage; serial "BYSTANDER"; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
GWP=$(gw_port gw)
for d in 1-2 1-4 1-5 1-6; do
	gw_wait_state gw sim1:$d pending
	gwctl gw approve sim1:$d >/dev/null
done
is "$(gw_state gw sim1:1-2)/$(gw_state gw sim1:1-4)/$(gw_state gw sim1:1-5)/$(gw_state gw sim1:1-6)" \
    authorized/authorized/authorized/authorized "four devices approved"

# The bystander: a verified loopback on another device for the whole test.
# It runs until told to end (SIGUSR2, after the last case): how long the
# cases take depends on the machine's load (prove -j, ASan); BY_SECONDS
# only bounds it.
BY_SECONDS=120
[ "${USBGW_ASAN:-0}" = 1 ] && BY_SECONDS=240
start_bg by "$TC" load "$GWA" sim1:1-6 --dir loop --urb 16K --inflight 4 \
    --seconds $BY_SECONDS --ready-file "$T/by.ready"
by_t0=$SECONDS
wait_file "$T/by.ready" 10 by
check $? "bystander loopback on sim1:1-6 running"

nmal=0
# malformed_row WHO: one more "malformed" audit row for BUSID, naming WHO.
malformed_row() {
	local busid=$1 who=$2 desc=$3
	nmal=$((nmal + 1))
	gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'malformed'" $nmal
	like "$(gw_sql gw "SELECT busid || ' ' || detail FROM audit_log WHERE event = 'malformed' ORDER BY seq DESC LIMIT 1")" \
	    "^$busid malformed PDU from $who" "$desc: audit row"
}

# vhci_case DESC HEX...: import sim1:1-2, send HEX, expect the gateway to
# close the session.  A refused import (the device is still being
# reclaimed after the previous case) is retried.
vhci_case() {
	local desc=$1 i args=()
	shift
	for h in "$@"; do args+=(--hex "$h"); done
	for i in $(seq 1 50); do
		run "$TC" raw "$GWA" sim1:1-2 --expect-close --wait 3000 "${args[@]}"
		[ "$RC" = 11 ] || break
		sleep 0.1
	done
	if ! is "$RC" 0 "$desc: session closed by the gateway"; then
		_diag_output
		gw_diag gw 20
	fi
	malformed_row sim1:1-2 "vhci host" "$desc"
}

# ---- from the vhci host ------------------------------------------------------------
bad_cmd=$(submit_hex 1 DEVID 1 0 18 0 $SETUP_GET_DEVICE)
vhci_case "unknown command (7)" "00000007${bad_cmd:8}"
vhci_case "devid of another device" "$(submit_hex 1 0xdeadbeef 1 0 18 0 $SETUP_GET_DEVICE)"
vhci_case "endpoint 16 (out of range)" "$(submit_hex 1 DEVID 1 16 512)"
vhci_case "endpoint 5 IN (the device has none)" "$(submit_hex 1 DEVID 1 5 512)"
vhci_case "endpoint 1 OUT (only 0x81 IN exists)" "$(submit_hex 1 DEVID 0 1 4)" 00000000
vhci_case "transfer_buffer_length 0x7fffffff" "$(submit_hex 1 DEVID 1 1 0x7fffffff)"
vhci_case "transfer_buffer_length -1" "$(submit_hex 1 DEVID 1 1 -1)"
vhci_case "OUT of 16 MiB + 1" "$(submit_hex 1 DEVID 0 2 $((16 * 1024 * 1024 + 1)))"
vhci_case "number_of_packets 5 on a bulk URB" "$(submit_hex 1 DEVID 1 1 512 5)"
vhci_case "a valid URB, then a duplicate seqnum" \
    "$(submit_hex 7 DEVID 1 1 512)" "$(submit_hex 7 DEVID 1 1 512)"

# ISO cases need alternate setting 1 of the audio device first, answered
# before the ISO URB is sent: done over bash's /dev/tcp.
iso_case() {
	local desc=$1 bad=$2 rep devid i st
	for i in $(seq 1 50); do
		usbip_open 7 "$GWP"
		usbip_send_hex 7 "$(op_import_hex sim1:1-4)"
		rep=$(usbip_read_hex 7 320)
		st=${rep:8:8}
		[ "$st" = 00000000 ] && break
		usbip_close 7
		sleep 0.1
	done
	if ! is "$st" 00000000 "$desc: imported sim1:1-4"; then
		skip 3 "no import"
		return
	fi
	devid=$(( (16#${rep:592:8} << 16) | 16#${rep:600:8} ))
	# SET_INTERFACE(interface 1, alternate 1)
	usbip_send_hex 7 "$(submit_hex 1 "$devid" 0 0 0 0 010b010001000000)"
	rep=$(usbip_read_hex 7 48)
	is "${rep:0:8}/${rep:40:8}" 00000003/00000000 "$desc: SET_INTERFACE(1, 1) answered"
	usbip_send_hex 7 "$("$bad" "$devid")"
	usbip_peer_closed 7 5
	check $? "$desc: session closed by the gateway"
	usbip_close 7
	malformed_row sim1:1-4 "vhci host" "$desc"
}
zeros() { head -c "$1" /dev/zero | od -An -v -tx1 | tr -d ' \n'; }
# ISO OUT, endpoint 1, 2 packets of 192 bytes in a 384-byte buffer, the
# second at offset 300 (300 + 192 > 384).
iso_outside() {
	printf '%s%s%s%s' "$(submit_hex 2 "$1" 0 1 384 2)" "$(zeros 384)" \
	    "$(iso_desc_hex 0 192)" "$(iso_desc_hex 300 192)"
}
iso_case "ISO packet outside the buffer" iso_outside
iso_many() { submit_hex 2 "$1" 1 2 192 5000; }
iso_case "ISO URB with 5000 packets" iso_many

# ---- from the exporter -------------------------------------------------------------
# exp_case DESC BUSID FAULT TC-ARGS...: a client moves data on BUSID, the
# simulator is told to corrupt its next reply; the client must be cut off.
exp_case() {
	local desc=$1 busid=$2 fault=$3 i
	shift 3
	for i in $(seq 1 50); do
		rm -f "$T/victim.ready"
		start_bg victim "$TC" "$@" --expect-disconnect \
		    --ready-file "$T/victim.ready"
		wait_file "$T/victim.ready" 5 victim && break
		wait_bg victim 5
		sleep 0.1
	done
	sim_ctl sim inject "${busid#sim1:}" "$fault"
	is "$RC" 0 "$desc: fault injected"
	wait_bg victim 15
	if ! is "$RC" 0 "$desc: the client was cut off"; then
		_diag_text "$(cat "$(bg_log victim)")"
		gw_diag gw 20
	fi
	malformed_row "$busid" exporter "$desc"
}
exp_case "RET_SUBMIT for a seqnum never sent" sim1:1-5 seqnum \
    load "$GWA" sim1:1-5 --dir in --seconds 60
exp_case "unknown reply command" sim1:1-5 command \
    load "$GWA" sim1:1-5 --dir in --seconds 60
exp_case "actual_length over the request" sim1:1-5 overflow \
    load "$GWA" sim1:1-5 --dir in --seconds 60
exp_case "ISO actual_length over the packet length" sim1:1-4 iso \
    iso "$GWA" sim1:1-4 --packets 8 --iterations 1000000

# ---- everyone else is fine -----------------------------------------------------------
if bg_alive by; then
	pass "the bystander loopback survived every malformed session ($((SECONDS - by_t0)) s so far)"
else
	fail "the bystander loopback survived every malformed session"
fi
num_cmp $((SECONDS - by_t0)) -lt $BY_SECONDS "all cases ran within the bystander's run"
kill -USR2 "$(bg_pid by)" 2>/dev/null	# the end of its run
wait_bg by 30
is "$RC" 0 "bystander: exit 0 (no disconnect, no data error)"
BY_OUT=$(cat "$(bg_log by)")
num_cmp "$(field mb_per_s "$BY_OUT")" -gt 0 "bystander throughput $(field mb_per_s "$BY_OUT") MB/s"
is "$(field verified "$BY_OUT")" yes "bystander data verified"
for d in 1-2 1-4 1-5; do gw_wait_state gw sim1:$d authorized 10; done
ok "the storage device works after its malformed sessions" \
    "$TC" load "$GWA" sim1:1-2 --dir loop --bytes 8M
ok "the source/sink device works after the exporter's faults" \
    "$TC" load "$GWA" sim1:1-5 --dir in --bytes 8M
ok "the audio device works after the ISO faults" \
    "$TC" iso "$GWA" sim1:1-4 --packets 8 --iterations 20
is "$(gw_audit_count gw malformed)" "$nmal" "exactly one malformed row per case ($nmal)"
is "$(gw_sql gw "SELECT busid || ': ' || detail FROM audit_log WHERE event = 'malformed' ORDER BY seq")" \
"sim1:1-2: malformed PDU from vhci host: unknown URB command
sim1:1-2: malformed PDU from vhci host: devid does not name the imported device
sim1:1-2: malformed PDU from vhci host: endpoint out of range 0..15
sim1:1-2: malformed PDU from vhci host: request to an endpoint the device does not have in its current configuration and alternate setting
sim1:1-2: malformed PDU from vhci host: request to an endpoint the device does not have in its current configuration and alternate setting
sim1:1-2: malformed PDU from vhci host: transfer_buffer_length exceeds USBIP_MAX_TRANSFER
sim1:1-2: malformed PDU from vhci host: negative transfer_buffer_length
sim1:1-2: malformed PDU from vhci host: transfer_buffer_length exceeds USBIP_MAX_TRANSFER
sim1:1-2: malformed PDU from vhci host: number_of_packets on a non-ISO URB
sim1:1-2: malformed PDU from vhci host: seqnum already in flight
sim1:1-4: malformed PDU from vhci host: ISO packet outside the transfer buffer
sim1:1-4: malformed PDU from vhci host: number_of_packets out of range
sim1:1-5: malformed PDU from exporter: RET_SUBMIT for a seqnum not in flight
sim1:1-5: malformed PDU from exporter: unknown URB command
sim1:1-5: malformed PDU from exporter: actual_length exceeds the requested length
sim1:1-4: malformed PDU from exporter: ISO actual_length exceeds packet length" \
    "each session was closed for its own fault"
ok "audit verify" "$USBGW" -s "$(gw_sock gw)" audit verify

gw_finish gw
done_testing
