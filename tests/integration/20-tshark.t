#!/bin/bash
# Interoperability with an independent decoder: capture simulator <->
# test client traffic on loopback and require that Wireshark's USB/IP
# dissector decodes DEVLIST, IMPORT, SUBMIT (control, bulk, interrupt,
# ISO) and UNLINK, with no malformed packet, and that its PDU count
# matches the protocol's bookkeeping.
#
# Known limit of tshark 4.0's dissector, which the traffic avoids: an
# IN RET_SUBMIT carrying data is sized right only when it is the first
# USB/IP PDU of its TCP segment.  (The USB layer it hands each PDU to
# rewrites pinfo's addresses, so the next PDU's length lookup finds an
# empty conversation, counts no data, and boundaries are lost: silently
# until a later PDU lands in the garbage.)  Several IN URBs in flight,
# or an OUT completing a waiting IN on the simulator's loopback (bulk
# loopback with 2+ in flight, the "completed" unlink order), put two
# replies in one segment.  So every IN transfer here runs one URB at a
# time, only the "unlinked" order is captured (the keyboard's second
# report is 1 s away, the composite has no keys), OUT runs 4 in flight.
#  The PDU accounting at the end catches a silent loss of boundaries.
. "$(dirname "$0")/../lib/common.sh"

need_prog "$SIM" "$TC" tshark
plan 32

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys "usbgw\n"; interval 1000; }
device 1-2 { type storage; }
device 1-3 { type composite; keys ""; }
device 1-4 { type audio; }
device 1-5 { type sourcesink; }
EOF
start_bg sim "$SIM" -c "$T/sim.conf" -l 127.0.0.1:0 -p "$T/sim.port"
wait_file "$T/sim.port" 10 sim || bail_out "simulator did not start: $(cat "$(bg_log sim)")"
P=$(cat "$T/sim.port")
A=127.0.0.1:$P

CAP=$T/usbip.pcapng
start_bg tshark tshark -n -i lo -f "tcp port $P" -w "$CAP"
# "Capturing on" comes before packets are: probe until one is seen.
captured() {
	(exec 3<>"/dev/tcp/127.0.0.1/$P") 2>/dev/null
	tshark -n -r "$CAP" -c 1 2>/dev/null | grep -q .
}
if ! wait_log tshark 'Capturing on' 20 || ! wait_for -t 20 -p tshark captured; then
	skip_all "tshark cannot capture on lo: $(tail -n 3 "$(bg_log tshark)" | tr '\n' ' ')"
fi

# ---- traffic -----------------------------------------------------------------
ok "list" "$TC" list "$A"
run "$TC" import "$A" 9-9
is "$RC" 14 "import of an unknown busid refused"
ok "import 1-2" "$TC" import "$A" 1-2
ok "keyboard: control, interrupt, unlink" "$TC" script "$A" 1-1
ok "storage: bulk loopback (1 URB in flight), unlink" \
    "$TC" script "$A" 1-2 --bytes 256K --urb 8K --inflight 1 --skip unlink-completed
ok "composite" "$TC" script "$A" 1-3 --bytes 64K --urb 8K --inflight 1 --skip unlink-completed
ok "bulk IN from the source" "$TC" load "$A" 1-5 --dir in --bytes 256K --urb 8K --inflight 1
ok "bulk OUT to the sink" "$TC" load "$A" 1-5 --dir out --bytes 256K --urb 8K --inflight 4
ok "ISO OUT and IN" "$TC" iso "$A" 1-4 --packets 8 --iterations 4

sleep 0.5		# let the last segments reach the capture
stop_bg tshark TERM
[ -s "$CAP" ] || bail_out "no capture file: $(cat "$(bg_log tshark)")"

# ---- what the dissector saw ------------------------------------------------------
# One decoding pass (tshark start-up costs about a second) into a table:
# one row per frame, columns as FIELDS, every occurrence of a field in
# the frame (several PDUs can share one) separated by spaces.
FIELDS=(frame.number frame.protocols _ws.malformed _ws.expert.severity
    usbip.operation usbip.number_of_devices usbip.busid usbip.status
    usbip.urb usbip.endpoint_number usbip.endpoint_number.direction
    usbip.transfer_buffer_length usbip.actual_length usbip.iso.num_of_packets
    usb.setup.bRequest usb.bDescriptorType usb.idVendor usb.bString
    usbhid.data usb.iso.iso_actual_len)
args=()
for f in "${FIELDS[@]}"; do args+=(-e "$f"); done
tshark -n -r "$CAP" -d "tcp.port==$P,usbip" -T fields -E occurrence=a \
    -E "aggregator= " -E "separator=|" "${args[@]}" >"$T/fields.txt" 2>"$T/fields.err"
check $? "tshark decodes the capture"

