#!/bin/bash
# The gateway's core promise against a simulated exporter: a device it
# claims is pending, not importable and receives no URB from a vhci host
# (the simulator's PDU log is the witness); a direct import at the
# exporter is refused while the gateway holds it; after `usbgw approve`
# descriptors and a verified 64 MiB bulk loopback pass through the
# gateway; DEVLIST shows only authorized devices (and pending ones with
# show-pending), to the test client and to the stock `usbip list`;
# busids are at most 31 bytes and hashed for a long exporter name.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 65

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)
PDU=$(sim_pdulog sim)

gw_conf gw "exporter sim1 $SIMA" "poll-interval = 500ms" "show-pending = no" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)

on_fail() { gw_diag gw 60; }

# ---- pending ---------------------------------------------------------------
gw_wait_state gw sim1:1-2 pending || on_fail
is "$(gw_state gw sim1:1-2)" pending "storage device claimed and pending"
gw_wait_state gw sim1:1-1 pending
gw_wait_state gw sim1:1-5 pending
is "$(gw_state gw sim1:1-5)" pending "source/sink device pending too"

run "$USBGW" -s "$(gw_sock gw)" list --json
is "$RC" 0 "usbgw list --json"
J=$OUT
is "$(printf '%s' "$J" | "$EJSON" get exporter busid=sim1:1-2)" sim1 "list: exporter"
is "$(printf '%s' "$J" | "$EJSON" get exporter_busid busid=sim1:1-2)" 1-2 "list: exporter_busid"
is "$(printf '%s' "$J" | "$EJSON" get vid busid=sim1:1-2)/$(printf '%s' "$J" |
    "$EJSON" get pid busid=sim1:1-2)" 1209/0002 "list: vid/pid as 4-digit hex"
is "$(printf '%s' "$J" | "$EJSON" get serial busid=sim1:1-2)" SIM-1-2 "list: serial read by the probe"

# The claim: the gateway imported every device itself.
sim_ctl sim list
like "$CTL_OUT" '1-2 storage [^
]* state=imported ' "the simulator shows 1-2 imported (the gateway's claim)"

ok "direct DEVLIST at the exporter" "$TC" list "$SIMA"
is "$(field ndev "$OUT")" 0 "the exporter lists no device while the gateway holds them all"
run "$TC" import "$SIMA" 1-2
is "$RC" 12 "direct import at the exporter: ST_DEV_BUSY (exit 12)"

# The probe is over once the device is pending: every URB that reached
# 1-2 so far is the gateway's own (its seqnums start at 0x10000001).
urbs_12() { grep -c 'cmd=CMD_SUBMIT.* busid=1-2$' "$PDU"; }
vhci_urbs_12() {	# URBs with seqnums below the gateway's probe range
	grep 'cmd=CMD_SUBMIT.* busid=1-2$' "$PDU" |
	    sed -n 's/.* seqnum=\([0-9]*\) .*/\1/p' |
	    awk '$1 < 268435456 { n++ } END { print n + 0 }'
}
n0=$(urbs_12)
num_cmp "$n0" -ge 4 "the gateway's probe read descriptors of 1-2 ($n0 control URBs)"
is "$(vhci_urbs_12)" 0 "no URB from a vhci host reached 1-2 yet"

run "$TC" list "$GWA"
is "$(field ndev "$OUT")" 0 "gateway DEVLIST shows no pending device (show-pending = no)"

run "$TC" import "$GWA" sim1:1-2
is "$RC" 11 "import of a pending device: ST_NA (exit 11)"
is "$(field status "$OUT")" ST_NA "import of a pending device says ST_NA"

# An import with URBs pipelined behind it, in one write: nothing may
# reach the device.
run "$TC" raw "$GWA" --op --expect-close --wait 3000 \
    --hex "$(op_import_hex sim1:1-2)" \
    --hex "$(submit_hex 1 0x00010003 1 0 18 0 $SETUP_GET_DEVICE)" \
    --hex "$(submit_hex 2 0x00010003 1 1 512)"
is "$RC" 0 "pipelined import + URBs for a pending device: connection closed"
like "$OUT" 'raw received=8 data=0111000300000001' "... after an OP_REP_IMPORT with ST_NA only"

