# usbgw-attach over TLS with the guest's real vhci_hcd (issue 15 items 3 and
# 7): the gateway's tls-listen (127.0.0.1:3245, guest/usbgwd.conf) and its
# store in /tmp/gw/tls; the host "vdi01" gets a certificate from that store
# with tlsid-issue (as enrollment will issue one).  Approved --to vdi01, the
# disk reads its checksum through TLS and the socketpair; the gateway records
# transport tls and the certificate's name; a revoke ends it on the host; a
# certificate for vdi02 is refused the import; plaintext usbip to the TLS port
# is refused.

disk=$(dummy_busid 0)
why=$(gw_missing)
for p in usbgw-attach tlsid-issue; do
	have_prog "$p" || why=${why:-"$p not built"}
done
if [ -n "$why" ]; then
	skip "tls companion: usbgw-attach -T through the gateway" "$why"
	return 0
fi
TLS_PORT=3245
STORE=$GW_DIR/tls
b=$(cat "$E2E_STATE/gw_busid.disk" 2>/dev/null)
TLOG=$LOGS/usbgw-attach-tls.log

check "tls companion: the gateway's store exists, gateway.key 0600 ($(stat -c %a "$STORE/gateway.key" 2>&1))" \
	[ "$(stat -c %a "$STORE/gateway.key" 2>/dev/null)" = 600 ]
for h in vdi01 vdi02; do
	out=$(tlsid-issue "$STORE" "/tmp/host-$h" "$h" 2>&1)
	check "tls companion: tlsid-issue gives $h a host certificate ($out)" [ $? -eq 0 ]
done
check "tls companion: host.key is 0600 ($(stat -c %a /tmp/host-vdi01/host.key 2>&1))" \
	[ "$(stat -c %a /tmp/host-vdi01/host.key 2>/dev/null)" = 600 ]

st=$(gw_wait_state 15 "$disk" pending blocked authorized)
check "tls companion: usbgw approve $b --to vdi01" gwctl approve "$b" --to vdi01
gw_wait_state 10 "$disk" authorized >/dev/null

usbgw-attach -T -c /tmp/host-vdi02 "127.0.0.1:$TLS_PORT" "$b" >> "$TLOG" 2>&1
rc=$?
check "tls companion: vdi02's certificate is refused the import (exit $rc, 1 expected)" [ $rc -eq 1 ]
check "tls companion: nothing on vhci after vdi02's refusal" no_vhci_device
check "tls companion: plaintext usbip attach to the TLS port fails" \
	attach_refused "$TLS_PORT" "$b"
vhci_detach_all

usbgw-attach -v -T -c /tmp/host-vdi01 "127.0.0.1:$TLS_PORT" "$b" >> "$TLOG" 2>&1 &
cpid=$!
if check "tls companion: the disk appears under vhci_hcd through TLS (vdi01)" \
    wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	check "tls companion: whole-disk SHA-256 through TLS matches the backing file" \
		[ "$(disk_sha "$d")" = "$(file_sha "$DISK_IMG")" ]
	sh=$(gwctl show "$b" 2>&1)
	check "tls companion: usbgw show says transport tls" sh -c 'echo "$1" | grep -qi "transport.*tls"' _ "$sh"
	check "tls companion: usbgw show names the certificate vdi01" sh -c 'echo "$1" | grep -q "vdi01"' _ "$sh"
	check "tls companion: usbgw revoke $b" gwctl revoke "$b"
	check "tls companion: the vhci disk goes after the revoke" wait_gone 10 vhci_disk
	check "tls companion: usbgw-attach exits after the revoke" wait_gone 10 kill -0 "$cpid"
	check "tls companion: the vhci port is free" wait_gone 10 vhci_any_used
else
	echo "$(gwctl show "$b" 2>&1)"
fi
kill -TERM "$cpid" 2>/dev/null
vhci_detach_all
gw_wait_state 15 "$disk" pending blocked >/dev/null
cat "$TLOG"
