#!/usr/bin/env bash
# usbgw-sim on its own: DEVLIST (checked by the stock `usbip list -r`, an
# independent peer), IMPORT (ok, busy, unknown busid, legacy ST_NA), a
# URB on the imported device, devid mismatch and malformed PDUs, plug and
# unplug over the control socket, SIGHUP reload, config errors, limits,
# the PDU log, clean shutdown.  Raw op requests go through bash's
# /dev/tcp; the test client (usbip-tc), when built, adds a full script
# run against every device type.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

need_prog "$SIM" socat
plan 79

cat >"$T/sim.conf" <<'EOF'
# test devices
device 1-1 { type keyboard; serial "KBD 1"; keys "ab" }
device 1-2 {
	type storage
	vendor 0x1d6b
	product 0x0104
	manufacturer "ACME"
	product_name "Loop Disk"
	serial "MSC-2"
}
device 2-1 { type composite }
device 1-4 { type audio }
device 1-5 { type sourcesink }
EOF

sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
port=$(sim_port sim)
pdu=$(sim_pdulog sim)
like "$port" '^[0-9]+$' "port file holds the chosen port ($port)"
isnt "$port" 0 "port 0 was replaced by a real one"

# ---- DEVLIST, through the stock usbip tool --------------------------------
if command -v usbip >/dev/null 2>&1; then
	run usbip --tcp-port "$port" list -r 127.0.0.1
	check "$RC" "usbip list -r accepts the simulator's DEVLIST"
	like "$OUT" '1-1: .*\(1209:0001\)' "keyboard listed with vid:pid"
	like "$OUT" '1-2: .*\(1d6b:0104\)' "storage listed with its configured vid:pid"
	like "$OUT" '2-1: .*\(1209:0003\)' "composite on bus 2 listed"
	like "$OUT" '03/01/01' "HID boot keyboard interface listed"
	like "$OUT" '08/06/50' "mass-storage interface listed"
	like "$OUT" '01/02/00' "audio streaming interface listed"
	like "$OUT" 'ff/00/00' "source/sink vendor interface listed"
	like "$OUT" '/sys/devices/platform/usbgw-sim/usb1/1-2' "device path listed"
else
	skip 9 "usbip tool not installed"
fi
sim_wait_pdu sim 'cmd=OP_REQ_DEVLIST' 5
check $? "PDU log records the OP_REQ_DEVLIST"

# ---- IMPORT ---------------------------------------------------------------
is "$(usbip_import_status "$port" 9-9)" 4 "unknown busid: ST_NODEV"

