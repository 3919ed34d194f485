# Proxy mode, revoke while attached: the vhci host loses the device at once and
# the gateway takes it back, pending or blocked; attaching again fails.

disk=$(dummy_busid 0)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "revoke: usbgw revoke succeeds" \
		"revoke: the vhci disk disappears" \
		"revoke: the vhci port is released" \
		"revoke: the gateway reclaims the disk, state pending or blocked" \
		"revoke: usbip attach through the gateway fails again" \
		"revoke: bypass at usbipd still fails" \
		"revoke: no device on vhci after both attempts"
	return 0
fi
b=$(cat "$E2E_STATE/gw_busid.disk" 2>/dev/null)

t0=$(e2e_uptime)
check "revoke: usbgw revoke $b succeeds" gwctl revoke "$b"
if wait_gone 10 vhci_disk; then
	ok "revoke: the vhci disk disappears ($(( ($(e2e_uptime) - t0) * 10 )) ms after revoke)"
else
	not_ok "revoke: the vhci disk disappears within 10 s"
fi
check "revoke: the vhci port is released" wait_gone 10 vhci_any_used
vhci_detach_all
st=$(gw_wait_state 15 "$disk" pending blocked)
check "revoke: the gateway reclaims the disk, state pending or blocked (last seen: $st)" \
	sh -c '[ "$1" = pending ] || [ "$1" = blocked ]' _ "$st"
check "revoke: usbip attach through the gateway (-b $b) fails again" \
	attach_refused "$GW_PORT" "$b"
usleep 1000000
vhci_detach_all
check "revoke: bypass at usbipd ($disk) still fails" attach_refused "$USBIPD_PORT" "$disk"
usleep 1000000
check "revoke: no device on vhci after both attempts" no_vhci_device
vhci_detach_all
