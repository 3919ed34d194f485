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

# SIGTERM while the disk streams to the vhci host: the agent ends cleanly
# (buffers still lent to a connection's output at exit: umem_teardown()).
GW_EXPORTER=$AGENT_EXPORTER
rd=""
st=$(gw_wait_state 20 "$adisk" pending)
if check "agent end: the disk is pending at the gateway ($st)" [ "$st" = pending ]; then
	b=$(gw_field "$adisk" busid)
	gwctl approve "$b" >/dev/null
	gw_wait_state 10 "$adisk" authorized >/dev/null
	usbip_attach "$GW_PORT" "$b"
	if check "agent end: the disk attaches through the gateway" wait_for 30 vhci_disk_ready; then
		d=$(vhci_disk)
		( while dd if="/dev/$d" of=/dev/null bs=1M iflag=direct 2>/dev/null; do :; done ) &
		rd=$!
		usleep 700000
	fi
fi
n0=$(grep -c "usbgw-agent stopped" "$AGENT_LOG")
check "agent end: usbgw-agent exits on SIGTERM within 15 s" agent_signal TERM
n1=$(grep -c "usbgw-agent stopped" "$AGENT_LOG")
check "agent end: the agent stopped cleanly while the disk streamed ('usbgw-agent stopped' logged: $n0 -> $n1)" \
	[ "$n1" -gt "$n0" ]
[ -z "$rd" ] || kill "$rd" 2>/dev/null
vhci_detach_all
wait_gone 15 vhci_disk
check "agent end: the disk has usb-storage again ($(iface_driver "$adisk"))" \
	wait_for 5 iface_driver_is "$adisk" usb-storage
check "agent end: the ACM port has cdc_acm again ($(iface_driver "$acm"))" \
	wait_for 5 iface_driver_is "$acm" cdc_acm
check "agent end: no sanitizer report in the agent's log" \
	fails grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$AGENT_LOG"
check "agent end: usbgw exporter remove $AGENT_EXPORTER" gwctl exporter remove "$AGENT_EXPORTER"
