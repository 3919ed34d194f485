# usbgw-agent on a real device: the requests it intercepts or must get right
# (usbfs-torture through vhci: SET_INTERFACE, SET_CONFIGURATION, CLEAR_HALT,
# unlinks, zero-length and short packets, 64 URBs in flight, resets), unplug
# mid-transfer, and --reattach after kill -9.  The agent runs as root with its
# own config (it exports only this scenario's gadget) on 127.0.0.1:3266;
# Debian's usbip attaches straight from it (no gateway).
# Alone: E2E_ONLY="00 71".

T66_VID=1209 T66_PID=0066
# The e2e agent of 61-69 may still run: serial "KEEP" keeps the gadget local
# for it (agent_conf); this scenario's own agent exports it by id.
T66_SERIAL=${KEEP_SERIAL:-E2E-TORTURE-66}
T66_PORT=3266
T66_DIR=/tmp/a66
T66_LOG=$LOGS/agent66.log
T66_G=/sys/kernel/config/usb_gadget/t66

for p in usbgw-agent usbfs-torture; do
	if ! have_prog "$p"; then
		skip "agent requests: usbfs-torture through the agent" "$p not built"
		return 0
	fi
done

udc=$(free_udc)
if [ -z "$udc" ]; then
	skip "agent requests: usbfs-torture through the agent" "no free dummy_udc"
	return 0
fi
n=${udc#dummy_udc.}

# The gadget: Loopback (interface 0), CDC ECM (1 control, 2 data with
# alternate settings 0 and 1; the gadget's network interface answers ARP for
# $T66_IP), mass storage (3: a kernel driver to give back).
T66_IP=10.66.0.1
mkdir -p "$T66_DIR"
dd if=/dev/zero of="$T66_DIR/disk.img" bs=1M count=1 2>/dev/null
ecm=1
modprobe usb_f_ecm 2>/dev/null || { ecm=0; e2e_diag "agent requests: no usb_f_ecm: the SET_INTERFACE alt checks skip"; }
make_gadget() {
	gadget_new t66 "$T66_VID" "$T66_PID" "$T66_SERIAL" "E2E Torture" &&
	mkdir "$T66_G/functions/Loopback.0" &&
	ln -s "$T66_G/functions/Loopback.0" "$T66_G/configs/c.1/" &&
	if [ $ecm = 1 ]; then
		mkdir "$T66_G/functions/ecm.0" &&
		ln -s "$T66_G/functions/ecm.0" "$T66_G/configs/c.1/"
	fi &&
	mkdir "$T66_G/functions/mass_storage.0" &&
	echo "$T66_DIR/disk.img" > "$T66_G/functions/mass_storage.0/lun.0/file" &&
	ln -s "$T66_G/functions/mass_storage.0" "$T66_G/configs/c.1/" &&
	gadget_bind t66 "$udc"
}
check "agent requests: gadget (loopback, ECM, mass storage) bound to $udc" make_gadget
ip_arg=
if [ $ecm = 1 ]; then
	ifn=$(cat "$T66_G/functions/ecm.0/ifname")
	echo 1 > "/proc/sys/net/ipv6/conf/$ifn/disable_ipv6" 2>/dev/null
	check "agent requests: the gadget's $ifn has $T66_IP" \
		sh -c "ip addr add $T66_IP/24 dev $ifn && ip link set $ifn up" &&
		ip_arg="-a $T66_IP"
fi
busid=$(dummy_busid "$n")
check "agent requests: it enumerates as ${busid:-?}" \
	wait_for 10 usb_dev_is "$busid" "$T66_VID" "$T66_PID"
# the mass-storage interface's number
msif() {
	local i
	for i in /sys/bus/usb/devices/"$busid":1.*; do
		[ "$(cat "$i/bInterfaceClass" 2>/dev/null)" = 08 ] && { echo "$i"; return 0; }
	done
	return 1
}
storage_bound() {
	local i
	i=$(msif) || return 1
	[ "$(basename "$(readlink "$i/driver")")" = usb-storage ]
}
check "agent requests: usb-storage binds its storage interface" wait_for 15 storage_bound

cat > "$T66_DIR/agent.conf" <<EOF
name e2e66
listen 127.0.0.1:$T66_PORT
allow-from 127.0.0.1
state-file $T66_DIR/held
export id $T66_VID:$T66_PID
keep-local id *:*
EOF
agent66_start() {
	usbgw-agent -f -v -c "$T66_DIR/agent.conf" >> "$T66_LOG" 2>&1 &
	echo $! > "$T66_DIR/pid"
	wait_for 20 agent66_lists
}
agent66_lists() { timeout 5 usbip --tcp-port $T66_PORT list -r 127.0.0.1 2>/dev/null | grep -q " $busid:"; }
agent66_stop() {
	local p
	p=$(cat "$T66_DIR/pid" 2>/dev/null) || return 0
	kill -TERM "$p" 2>/dev/null
	wait_gone 10 kill -0 "$p"
}
t66_node() { usbdev_node "$(vhci_usbdev "$T66_VID" "$T66_PID")"; }
t66_attach() {
	usbip_attach "$T66_PORT" "$busid" &&
	wait_for 20 vhci_usbdev "$T66_VID" "$T66_PID" &&
	wait_for 5 sh -c '[ -c "$1" ]' _ "$(t66_node)"
}
# each line of usbfs-torture's output as a result
t66_results() {	# t66_results PREFIX < OUTPUT
	local line
	while IFS= read -r line; do
		case $line in
		"ok - "*" # SKIP "*)	l=${line#ok - }
					skip "$1: ${l% # SKIP *}" "${l##* # SKIP }" ;;
		"ok - "*)		ok "$1: ${line#ok - }" ;;
		"not ok - "*)		not_ok "$1: ${line#not ok - }" ;;
		esac
	done
}
# What vhci said since the mark about losing the device: an answer it could not
# match (it then drops the connection), the connection's end, a disconnect.
# ("unlink->seqnum N", "urb->status -104" and "the urb (seqnum N) was already
# given back" are the normal unlink paths, 1.3.5 cases 2 and 1.)
vhci_trouble() {
	dmesg_since | grep -E "vhci_hcd.*(cannot find|connection closed|disconnect device|stop threads)|USB disconnect" || true
}

