# usbgw-attach --follow over TLS with the guest's real vhci_hcd (issue 15
# items 4 and 7, protocol.md 1.10.8): the host vdi01 (a tlsid-issue
# certificate from the gateway's store, as in 25) subscribes on the TLS
# listener and attaches whatever the gateway says is authorized for it,
# without anyone typing a busid.  The disk approved --permanent --to vdi01
# appears on vhci and reads its checksum; the loopback gadget approved for
# vdi02 is never named nor attached; the gateway stopped (SIGTERM, as 90)
# takes the disk off vhci and, started again (gw_start, as 20), gives it
# back (the permanent approval survives the restart); with the loopback
# gadget approved for vdi01 too, a revoke of the disk takes only the disk
# off and it stays off; SIGTERM frees every port.  Leaves both gadgets
# pending at the gateway, which keeps running, and removes the operator
# rule that approve --permanent wrote.

disk=$(dummy_busid 0)
loop=$(dummy_busid 1)
why=$(gw_missing)
for p in usbgw-attach tlsid-issue; do
	have_prog "$p" || why=${why:-"$p not built"}
done
[ -n "$why" ] || usbgw-attach 2>&1 | grep -q -- --follow ||
	why="usbgw-attach has no --follow"
if [ -n "$why" ]; then
	skip "follow: usbgw-attach --follow through the gateway" "$why"
	return 0
fi
TLS_PORT=3245
STORE=$GW_DIR/tls
HDIR=/tmp/follow-vdi01
b=$(cat "$E2E_STATE/gw_busid.disk" 2>/dev/null)
bl=$(cat "$E2E_STATE/gw_busid.loop" 2>/dev/null)
FLOG=$LOGS/usbgw-attach-follow.log

out=$(tlsid-issue "$STORE" "$HDIR" vdi01 2>&1)
check "follow: tlsid-issue gives vdi01 a host certificate ($out)" [ $? -eq 0 ]
st=$(gw_wait_state 15 "$disk" pending blocked)
check "follow: the disk starts neither authorized nor attached (last seen: $st)" \
	sh -c '[ "$1" = pending ] || [ "$1" = blocked ]' _ "$st"
vhci_detach_all

# follow_ports: how many vhci ports are in use.
follow_ports() { vhci_used_ports | wc -l; }
follow_subscribed() { [ "$(grep -c "knows this host as vdi01" "$FLOG")" -ge "$1" ]; }

: > "$FLOG"
usbgw-attach --follow -v -T -c "$HDIR" "127.0.0.1:$TLS_PORT" >> "$FLOG" 2>&1 &
fpid=$!
check "follow: subscribed on the TLS listener, the gateway knows the host as vdi01" \
	wait_for 20 follow_subscribed 1
check "follow: nothing on vhci while nothing is authorized for vdi01" no_vhci_device

# Another host's device first: its approval is pushed (or not) before the
# disk's, so once the disk is on vhci the loopback device had its chance.
check "follow: usbgw approve $bl --to vdi02" gwctl approve "$bl" --to vdi02
t0=$(e2e_uptime)
check "follow: usbgw approve $b --permanent --to vdi01" \
	gwctl approve "$b" --permanent --to vdi01
wait_for 15 vhci_any_used
rc=$?
ms=$(ms_since "$t0")
check "follow: the disk is on a vhci port ${ms} ms after the approval, nobody typed a busid" \
	in_time $rc "$ms" 10000
[ $rc -ne 0 ] || e2e_metric follow_approve_to_vhci_ms "$ms"
if check "follow: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	ms=$(ms_since "$t0")
	e2e_metric follow_approve_to_disk_ms "$ms"
	d=$(vhci_disk)
	check "follow: whole-disk SHA-256 through follow, TLS and vhci matches the backing file" \
		[ "$(disk_sha "$d")" = "$(file_sha "$DISK_IMG")" ]
	sh=$(gwctl show "$b" 2>&1)
	check "follow: usbgw show says attached over tls to vdi01" \
		sh -c 'echo "$1" | grep -q attached && echo "$1" | grep -qi "transport.*tls" &&
		    echo "$1" | grep -q vdi01' _ "$sh"
