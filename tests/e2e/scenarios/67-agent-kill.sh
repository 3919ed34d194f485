# The agent killed (SIGKILL) while the gateway holds its disk attached to vhci:
# the kernel does not give the devices back by itself; the agent's guardian
# does.  The kill lands while the vhci host writes the disk (the image's own
# bytes, so its content stays), so the device is left halfway through a
# command (once in CI, without a reset, the local disk was not back after
# 10 s).  The guardian resets it as the agent's own release does, and
# within 2 s the disk gadget has usb-storage and its disk back on the thin
# client; the port refuses; the gateway says gone.

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
vd=$(vhci_disk)
# Writes in flight when the agent dies (direct: every write is a command).
( while :; do dd if="$AGENT_DISK_IMG" of="/dev/$vd" bs=1M oflag=direct \
	2>/dev/null || exit 0; done ) &
writer=$!
sleep 0.5
echo "e2e-67: agent kill" > /dev/kmsg
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
if ! check "agent kill: the local disk is back within 2 s ($ms ms)" \
	in_time "$rc" "$ms" 2000; then
	dmesg | sed -n '/e2e-67: agent kill/,$p' | head -60 |
		while IFS= read -r l; do e2e_diag "$l"; done
	grep guardian "$AGENT_LOG" | tail -5 |
		while IFS= read -r l; do e2e_diag "$l"; done
fi
# The guardian's reset comes before usb-storage binds (usb-storage's own
# reset recovery of a confused device would come after).
reset_first() {
	dmesg | sed -n '/e2e-67: agent kill/,$p' | awk -v b="$1" '
		index($0, "usb " b ": reset ") && !bound { r = 1 }
		index($0, "usb-storage " b ":1.0: USB Mass Storage") { bound = 1 }
		END { exit !(r && bound) }'
}
check "agent kill: the guardian reset $adisk before usb-storage bound" \
	reset_first "$adisk"
d=$(disk_under "*/dummy_hcd.$ADISK_UDC/*")
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
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
