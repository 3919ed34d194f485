# Local mode (issue 7), direct: a second usbgwd with mode = local (own database,
# socket, USB/IP port; lib.sh lgw_*) claims the gadget disk from usbipd and, once
# approved, attaches it to this guest's real vhci_hcd itself, handing the kernel
# its TCP claim (the gateway sees no URB).  The attachment survives a restart of
# the gateway (adopted); usbgw detach/attach; the vhci side letting go; revoke
# detaches the vhci port.
# The proxy gateway gives up its exporter first so that only one gateway claims
# the gadgets; 59-local-end.sh gives it back.

disk=$(dummy_busid 0)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "local: the proxy gateway lets go of its devices" \
		"local direct: usbgwd starts in mode = local" \
		"local direct: the gateway claims the disk, state pending" \
		"local direct: nothing attached to vhci while pending" \
		"local direct: approve, the gateway attaches the disk to vhci itself" \
		"local direct: vhci port in use with the exporter's devid" \
		"local direct: the disk appears under vhci_hcd" \
		"local direct: whole-disk SHA-256 matches the backing file" \
		"local direct: a write lands in the backing file" \
		"throughput: local direct whole-disk read timed" \
		"local direct: nobody else gets the disk while it is attached" \
		"local direct: a restart adopts the attachment" \
		"local direct: usbgw detach and attach" \
		"local direct: the vhci side lets go, the gateway holds the device" \
		"local direct: revoke detaches the vhci port" \
		"local direct: the gateway reclaims the disk, state pending"
	return 0
fi

# The proxy gateway (20-40) holds every gadget usbipd exports; without its
# exporter it releases them.
gw_running &&
	check "local: the proxy gateway lets go of its devices (usbgw exporter remove $GW_EXPORTER)" \
		proxy_let_go
ensure_bound "$disk"
check "local: usbipd lists the disk $disk again" wait_for 20 usbipd_lists "$disk"

lgw_use
check "local direct: usbgwd starts in mode = local (local-attach = direct)" \
	lgw_start direct "local-attach = direct"
check "local direct: usbgw exporter add $LGW_EXPORTER 127.0.0.1:$USBIPD_PORT" \
	gwctl exporter add "$LGW_EXPORTER" "127.0.0.1:$USBIPD_PORT"
st=$(gw_wait_state 30 "$disk" pending)
check "local direct: the gateway claims the disk, state pending (last seen: $st)" [ "$st" = pending ]
usleep 1000000
check "local direct: nothing attached to vhci while pending" no_vhci_device

b=$(gw_field "$disk" busid)
devid=$(usb_devid "$disk")
check "local direct: usbgw approve $b" gwctl approve "$b"
st=$(gw_wait_state 15 "$disk" attached)
check "local direct: the gateway attaches the disk to vhci itself, state attached (last seen: $st)" \
	[ "$st" = attached ]
port=$(gw_local "$disk" port)
mode=$(gw_local "$disk" mode)
check "local direct: usbgw list shows mode direct on a vhci port (mode ${mode:-?}, port ${port:-?})" \
	[ "$mode:${port:+set}" = direct:set ]
# sta 006 (in use) and the devid written to attach: the exporter's own, since
# the kernel talks to usbipd over the gateway's claim.
wait_for 15 vhci_port_is "${port:-999}" 006
line=$(vhci_port_line "${port:-999}")
check "local direct: vhci port ${port:-?} in use with the exporter's devid $devid ($line)" \
	[ "$(echo "$line" | awk '{ print $3 " " $5 }')" = "006 $devid" ]

if check "local direct: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	want=$(file_sha "$DISK_IMG")
	got=$(disk_sha "$d")
	if [ "$got" = "$want" ] && [ "$got" = "$(cat /e2e/disk.sha256)" ]; then
		ok "local direct: whole-disk SHA-256 through vhci matches the backing file"
	else
		not_ok "local direct: whole-disk SHA-256 through vhci matches the backing file" \
			"read $got, backing file $want, host $(cat /e2e/disk.sha256)"
	fi
	why=$(disk_write_lands "$d" "$DISK_IMG" 300)
	check "local direct: a write through vhci lands in the backing file${why:+ ($why)}" [ -z "$why" ]
	mbps=$(disk_read_mbps "$d")
	check "throughput: local direct whole-disk read timed (${mbps:-?} MB/s)" [ -n "$mbps" ]
	[ -z "$mbps" ] || e2e_metric local_direct_read_mbps "$mbps"
