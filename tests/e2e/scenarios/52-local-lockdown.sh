# Local mode, lock-down (vhci-lockdown, vhci-per-interface): the local-mode
# usbgwd sets authorized_default and interface_authorized_default to 0 on every
# vhci root hub at start, so the kernel binds no driver to anything it did not
# authorize:
#  - a disk attached behind the gateway's back (stock usbip attach straight at
#    usbipd) stays unauthorized, unconfigured, without a disk; a restarted
#    gateway reports that port as foreign and leaves it alone;
#  - a disk the gateway attached enumerates unauthorized, then the gateway
#    authorizes it and its interface, and usb-storage binds;
#  - a composite gadget (mass storage + loopback, on dummy_udc.2 in place of the
#    second disk of 40) approved while a rule blocks mass-storage interfaces:
#    the device is authorized, its storage interface kept without a driver.

disk=$(dummy_busid 0)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "lock-down: usbgwd starts with vhci-lockdown and vhci-per-interface" \
		"lock-down: authorized_default 0 on every vhci root hub" \
		"lock-down: interface_authorized_default 0 on every vhci root hub" \
		"lock-down: a disk attached behind the gateway's back stays unauthorized" \
		"lock-down: a restart reports the foreign port and leaves it alone" \
		"lock-down: the gateway's disk enumerates unauthorized first" \
		"lock-down: the gateway authorizes it, usb-storage binds" \
		"lock-down: a rule allows the disk, the gateway attaches it" \
		"lock-down: a policy change detaches the disk" \
		"per-interface: the composite device is authorized" \
		"per-interface: its blocked storage interface gets no driver" \
		"per-interface: its other interface is authorized" \
		"per-interface: audit names the interface kept without a driver"
	return 0
fi

proxy_let_go	# when run without 50 (E2E_ONLY)
lgw_use
had=$(vhci_used_ports | tr '\n' ' ')
check "lock-down: the inspected-mode usbgwd stops (SIGTERM)" lgw_stop
check "local inspected: its attachment (vhci port ${had:-none}) ended with the process: port free, disk gone" \
	wait_for 10 no_vhci_device

# The composite gadget replaces the second disk on dummy_udc.2.
setup_combo() {
	gadget_unbind disk2 2>/dev/null
	dd if=/dev/zero of="$COMBO_IMG" bs=1M count=1 2>/dev/null
	gadget_new combo "$COMBO_VID" "$COMBO_PID" "$COMBO_SERIAL" "$COMBO_PRODUCT" &&
	gadget_storage combo "$COMBO_IMG" &&
	gadget_loopback combo &&
	gadget_bind combo dummy_udc.2
}
check "lock-down: composite gadget (mass storage + loopback) bound to dummy_udc.2" setup_combo
combo=$(dummy_busid 2)
check "lock-down: the composite gadget enumerates as $combo ($COMBO_VID:$COMBO_PID)" \
	wait_for 10 usb_dev_is "$combo" "$COMBO_VID" "$COMBO_PID"
ensure_bound "$combo"

vhci_roothubs_save
lockdown="vhci-lockdown = yes" perif="vhci-per-interface = yes"
if [ "$E2E_BREAK" = no-lockdown ]; then
	# Forced failure for demonstrating the checks: no lock-down configured.
	lockdown="vhci-lockdown = no" perif="vhci-per-interface = no"
	e2e_diag "E2E_BREAK=no-lockdown: the local-mode usbgwd starts without lock-down"
fi
check "lock-down: usbgwd starts with vhci-lockdown = yes, vhci-per-interface = yes (direct)" \
	lgw_start lockdown "local-attach = direct" "$lockdown" "$perif"
nhubs=$(vhci_roothubs | wc -l)
v=$(vhci_roothubs_read authorized_default)
check "lock-down: authorized_default 0 on all $nhubs vhci root hubs (${v:-?})" \
	[ "$v" = "${nhubs}x0" ]
v=$(vhci_roothubs_read interface_authorized_default)
check "lock-down: interface_authorized_default 0 on all $nhubs vhci root hubs (${v:-?})" \
	[ "$v" = "${nhubs}x0" ]

