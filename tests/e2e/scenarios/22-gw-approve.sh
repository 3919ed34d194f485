# Proxy mode, approved: the same attach now succeeds through the gateway and the
# disk's data moves through the gateway's relay both ways.

disk=$(dummy_busid 0)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "approve: usbgw approve succeeds" \
		"approve: state authorized" \
		"approve: usbip attach through the gateway succeeds" \
		"approve: the disk appears under vhci_hcd" \
		"approve: state attached" \
		"approve: disk size through the gateway" \
		"approve: whole-disk SHA-256 through the gateway matches the backing file" \
		"approve: a write through the gateway lands in the backing file" \
		"throughput: whole-disk read through the gateway timed"
	return 0
fi
b=$(cat "$E2E_STATE/gw_busid.disk" 2>/dev/null)

if [ "$E2E_BREAK" = no-approve ]; then
	# Forced failure for demonstrating the checks: approve nothing.
	e2e_diag "E2E_BREAK=no-approve: not approving $b"
	check "approve: usbgw approve $b succeeds" true
else
	check "approve: usbgw approve $b succeeds" gwctl approve "$b"
fi
st=$(gw_wait_state 10 "$disk" authorized)
check "approve: state authorized (last seen: $st)" [ "$st" = authorized ]
check "approve: usbip attach through the gateway (-b $b) succeeds" usbip_attach "$GW_PORT" "$b"
if check "approve: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	st=$(gw_wait_state 10 "$disk" attached)
	check "approve: state attached (last seen: $st)" [ "$st" = attached ]
	check "approve: disk size through the gateway is $E2E_DISK_MB MiB" \
		[ "$(cat "/sys/block/$d/size")" -eq $((E2E_DISK_MB * 2048)) ]
	want=$(file_sha "$DISK_IMG")
	got=$(disk_sha "$d")
	check "approve: whole-disk SHA-256 through the gateway matches the backing file" \
		[ "$got" = "$want" ]
	why=$(disk_write_lands "$d" "$DISK_IMG" 200)
	check "approve: a write through the gateway lands in the backing file${why:+ ($why)}" \
		[ -z "$why" ]
	mbps=$(disk_read_mbps "$d")
	check "throughput: whole-disk read through the gateway timed (${mbps:-?} MB/s)" \
		[ -n "$mbps" ]
	if [ -n "$mbps" ]; then
		e2e_metric gateway_read_mbps "$mbps"
	fi
else
	st=$(gw_state "$disk")
	not_ok "approve: state attached (last seen: $st)"
fi