fi
check "follow: the device approved for vdi02 is not on vhci" \
	fails vhci_usbdev "$LOOP_VID" "$LOOP_PID"
check "follow: one vhci port in use ($(follow_ports))" [ "$(follow_ports)" -eq 1 ]
check "follow: usbgw-attach never named vdi02's device $bl" fails grep -qF "$bl" "$FLOG"
st=$(gw_state "$loop")
check "follow: vdi02's device stays authorized, not attached (state $st)" [ "$st" = authorized ]
gwctl revoke "$bl" >/dev/null

# The gateway stopped and started again, as 90 stops it and 20 starts it.
pid=$(cat "$E2E_STATE/usbgwd.pid")
t0=$(e2e_uptime)
kill -TERM "$pid"
check "restart: usbgwd exits on SIGTERM" wait_gone 15 proc_alive "$pid"
check "restart: the disk leaves vhci with the gateway" wait_gone 15 vhci_any_used
check "restart: usbgw-attach --follow keeps running" proc_alive "$fpid"
check "restart: usbgwd starts again on its database" gw_start
check "restart: subscribed again" wait_for 40 follow_subscribed 2
if check "restart: the disk comes back on vhci" wait_for 60 vhci_disk_ready; then
	e2e_metric follow_restart_to_disk_ms "$(ms_since "$t0")"
	d=$(vhci_disk)
	check "restart: whole-disk SHA-256 matches again" \
		[ "$(disk_sha "$d")" = "$(file_sha "$DISK_IMG")" ]
fi

# A second device for vdi01 (the loopback gadget, approved once), then a
# revoke of the disk: the disk leaves vhci at once and stays off, the
# other device stays; SIGTERM then frees every port.
check "revoke: usbgw approve $bl --to vdi01" gwctl approve "$bl" --to vdi01
check "revoke: the second device comes on vhci beside the disk" \
	wait_for 30 vhci_usbdev "$LOOP_VID" "$LOOP_PID"
t0=$(e2e_uptime)
check "revoke: usbgw revoke $b" gwctl revoke "$b"
wait_gone 10 vhci_usbdev "$DISK_VID" "$DISK_PID"
rc=$?
ms=$(ms_since "$t0")
check "revoke: the disk leaves vhci ${ms} ms after the revoke" in_time $rc "$ms" 10000
[ $rc -ne 0 ] || e2e_metric follow_revoke_to_gone_ms "$ms"
check "revoke: usbgw-attach says the disk was withdrawn" \
	grep -q "follow: $b withdrawn" "$FLOG"
check "revoke: the disk is not attached again within 3 s" \
	fails wait_for 3 vhci_usbdev "$DISK_VID" "$DISK_PID"
check "revoke: the other device stays on vhci, one port in use ($(follow_ports))" \
	sh -c '[ "$1" -eq 1 ]' _ "$(follow_ports)"
check "revoke: ... and it is the loopback device" vhci_usbdev "$LOOP_VID" "$LOOP_PID"
st=$(gw_state "$disk")
check "revoke: the gateway holds the disk pending (state $st)" [ "$st" = pending ]

kill -TERM "$fpid"
check "sigterm: usbgw-attach --follow exits" wait_gone 10 proc_alive "$fpid"
wait "$fpid"
rc=$?
check "sigterm: ... with exit 0 ($rc)" [ $rc -eq 0 ]
check "sigterm: every vhci port is free" wait_gone 10 vhci_any_used

# As 25 left it: the disk pending, no operator rule of ours.
kill -TERM "$fpid" 2>/dev/null
vhci_detach_all
gw_wait_state 15 "$loop" authorized >/dev/null
gwctl revoke "$bl" >/dev/null
rule=$(gwctl policy list 2>/dev/null | awk '/to-host vdi01/ && /'"$DISK_SERIAL"'/ { print $2; exit }')
check "cleanup: usbgw policy remove the operator rule (${rule:-none found})" \
	gwctl policy remove "${rule:-none}"
st=$(gw_wait_state 15 "$disk" pending blocked)
check "cleanup: the disk is pending again (last seen: $st)" [ "$st" = pending ]
st=$(gw_wait_state 15 "$loop" pending blocked)
check "cleanup: the loopback device is pending again (last seen: $st)" [ "$st" = pending ]
cat "$FLOG"
