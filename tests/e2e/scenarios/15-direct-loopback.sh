# Baseline without the gateway: the loopback gadget (usb_f_ss_lb) attached straight
# from usbipd; e2e-bulk writes a pattern to its bulk OUT endpoint and reads it back
# from bulk IN.

busid=$(dummy_busid 1)
check "direct loopback: usbip bind -b $busid" usbip bind -b "$busid"
if ! have_prog e2e-bulk; then
	skip "direct loopback: bulk data verified through vhci" "e2e-bulk not built"
	return 0
fi
check "direct loopback: usbip attach succeeds" usbip_attach "$USBIPD_PORT" "$busid"
if check "direct loopback: device appears under vhci_hcd" \
    wait_for 20 vhci_usbdev "$LOOP_VID" "$LOOP_PID"; then
	node=$(usbdev_node "$(vhci_usbdev "$LOOP_VID" "$LOOP_PID")")
	wait_for 5 [ -c "$node" ]
	out=$(e2e-bulk -m 8 "$node" 2>&1)
	rc=$?
	echo "$out"
	check "direct loopback: 8 MiB bulk data verified through vhci ($out)" [ $rc -eq 0 ]
	mbps=$(echo "$out" | sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p')
	[ -z "$mbps" ] || e2e_metric direct_loopback_mbps "$mbps"
fi
vhci_detach_all
check "direct loopback: detach frees the vhci port" wait_gone 10 vhci_any_used
check "direct loopback: usbipd lists $busid again after detach" \
	wait_for 15 usbipd_lists "$busid"
