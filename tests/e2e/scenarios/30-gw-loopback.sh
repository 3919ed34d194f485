# Proxy mode, bulk data: the loopback gadget approved and attached through the
# gateway; e2e-bulk sends a pattern to bulk OUT and checks what bulk IN returns.

loop=$(dummy_busid 1)
why=$(gw_missing)
[ -n "$why" ] || have_prog e2e-bulk || why="e2e-bulk not built"
if [ -n "$why" ]; then
	skip_all "$why" "loopback: usbgw approve succeeds" \
		"loopback: usbip attach through the gateway succeeds" \
		"loopback: the device appears under vhci_hcd" \
		"loopback: bulk data verified through the gateway" \
		"loopback: detach frees the vhci port" \
		"loopback: the gateway reclaims the device, state authorized"
	return 0
fi
b=$(cat "$E2E_STATE/gw_busid.loop" 2>/dev/null)

check "loopback: usbgw approve $b succeeds" gwctl approve "$b"
gw_wait_state 10 "$loop" authorized >/dev/null
check "loopback: usbip attach through the gateway (-b $b) succeeds" usbip_attach "$GW_PORT" "$b"
if check "loopback: the device appears under vhci_hcd" \
    wait_for 20 vhci_usbdev "$LOOP_VID" "$LOOP_PID"; then
	node=$(usbdev_node "$(vhci_usbdev "$LOOP_VID" "$LOOP_PID")")
	wait_for 5 [ -c "$node" ]
	out=$(e2e-bulk -m 8 "$node" 2>&1)
	rc=$?
	echo "$out"
	check "loopback: 8 MiB bulk data verified through the gateway ($out)" [ $rc -eq 0 ]
	mbps=$(echo "$out" | sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p')
	[ -z "$mbps" ] || e2e_metric gateway_loopback_mbps "$mbps"
fi
vhci_detach_all
check "loopback: detach frees the vhci port" wait_gone 10 vhci_any_used
st=$(gw_wait_state 15 "$loop" authorized)
check "loopback: after detach the gateway reclaims the device, state authorized (last seen: $st)" \
	[ "$st" = authorized ]
