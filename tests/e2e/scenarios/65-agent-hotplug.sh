# Hot-plug at the thin client: the disk gadget's UDC unbound (unplugged), then
# bound again.  The gateway must show it gone, then pending (a new presence:
# 62's approval was for the last one), each within 1 s.

why=$(agent_missing)
agent_running || why=${why:-"usbgw-agent not running"}
if [ -n "$why" ]; then
	skip_all "$why" "agent hot-plug: unplugged, the gateway says gone within 1 s" \
		"agent hot-plug: plugged in again, pending within 1 s"
	return 0
fi
adisk=$(cat "$E2E_STATE/agent_busid.adisk")
GW_EXPORTER=$AGENT_EXPORTER

t0=$(e2e_uptime)
gadget_unbind adisk
wait_for 10 gw_none_live "$adisk"
rc=$?
ms=$(ms_since "$t0")
e2e_metric agent_unplug_gone_ms "$ms"
check "agent hot-plug: unplugged (UDC unbind at $t0 cs), the gateway says gone within 1 s ($ms ms)" \
	in_time "$rc" "$ms" 1000

t0=$(e2e_uptime)
gadget_bind adisk "dummy_udc.$ADISK_UDC"
wait_for 10 gw_has "$adisk" pending
rc=$?
ms=$(ms_since "$t0")
e2e_metric agent_plug_pending_ms "$ms"
check "agent hot-plug: plugged in again (UDC bind at $t0 cs), pending within 1 s ($ms ms)" \
	in_time "$rc" "$ms" 1000
check "agent hot-plug: the new presence is held by the agent (driver $(iface_driver "$adisk"))" \
	wait_for 10 iface_driver_is "$adisk" usbfs
