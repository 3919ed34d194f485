# Enrollment in the guest (issue 15 items 2 and 7; protocol.md 1.10.10):
# `usbgw-attach enroll` against the guest gateway's tls-listen
# (127.0.0.1:3245) makes host.key (0600) and shows a code; the gateway
# lists the same code; `usbgw agent approve CODE` issues the certificate,
# which the host stores; approved --to vdi03, the disk is attached over
# TLS through the guest's real vhci_hcd and reads its SHA-256; `usbgw
# agent revoke vdi03` takes it off vhci and ends usbgw-attach; the next
# import with that certificate is refused.

disk=$(dummy_busid 0)
why=$(gw_missing)
have_prog usbgw-attach || why=${why:-"usbgw-attach not built"}
if [ -n "$why" ]; then
	skip "enroll: usbgw-attach enroll, approve, attach over TLS" "$why"
	return 0
fi
TLS_PORT=3245
b=$(cat "$E2E_STATE/gw_busid.disk" 2>/dev/null)
ELOG=$LOGS/usbgw-attach-enroll.log
HDIR=/tmp/host-vdi03

usbgw-attach enroll -c "$HDIR" --name vdi03 -t 120 "127.0.0.1:$TLS_PORT" > "$ELOG" 2>&1 &
epid=$!
enroll_code() { sed -n 's/^pairing code: \([0-9]\{6\}\)$/\1/p' "$ELOG"; }
check "enroll: usbgw-attach enroll shows a 6-digit code" wait_for 60 sh -c "grep -q '^pairing code: [0-9]' '$ELOG'"
code=$(enroll_code)
check "enroll: host.key is 0600 ($(stat -c %a "$HDIR/host.key" 2>&1))" \
	[ "$(stat -c %a "$HDIR/host.key" 2>/dev/null)" = 600 ]
gcode=$(gwctl agent list --json 2>/dev/null | e2e-json get code name=vdi03 2>/dev/null)
check "enroll: the gateway lists the same code ($gcode, client $code)" [ -n "$code" ] && [ "$code" = "$gcode" ]
check "enroll: usbgw agent approve $code" gwctl agent approve "$code"
wait "$epid"
rc=$?
check "enroll: usbgw-attach enroll exits 0 (paired; exit $rc)" [ $rc -eq 0 ]
check "enroll: host.pem and gateway-ca.pem stored" [ -s "$HDIR/host.pem" ] && [ -s "$HDIR/gateway-ca.pem" ]
st=$(gwctl agent list --json 2>/dev/null | e2e-json get state name=vdi03 2>/dev/null)
check "enroll: agent list says vdi03 active ($st)" [ "$st" = active ]

gw_wait_state 15 "$disk" pending blocked authorized >/dev/null
check "enroll: usbgw approve $b --to vdi03" gwctl approve "$b" --to vdi03
gw_wait_state 10 "$disk" authorized >/dev/null
TLOG=$LOGS/usbgw-attach-enrolled.log
usbgw-attach -v -T -c "$HDIR" "127.0.0.1:$TLS_PORT" "$b" >> "$TLOG" 2>&1 &
cpid=$!
if check "enroll: the disk appears under vhci_hcd with the enrolled certificate" \
    wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	check "enroll: whole-disk SHA-256 through TLS matches the backing file" \
		[ "$(disk_sha "$d")" = "$(file_sha "$DISK_IMG")" ]
	check "enroll: usbgw agent revoke vdi03" gwctl agent revoke vdi03
	check "enroll: the vhci disk goes after the revoke" wait_gone 10 vhci_disk
	check "enroll: usbgw-attach exits after the revoke" wait_gone 10 kill -0 "$cpid"
	usbgw-attach -T -c "$HDIR" "127.0.0.1:$TLS_PORT" "$b" >> "$TLOG" 2>&1
	rc=$?
	check "enroll: the revoked certificate is refused (exit $rc)" [ $rc -ne 0 ]
	check "enroll: nothing on vhci after the refusal" no_vhci_device
else
	echo "$(gwctl show "$b" 2>&1)"
fi
kill -TERM "$cpid" 2>/dev/null
vhci_detach_all
gwctl revoke "$b" >/dev/null 2>&1
gw_wait_state 15 "$disk" pending blocked >/dev/null
cat "$ELOG" "$TLOG"