if ! check "agent requests: usbgw-agent exports $busid on 127.0.0.1:$T66_PORT" agent66_start; then
	cat "$T66_LOG"
	vhci_detach_all; gadget_unbind t66
	return 0
fi
check "agent requests: the agent took the storage interface from usb-storage" \
	wait_gone 10 storage_bound
check "agent requests: the state file lists $busid" grep -q "^$busid " "$T66_DIR/held"

# 1. The requests.
if check "agent requests: usbip attach from the agent" t66_attach; then
	node=$(t66_node)
	dmesg_mark
	usbfs-torture -R $ip_arg "$node" > "$T66_DIR/torture.out" 2>&1
	rc=$?
	cat "$T66_DIR/torture.out"
	t66_results "agent requests" < "$T66_DIR/torture.out"
	check "agent requests: usbfs-torture passed every check (exit $rc)" [ $rc -eq 0 ]
	why=$(vhci_trouble)
	check "agent requests: vhci kept the device (dmesg: ${why:-nothing})" [ -z "$why" ]
	grep '^#' "$T66_DIR/torture.out" | while IFS= read -r l; do e2e_diag "agent requests: ${l#\# }"; done
fi

# 2. Unplug mid-transfer: 8 bulk INs pending when the gadget's UDC goes.
node=$(t66_node 2>/dev/null)
if [ -n "$node" ] && [ -c "$node" ]; then
	usbfs-torture -u 8 -t 30000 "$node" > "$T66_DIR/unplug.out" 2>&1 &
	tpid=$!
	wait_for 10 grep -q '^pending' "$T66_DIR/unplug.out"
	usleep 300000
	: > "$T66_DIR/mark.log"; cp "$T66_LOG" "$T66_DIR/mark.log"
	gadget_unbind t66
	if wait_gone 40 kill -0 $tpid; then
		wait $tpid
		rc=$?
	else
		# stuck in the kernel (D state: vhci waits for an answer)
		rc=124
		a=$(cat "$T66_DIR/pid")
		e2e_diag "agent unplug: usbfs-torture -u 8 still running after 40 s;" \
			"agent cpu ticks $(awk '{ print $14 + $15 }' /proc/$a/stat)," \
			"1 s later $(sleep 1; awk '{ print $14 + $15 }' /proc/$a/stat)"
		netstat -tn 2>/dev/null | grep ":$T66_PORT"
		ls -l /proc/$a/fd
		cat /proc/$tpid/stack 2>/dev/null
	fi
	cat "$T66_DIR/unplug.out"
	t66_results "agent unplug" < "$T66_DIR/unplug.out"
	check "agent unplug: usbfs-torture -u 8 exits 0 ($rc)" [ $rc -eq 0 ]
	ended() { tail -n +$(($(wc -l < "$T66_DIR/mark.log") + 1)) "$T66_LOG" | grep -q "release busid=$busid "; }
	check "agent unplug: the agent logs the import's end (release busid=$busid)" wait_for 10 ended
	tail -n +$(($(wc -l < "$T66_DIR/mark.log") + 1)) "$T66_LOG"
	check "agent unplug: the vhci device goes away" wait_gone 15 vhci_usbdev "$T66_VID" "$T66_PID"
	check "agent unplug: the agent no longer lists $busid" wait_gone 10 agent66_lists
	check "agent unplug: the gadget comes back on $udc" gadget_bind t66 "$udc"
	check "agent unplug: it enumerates again" wait_for 10 usb_dev_is "$busid" "$T66_VID" "$T66_PID"
	if ! pidof systemd-udevd >/dev/null 2>&1; then
		# No udev monitor, no arrival (protocol.md 1.9.3): start the agent again.
		e2e_diag "agent unplug: no udevd: the agent is restarted to see the device"
		agent66_stop
		agent66_start
	fi
	check "agent unplug: exportable again after the replug" wait_for 20 agent66_lists
	check "agent unplug: the storage interface is held again (not usb-storage)" \
		wait_gone 10 storage_bound
	if check "agent unplug: usbip attach again" t66_attach; then
		out=$(e2e-bulk -m 1 "$(t66_node)" 2>&1)
		check "agent unplug: 1 MiB bulk echo after the replug ($out)" [ $? -eq 0 ]
	fi
	vhci_detach_all
	check "agent unplug: detach frees the vhci port" wait_gone 10 vhci_any_used
	check "agent unplug: exportable after the detach" wait_for 20 agent66_lists