# Behind the gateway's back: the gateway has no exporter yet, so the disk is free
# at usbipd and the stock client attaches it straight to vhci.
wait_for 20 usbipd_lists "$disk"
dmesg_mark
check "lock-down: usbip attach straight at usbipd ($disk), behind the gateway's back" \
	usbip_attach "$USBIPD_PORT" "$disk"
if check "lock-down: the foreign device enumerates on vhci_hcd" \
    wait_for 20 vhci_usbdev "$DISK_VID" "$DISK_PID"; then
	f=$(vhci_usbdev "$DISK_VID" "$DISK_PID")
	# Longer than the SCSI scan a bound usb-storage needs, and than the gateway's
	# 2 s tick: neither the kernel nor the gateway authorizes it.
	usleep 3000000
	a=$(cat "$f/authorized") c=$(cat "$f/bConfigurationValue")
	check "lock-down: the foreign device ${f##*/} stays unauthorized and unconfigured (authorized=$a, bConfigurationValue=\"$c\")" \
		[ "$a|$c" = "0|" ]
	check "lock-down: the foreign device gets no disk" fails vhci_disk
	check "lock-down: the kernel says so (\"${f##*/}: Device is not authorized for usage\")" \
		dmesg_has "${f##*/}: Device is not authorized for usage"
	# Reconciliation at start: a port the gateway did not attach is reported
	# (vhci-foreign) and left alone.
	fp=$(vhci_used_ports | head -n 1)
	lgw_stop
	check "lock-down: usbgwd restarts with the foreign device on vhci port ${fp:-?}" \
		lgw_restart lockdown
	det=$(audit_detail vhci-foreign)
	check "lock-down: the restarted gateway reports the foreign port (audit vhci-foreign: $det)" \
		sh -c 'case $1 in "vhci port $2 holds $3 "*"left alone") ;; *) exit 1 ;; esac' \
		_ "$det" "$fp" "${f##*/}"
	usleep 2500000
	foreign_left_alone() {
		[ "$(cat "$f/authorized" 2>/dev/null)" = 0 ] && vhci_port_is "${fp:-999}" 006
	}
	check "lock-down: ... and leaves it alone: port ${fp:-?} in use, device still unauthorized" \
		foreign_left_alone
fi
vhci_detach_all
check "lock-down: the foreign attachment detached" wait_gone 10 vhci_any_used

# The gateway's own attachment, made because a rule allows the disk:
# unauthorized at first (the kernel's message), then the gateway authorizes the
# device and its interface.
wait_for 20 usbipd_lists "$disk"
dmesg_mark
check "lock-down: usbgw policy add 'allow id $DISK_VID:$DISK_PID serial \"$DISK_SERIAL\"'" \
	gwctl policy add "allow id $DISK_VID:$DISK_PID serial \"$DISK_SERIAL\""
gwctl exporter add "$LGW_EXPORTER" "127.0.0.1:$USBIPD_PORT"
st=$(gw_wait_state 30 "$disk" attached)
check "lock-down: the gateway claims the disk, the rule authorizes it, the gateway attaches it (last seen: $st)" \
	[ "$st" = attached ]
