# Hot-plug at the thin client: the disk gadget's UDC unbound (unplugged), then
# bound again.  The gateway must show it gone, then pending (a new presence:
# 62's approval was for the last one), each within 1 s (plugging in: of the
# kernel's enumeration; from the UDC bind it is reported).

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

# Plugging in: the kernel enumerates the device first (on dummy_hcd under
# TCG that alone takes a good part of a second: reported, not ours); from
# the moment the device is in sysfs, the agent must see it, claim it and
# push it, and the gateway claim and probe it: pending within 1 s of that.
t0=$(e2e_uptime)
gadget_bind adisk "dummy_udc.$ADISK_UDC"
wait_for 10 test -e "/sys/bus/usb/devices/$adisk/idVendor"
t1=$(e2e_uptime)
wait_for 10 gw_has "$adisk" pending
rc=$?
ms=$(ms_since "$t0")
ms1=$(ms_since "$t1")
e2e_metric agent_plug_enumerated_ms $(( (t1 - t0) * 10 ))
e2e_metric agent_plug_pending_ms "$ms"
e2e_metric agent_enumerated_pending_ms "$ms1"
check "agent hot-plug: plugged in again (UDC bind at $t0 cs, in sysfs at $t1 cs), pending within 1 s of the kernel's enumeration ($ms1 ms; $ms ms from the bind)" \
	in_time "$rc" "$ms1" 1000
check "agent hot-plug: the new presence is held by the agent (driver $(iface_driver "$adisk"))" \
	wait_for 10 iface_driver_is "$adisk" usbfs
