#!/usr/bin/env bash
# tls-listen on the wire: tshark, told to decode the TLS port as USB/IP,
# finds no USB/IP PDU there and no busid or descriptor string in the
# clear, while it does find TLS 1.3 records; the same exchange on the
# plaintext port is decoded as USB/IP (the check can fail).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$ISSUE" tshark
plan 11

cat >"$T/sim.conf" <<'EOF'
device 1-2 { type storage; serial "SECRET-SERIAL-42"; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP"
gw_start gw || bail_out "usbgwd did not start"
GWP=$(gw_port gw)
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
gw_wait_state gw sim1:1-2 pending || bail_out "sim1:1-2 not pending"
"$ISSUE" "$T/tls" "$T/vdi01" vdi01 >/dev/null || bail_out "no certificate"
gwctl gw approve sim1:1-2

CAP=$T/gw.pcapng
start_bg tshark tshark -n -i lo -f "tcp port $TLSP or tcp port $GWP" -w "$CAP"
captured() {
	(exec 3<>"/dev/tcp/127.0.0.1/$GWP") 2>/dev/null
	tshark -n -r "$CAP" -c 1 2>/dev/null | grep -q .
}
if ! wait_log tshark 'Capturing on' 20 || ! wait_for -t 20 -p tshark captured; then
	skip_all "tshark cannot capture on lo: $(tail -n 3 "$(bg_log tshark)" | tr '\n' ' ')"
fi

ok "the URB script over TLS" "$TC" script "127.0.0.1:$TLSP" sim1:1-2 --bytes 256K \
    --urb 8K --inflight 1 --skip unlink-completed --tls-dir "$T/vdi01"
ok "the same over plaintext" "$TC" script "127.0.0.1:$GWP" sim1:1-2 --bytes 256K \
    --urb 8K --inflight 1 --skip unlink-completed
sleep 1
stop_bg tshark INT

# usbip_pdus PORT: packets on PORT where the USB/IP dissector finds an op
# header (version 1.1.1) or a setup packet of a control URB
usbip_pdus() {
	tshark -n -r "$CAP" -d "tcp.port==$1,usbip" -Y "tcp.port == $1 &&
	    (usbip.version == 0x0111 || usbip.busid == \"sim1:1-2\" || usbip.setup)" \
	    2>/dev/null | wc -l
}
N_PLAIN=$(usbip_pdus "$GWP")
N_TLS=$(usbip_pdus "$TLSP")
num_cmp "$N_PLAIN" -gt 10 "plaintext port: tshark decodes USB/IP (op headers, busid, setup packets: $N_PLAIN)"
is "$N_TLS" 0 "TLS port: none of them in the clear"
TLS13=$(tshark -n -r "$CAP" -d "tcp.port==$TLSP,tls" \
    -Y "tcp.port == $TLSP && tls.handshake.type == 1" -T fields \
    -e tls.handshake.extensions.supported_version 2>/dev/null | head -n 1)
like "$TLS13" '0x0304' "TLS port: a ClientHello offering TLS 1.3"
APP=$(tshark -n -r "$CAP" -d "tcp.port==$TLSP,tls" \
    -Y "tcp.port == $TLSP && tls.app_data" 2>/dev/null | wc -l)
num_cmp "$APP" -gt 20 "TLS port: application data records ($APP packets)"
raw_has() {		# raw_has STRING PORT: STRING in a packet on PORT
	tshark -n -r "$CAP" -Y "tcp.port == $2 && frame contains \"$1\"" 2>/dev/null | grep -q .
}
raw_has "sim1:1-2" "$GWP"
check $? "plaintext port: the busid is on the wire"
raw_has "sim1:1-2" "$TLSP"
isnt "$?" 0 "TLS port: the busid is not"

gw_finish gw
done_testing
