# Agent scenarios (60-69), the thin client's side, without the agent yet: the
# HID and ACM gadget functions and their host drivers, udevd started as
# initramfs-tools starts it with the agent's udev rule, and four gadgets on
# dummy_udc.3-.6 (a disk on its own image, a boot keyboard, an ACM serial port,
# a loopback device with serial "KEEP").  Each is checked with its local
# driver, so that a later failure is the agent's, not the harness's.

ld() {
	local m
	for m in usb_f_hid usb_f_acm hid usbhid hid-generic cdc-acm; do
		modprobe "$m" || { echo "modprobe $m failed"; return 1; }
	done
}
check "agent: HID and ACM modules load (usb_f_hid, usb_f_acm, hid, usbhid, hid-generic, cdc-acm)" ld
check "agent: eight dummy_hcd controllers (dummy_hcd num=8)" \
	[ -d /sys/devices/platform/dummy_hcd.7 ]
check "agent: systemd-udevd starts (--daemon), coldplug trigger and settle" udevd_start
e2e_diag "agent: udev rule contrib/70-usbgw-agent.rules:" \
	"$(grep -v '^#' /etc/udev/rules.d/70-usbgw-agent.rules | head -n 1)"

cp "$DISK_IMG" "$AGENT_DISK_IMG"
setup_agent_gadgets() {
	gadget_new adisk "$ADISK_VID" "$ADISK_PID" "$ADISK_SERIAL" "E2E Agent Disk" &&
	gadget_storage adisk "$AGENT_DISK_IMG" &&
	gadget_new kbd "$KBD_VID" "$KBD_PID" "$KBD_SERIAL" "E2E Keyboard" &&
	gadget_hid kbd &&
	gadget_new acm "$ACM_VID" "$ACM_PID" "$ACM_SERIAL" "E2E Serial" &&
	gadget_acm acm &&
	gadget_new keep "$KEEP_VID" "$KEEP_PID" "$KEEP_SERIAL" "E2E Kept Loopback" &&
	gadget_loopback keep &&
	gadget_bind adisk "dummy_udc.$ADISK_UDC" &&
	gadget_bind kbd "dummy_udc.$KBD_UDC" &&
	gadget_bind acm "dummy_udc.$ACM_UDC" &&
	gadget_bind keep "dummy_udc.$KEEP_UDC"
}
check "agent: gadgets created and bound (disk .3, keyboard .4, ACM .5, loopback KEEP .6)" \
	setup_agent_gadgets
for g in "adisk $ADISK_UDC $ADISK_VID $ADISK_PID" "kbd $KBD_UDC $KBD_VID $KBD_PID" \
    "acm $ACM_UDC $ACM_VID $ACM_PID" "keep $KEEP_UDC $KEEP_VID $KEEP_PID"; do
	set -- $g
	b=$(dummy_busid "$2")
	check "agent: $1 gadget enumerates on dummy_hcd.$2 as ${b:-?} ($3:$4)" \
		wait_for 10 usb_dev_is "$b" "$3" "$4"
	echo "$b" > "$E2E_STATE/agent_busid.$1"
done
udevadm settle --timeout=30
adisk=$(cat "$E2E_STATE/agent_busid.adisk")
kbd=$(cat "$E2E_STATE/agent_busid.kbd")
acm=$(cat "$E2E_STATE/agent_busid.acm")
keep=$(cat "$E2E_STATE/agent_busid.keep")

# The local drivers, before any agent: usb-storage, usbhid (hidraw), cdc_acm.
if check "agent: the disk gadget is a local disk (usb-storage)" \
    wait_for 30 disk_under "*/dummy_hcd.$ADISK_UDC/*"; then
	d=$(disk_under "*/dummy_hcd.$ADISK_UDC/*")
	check "agent: the local disk /dev/$d reads the image's SHA-256" \
		[ "$(disk_sha "$d")" = "$(file_sha "$AGENT_DISK_IMG")" ]
fi
hidg=$(gadget_hidg kbd)
check "agent: the keyboard gadget's /dev/${hidg:-hidg?} exists" [ -c "/dev/$hidg" ]
if check "agent: the keyboard is a local hidraw device (usbhid)" \
    wait_for 15 class_node_under hidraw "*/dummy_hcd.$KBD_UDC/*"; then
	h=$(class_node_under hidraw "*/dummy_hcd.$KBD_UDC/*")
	got=$(kbd_report_arrives "$hidg" "$h")
	check "agent: a report written to /dev/$hidg arrives on the local /dev/$h (read $got)" \
		[ "$got" = 0000040000000000 ]
fi
gs=$(gadget_tty acm)
check "agent: the ACM gadget's /dev/$gs exists" [ -c "/dev/$gs" ]
if check "agent: the ACM gadget is a local ttyACM (cdc_acm)" \
    wait_for 15 class_node_under tty "*/dummy_hcd.$ACM_UDC/*"; then
	t=$(class_node_under tty "*/dummy_hcd.$ACM_UDC/*")
	got=$(tty_oneway "$gs" "$t" gadget-to-host-60)
	check "agent: local ACM data /dev/$gs -> /dev/$t (read $got)" [ "$got" = gadget-to-host-60 ]
	got=$(tty_oneway "$t" "$gs" host-to-gadget-60)
	check "agent: local ACM data /dev/$t -> /dev/$gs (read $got)" [ "$got" = host-to-gadget-60 ]
fi

# The udev rule: the agent's group may open the gadgets' nodes, not a hub's.
ids=$(as_agent_user id 2>&1)
check "agent: su runs commands as the agent's user ($ids)" \
	sh -c 'case $1 in "uid=$2($3) gid=$4($3)"*) ;; *) exit 1 ;; esac' _ "$ids" \
	"$AGENT_UID" "$AGENT_USER" "$AGENT_GID"
for b in $adisk $kbd $acm $keep; do
	n=$(usbdev_node "/sys/bus/usb/devices/$b")
	m=$(stat -c '%g %a' "$n")
	check "agent: udev gives $n ($b) to group $AGENT_GID, mode 0660 (got $m)" [ "$m" = "$AGENT_GID 660" ]
	check "agent: uid $AGENT_UID opens $n read-write" agent_can_open "$n"
done
hub=$(usbdev_node "$(readlink -f "/sys/bus/usb/devices/$adisk/..")")
check "agent: uid $AGENT_UID cannot open the root hub's $hub ($(stat -c '%U:%G %a' "$hub"))" \
	fails agent_can_open "$hub"

# Debian's usbip sees them on the local bus (not exported: nobody bound them).
usbip list -l > "$E2E_STATE/usbip-local" 2>&1
for b in $adisk $kbd $acm $keep; do
	check "agent: usbip list -l shows $b" grep -q "busid $b " "$E2E_STATE/usbip-local"
done
check "agent: usbipd does not list the agent's gadgets" fails usbipd_lists "$adisk"