else
	skip "agent unplug: pending INs answered when the UDC goes" "not attached"
fi

# 3a. The keep-list on SIGHUP: a reload that keeps the device gives an
# exportable device back to its drivers at once and ends an import of it; a
# reload that lets go takes it again.
t66_conf() {	# t66_conf keep|export
	{
		echo "name e2e66"
		echo "listen 127.0.0.1:$T66_PORT"
		echo "allow-from 127.0.0.1"
		echo "state-file $T66_DIR/held"
		[ "$1" = keep ] && echo "keep-local id $T66_VID:$T66_PID"
		echo "export id $T66_VID:$T66_PID"
		echo "keep-local id *:*"
	} > "$T66_DIR/agent.conf"
}
t66_hup() { t66_conf "$1" && kill -HUP "$(cat "$T66_DIR/pid")"; }
t66_since() { tail -n +$(($(wc -l < "$T66_DIR/mark.log") + 1)) "$T66_LOG"; }
t66_mark() { cp "$T66_LOG" "$T66_DIR/mark.log"; }
t66_logged() { t66_since | grep -q "$1"; }
if wait_for 20 agent66_lists; then
	t66_mark
	check "agent keep reload: SIGHUP with 'keep-local id $T66_VID:$T66_PID'" t66_hup keep
	check "agent keep reload: usb-storage is bound again (given back at once)" \
		wait_for 10 storage_bound
	check "agent keep reload: the agent no longer lists $busid" wait_gone 10 agent66_lists
	check "agent keep reload: audit keep-local busid=$busid ... reason=reload" \
		wait_for 5 t66_logged "audit: keep-local busid=$busid .*reason=reload"
	check "agent keep reload: the state file no longer lists $busid" \
		fails grep -q "^$busid " "$T66_DIR/held"
	t66_mark
	check "agent keep reload: SIGHUP without it" t66_hup export
	check "agent keep reload: the storage interface is taken again" \
		wait_gone 10 storage_bound
	check "agent keep reload: exportable again" wait_for 10 agent66_lists
	if check "agent keep reload: usbip attach from the agent" t66_attach; then
		t66_mark
		check "agent keep reload: SIGHUP with the keep line while imported" t66_hup keep
		check "agent keep reload: the import ends (vhci device gone)" \
			wait_gone 15 vhci_usbdev "$T66_VID" "$T66_PID"
		check "agent keep reload: audit end busid=$busid reason=\"keep-local after reload\"" \
			wait_for 5 t66_logged "audit: end peer=.* busid=$busid reason=\"keep-local after reload\""
		check "agent keep reload: usb-storage is bound again after the import" \
			wait_for 10 storage_bound
		check "agent keep reload: not listed after the import" fails agent66_lists
		t66_since
	fi
	vhci_detach_all
	wait_gone 10 vhci_any_used
	t66_mark
	check "agent keep reload: SIGHUP without it, again" t66_hup export
	t66_held_again() { wait_for 10 agent66_lists && wait_gone 10 storage_bound; }
	check "agent keep reload: exportable again, storage interface held" t66_held_again
else
	not_ok "agent keep reload: $busid exportable before the reload (usbip list at the agent)"
fi