run "$TC" import "$GWA" sim1:9-9
is "$RC" 14 "unknown busid: ST_NODEV (exit 14)"

sleep 0.3	# the simulator flushes its log per batch read
is "$(urbs_12)" "$n0" "PDU log: no URB reached 1-2 after the refused imports"
is "$(vhci_urbs_12)" 0 "PDU log: no URB with a vhci seqnum on 1-2"
is "$(grep -c 'cmd=OP_REQ_IMPORT busid=1-2$' "$PDU")" 2 \
    "PDU log: 1-2 imported only by the gateway's claim (and the direct attempt)"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'access-request' AND busid = 'sim1:1-2'" 2
num_cmp "$(gw_audit_count gw access-request "busid = 'sim1:1-2'")" -ge 2 \
    "the refused imports are audited as access requests"

# ---- approve ------------------------------------------------------------------
gwctl gw approve sim1:1-2 -m "integration test"
is "$RC" 0 "usbgw approve sim1:1-2"
like "$OUT" 'now authorized' "approve says the device is now authorized"
is "$(gw_state gw sim1:1-2)" authorized "list --json: authorized"

run "$TC" list "$GWA"
is "$(field ndev "$OUT")" 1 "gateway DEVLIST: only the authorized device"
like "$OUT" $'sim1:1-2: 1209:0002 [^\n]*speed high' "gateway DEVLIST: sim1:1-2 with its identity"
like "$OUT" 'path /usbgw/sim1/1-2' "gateway DEVLIST: the gateway's own path"
unlike "$OUT" 'sim1:1-1|sim1:1-5' "gateway DEVLIST: pending devices are not shown"

if command -v usbip >/dev/null 2>&1; then
	run usbip --tcp-port "$(gw_port gw)" list -r 127.0.0.1
	check "$RC" "stock usbip list -r accepts the gateway's DEVLIST"
	like "$OUT" 'sim1:1-2: .*\(1209:0002\)' "stock usbip list shows sim1:1-2"
	unlike "$OUT" 'sim1:1-1|sim1:1-5' "stock usbip list shows no pending device"
else
	skip 3 "usbip tool not installed"
fi

ok "script through the gateway: descriptors and 64 MiB loopback" \
    "$TC" script "$GWA" sim1:1-2 --bytes 64M || on_fail
like "$OUT" 'ok import sim1:1-2 busnum=[0-9]+ devnum=[0-9]+ speed=high vid=1209 pid=0002' \
    "import through the gateway: its busid and the device's identity"
like "$OUT" 'ok desc-device usb=2.00 vid=1209 pid=0002' "device descriptor through the gateway"
like "$OUT" 'ok desc-config 32 bytes interfaces=1 endpoints=81:bulk,02:bulk' \
    "configuration descriptor through the gateway"
like "$OUT" 'ok desc-string-serial index=3 "SIM-1-2"' "serial string through the gateway"
like "$OUT" 'ok bulk-loop ep_out=02 ep_in=81 urb=65536 inflight=16 verified bytes=67108864 ' \
    "64 MiB bulk loopback through the gateway, data verified"
like "$OUT" 'ok unlink-pending order=unlinked unlink_status=-104' "unlink of a pending URB through the gateway"
like "$OUT" 'ok unlink-completed order=completed unlink_status=0' "unlink of a completed URB through the gateway"
is "$(field failed "$OUT")" 0 "script: no failed step"
sleep 0.3
num_cmp "$(vhci_urbs_12)" -ge 2048 "PDU log: the vhci host's URBs reached 1-2 once approved"

# The vhci host let go: released, reclaimed fresh, authorized again.
gw_wait_state gw sim1:1-2 authorized
is "$(gw_state gw sim1:1-2)" authorized "after the client detached: authorized again"
wait_for -t 10 eval '[ "$(sim_dev_field sim 1-2 imports)" = 2 ]'
is "$(sim_dev_field sim 1-2 state)/$(sim_dev_field sim 1-2 imports)" imported/2 \
    "the exporter reset the device and the gateway claimed it again"

