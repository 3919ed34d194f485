# The agent's keyboard (exported by the test config): approved and attached,
# its interrupt reports reach the vhci side's hidraw.

why=$(agent_missing)
agent_running || why=${why:-"usbgw-agent not running"}
if [ -n "$why" ]; then
	skip_all "$why" "agent keyboard: approve, attach through the gateway" \
		"agent keyboard: a hidraw device appears on vhci" \
		"agent keyboard: a report written to hidg arrives on the vhci side" \
		"agent keyboard: detach"
	return 0
fi
kbd=$(cat "$E2E_STATE/agent_busid.kbd")
GW_EXPORTER=$AGENT_EXPORTER
b=$(cat "$E2E_STATE/agent_gwbusid.$kbd")
hidg=$(gadget_hidg kbd)

check "agent keyboard: no hidraw on vhci while pending" fails class_node_under hidraw "*/vhci_hcd*"
check "agent keyboard: usbgw approve $b" gwctl approve "$b"
gw_wait_state 10 "$kbd" authorized >/dev/null
check "agent keyboard: usbip attach through the gateway (-b $b)" usbip_attach "$GW_PORT" "$b"
if check "agent keyboard: a hidraw device appears on vhci (usbhid)" \
    wait_for 30 class_node_under hidraw "*/vhci_hcd*"; then
	h=$(class_node_under hidraw "*/vhci_hcd*")
	got=$(kbd_report_arrives "$hidg" "$h")
	check "agent keyboard: a report written to /dev/$hidg arrives on vhci's /dev/$h (read $got)" \
		[ "$got" = 0000040000000000 ]
	got=$(kbd_report_arrives "$hidg" "$h")
	check "agent keyboard: ... and a second one (read $got)" [ "$got" = 0000040000000000 ]
fi
vhci_detach_all
check "agent keyboard: detach frees the vhci port" wait_gone 10 vhci_any_used
st=$(gw_wait_state 15 "$kbd" authorized)
check "agent keyboard: the gateway holds it again, state authorized (last seen: $st)" \
	[ "$st" = authorized ]