# q [-v FIELD] COND...: count the frames where every COND holds
# (FIELD=VALUE: some occurrence equals VALUE; FIELD~ERE: some occurrence
# matches; FIELD>=N: some occurrence is at least N; FIELD: present), as
# a display filter's "any" semantics.
# With -v, print every occurrence of FIELD in those frames instead.
q() {
	local show=
	if [ "$1" = -v ]; then show=$2; shift 2; fi
	awk -F'|' -v names="${FIELDS[*]}" -v conds="$*" -v show="$show" '
	BEGIN {
		n = split(names, nm, " ")
		for (i = 1; i <= n; i++) col[nm[i]] = i
		nc = split(conds, c, " ")
		for (j = 1; j <= nc; j++) {
			if ((k = index(c[j], ">=")) > 0) { op[j] = ">="; k++ }
			else if ((k = index(c[j], "~")) > 0) op[j] = "~"
			else if ((k = index(c[j], "=")) > 0) op[j] = "="
			else { op[j] = ""; k = length(c[j]) + 1 }
			f[j] = substr(c[j], 1, op[j] == ">=" ? k - 2 : k - 1)
			v[j] = substr(c[j], k + 1)
			if (!(f[j] in col)) { print "q: no field " f[j] > "/dev/stderr"; exit 2 }
		}
	}
	{
		for (j = 1; j <= nc; j++) {
			m = split($(col[f[j]]), vals, " "); hit = 0
			for (x = 1; x <= m; x++)
				if (op[j] == "" || (op[j] == "=" && vals[x] == v[j]) ||
				    (op[j] == "~" && vals[x] ~ v[j]) ||
				    (op[j] == ">=" && vals[x] + 0 >= v[j] + 0)) { hit = 1; break }
			if (!hit) next
		}
		cnt++
		if (show != "") {
			m = split($(col[show]), vals, " ")
			for (x = 1; x <= m; x++) print vals[x]
		}
	}
	END { if (show == "") print cnt + 0 }' "$T/fields.txt"
}

is "$(q _ws.malformed)" 0 "no malformed USB/IP packet"
# PI_ERROR is 0x00800000.
is "$(q '_ws.expert.severity>=8388608')" 0 "no dissector error (expert info of severity error)"
num_cmp "$(q frame.protocols~usbip)" -gt 100 "the dissector decoded the capture as USB/IP"

ops=$(q -v usbip.operation usbip.operation | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
like "$ops" '0x8005=1 ' "OP_REQ_DEVLIST decoded"
is "$(q -v usbip.number_of_devices usbip.operation=0x0005)" 5 "OP_REP_DEVLIST decoded: 5 devices"
is "$(q -v usbip.busid usbip.operation=0x0005 | tr '\n' ' ')" '1-1 1-2 1-3 1-4 1-5 ' \
    "OP_REP_DEVLIST device records decoded"
like "$ops" '0x8003=8 ' "OP_REQ_IMPORT decoded (8 imports)"
is "$(q usbip.operation=0x0003 usbip.status=4)" 1 "OP_REP_IMPORT refusal (ST_NODEV) decoded"
is "$(q usbip.operation=0x0003 usbip.status=0 usbip.busid)" 7 \
    "OP_REP_IMPORT with device record decoded (7 accepted)"

num_cmp "$(q usbip.urb=0x00000001 usbip.endpoint_number=0x00 usb.setup.bRequest=6)" -ge 20 \
    "control CMD_SUBMIT (GET_DESCRIPTOR) decoded"
is "$(q -v usb.idVendor usbip.urb=0x00000003 usb.bDescriptorType=0x01 | sort -u)" 0x1209 \
    "control RET_SUBMIT: device descriptors decoded"
is "$(q usbip.urb=0x00000003 usb.bString)" 9 "string descriptors decoded (3 devices x 3)"
num_cmp "$(q usbip.urb=0x00000001 usbip.endpoint_number=0x02 usbip.endpoint_number.direction=0x00 usbip.transfer_buffer_length=8192)" -ge 32 \
    "bulk OUT CMD_SUBMIT with 8 KiB data decoded"
num_cmp "$(q usbip.urb=0x00000003 usbip.endpoint_number=0x01 usbip.endpoint_number.direction=0x01 usbip.actual_length=8192)" -ge 32 \
    "bulk IN RET_SUBMIT with 8 KiB data decoded"
num_cmp "$(q frame.protocols~usbms)" -ge 1 "bulk on the storage interface handed to the mass-storage dissector"
num_cmp "$(q usbip.urb=0x00000003 usbhid.data)" -ge 1 "interrupt IN RET_SUBMIT decoded as HID report"
num_cmp "$(q usbip.urb=0x00000001 usbip.iso.num_of_packets=8)" -ge 8 \
    "ISO CMD_SUBMIT with 8 descriptors decoded"
num_cmp "$(q usbip.urb=0x00000003 usb.iso.iso_actual_len=192)" -ge 8 \
    "ISO RET_SUBMIT descriptors decoded"

urbs=$(q -v usbip.urb usbip.urb | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
cmd=$(echo "$urbs" | sed -n 's/.*0x00000001=\([0-9]*\).*/\1/p')
ret=$(echo "$urbs" | sed -n 's/.*0x00000003=\([0-9]*\).*/\1/p')
cunl=$(echo "$urbs" | sed -n 's/.*0x00000002=\([0-9]*\).*/\1/p')
runl=$(echo "$urbs" | sed -n 's/.*0x00000004=\([0-9]*\).*/\1/p')
unlinked=$(q -v usbip.status usbip.urb=0x00000004 | grep -c '^-104$')
num_cmp "${cunl:-0}" -ge 4 "CMD_UNLINK decoded (${cunl:-0})"
is "${runl:-0}" "${cunl:-x}" "a RET_UNLINK for every CMD_UNLINK"
num_cmp "$unlinked" -ge 3 "RET_UNLINK -ECONNRESET decoded ($unlinked)"
is "$((ret + unlinked))" "$cmd" "every CMD_SUBMIT answered by a RET_SUBMIT or unlinked ($cmd = $ret + $unlinked)"

stop_bg sim
done_testing