# URBs of an odd size put PDU boundaries (and the devid the relay
# rewrites) at every offset of its reads and buffer chains.
ok "16 MiB loopback in 65521-byte URBs through the gateway" \
    "$TC" script "$GWA" sim1:1-2 --bytes 16M --urb 65521 \
    --skip unlink,unlink-pending,unlink-completed,interrupt,iso || on_fail
like "$OUT" 'ok bulk-loop [^
]*urb=65521 [^
]*verified bytes=16777216 ' "odd-size URBs: data verified"
gw_wait_state gw sim1:1-2 authorized
wait_for -t 10 eval '[ "$(sim_dev_field sim 1-2 imports)" = 3 ]'

# ---- while attached ---------------------------------------------------------------
start_bg hold "$TC" hold "$GWA" sim1:1-2 --ready-file "$T/hold.ready"
wait_file "$T/hold.ready" 10 hold
check $? "a vhci host holds sim1:1-2 through the gateway"
gw_wait_state gw sim1:1-2 attached 5
is "$(gw_state gw sim1:1-2)" attached "list --json: attached"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 12 "second import through the gateway: ST_DEV_BUSY"
run "$TC" import "$SIMA" 1-2
is "$RC" 12 "direct import at the exporter while attached: ST_DEV_BUSY"
stop_bg hold TERM
gw_wait_state gw sim1:1-2 authorized

# ---- show-pending ---------------------------------------------------------------
gw_conf gw "exporter sim1 $SIMA" "poll-interval = 500ms" "show-pending = yes" \
    "attach-pending-wait = 0"
kill -HUP "$(bg_pid gw)"
wait_log gw 'SIGHUP' 5
wait_for -t 5 eval '[ "$("$TC" list "$GWA" | sed -n "s/^RESULT ndev=//p")" = 3 ]'
run "$TC" list "$GWA"
is "$(field ndev "$OUT")" 3 "show-pending = yes (SIGHUP): DEVLIST shows pending devices too"
like "$OUT" 'sim1:1-1: 1209:0001' "... the pending keyboard"
if command -v usbip >/dev/null 2>&1; then
	run usbip --tcp-port "$(gw_port gw)" list -r 127.0.0.1
	like "$OUT" 'sim1:1-5: .*\(1209:0005\)' "stock usbip list shows the pending device too"
else
	skip 1 "usbip tool not installed"
fi
run "$TC" import "$GWA" sim1:1-5
is "$RC" 11 "a pending device shown in DEVLIST is still not importable"

# ---- busids -------------------------------------------------------------------------
long=exporter-with-a-very-long-name1		# 31 bytes, the maximum
cat >"$T/sim2.conf" <<'EOF'
device 1-2 { type storage; serial "LONG-1"; }
EOF
sim_start sim2 -c "$T/sim2.conf" || bail_out "second simulator did not start"
gwctl gw exporter add "$long" "127.0.0.1:$(sim_port sim2)"
is "$RC" 0 "usbgw exporter add with a 31-byte name"
longid() {
	"$USBGW" -s "$(gw_sock gw)" list --json |
	    "$EJSON" get busid exporter="$long" exporter_busid=1-2
}
wait_for -t 15 eval '[ -n "$(longid)" ]'
LB=$(longid)
like "$LB" '^g[0-9a-f]{16}$' "long exporter name: hashed busid ($LB)"
gw_wait_state gw "$LB" pending
is "$(gw_state gw "$LB")" pending "the hashed busid names the device (pending)"
run "$USBGW" -s "$(gw_sock gw)" list --json
too_long=$(printf '%s' "$OUT" | grep -o '"busid": "[^"]*"' | sed 's/.*: "//; s/"$//' |
    awk 'length($0) > 31' | wc -l)
is "$too_long" 0 "every busid the gateway shows is at most 31 bytes"
gwctl gw approve "$LB"
is "$RC" 0 "approve by hashed busid"
run "$TC" import "$GWA" "$LB"
is "$RC" 0 "import by hashed busid through the gateway"
like "$OUT" "ok import $LB " "the import reply carries the same busid"

gw_finish gw
done_testing
