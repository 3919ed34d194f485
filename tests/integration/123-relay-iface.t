#!/usr/bin/env bash
# Per-interface enforcement in the relay (issue 17; protocol.md 1.6,
# "Per-interface enforcement"):
# a composite device (interface 0 HID 03/01/01 with 0x81 interrupt IN,
# interface 1 storage 08/06/50 with 0x82 bulk IN and 0x02 bulk OUT)
# allowed with one interface denied.  What belongs to the denied
# interface (URBs to its endpoints; control requests whose recipient is
# it or one of its endpoints: class, vendor, standard, SET_INTERFACE) is
# answered by the gateway with RET_SUBMIT -EPIPE, the session stays
# open, the exporter never sees it (its PDU log), and each refusal is
# audited (`iface-refused`), the first 16 of an attachment one by one,
# then one summary row.  What belongs to the allowed interface, and
# requests to the device, pass.  The reverse rule on a second device.
# Each attachment's row counts its refusals (attachments.iface_refused,
# migration 15): as many as the test caused, past the 16 audited ones
# too, and 0 for an attachment without refusals or without a policy.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" socat sqlite3

cat >"$T/sim.conf" <<'CONF'
device 1-1 { type composite; serial "IF-A"; interval 50 }
device 1-2 { type composite; serial "IF-B"; interval 50 }
device 1-3 { type composite; serial "IF-N"; interval 50 }
CONF
gw_sim_world
gwctl gw policy add 'allow serial "IF-A" interface-policy allow { block 08:*:* }'
if [ "$RC" != 0 ]; then
	fail_all "the interface-policy rule is accepted (exit $RC): $OUT $ERR"
fi
plan 72
gwctl gw policy add 'allow serial "IF-B" interface-policy block { allow 08:*:* }'
is "$RC" 0 "the reverse rule for IF-B"
gwctl gw policy add 'allow serial "IF-N"'
is "$RC" 0 "IF-N: allowed whole, no interface-policy"
gw_wait_state gw sim1:1-1 authorized 15
gw_wait_state gw sim1:1-2 authorized 15
is "$(gw_state gw sim1:1-1)/$(gw_state gw sim1:1-2)" authorized/authorized \
    "both devices authorized (the device verdict is allow)"

# submit SEQ DIR EP LEN SETUP [DATA]: a CMD_SUBMIT in hex (DEVID: the
# imported device's), no ISO packets.
submit() {
	printf '00000001%08xDEVID%08x%08x00000000%08x000000000000000000000000%s%s' \
	    "$1" "$2" "$3" "$4" "$5" "${6:-}"
}
NOSETUP=0000000000000000
# The RET_SUBMIT -EPIPE of SEQ, as the gateway writes it.
epipe() {
	printf '00000003%08x000000000000000000000000ffffffe0000000000000000000000000000000000000000000000000' "$1"
}

# The attachments that have ended.
ENDED="SELECT count(*) FROM attachments WHERE ended_at IS NOT NULL"
# ended_refused NAME BUSID A0 N: once more than A0 attachments have
# ended, the row of BUSID's last one counts N refusals.
ended_refused() {
	gw_wait_sql gw "$ENDED" $(($3 + 1)) 10
	is "$(gw_sql gw "SELECT a.iface_refused FROM attachments a JOIN
	    devices d ON d.id = a.device_id WHERE d.busid = '$2' AND
	    a.ended_at IS NOT NULL ORDER BY a.id DESC LIMIT 1")" "$4" \
	    "$1: its attachments row counts $4 refused"
}

# stalled NAME BUSID SEQ HEX: the gateway answers -EPIPE, keeps the
# session, forwards nothing, audits it, counts it in the attachment's row.
stalled() {
	local n0 a0 seq=$(($3))
	gw_wait_state gw "$2" authorized 15
	n0=$(gw_audit_count gw iface-refused)
	a0=$(gw_sql gw "$ENDED")
	run "$TC" raw "$GWA" "$2" --hex "$4" --wait 500 --expect-open
	is "$RC" 0 "$1: the session stays open"
	like "$OUT" "data=$(epipe "$3")" "$1: answered RET_SUBMIT -EPIPE by the gateway"
	gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'iface-refused'" \
	    $((n0 + 1)) 5
	like "$(gw_sql gw "SELECT busid || ' ' || detail FROM audit_log WHERE
	    event = 'iface-refused' ORDER BY seq DESC LIMIT 1")" \
	    "^$2 .*interface $5 .*denies" "$1: audited, naming interface $5"
	! grep -q "seqnum=$seq .*busid=${2#sim1:}\$" "$(sim_pdulog sim)"
	check $? "$1: nothing reached the exporter"
	ended_refused "$1" "$2" "$a0" 1
}
# passes NAME BUSID SEQ HEX: forwarded to the exporter and answered; the
# attachment's row counts no refusal (after one that counted some).
passes() {
	local a0 seq=$(($3))
	gw_wait_state gw "$2" authorized 15
	a0=$(gw_sql gw "$ENDED")
	run "$TC" raw "$GWA" "$2" --hex "$4" --wait 1500 --expect-open
	is "$RC" 0 "$1: the session stays open"
	unlike "$OUT" "ffffffe0" "$1: not stalled"
	grep -q "seqnum=$seq .*busid=${2#sim1:}\$" "$(sim_pdulog sim)"
	check $? "$1: the exporter received it"
	ended_refused "$1" "$2" "$a0" 0
}

