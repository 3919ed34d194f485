# The agent's ACM serial port: approved and attached, data both ways between
# the gadget's ttyGS and the vhci side's ttyACM.

why=$(agent_missing)
agent_running || why=${why:-"usbgw-agent not running"}
if [ -n "$why" ]; then
	skip_all "$why" "agent ACM: approve, attach through the gateway" \
		"agent ACM: a ttyACM appears on vhci" \
		"agent ACM: data gadget -> vhci side" "agent ACM: data vhci side -> gadget" \
		"agent ACM: detach"
	return 0
fi
acm=$(cat "$E2E_STATE/agent_busid.acm")
GW_EXPORTER=$AGENT_EXPORTER
b=$(cat "$E2E_STATE/agent_gwbusid.$acm")
gs=$(gadget_tty acm)

check "agent ACM: usbgw approve $b" gwctl approve "$b"
gw_wait_state 10 "$acm" authorized >/dev/null
check "agent ACM: usbip attach through the gateway (-b $b)" usbip_attach "$GW_PORT" "$b"
if check "agent ACM: a ttyACM appears on vhci (cdc_acm)" \
    wait_for 30 class_node_under tty "*/vhci_hcd*"; then
	t=$(class_node_under tty "*/vhci_hcd*")
	wait_for 5 [ -c "/dev/$t" ]
	got=$(tty_oneway "$gs" "$t" gadget-to-vhci-64)
	check "agent ACM: data /dev/$gs -> vhci's /dev/$t (read $got)" [ "$got" = gadget-to-vhci-64 ]
	got=$(tty_oneway "$t" "$gs" vhci-to-gadget-64)
	check "agent ACM: data vhci's /dev/$t -> /dev/$gs (read $got)" [ "$got" = vhci-to-gadget-64 ]
fi
vhci_detach_all
check "agent ACM: detach frees the vhci port" wait_gone 10 vhci_any_used
st=$(gw_wait_state 15 "$acm" authorized)
check "agent ACM: the gateway holds it again, state authorized (last seen: $st)" \
	[ "$st" = authorized ]
