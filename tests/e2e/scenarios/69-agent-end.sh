# End of the agent scenarios: SIGTERM lets the agent give every device back to
# its kernel driver; the gateway loses its exporter agent1.

why=$(agent_missing)
agent_running || why=${why:-"usbgw-agent not running"}
if [ -n "$why" ]; then
	skip_all "$why" "agent end: usbgw-agent exits on SIGTERM" \
		"agent end: the disk has usb-storage again" \
		"agent end: no sanitizer report in the agent's log"
	return 0
fi
adisk=$(cat "$E2E_STATE/agent_busid.adisk")
acm=$(cat "$E2E_STATE/agent_busid.acm")

check "agent end: usbgw-agent exits on SIGTERM within 15 s" agent_signal TERM
check "agent end: the disk has usb-storage again ($(iface_driver "$adisk"))" \
	wait_for 5 iface_driver_is "$adisk" usb-storage
check "agent end: the ACM port has cdc_acm again ($(iface_driver "$acm"))" \
	wait_for 5 iface_driver_is "$acm" cdc_acm
check "agent end: no sanitizer report in the agent's log" \
	fails grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$AGENT_LOG"
check "agent end: usbgw exporter remove $AGENT_EXPORTER" gwctl exporter remove "$AGENT_EXPORTER"
