# usbgw-attach, the vhci host's companion (issue 15 item 3, plaintext core):
# it imports through the gateway and gives vhci_hcd one end of a socketpair,
# relaying the other end to its gateway connection, so the kernel never holds
# the network socket.  Refused while pending; approved: the disk reads its
# checksum; a revoke at the gateway ends it on this host (fail closed); usbip
# detach ends the companion; SIGTERM detaches.

disk=$(dummy_busid 0)
why=$(gw_missing)
have_prog usbgw-attach || why=${why:-"usbgw-attach not built"}
if [ -n "$why" ]; then
	skip "companion: usbgw-attach through the gateway" "$why"
	return 0
fi
b=$(cat "$E2E_STATE/gw_busid.disk" 2>/dev/null)
CLOG=$LOGS/usbgw-attach.log

st=$(gw_wait_state 15 "$disk" pending blocked)
usbgw-attach "127.0.0.1:$GW_PORT" "$b" >> "$CLOG" 2>&1
rc=$?
check "companion: refused while $st (exit $rc, 1 expected)" [ $rc -eq 1 ]
check "companion: nothing on vhci after the refusal" no_vhci_device

# comp_start: usbgw-attach in the background, its pid in $cpid
comp_start() {
	usbgw-attach -v "127.0.0.1:$GW_PORT" "$b" >> "$CLOG" 2>&1 &
	cpid=$!
}
# comp_sockets: "TCP UNIX" counts of the companion's sockets (inodes of
# /proc/PID/fd found in /proc/net/tcp and /proc/net/unix).
comp_sockets() {
	local f l ino t=0 u=0
	for f in /proc/"$cpid"/fd/*; do
		l=$(readlink "$f" 2>/dev/null) || continue
		case $l in socket:\[*\]) ;; *) continue ;; esac
		ino=${l#socket:[}; ino=${ino%]}
		awk -v i="$ino" '$10 == i { f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null && t=$((t + 1))
		awk -v i="$ino" '$7 == i { f = 1 } END { exit !f }' /proc/net/unix 2>/dev/null && u=$((u + 1))
	done
	echo "$t $u"
}
check "companion: usbgw approve $b" gwctl approve "$b"
gw_wait_state 10 "$disk" authorized >/dev/null
comp_start
if check "companion: the disk appears under vhci_hcd through usbgw-attach" \
    wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	st=$(gw_wait_state 10 "$disk" attached)
	check "companion: state attached (last seen: $st)" [ "$st" = attached ]
	check "companion: whole-disk SHA-256 through the companion matches the backing file" \
		[ "$(disk_sha "$d")" = "$(file_sha "$DISK_IMG")" ]
	n=$(comp_sockets)
	check "companion: one TCP socket (the gateway) and one Unix socket (the socketpair's end; vhci has the other): got TCP/Unix $n" \
		[ "$n" = "1 1" ]
	# fail closed: revoke at the gateway ends it on this host
	check "companion: usbgw revoke $b" gwctl revoke "$b"
	check "companion: the vhci disk goes after the revoke" wait_gone 10 vhci_disk
	check "companion: usbgw-attach exits after the revoke" wait_gone 10 kill -0 "$cpid"
	wait "$cpid"
	rc=$?
	check "companion: ... with exit 0 ($rc)" [ $rc -eq 0 ]
	check "companion: the vhci port is free" wait_gone 10 vhci_any_used
fi
vhci_detach_all

# usbip detach on this host ends the companion; the gateway holds it again
st=$(gw_wait_state 15 "$disk" pending blocked)
gwctl approve "$b" >/dev/null
gw_wait_state 10 "$disk" authorized >/dev/null
comp_start
if check "companion: attached again" wait_for 30 vhci_disk_ready; then
	p=$(vhci_used_ports | head -n 1)
	check "companion: usbip detach -p $p" usbip detach -p "$p"
	check "companion: usbgw-attach exits after the detach" wait_gone 10 kill -0 "$cpid"
	st=$(gw_wait_state 15 "$disk" authorized)
	check "companion: the gateway holds the disk again, authorized (last seen: $st)" \
		[ "$st" = authorized ]
fi
# SIGTERM detaches
comp_start
if check "companion: attached a third time" wait_for 30 vhci_disk_ready; then
	kill -TERM "$cpid"
	check "companion: SIGTERM: usbgw-attach exits" wait_gone 10 kill -0 "$cpid"
	check "companion: SIGTERM: the vhci port is free" wait_gone 10 vhci_any_used
fi
vhci_detach_all
gwctl revoke "$b" >/dev/null 2>&1
gw_wait_state 15 "$disk" pending blocked >/dev/null
cat "$CLOG"