fi
st=$(gw_state "$disk")
check "local direct: still attached after the reads (state $st)" [ "$st" = attached ]

# Nobody else gets it meanwhile: not through the local gateway's own USB/IP
# server (busy), not straight from usbipd (the kernel holds the claim).
check "local direct: usbip attach through the local gateway's USB/IP port (-b $b) fails while attached" \
	attach_refused "$LGW_PORT" "$b"
check "local direct: bypass at usbipd ($disk) fails while attached" \
	attach_refused "$USBIPD_PORT" "$disk"
n=$(vhci_used_ports | wc -l)
check "local direct: still exactly one vhci port in use ($n)" [ "$n" -eq 1 ]

# A clean stop leaves a direct attachment in place (the kernel holds the
# exporter's socket); the restarted gateway adopts it.
check "local direct: usbgwd stops (SIGTERM) with the disk attached" lgw_stop
check "local direct: after the stop vhci port ${port:-?} still holds the disk ($(vhci_port_line "${port:-999}"))" \
	vhci_port_is "${port:-999}" 006
d=$(vhci_disk)
got=$(disk_sha "${d:-none}" 2>/dev/null)
check "local direct: the disk still reads correctly with no gateway running" \
	[ "$got" = "$(cat /e2e/disk.sha256)" ]
check "local direct: usbgwd restarts on the same database" lgw_restart direct
st=$(gw_wait_state 15 "$disk" attached)
check "local direct: the restarted gateway adopts the attachment, state attached (last seen: $st)" \
	[ "$st" = attached ]
det=$(audit_detail local-adopt)
check "local direct: audit local-adopt ($det)" \
	sh -c 'case $1 in *"vhci port $2 "*) ;; *) exit 1 ;; esac' _ "$det" "$port"

# usbgw detach: the port is freed and the device stays authorized, held (not
# attached again on its own); usbgw attach attaches it again.
check "local direct: usbgw detach $b" gwctl detach "$b"
check "local direct: detach frees the vhci port" wait_gone 10 vhci_any_used
check "local direct: detach removes the vhci disk" wait_gone 10 vhci_disk
st=$(gw_wait_state 15 "$disk" authorized)
usleep 2500000
st=$(gw_state "$disk")
h=$(gw_local "$disk" held)
check "local direct: after detach the disk stays authorized and held, not attached again (state $st, held ${h:-?})" \
	[ "$st|$h" = "authorized|true" ]
check "local direct: no vhci port in use while held" fails vhci_any_used
check "local direct: usbgw attach $b" lgw_attach "$b"
st=$(gw_wait_state 10 "$disk" attached)
check "local direct: attached again (last seen: $st)" [ "$st" = attached ]
check "local direct: the disk appears again" wait_for 30 vhci_disk_ready

# The vhci side lets go (usbip detach by hand): the gateway notices within its
# 2 s check, the device goes back to authorized and is held.
port=$(gw_local "$disk" port)
usbip detach -p "${port:-999}"
st=$(gw_wait_state 10 "$disk" authorized)
check "local direct: usbip detach -p ${port:-?} by hand: the gateway notices, state authorized (last seen: $st)" \
	[ "$st" = authorized ]
usleep 2500000
check "local direct: ... and does not attach it again on its own" fails vhci_any_used
check "local direct: usbgw attach $b once more" lgw_attach "$b"
st=$(gw_wait_state 10 "$disk" attached)
check "local direct: attached once more (last seen: $st)" [ "$st" = attached ]
wait_for 30 vhci_disk_ready
port=$(gw_local "$disk" port)

t0=$(e2e_uptime)
check "local direct: usbgw revoke $b" gwctl revoke "$b"
if wait_gone 10 vhci_disk; then
	ok "local direct: revoke removes the vhci disk ($(( ($(e2e_uptime) - t0) * 10 )) ms)"
else
	not_ok "local direct: revoke removes the vhci disk within 10 s"
fi
check "local direct: revoke frees the vhci port ($(vhci_port_line "${port:-999}"))" \
	wait_gone 10 vhci_any_used
st=$(gw_wait_state 15 "$disk" pending)
check "local direct: the gateway reclaims the disk, state pending (last seen: $st)" [ "$st" = pending ]
usleep 2500000
check "local direct: not attached again while pending" no_vhci_device
