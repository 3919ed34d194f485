#!/bin/bash
# Simulator + test client: the op phase (list, import, busy, unknown),
# a scripted URB sequence on every simulated device type, a verified
# 64 MiB bulk loopback, unlink in both orders, ISO, unplug while
# imported, malformed input, and the load and latency modes.
. "$(dirname "$0")/../lib/common.sh"

need_prog "$SIM" "$TC" socat
plan 95

start_sim() {		# start_sim NAME [ARGS...]: sets PORT_<NAME>
	local name=$1
	shift
	start_bg "$name" "$SIM" -l 127.0.0.1:0 -p "$T/$name.port" "$@"
	wait_file "$T/$name.port" 10 "$name" || bail_out "$name did not start: $(cat "$T/$name.log")"
	printf -v "PORT_$name" '%s' "$(cat "$T/$name.port")"
}

simctl() { printf '%s\n' "$*" | socat -t 5 - "UNIX-CONNECT:$T/sim.ctl"; }

# Explicit devices, so the test does not depend on the built-in set.
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys "usbgw\n"; }
device 1-2 { type storage; }
device 1-3 { type composite; }
device 1-4 { type audio; }
device 1-5 { type sourcesink; }
device 1-6 { type keyboard; keys ""; product_name "Idle Keyboard"; }
EOF
start_sim sim -c "$T/sim.conf" -C "$T/sim.ctl" -L "$T/pdu.log"
A=127.0.0.1:$PORT_sim

# ---- op phase -------------------------------------------------------------
ok "list succeeds" "$TC" list "$A"
is "$(field ndev "$OUT")" 6 "list shows the six configured devices"
like "$OUT" $'1-2: 1209:0002 [^\n]*speed high busnum 1 devnum 3' "storage device record"
like "$OUT" $'1-2: [^\n]*\n[^\n]*path [^\n]*\n    interface 0: 08/06/50' "storage interface 08/06/50"
like "$OUT" $'1-3: [^\n]*\n[^\n]*\n    interface 0: 03/01/01\n    interface 1: 08/06/50' "composite: HID and mass storage"

ok "list --json succeeds" "$TC" list "$A" --json
like "$OUT" '"busid": "1-5"' "JSON has busids"
like "$OUT" '"vid": "1209",' "JSON vid as 4-digit hex string"
unlike "$OUT" 'RESULT' "JSON output is JSON only"

run "$TC" import "$A" 1-2
is "$RC" 0 "import of a free device exits 0"
is "$(field status "$OUT")" ST_OK "import status ST_OK"
like "$OUT" 'busnum=1 devnum=3 speed=high vid=1209 pid=0002' "import prints busnum/devnum/speed/ids"

run "$TC" import "$A" 9-9
is "$RC" 14 "unknown busid: exit 14 (10 + ST_NODEV)"
is "$(field status "$OUT")" ST_NODEV "unknown busid: ST_NODEV"

run "$TC" import "$A" 1-2 --json
like "$OUT" '"status": "ST_OK"' "import --json"

# ---- busy, unplug while imported --------------------------------------------
start_bg hold "$TC" hold "$A" 1-2 --expect-disconnect --within 1000 --ready-file "$T/hold.ready"
wait_file "$T/hold.ready" 10
check $? "hold: device imported"
run "$TC" import "$A" 1-2
is "$RC" 12 "second import of a held device: exit 12 (ST_DEV_BUSY)"
like "$OUT" 'ST_DEV_BUSY' "second import says ST_DEV_BUSY"
run "$TC" list "$A"
is "$(field ndev "$OUT")" 5 "an imported device leaves the device list (as usbipd)"

kill -USR1 "$(bg_pid hold)"
is "$(simctl unplug 1-2)" ok "simulator unplugs 1-2"
wait_bg hold 10
is "$RC" 0 "hold sees the disconnect (--expect-disconnect exits 0)"
HOLD_OUT=$(cat "$(bg_log hold)")
like "$HOLD_OUT" 'DISCONNECT kind=(eof|reset)' "hold prints DISCONNECT"
ms=$(printf '%s\n' "$HOLD_OUT" | sed -n 's/.*since_marker_ms=\([0-9.]*\).*/\1/p')
num_cmp "${ms:-9999}" -lt 1000 "disconnect seen within 1 s of the unplug ($ms ms)"

