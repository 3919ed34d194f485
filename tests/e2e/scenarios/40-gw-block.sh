# Proxy mode, policy: a block rule for mass storage keeps a newly plugged disk out,
# whoever asks for it.  The second disk gadget is plugged in only after the rule.

why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "block: usbgw policy add 'block with-interface 08:*:*'" \
		"block: the second disk gadget enumerates" \
		"block: usbip bind" \
		"block: the gateway claims the new disk, state blocked" \
		"block: usbip attach through the gateway fails" \
		"block: bypass at usbipd fails" \
		"block: no disk appears on vhci" \
		"block: usbgwd is still running"
	return 0
fi

check "block: usbgw policy add 'block with-interface 08:*:*'" \
	gwctl policy add 'block with-interface 08:*:*'
gadget_bind disk2 dummy_udc.2
disk2=$(dummy_busid 2)
check "block: the second disk gadget enumerates as $disk2 ($DISK2_VID:$DISK2_PID)" \
	wait_for 10 usb_dev_is "$disk2" "$DISK2_VID" "$DISK2_PID"
check "block: usbip bind -b $disk2" usbip bind -b "$disk2"
st=$(gw_wait_state 30 "$disk2" blocked)
check "block: the gateway claims the new disk, state blocked (last seen: $st)" [ "$st" = blocked ] ||
	gwctl policy list >&2
b=$(gw_field "$disk2" busid)
check "block: usbip attach through the gateway (-b $b) fails" attach_refused "$GW_PORT" "$b"
usleep 1000000
vhci_detach_all
check "block: bypass at usbipd ($disk2) fails" attach_refused "$USBIPD_PORT" "$disk2"
usleep 1000000
check "block: no disk appears on vhci" no_vhci_device
vhci_detach_all
check "block: usbgwd is still running" gw_running