# 3b. A reload that keeps the device while an import of it is between its
# request and its answer (the import's reset, on the worker; a device claimed
# anew is reset before its first import): whichever side of the reset the
# reload lands on, the import is refused or ends and the device goes back to
# its drivers.  Five rounds, the reload 0.05 to 0.4 s after usbip attach
# starts; at least one must land in the reset (the agent logs it).
t66_held_again() { wait_for 10 agent66_lists && wait_gone 10 storage_bound; }
hits=0
for delay in 50000 100000 150000 250000 400000; do
	t66_mark
	usbip_attach "$T66_PORT" "$busid" >/dev/null 2>&1 &
	ap=$!
	usleep $delay
	t66_hup keep
	wait $ap
	t66_logged "during the import's reset" && hits=$((hits + 1))
	check "agent keep race ($delay us): no import of $busid is left" \
		wait_gone 15 vhci_usbdev "$T66_VID" "$T66_PID"
	check "agent keep race ($delay us): usb-storage is bound again" \
		wait_for 10 storage_bound
	vhci_detach_all
	wait_gone 10 vhci_any_used
	t66_hup export
	check "agent keep race ($delay us): exportable again, storage interface held" \
		t66_held_again
done
check "agent keep race: a reload landed in the import's reset ($hits of 5)" [ "$hits" -ge 1 ]

# 3c. The vhci host unconfigures the device (SET_CONFIGURATION 0, which the
# agent carries out): no interface is claimed then, but the device is still the
# agent's, named in the state file, and comes back to its drivers, configured,
# when the agent dies (the guardian) or stops (SIGTERM).
t66_unconfigure() {
	local v
	v=$(vhci_usbdev "$T66_VID" "$T66_PID") || return 1
	echo 0 > "$v/bConfigurationValue" || return 1
	wait_for 10 sh -c 'f=/sys/bus/usb/devices/$1/bConfigurationValue; [ -e "$f" ] && [ -z "$(cat "$f")" ]' _ "$busid"
}
for how in KILL TERM; do
	if check "agent unconfigured ($how): usbip attach from the agent" t66_attach &&
	    check "agent unconfigured ($how): SET_CONFIGURATION 0 from the vhci host unconfigures $busid" \
		t66_unconfigure; then
		check "agent unconfigured ($how): the state file still lists $busid" \
			grep -Eq "^$busid [0-9]+ [0-9]+ [0-9]+ -( |\$)" "$T66_DIR/held"
		p=$(cat "$T66_DIR/pid")
		kill -$how "$p"
		check "agent unconfigured ($how): the agent is gone" wait_gone 10 kill -0 "$p"
		check "agent unconfigured ($how): configured again, usb-storage bound" \
			wait_for 5 storage_bound
		vhci_detach_all
		wait_gone 10 vhci_any_used
	else
		agent66_stop
	fi
	check "agent unconfigured ($how): a new agent takes the device again" agent66_start
	check "agent unconfigured ($how): the storage interface is held again" \
		wait_gone 10 storage_bound
done

# 3. kill -9: the guardian gives the interfaces back to their drivers within
# 2 s; with the guardian killed too, --reattach does.
agent_pids() {	# the agent and its guardian (its child)
	local p
	p=$(cat "$T66_DIR/pid")
	echo "$p"
	for s in /proc/[0-9]*/stat; do
		awk -v p="$p" '$4 == p { print $1 }' "$s" 2>/dev/null
	done
}
check "agent reattach: the agent holds the storage interface" fails storage_bound
set -- $(agent_pids)
check "agent reattach: the agent has a guardian process ($*)" [ $# -eq 2 ]
t0=$(e2e_uptime)
kill -9 "$1"
wait_for 3 storage_bound
rc=$?
ms=$(( ($(e2e_uptime) - t0) * 10 ))
e2e_metric agent_guardian_back_ms "$ms"
check "agent reattach: kill -9 the agent: usb-storage back within 2 s ($ms ms)" \
	sh -c '[ "$1" -eq 0 ] && [ "$2" -le 2000 ]' _ "$rc" "$ms"
[ $# -eq 2 ] && check "agent reattach: the guardian exits after that" wait_gone 5 kill -0 "$2"

check "agent reattach: a new agent takes the device again" agent66_start
check "agent reattach: the storage interface is held again" wait_gone 10 storage_bound
set -- $(agent_pids)
[ $# -eq 2 ] && kill -9 "$2"
kill -9 "$1"
wait_gone 10 kill -0 "$1"
usleep 500000
check "agent reattach: with the guardian killed first, usb-storage stays unbound" fails storage_bound
out=$(usbgw-agent --reattach "$T66_DIR/held" 2>&1)
rc=$?
echo "$out"
check "agent reattach: usbgw-agent --reattach exits 0 ($out)" [ $rc -eq 0 ]
check "agent reattach: usb-storage is bound again" wait_for 10 storage_bound

vhci_detach_all
gadget_unbind t66 2>/dev/null
cat "$T66_LOG"