run "$TC" import "$A" 1-2
is "$RC" 14 "unplugged device: ST_NODEV"
is "$(simctl plug 1-2 storage)" ok "simulator plugs 1-2 back"
ok "re-plugged device imports" "$TC" import "$A" 1-2

# Unplug during a running transfer (the gateway's revoke test does the
# same through the gateway): the client sees the disconnect in < 1 s.
start_bg load "$TC" load "$A" 1-2 --dir loop --seconds 60 --expect-disconnect \
    --within 1000 --ready-file "$T/load.ready"
wait_file "$T/load.ready" 10 load
check $? "load: data flowing"
kill -USR1 "$(bg_pid load)"
is "$(simctl unplug 1-2)" ok "unplug during the transfer"
wait_bg load 10
is "$RC" 0 "load sees the disconnect within 1 s of the marker"
like "$(cat "$(bg_log load)")" 'RESULT dir=loop .* verified=yes' "load: figures so far printed, data verified"
is "$(simctl plug 1-2 storage)" ok "simulator plugs 1-2 back again"
run "$TC" hold "$A" 1-2 --seconds 0.3 --expect-disconnect
is "$RC" 1 "--expect-disconnect without a disconnect exits 1"

# ---- scripted URB sequences ---------------------------------------------------
ok "script: keyboard" "$TC" script "$A" 1-1
like "$OUT" 'ok desc-device usb=1.10 vid=1209 pid=0001' "keyboard: device descriptor matches the import"
like "$OUT" 'ok desc-config 34 bytes interfaces=1 endpoints=81:int' "keyboard: configuration with one interrupt IN"
like "$OUT" 'ok desc-langs langids=1 first=0409' "keyboard: language table"
like "$OUT" 'ok desc-string-product index=2 "Simulated Keyboard"' "keyboard: product string"
like "$OUT" 'ok desc-string-serial index=3 "SIM-1-1"' "keyboard: serial string"
like "$OUT" 'ok set-config value=1' "keyboard: SET_CONFIGURATION"
like "$OUT" 'ok interrupt-in ep=81 report=yes status=0 actual=8 data=0000180000000000' \
    "keyboard: first report is the key 'u' (usage 0x18)"
like "$OUT" 'ok unlink-interrupt order=(unlinked|completed)' "keyboard: unlink of an interrupt IN"
is "$(field failed "$OUT")" 0 "keyboard: no failed step"

ok "script: mass storage, 64 MiB loopback" "$TC" script "$A" 1-2 --bytes 64M
like "$OUT" 'ok bulk-loop ep_out=02 ep_in=81 urb=65536 inflight=16 verified bytes=67108864 ' \
    "storage: 64 MiB bulk loopback, data verified"
like "$OUT" 'ok unlink-pending order=unlinked unlink_status=-104' \
    "unlink of a pending URB: RET_UNLINK -ECONNRESET, no RET_SUBMIT"
like "$OUT" 'ok unlink-completed order=completed unlink_status=0' \
    "unlink of a completed URB: RET_SUBMIT, then RET_UNLINK 0"
like "$OUT" 'ok clear-halt ep=81' "storage: CLEAR_FEATURE(ENDPOINT_HALT)"
is "$(field failed "$OUT")" 0 "storage: no failed step"

ok "script: odd URB size, many in flight" "$TC" script "$A" 1-2 --bytes 9M --urb 65000 --inflight 64 --skip unlink
like "$OUT" 'ok bulk-loop .*urb=65000 inflight=64 verified bytes=9437184 ' "odd-sized URBs verified"
ok "script: 1 MiB URBs" "$TC" script "$A" 1-2 --bytes 16M --urb 1M --inflight 4 --skip unlink
like "$OUT" 'verified bytes=16777216 ' "1 MiB URBs verified"

ok "script: composite" "$TC" script "$A" 1-3 --bytes 8M
like "$OUT" 'ok desc-config 57 bytes interfaces=2 endpoints=81:int,82:bulk,02:bulk' "composite: both interfaces' endpoints"
like "$OUT" 'ok bulk-loop ep_out=02 ep_in=82 .*verified bytes=8388608 ' "composite: loopback on its storage interface"
like "$OUT" 'ok interrupt-in ep=81 report=' "composite: interrupt IN on its HID interface"
is "$(field failed "$OUT")" 0 "composite: no failed step"

