# The agent's disk through the gateway: refused while pending, then approved,
# attached to this guest's vhci_hcd: whole-disk checksum, a write lands in the
# gadget's image, throughput; detached, the gateway holds it again.

why=$(agent_missing)
agent_running || why=${why:-"usbgw-agent not running"}
if [ -n "$why" ]; then
	skip_all "$why" "agent disk: attach refused while pending" \
		"agent disk: approve, attach through the gateway" \
		"agent disk: whole-disk SHA-256 matches the gadget's image" \
		"agent disk: a write lands in the gadget's image" \
		"agent disk: detach, the gateway holds it again"
	return 0
fi
adisk=$(cat "$E2E_STATE/agent_busid.adisk")
GW_EXPORTER=$AGENT_EXPORTER
b=$(cat "$E2E_STATE/agent_gwbusid.$adisk")

check "agent disk: usbip attach of pending $b through the gateway fails" attach_refused "$GW_PORT" "$b"
check "agent disk: ... and no disk appears on vhci" no_vhci_device
vhci_detach_all
check "agent disk: usbgw approve $b" gwctl approve "$b"
st=$(gw_wait_state 10 "$adisk" authorized)
check "agent disk: state authorized (last seen: $st)" [ "$st" = authorized ]
check "agent disk: usbip attach through the gateway (-b $b)" usbip_attach "$GW_PORT" "$b"
if check "agent disk: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	st=$(gw_wait_state 10 "$adisk" attached)
	check "agent disk: state attached (last seen: $st)" [ "$st" = attached ]
	want=$(file_sha "$AGENT_DISK_IMG")
	got=$(disk_sha "$d")
	check "agent disk: whole-disk SHA-256 through agent and gateway matches the gadget's image" \
		[ "$got" = "$want" ]
	why=$(disk_write_lands "$d" "$AGENT_DISK_IMG" 150)
	check "agent disk: a write through agent and gateway lands in the image${why:+ ($why)}" \
		[ -z "$why" ]
	mbps=$(disk_read_mbps "$d")
	check "throughput: whole-disk read through agent and gateway timed (${mbps:-?} MB/s)" \
		[ -n "$mbps" ]
	[ -z "$mbps" ] || e2e_metric agent_gateway_read_mbps "$mbps"
fi
vhci_detach_all
check "agent disk: detach removes the vhci disk" wait_gone 15 vhci_disk
st=$(gw_wait_state 15 "$adisk" authorized)
check "agent disk: the gateway holds the disk again, state authorized (last seen: $st)" \
	[ "$st" = authorized ]
# (after the release the agent resets the device and claims it again: for a
# moment no driver at all is bound, which is still closed)
wait_for 5 iface_driver_is "$adisk" usbfs
check "agent disk: the disk is not back with a local driver ($(iface_driver "$adisk"))" \
	iface_driver_is "$adisk" usbfs
