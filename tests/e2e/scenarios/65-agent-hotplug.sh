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

# The times are the gateway's: its events as they come (usbgw watch), each
# stamped on arrival with the guest's uptime in centiseconds, by a shell
# builtin.  Polling `usbgw list` instead costs two process starts a round
# (100-300 ms under TCG) and once made a 1 s check read 1010 ms.
ev=$E2E_STATE/events.65
: > "$ev"
rm -f "$ev.fifo"
mkfifo "$ev.fifo"
{
	while IFS= read -r l; do
		read -r up _ < /proc/uptime
		echo "${up%.*}${up#*.} $l"
	done < "$ev.fifo" > "$ev"
} &
usbgw -s "$GW_SOCK" watch --json --events gone,pending > "$ev.fifo" 2>/dev/null &
watch_pid=$!
# ev_at TYPE SINCE: the stamp (cs) of the first TYPE event of
# $GW_EXPORTER:$adisk stamped at SINCE or later; nothing if none yet.
ev_at() {
	awk -v s="$2" -v e="\"event\": *\"$1\"" \
	    -v b="\"busid\": *\"$GW_EXPORTER:$adisk\"" \
	    '$1 + 0 >= s + 0 && $0 ~ e && $0 ~ b { print $1 + 0; exit }' "$ev"
}
ev_seen() { [ -n "$(ev_at "$1" "$2")" ]; }
# The watcher is connected before anything is unplugged.
usleep 1500000

t0=$(e2e_uptime)
gadget_unbind adisk
wait_for 10 ev_seen gone "$t0"
rc=$?
te=$(ev_at gone "$t0")
ms=$(( (${te:-$(e2e_uptime)} - t0) * 10 ))
e2e_metric agent_unplug_gone_ms "$ms"
check "agent hot-plug: unplugged (UDC unbind at $t0 cs), the gateway says gone within 1 s ($ms ms, its event at ${te:-none} cs)" \
	in_time "$rc" "$ms" 1000
check "agent hot-plug: unplugged, the gateway lists $adisk gone" \
	wait_for 10 gw_none_live "$adisk"

# Plugging in: the kernel enumerates the device first (on dummy_hcd under
# TCG that alone takes a good part of a second: reported, not ours); from
# the moment the device is in sysfs, the agent must see it, claim it and
# push it, and the gateway claim and probe it: pending within 1 s of that.
t0=$(e2e_uptime)
gadget_bind adisk "dummy_udc.$ADISK_UDC"
wait_for 10 test -e "/sys/bus/usb/devices/$adisk/idVendor"
t1=$(e2e_uptime)
wait_for 10 ev_seen pending "$t0"
rc=$?
te=$(ev_at pending "$t0")
te=${te:-$(e2e_uptime)}
ms=$(( (te - t0) * 10 ))
ms1=$(( (te - t1) * 10 ))
check "agent hot-plug: plugged in again, the gateway lists $adisk pending" \
	wait_for 10 gw_has "$adisk" pending
e2e_metric agent_plug_enumerated_ms $(( (t1 - t0) * 10 ))
e2e_metric agent_plug_pending_ms "$ms"
e2e_metric agent_enumerated_pending_ms "$ms1"
check "agent hot-plug: plugged in again (UDC bind at $t0 cs, in sysfs at $t1 cs), pending within 1 s of the kernel's enumeration ($ms1 ms; $ms ms from the bind)" \
	in_time "$rc" "$ms1" 1000
check "agent hot-plug: the new presence is held by the agent (driver $(iface_driver "$adisk"))" \
	wait_for 10 iface_driver_is "$adisk" usbfs
kill "$watch_pid" 2>/dev/null
rm -f "$ev.fifo"