# ---- IF-A: storage (interface 1) denied, HID allowed -------------------
stalled "bulk IN 0x82 of the storage interface" sim1:1-1 0x5101 \
    "$(submit 0x5101 1 2 512 "$NOSETUP")" 1
stalled "bulk OUT 0x02 with data" sim1:1-1 0x5102 \
    "$(submit 0x5102 0 2 4 "$NOSETUP" deadbeef)" 1
stalled "Get Max LUN (class request to interface 1)" sim1:1-1 0x5103 \
    "$(submit 0x5103 1 0 1 a1fe000001000100)" 1
stalled "CLEAR_FEATURE(HALT) to endpoint 0x82" sim1:1-1 0x5104 \
    "$(submit 0x5104 0 0 0 0201000082000000)" 1
stalled "SET_INTERFACE 1/0" sim1:1-1 0x5105 \
    "$(submit 0x5105 0 0 0 010b000001000000)" 1
stalled "vendor request to interface 1" sim1:1-1 0x5106 \
    "$(submit 0x5106 1 0 4 c101000001000400)" 1
passes "interrupt IN 0x81 of the HID interface" sim1:1-1 0x5201 \
    "$(submit 0x5201 1 1 8 "$NOSETUP")"
passes "GET_STATUS to the device" sim1:1-1 0x5202 \
    "$(submit 0x5202 1 0 2 8000000000000200)"

# a flood of refusals: 16 rows, then one summary when the session ends
gw_wait_state gw sim1:1-1 authorized 15
n0=$(gw_audit_count gw iface-refused)
a0=$(gw_sql gw "$ENDED")
hex=
for i in $(seq 1 40); do
	hex="$hex$(submit $((0x5300 + i)) 1 2 512 "$NOSETUP")"
done
run "$TC" raw "$GWA" sim1:1-1 --hex "$hex" --wait 1000
like "$OUT" 'received=1920$' "40 refused URBs: 40 answers of 48 bytes"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'iface-refused'" \
    $((n0 + 17)) 10
is "$(gw_audit_count gw iface-refused)" $((n0 + 17)) \
    "16 audited one by one, then one summary row"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'iface-refused'
    ORDER BY seq DESC LIMIT 1")" '^40 URBs and control requests to denied' \
    "the summary counts all 40"
ended_refused "40 refused URBs" sim1:1-1 "$a0" 40
is "$(gw_sql gw "SELECT busid || ' ' || iface_refused || ' ' || urbs_to_device
    FROM v_attachment_traffic ORDER BY attachment_id DESC LIMIT 1")" \
    "sim1:1-1 40 0" "v_attachment_traffic: 40 refused, none forwarded"
! grep -Eq "seqnum=$((0x5301)) .*busid=1-1\$" "$(sim_pdulog sim)"
check $? "none of them reached the exporter"

# ---- IF-B: the reverse (only storage allowed) ---------------------------
stalled "IF-B: interrupt IN 0x81 of the HID interface" sim1:1-2 0x5401 \
    "$(submit 0x5401 1 1 8 "$NOSETUP")" 0
stalled "IF-B: HID GET_REPORT to interface 0" sim1:1-2 0x5402 \
    "$(submit 0x5402 1 0 8 a101000100000800)" 0
passes "IF-B: bulk OUT 0x02 of the storage interface" sim1:1-2 0x5403 \
    "$(submit 0x5403 0 2 4 "$NOSETUP" deadbeef)"
passes "IF-B: Get Max LUN" sim1:1-2 0x5404 \
    "$(submit 0x5404 1 0 1 a1fe000001000100)"

# ---- IF-N: no interface-policy: nothing refused, nothing counted --------
passes "IF-N: bulk IN 0x82 of the storage interface" sim1:1-3 0x5501 \
    "$(submit 0x5501 1 2 512 "$NOSETUP")"
gw_finish gw
