# The agent killed (SIGKILL) while the gateway holds its disk attached to vhci:
# the kernel does not give the devices back by itself; the agent's guardian
# does.  Within 2 s the disk gadget has usb-storage and its disk back on the
# thin client; the port refuses; the gateway says gone.

why=$(agent_missing)
agent_running || why=${why:-"usbgw-agent not running"}
if [ -n "$why" ]; then
	skip_all "$why" "agent kill: the disk is attached through the gateway" \
		"agent kill: usb-storage bound again within 2 s" \
		"agent kill: the local disk is back within 2 s" \
		"agent kill: port $AGENT_PORT refuses" \
		"agent kill: the gateway says gone"
	return 0
fi
adisk=$(cat "$E2E_STATE/agent_busid.adisk")
kbd=$(cat "$E2E_STATE/agent_busid.kbd")
acm=$(cat "$E2E_STATE/agent_busid.acm")
GW_EXPORTER=$AGENT_EXPORTER

b=$(gw_field "$adisk" busid)
gwctl approve "$b"
gw_wait_state 10 "$adisk" authorized >/dev/null
usbip_attach "$GW_PORT" "$b"
check "agent kill: the disk ($b) is attached through the gateway" wait_for 30 vhci_disk_ready

pid=$(cat "$E2E_STATE/agent.pid")
t0=$(e2e_uptime)
kill -KILL "$pid"
wait_for 3 iface_driver_is "$adisk" usb-storage
rc=$?
ms=$(ms_since "$t0")
e2e_metric agent_kill_driver_back_ms "$ms"
check "agent kill: $adisk:1.0 has usb-storage again within 2 s ($ms ms; driver $(iface_driver "$adisk"))" \
	in_time "$rc" "$ms" 2000
wait_for 10 disk_under "*/dummy_hcd.$ADISK_UDC/*"
rc=$?
ms=$(ms_since "$t0")
e2e_metric agent_kill_disk_back_ms "$ms"
check "agent kill: the local disk is back within 2 s ($ms ms)" in_time "$rc" "$ms" 2000
d=$(disk_under "*/dummy_hcd.$ADISK_UDC/*")
check "agent kill: the local disk reads the image's SHA-256" \
	[ "$(disk_sha "${d:-none}")" = "$(file_sha "$AGENT_DISK_IMG")" ]
check "agent kill: the keyboard has usbhid again ($(iface_driver "$kbd"))" \
	wait_for 5 iface_driver_is "$kbd" usbhid
check "agent kill: the ACM port has cdc_acm again ($(iface_driver "$acm"))" \
	wait_for 5 iface_driver_is "$acm" cdc_acm
rm -f "$E2E_STATE/agent.pid"
check "agent kill: nothing listens on port $AGENT_PORT" fails agent_listens
out=$(usbip-tc list "127.0.0.1:$AGENT_PORT" 2>&1)
check "agent kill: a connection to port $AGENT_PORT is refused ($out)" \
	sh -c 'echo "$1" | grep -q "Connection refused"' _ "$out"
for x in $adisk $kbd $acm; do
	check "agent kill: the gateway says $AGENT_EXPORTER:$x gone" wait_for 15 gw_none_live "$x"
done
check "agent kill: the vhci disk goes away" wait_gone 30 vhci_disk
vhci_detach_all
wait_gone 10 vhci_any_used
