# Baseline without the gateway: Debian's usbipd exports the gadget disk and the
# stock client attaches it straight to vhci_hcd.  Proves the harness, the kernel
# chain and the checks; gives the direct throughput for the gateway ratio.

busid=$(dummy_busid 0)
check "direct: usbip bind -b $busid" usbip bind -b "$busid"
check "direct: usbipd lists $busid" usbipd_lists "$busid"
check "direct: usbip attach -r 127.0.0.1 -b $busid succeeds" usbip_attach "$USBIPD_PORT" "$busid"
if check "direct: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	e2e_diag "direct: vhci disk is /dev/$d ($(readlink -f "/sys/block/$d" | sed 's,/block/.*,,'))"
	check "direct: disk size is $E2E_DISK_MB MiB" \
		[ "$(cat "/sys/block/$d/size")" -eq $((E2E_DISK_MB * 2048)) ]
	want=$(file_sha "$DISK_IMG")
	got=$(disk_sha "$d")
	if [ "$got" = "$(cat /e2e/disk.sha256)" ] && [ "$got" = "$want" ]; then
		ok "direct: whole-disk SHA-256 through vhci matches the backing file"
	else
		not_ok "direct: whole-disk SHA-256 through vhci matches the backing file" \
			"read $got, backing file $want, host $(cat /e2e/disk.sha256)"
	fi
	why=$(disk_write_lands "$d" "$DISK_IMG" 100)
	check "direct: a write through vhci lands in the backing file${why:+ ($why)}" [ -z "$why" ]
	mbps=$(disk_read_mbps "$d")
	check "direct: whole-disk read timed (${mbps:-?} MB/s)" [ -n "$mbps" ]
	[ -z "$mbps" ] || e2e_metric direct_read_mbps "$mbps"
fi
vhci_detach_all
check "direct: usbip detach removes the vhci disk" wait_gone 15 vhci_disk
check "direct: vhci ports are free again" wait_gone 10 vhci_any_used
check "direct: usbipd lists $busid again after detach" \
	wait_for 15 usbipd_lists "$busid"