ok "script: idle keyboard" "$TC" script "$A" 1-6
like "$OUT" 'ok interrupt-in ep=81 report=no' "idle keyboard: the read pends"
like "$OUT" 'ok unlink-interrupt order=unlinked unlink_status=-104' "idle keyboard: pending interrupt IN unlinked"

ok "script: ISO device" "$TC" script "$A" 1-4
like "$OUT" 'ok set-interface interface=1 alt=1' "ISO: alternate setting 1 selected"
like "$OUT" 'ok iso ep_out=01 ep_in=82 packets=8 urbs=8 out=6144 in=6144 verified=6144' \
    "ISO: OUT packets come back on ISO IN"

ok "script: source/sink" "$TC" script "$A" 1-5
is "$(field failed "$OUT")" 0 "source/sink: no failed step"

ok "iso command" "$TC" iso "$A" 1-4 --packets 32 --iterations 20
is "$(field verified "$OUT")" 122880 "iso: 20 x 32 packets verified"

# ---- load and latency ----------------------------------------------------------
for dir in in out; do
	ok "load --dir $dir" "$TC" load "$A" 1-5 --dir $dir --seconds 1
	num_cmp "$(field mb_per_s "$OUT")" -gt 0 "load --dir $dir: MB/s figure ($(field mb_per_s "$OUT"))"
	num_cmp "$(field urbs_per_s "$OUT")" -gt 0 "load --dir $dir: URBs/s figure"
done
ok "load --dir loop" "$TC" load "$A" 1-2 --dir loop --seconds 1
is "$(field verified "$OUT")" yes "load --dir loop: data verified"
is "$(field bytes_out "$OUT")" "$(field bytes_in "$OUT")" "load --dir loop: all bytes came back"
ok "load --bytes with small URBs" "$TC" load "$A" 1-2 --dir loop --bytes 4M --urb 512 --inflight 32
is "$(field bytes "$OUT")" 4194304 "load --bytes moves exactly that many bytes"

ok "load --dir in --verify: g_zero source pattern, (i % wMaxPacketSize) % 63" \
    "$TC" load "$A" 1-5 --dir in --bytes 1M --verify
is "$(field verified "$OUT")" yes "source data verified"

ok "latency: control" "$TC" latency "$A" 1-5 --kind control --iterations 300
med=$(field median_us "$OUT")
num_cmp "$med" -gt 0 "latency: median round trip ($med us)"
num_cmp "$(field p99_us "$OUT")" -ge "$med" "latency: p99 >= median"
ok "latency: loop" "$TC" latency "$A" 1-2 --kind loop --size 64 --iterations 300
is "$(field n "$OUT")" 600 "latency loop: OUT and IN timed separately"

# ---- malformed input, exit codes -------------------------------------------------
run "$TC" raw "$A" 1-2 --expect-close \
    --hex '00000001 00000001 DEVID 00000001 00000010 00000000 00000040 00000000 00000000 00000000 0000000000000000'
is "$RC" 0 "CMD_SUBMIT to ep 16: the simulator closes the session"
ok "device importable again afterwards" "$TC" import "$A" 1-2
run "$TC" raw "$A" --op --expect-close --hex '0112 8005 00000000'
is "$RC" 0 "op request with version 0x0112: closed"
run "$TC" raw "$A" 1-2 --expect-open --wait 300 \
    --hex '00000001 00000007 DEVID 00000001 00000000 00000000 00000002 00000000 00000000 00000000 8000000000000200'
like "$OUT" 'received=50 data=00000003000000070000000000000000000000000000000000000002' \
    "raw GET_STATUS: RET_SUBMIT seqnum 7, actual_length 2"

run "$TC" list 127.0.0.1:1
is "$RC" 3 "connection refused: exit 3"
run "$TC" import "$A" 'bad busid!'
is "$RC" 2 "bad busid: usage error, exit 2"

start_sim old -S
run "$TC" import "127.0.0.1:$PORT_old" 9-9
is "$RC" 11 "legacy exporter: unknown busid gets ST_NA (exit 11)"

grep -q 'cmd=CMD_UNLINK' "$T/pdu.log"
check $? "the simulator's PDU log shows the unlinks"

stop_bg sim
is "$RC" 0 "simulator exits cleanly on SIGTERM"
asan_clean "no sanitizer report"
done_testing