usbip_open 5 "$port"
usbip_send_import 5 1-2
rep=$(usbip_read_hex 5 320)
is "${#rep}" 640 "import reply is 320 bytes"
is "${rep:0:16}" 0111000300000000 "OP_REP_IMPORT with ST_OK"
# record at byte 8: busid at 8+256, busnum at 8+288, devnum at 8+292,
# speed at 8+296, vendor/product at 8+300.
is "${rep:528:6}" 312d32 "record busid is 1-2"
busnum=$((16#${rep:592:8}))
devnum=$((16#${rep:600:8}))
is "$busnum" 1 "busnum 1"
is "${rep:608:8}" 00000003 "speed high (3)"
is "${rep:616:8}" 1d6b0104 "idVendor:idProduct in the record"
devid=$(printf '%08x' $(((busnum << 16) | devnum)))

is "$(usbip_import_status "$port" 1-2)" 2 "second import of 1-2: ST_DEV_BUSY"
if command -v usbip >/dev/null 2>&1; then
	run usbip --tcp-port "$port" list -r 127.0.0.1
	unlike "$OUT" '1-2:' "an imported device leaves the DEVLIST"
else
	skip 1 "usbip tool not installed"
fi
sim_ctl sim list
like "$CTL_OUT" '1-2 storage 1d6b:0104 .*state=imported peer=127\.0\.0\.1:' \
    "control list shows 1-2 imported, with the peer"
grep -q "cmd=OP_REQ_IMPORT busid=1-2\$" "$pdu"
check $? "PDU log records the import with its busid"

# GET_DESCRIPTOR(device) on ep 0 of the imported device.
usbip_send_hex 5 "0000000100000001${devid}0000000100000000000000000000001200000000000000000000000080060001000012 00"
ret=$(usbip_read_hex 5 66)
is "${ret:0:8}" 00000003 "URB phase: RET_SUBMIT"
is "${ret:8:8}" 00000001 "RET_SUBMIT carries the request's seqnum"
is "${ret:40:16}" 0000000000000012 "status 0, actual_length 18"
is "${ret:96:4}" 1201 "device descriptor: bLength 18, type 1"
is "${ret:112:8}" 6b1d0401 "device descriptor: idVendor/idProduct (LE)"
sim_wait_pdu sim "cmd=CMD_SUBMIT seqnum=1 devid=0x$devid ep=0 dir=in len=18 setup=8006000100001200 busid=1-2" 5
check $? "PDU log records the CMD_SUBMIT with ep, dir, length and setup"

# Unknown endpoint: a stall, the connection stays.
usbip_send_hex 5 "0000000100000002${devid}00000001000000070000000000000040000000000000000000000000 0000000000000000"
ret=$(usbip_read_hex 5 48)
is "${ret:40:8}" ffffffe0 "URB to an endpoint the device lacks: -EPIPE (stall)"

# ---- unplug closes the import, plug adds a device ---------------------------
sim_ctl sim unplug 1-2
check "$RC" "control: unplug 1-2"
usbip_peer_closed 5 5
check $? "unplugging an imported device closes its URB connection"
usbip_close 5
is "$(usbip_import_status "$port" 1-2)" 4 "unplugged device: ST_NODEV"

sim_ctl sim plug 1-7 storage 'serial="SER 7"' vendor=0xabcd
check "$RC" "control: plug 1-7 storage with key=value options"
sim_ctl sim plug 1-7 keyboard
like "$CTL_OUT" '^error: device 1-7 already exists' "plugging a busid twice is refused"
sim_ctl sim plug 1-8 printer
like "$CTL_OUT" '^error: type: expected keyboard, storage' "unknown type refused with what is expected"
sim_ctl sim frobnicate
like "$CTL_OUT" '^error: unknown command' "unknown control command refused"
if command -v usbip >/dev/null 2>&1; then
	run usbip --tcp-port "$port" list -r 127.0.0.1
	like "$OUT" '1-7: .*\(abcd:0002\)' "plugged device appears in the DEVLIST"
else
	skip 1 "usbip tool not installed"
fi
is "$(usbip_import_status "$port" 1-7)" 0 "plugged device can be imported"
# usbip_import_status closed that connection: the device is free again.
wait_for -t 5 bash -c "printf 'list\n' | socat - UNIX-CONNECT:$(sim_ctlpath sim) | grep -q '^1-7 .*state=available'"
check $? "closing the import connection releases the device"

# ---- faults injected into the exporter's replies ---------------------------
usbip_open 6 "$port"
usbip_send_import 6 1-5
rep=$(usbip_read_hex 6 320)
d15=$(printf '%08x' $(((16#${rep:592:8} << 16) | 16#${rep:600:8})))
getdev() {	# getdev SEQNUM-HEX8: GET_DESCRIPTOR(device), 18 bytes
	usbip_send_hex 6 "00000001$1${d15}00000001000000000000000000000012000000000000000000000000 8006000100001200"
}
sim_ctl sim inject 1-5 seqnum
getdev 00000011
ret=$(usbip_read_hex 6 66)
is "${ret:8:8}" 80000011 "inject seqnum: the next RET_SUBMIT answers a seqnum never sent"
sim_ctl sim inject 1-5 overflow
getdev 00000012
ret=$(usbip_read_hex 6 67)
is "${ret:48:8}" 00000013 "inject overflow: actual_length one more than asked, bytes to match"
sim_ctl sim inject 1-5 raw 0123abcd
is "$(usbip_read_hex 6 4)" 0123abcd "inject raw: the bytes are written as given"
sim_ctl sim inject 1-5 freeze
getdev 00000013
is "$(usbip_read_hex 6 48 1)" "" "inject freeze: no more replies"
sim_ctl sim inject 1-5 bogus
like "$CTL_OUT" '^error: expected seqnum, command' "unknown fault refused"
usbip_close 6

# ---- connection-level errors close one connection only --------------------
usbip_open 6 "$port"
usbip_send_import 6 2-1
rep=$(usbip_read_hex 6 320)
is "${rep:0:16}" 0111000300000000 "import 2-1"
usbip_send_hex 6 "00000001000000050001999900000001000000000000000000000012000000000000000000000000 8006000100001200"
usbip_peer_closed 6 5
check $? "a CMD_SUBMIT with a foreign devid drops the connection"
usbip_close 6
grep -q 'cmd=CMD_SUBMIT seqnum=5 devid=0x00019999' "$pdu"
check $? "... and the PDU log shows what arrived"

usbip_open 6 "$port"
usbip_send_hex 6 "0222800500000000"
usbip_peer_closed 6 5
check $? "an op request with a bad version closes the connection"
usbip_close 6
grep -q 'cmd=MALFORMED why="unsupported USB/IP version"' "$pdu"
check $? "the malformed PDU is in the PDU log with its reason"
is "$(usbip_import_status "$port" 1-1)" 0 "the simulator still serves after malformed input"

# ---- SIGHUP reload ------------------------------------------------------------
sed -i 's/^device 1-4 .*$/device 1-9 { type keyboard }/' "$T/sim.conf"
kill -HUP "$(bg_pid sim)"
wait_for -t 5 grep -q 'reloaded' "$(bg_log sim)"
check $? "SIGHUP reloads the config"
list=$(sim_ctl_list sim)
like "$list" '(^|
)1-9 keyboard ' "reload plugged the new device"
unlike "$list" '(^|
)1-4 ' "reload unplugged the removed device"
like "$list" '(^|
)1-7 storage .*origin=control' "reload keeps devices plugged over the control socket"
echo 'device 1-10 { type nonsense }' >>"$T/sim.conf"
sim_ctl sim reload
wait_for -t 5 grep -q 'has errors; devices unchanged' "$(bg_log sim)"
check $? "a reload of a broken config is refused"
sim_ctl sim list
like "$CTL_OUT" '(^|
)1-9 keyboard ' "... and leaves the devices as they were"
sed -i '$d' "$T/sim.conf"

# ---- the test client, when built: every device type, URB by URB -------------
if [ -x "$TC" ]; then
	for b in 1-1 2-1 1-5 1-7; do
		run "$TC" script "127.0.0.1:$port" "$b" --bytes 2M
		check "$RC" "usbip-tc script on $b passes"
		[ "$RC" = 0 ] || _diag_output
		[ "$b" = 1-1 ] && like "$OUT" \
		    'interrupt-in ep=81 .*data=0000040000000000' \
		    "keyboard's first report presses 'a' (usage 0x04)"
	done
	sim_ctl sim plug 1-4 audio
	run "$TC" script "127.0.0.1:$port" 1-4
	like "$OUT" 'ok iso ' "usbip-tc ISO OUT/IN on the audio device"
else
	skip 5 "usbip-tc not built"
fi

# ---- legacy status, limits, config errors, listen checks -------------------
sim_start old -c "$T/sim.conf" --legacy-status || bail_out "second simulator did not start"
oport=$(sim_port old)
is "$(usbip_import_status "$oport" nope)" 1 "legacy status: unknown busid gets ST_NA"
usbip_open 7 "$oport"
usbip_send_import 7 1-1
rep=$(usbip_read_hex 7 320)
is "$(usbip_import_status "$oport" 1-1)" 1 "legacy status: busy device gets ST_NA"
usbip_close 7
stop_bg old

sim_start lim -c "$T/sim.conf" -m 2 || bail_out "third simulator did not start"
lport=$(sim_port lim)
usbip_open 3 "$lport"
usbip_open 4 "$lport"
sleep 0.2
usbip_open 8 "$lport"
usbip_peer_closed 8 5
check $? "-m 2: a third connection is closed at once"
usbip_close 8
usbip_close 3
usbip_close 4
stop_bg lim

cat >"$T/bad.conf" <<'EOF'
device 1-1 {
	type keyboard
	vendor 0x12345
}
device 1-2 { type storage; fifo 1 }
device 1-3 type storage
EOF
run "$SIM" -c "$T/bad.conf" -l 127.0.0.1:0
isnt "$RC" 0 "a config with errors is refused"
like "$ERR" 'bad\.conf:3: vendor: expected a number 0\.\.0xffff, got "0x12345"' \
    "error names file, line and what was expected"
like "$ERR" 'bad\.conf:5: fifo: expected a size' "every error is reported, not just the first"
like "$ERR" "bad\\.conf:6: expected '\\{' after 'device 1-3'" "syntax error with its line"

run "$SIM" -c "$T/sim.conf" -l 0.0.0.0:0
isnt "$RC" 0 "a non-loopback listen address needs -A"
like "$ERR" 'not a loopback address' "... and says so"

if ip -6 addr show dev lo 2>/dev/null | grep -q '::1/'; then
	rm -f "$T/v6.port"
	start_bg v6 "$SIM" -c "$T/sim.conf" -l '[::1]:0' -p "$T/v6.port"
	wait_file "$T/v6.port" 10
	v6port=$(cat "$T/v6.port" 2>/dev/null)
	if command -v usbip >/dev/null 2>&1; then
		run usbip --tcp-port "$v6port" list -r ::1
		like "$OUT" '1-1: ' "IPv6: listening on [::1], usbip list -r ::1 works"
	else
		run bash -c "exec 3<>/dev/tcp/::1/$v6port"
		check "$RC" "IPv6: listening on [::1]"
	fi
	like "$(cat "$(bg_log v6)")" 'listening on \[::1\]:[0-9]+' "IPv6 listener logged as [addr]:port"
	stop_bg v6
else
	skip 2 "no IPv6 loopback"
fi

run "$SIM" --help
check "$RC" "--help exits 0"
like "$OUT" '-C PATH' "--help documents the control socket"

# ---- shutdown --------------------------------------------------------------
stop_bg sim TERM
is "$RC" 0 "SIGTERM: clean exit"
[ ! -e "$(sim_ctlpath sim)" ]
check $? "control socket removed at exit"

asan_clean "no sanitizer report"
done_testing
