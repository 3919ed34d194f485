# Machine setup: modules, loopback network, gadgets on dummy_udc.0 and .1 (the
# second disk, for the block rule, is made here and plugged in later).

check "kernel modules load (dummy_hcd, libcomposite, usb-storage, usbip, vhci)" load_modules
check "loopback interface up" ip link set lo up
syslogd -O "$LOGS/syslog" -S
check "backing disk image matches the host's checksum" \
	[ "$(file_sha "$DISK_IMG")" = "$(cat /e2e/disk.sha256)" ]

if [ "$E2E_BREAK" = corrupt-disk ]; then
	# Forced failure for demonstrating the checks: one byte changed in the backing
	# file before anything reads it, so the direct checksum must not match.
	printf 'X' | dd of="$DISK_IMG" bs=1 seek=1000000 conv=notrunc 2>/dev/null
	e2e_diag "E2E_BREAK=corrupt-disk: changed byte 1000000 of $DISK_IMG"
fi

dd if=/dev/zero of="$DISK2_IMG" bs=1M count=1 2>/dev/null
setup_gadgets() {
	gadget_new disk "$DISK_VID" "$DISK_PID" "$DISK_SERIAL" "$DISK_PRODUCT" &&
	gadget_storage disk "$DISK_IMG" &&
	gadget_new loop "$LOOP_VID" "$LOOP_PID" "$LOOP_SERIAL" "$LOOP_PRODUCT" &&
	gadget_loopback loop &&
	gadget_new disk2 "$DISK2_VID" "$DISK2_PID" "$DISK2_SERIAL" "$DISK_PRODUCT" &&
	gadget_storage disk2 "$DISK2_IMG" &&
	gadget_bind disk dummy_udc.0 &&
	gadget_bind loop dummy_udc.1
}
check "configfs gadgets created and bound (mass storage, loopback)" setup_gadgets

b=$(dummy_busid 0)
check "disk gadget enumerates on dummy_hcd.0 as ${b:-?} ($DISK_VID:$DISK_PID)" \
	wait_for 10 usb_dev_is "$b" "$DISK_VID" "$DISK_PID"
b=$(dummy_busid 1)
check "loopback gadget enumerates on dummy_hcd.1 as ${b:-?} ($LOOP_VID:$LOOP_PID)" \
	wait_for 10 usb_dev_is "$b" "$LOOP_VID" "$LOOP_PID"
check "usbipd listens on 127.0.0.1:$USBIPD_PORT" start_usbipd
