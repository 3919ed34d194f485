# End of the local-mode scenarios: whatever 50-52 left behind is cleaned up (a
# local-mode usbgwd still running, a vhci port in use, the lock-down still on
# the root hubs), and the proxy gateway gets its exporter back and claims the
# disk again, so 90-gw-stop sees it as 20-40 left it.

disk=$(dummy_busid 0)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip "local end: the proxy gateway claims the disk again" "$why"
	return 0
fi

if lgw_running; then
	e2e_diag "local end: the local-mode usbgwd was still running; stopping it"
	lgw_stop
fi
if vhci_any_used; then
	e2e_diag "local end: vhci ports still in use: $(vhci_used_ports | tr '\n' ' ')"
	vhci_detach_all
fi
vhci_roothubs_restore
rm -f "$E2E_STATE/roothubs"

if [ -f "$E2E_STATE/proxy_exporter_removed" ] && gw_running; then
	ensure_bound "$disk"
	check "local end: the proxy gateway gets its exporter back (usbgw exporter add $GW_EXPORTER)" \
		gwctl exporter add "$GW_EXPORTER" "127.0.0.1:$USBIPD_PORT"
	st=$(gw_wait_state 30 "$disk" pending blocked)
	check "local end: the proxy gateway claims the disk again, state pending or blocked (last seen: $st)" \
		sh -c '[ "$1" = pending ] || [ "$1" = blocked ]' _ "$st"
fi
