# Local mode, inspected: the local-mode usbgwd restarted with local-attach =
# inspected hands vhci_hcd one end of a socketpair and relays the URBs itself,
# with the gateway's own devid; the disk's data still checks out, and the relay
# counts what it moved.  Throughput compared with the direct attachment of 50.

disk=$(dummy_busid 0)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "local inspected: usbgwd restarts with local-attach = inspected" \
		"local inspected: approve, the gateway attaches the disk through its relay" \
		"local inspected: vhci port in use with the gateway's devid" \
		"local inspected: the disk appears under vhci_hcd" \
		"local inspected: whole-disk SHA-256 matches the backing file" \
		"local inspected: a write lands in the backing file" \
		"local inspected: the relay counted the disk's bytes" \
		"throughput: local inspected whole-disk read timed" \
		"local inspected: revoke detaches the vhci port" \
		"local inspected: the gateway reclaims the disk, state pending"
	return 0
fi

proxy_let_go	# when run without 50 (E2E_ONLY)
lgw_use
check "local inspected: the direct-mode usbgwd stops (SIGTERM)" lgw_stop
check "local inspected: no vhci port left in use" no_vhci_device
check "local inspected: usbgwd starts in mode = local (local-attach = inspected)" \
	lgw_start inspected "local-attach = inspected"
gwctl exporter add "$LGW_EXPORTER" "127.0.0.1:$USBIPD_PORT"
st=$(gw_wait_state 30 "$disk" pending)
check "local inspected: the gateway claims the disk, state pending (last seen: $st)" [ "$st" = pending ]

b=$(gw_field "$disk" busid)
devid=$(usb_devid "$disk")
check "local inspected: usbgw approve $b" gwctl approve "$b"
st=$(gw_wait_state 15 "$disk" attached)
check "local inspected: the gateway attaches the disk through its relay, state attached (last seen: $st)" \
	[ "$st" = attached ]
port=$(gw_local "$disk" port)
mode=$(gw_local "$disk" mode)
peer=$(gw_field "$disk" attached_to)
check "local inspected: usbgw list shows mode inspected, a relay session \"local:vhci ${port:-?}\" (mode ${mode:-?}, attached_to ${peer:-?})" \
	[ "$mode|$peer" = "inspected|local:vhci ${port:-?}" ]
# The relay rewrites devid: the kernel got the gateway's, not the exporter's.
wait_for 15 vhci_port_is "${port:-999}" 006
line=$(vhci_port_line "${port:-999}")
check "local inspected: vhci port ${port:-?} in use with the gateway's devid, not the exporter's $devid ($line)" \
	sh -c '[ "$(echo "$1" | awk "{ print \$3 }")" = 006 ] && [ "$(echo "$1" | awk "{ print \$5 }")" != "$2" ]' \
	_ "$line" "$devid"

if check "local inspected: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	want=$(file_sha "$DISK_IMG")
	got=$(disk_sha "$d")
	if [ "$got" = "$want" ] && [ "$got" = "$(cat /e2e/disk.sha256)" ]; then
		ok "local inspected: whole-disk SHA-256 through the relay matches the backing file"
	else
		not_ok "local inspected: whole-disk SHA-256 through the relay matches the backing file" \
			"read $got, backing file $want, host $(cat /e2e/disk.sha256)"
	fi
	why=$(disk_write_lands "$d" "$DISK_IMG" 400)
	check "local inspected: a write through the relay lands in the backing file${why:+ ($why)}" \
		[ -z "$why" ]
	# The whole disk went to the host once (the checksum), plus the write test.
	n=$(gw_field "$disk" bytes_to_host)
	u=$(gw_field "$disk" urbs)
	check "local inspected: the relay counted the disk's bytes (${n:-?} bytes to the host, ${u:-?} URBs)" \
		[ $(( ${n:-0} >= E2E_DISK_MB * 1048576 && ${u:-0} > 0 )) = 1 ]
	mbps=$(disk_read_mbps "$d")
	check "throughput: local inspected whole-disk read timed (${mbps:-?} MB/s)" [ -n "$mbps" ]
	if [ -n "$mbps" ]; then
		e2e_metric local_inspected_read_mbps "$mbps"
		n2=$(gw_field "$disk" bytes_to_host)
		check "local inspected: the timed read went through the relay (+$(( ${n2:-0} - ${n:-0} )) bytes)" \
			[ $(( ${n2:-0} - ${n:-0} )) -ge $((E2E_DISK_MB * 1048576)) ]
		direct=$(cat "$E2E_STATE/metric.local_direct_read_mbps" 2>/dev/null)
		[ -z "$direct" ] || e2e_diag "$(awk -v d="$direct" -v i="$mbps" 'BEGIN {
			printf "local mode disk read: direct %.2f MB/s, inspected %.2f MB/s, ratio %.2f",
				d, i, (d > 0 ? i / d : 0) }')"
	fi
fi

t0=$(e2e_uptime)
check "local inspected: usbgw revoke $b" gwctl revoke "$b"
if wait_gone 10 vhci_disk; then
	ok "local inspected: revoke removes the vhci disk ($(( ($(e2e_uptime) - t0) * 10 )) ms)"
else
	not_ok "local inspected: revoke removes the vhci disk within 10 s"
fi
check "local inspected: revoke frees the vhci port" wait_gone 10 vhci_any_used
st=$(gw_wait_state 15 "$disk" pending)
check "local inspected: the gateway reclaims the disk, state pending (last seen: $st)" [ "$st" = pending ]

# Approved again and left attached: 52 stops this gateway, which ends an
# inspected attachment (its relay dies with the process).
gwctl approve "$b"
st=$(gw_wait_state 15 "$disk" attached)
check "local inspected: approved again, attached again (last seen: $st)" [ "$st" = attached ]
check "local inspected: the disk appears again" wait_for 30 vhci_disk_ready
