# Proxy mode, pending: nobody gets the disk, neither behind the gateway's back at
# usbipd nor through the gateway.

disk=$(dummy_busid 0)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "bypass: usbip attach straight at usbipd fails while the gateway holds the disk" \
		"bypass: no disk appears on vhci" \
		"pending: the gateway answers usbip list on its USB/IP port" \
		"pending: usbip attach through the gateway fails" \
		"pending: no disk appears on vhci" \
		"pending: the disk is still pending" \
		"pending: usbgwd is still running"
	return 0
fi
b=$(cat "$E2E_STATE/gw_busid.disk" 2>/dev/null)

check "bypass: usbip attach straight at usbipd ($disk) fails while the gateway holds the disk" \
	attach_refused "$USBIPD_PORT" "$disk"
usleep 1500000
check "bypass: no disk appears on vhci" no_vhci_device
vhci_detach_all

check "pending: the gateway answers usbip list on its USB/IP port" gw_answers_devlist
check "pending: usbip attach through the gateway (-b $b) fails" \
	attach_refused "$GW_PORT" "$b"
usleep 1500000
check "pending: no disk appears on vhci" no_vhci_device
vhci_detach_all
st=$(gw_state "$disk")
check "pending: the disk is still pending after the attempts (state $st)" [ "$st" = pending ]
check "pending: usbgwd is still running" gw_running