b=$(gw_field "$disk" busid)
if check "lock-down: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	u=$(vhci_usbdev "$DISK_VID" "$DISK_PID")
	n=${u##*/}
	check "lock-down: the kernel enumerated $n unauthorized first (\"Device is not authorized for usage\")" \
		dmesg_has "$n: Device is not authorized for usage"
	check "lock-down: its interface $n:1.0 was created unauthorized (\"Interface 0 is not authorized for usage\")" \
		dmesg_has "$n:1.0: Interface 0 is not authorized for usage"
	a=$(cat "$u/authorized") ia=$(cat "$u/$n:1.0/authorized")
	drv=$(basename "$(readlink "$u/$n:1.0/driver")")
	check "lock-down: the gateway authorized $n and $n:1.0 (authorized=$a, $ia), usb-storage bound (driver ${drv:-none})" \
		[ "$a|$ia|$drv" = "1|1|usb-storage" ]
	d=$(vhci_disk)
	check "lock-down: disk size is $E2E_DISK_MB MiB" \
		[ "$(cat "/sys/block/$d/size")" -eq $((E2E_DISK_MB * 2048)) ]
	det=$(audit_detail local-authorize busid="$b")
	check "lock-down: audit local-authorize ($det)" \
		sh -c 'case $1 in *"1 interface allowed, 0 kept without a driver"*) ;; *) exit 1 ;; esac' _ "$det"
fi

# A rule ahead of it that blocks single-interface mass storage: the attached
# disk is decided again, blocked, and detached.
check "lock-down: usbgw policy insert 1 'block with-interface 08:*:*'" \
	gwctl policy insert 1 'block with-interface 08:*:*'
st=$(gw_wait_state 10 "$disk" blocked)
check "lock-down: after the policy change the disk is blocked (last seen: $st)" [ "$st" = blocked ]
check "lock-down: ... and detached from vhci" wait_gone 10 vhci_any_used
check "lock-down: ... the vhci disk is gone" fails vhci_disk

# Per interface: the composite device (08:06:50 + ff:00:00) does not match the
# block rule (one interface of class 08 exactly); an ask rule's
# interface-policy denies its storage interface (protocol.md 3.12: the same
# verdicts as in proxy mode); approved, it is attached and authorized, and
# its storage interface is not.
check "per-interface: usbgw policy add 'ask id $COMBO_VID:$COMBO_PID interface-policy allow { block 08:*:* }'" \
	gwctl policy add "ask id $COMBO_VID:$COMBO_PID interface-policy allow { block 08:*:* }"
st=$(gw_wait_state 30 "$combo" pending)
check "per-interface: the gateway claims the composite device, state pending (last seen: $st)" \
	[ "$st" = pending ]
cb=$(gw_field "$combo" busid)
dmesg_mark
gwctl approve "$cb"
st=$(gw_wait_state 15 "$combo" attached)
check "per-interface: approve $cb, the gateway attaches it (last seen: $st)" [ "$st" = attached ]
usbdev_authorized() {
	u=$(vhci_usbdev "$COMBO_VID" "$COMBO_PID") && [ "$(cat "$u/authorized")" = 1 ] &&
		[ -d "$u/${u##*/}:1.1" ]
}
if check "per-interface: the composite device is authorized and configured" \
    wait_for 20 usbdev_authorized; then
	u=$(vhci_usbdev "$COMBO_VID" "$COMBO_PID")
	n=${u##*/}
	wait_for 5 [ -f "$u/$n:1.0/authorized" ]
	usleep 2000000
	c0=$(cat "$u/$n:1.0/bInterfaceClass") a0=$(cat "$u/$n:1.0/authorized")
	drv=$(basename "$(readlink "$u/$n:1.0/driver")")
	check "per-interface: storage interface $n:1.0 (class $c0) kept without a driver (authorized=$a0, driver ${drv:-none})" \
		[ "$c0|$a0|$drv" = "08|0|" ]
	check "per-interface: the kernel refused it to usb-storage (\"Interface 0 is not authorized for usage\")" \
		dmesg_has "$n:1.0: Interface 0 is not authorized for usage"
	c1=$(cat "$u/$n:1.1/bInterfaceClass") a1=$(cat "$u/$n:1.1/authorized")
	check "per-interface: loopback interface $n:1.1 (class $c1) authorized (authorized=$a1)" \
		[ "$c1|$a1" = "ff|1" ]
	check "per-interface: no disk appears on vhci" fails vhci_disk
	det=$(audit_detail local-authorize busid="$cb")
	check "per-interface: audit local-authorize names the interface and why ($det)" \
		sh -c 'case $1 in *"1 interface allowed, 1 kept without a driver: $2:1.0 08:06:50 (interface-policy, approval "*) ;; *) exit 1 ;; esac' \
		_ "$det" "$n"
fi
check "per-interface: usbgw revoke $cb" gwctl revoke "$cb"
check "per-interface: revoke frees the vhci port" wait_gone 10 vhci_any_used

check "lock-down: the local-mode usbgwd stops (SIGTERM)" lgw_stop
check "lock-down: no sanitizer report in the local gateway's log" \
	fails grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$LGW_LOG"
vhci_roothubs_restore
v=$(vhci_roothubs_read authorized_default)
e2e_diag "lock-down: root hubs restored by the test after the stop (authorized_default $v)"
