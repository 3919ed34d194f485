# Proxy mode: usbgwd takes usbipd (the exporter) as its upstream, claims both
# gadgets (the disk and the loopback device) and holds them pending; it reports
# the identity it read itself.

disk=$(dummy_busid 0)
loop=$(dummy_busid 1)
why=$(gw_missing)
if [ -n "$why" ]; then
	skip_all "$why" "gateway: usbgwd starts and answers on its control socket" \
		"gateway: usbgw exporter add" \
		"gateway: claims the gadget disk, state pending" \
		"gateway: the disk's busid is usable by usbip attach" \
		"gateway: usbipd stops listing the claimed disk" \
		"identity: vid/pid" "identity: serial" \
		"identity: manufacturer and product strings" "identity: interfaces" \
		"gateway: claims the loopback gadget, state pending"
	return 0
fi

ensure_bound "$disk"
ensure_bound "$loop"
check "gateway: usbgwd starts and answers on its control socket" gw_start
check "gateway: usbgw exporter add $GW_EXPORTER 127.0.0.1:$USBIPD_PORT" \
	gwctl exporter add "$GW_EXPORTER" "127.0.0.1:$USBIPD_PORT"
st=$(gw_wait_state 30 "$disk" pending)
check "gateway: claims the gadget disk ($GW_EXPORTER $disk), state pending (last seen: $st)" \
	[ "$st" = pending ]
b=$(gw_field "$disk" busid)
echo "$b" > "$E2E_STATE/gw_busid.disk"
# usbip attach -b copies the busid into a 32-byte field: 1..31 bytes, no blanks.
check "gateway: the disk's busid \"$b\" is usable by usbip attach" busid_ok "$b"
check "gateway: usbipd stops listing the claimed disk $disk" \
	wait_gone 10 usbipd_lists "$disk"

v=$(gw_field "$disk" vid) p=$(gw_field "$disk" pid)
check "identity: vid/pid read by the gateway is $DISK_VID:$DISK_PID (got $v:$p)" \
	[ "$v:$p" = "$DISK_VID:$DISK_PID" ]
s=$(gw_field "$disk" serial)
check "identity: serial is \"$DISK_SERIAL\" (got \"$s\")" [ "$s" = "$DISK_SERIAL" ]
m=$(gw_field "$disk" manufacturer) p=$(gw_field "$disk" product)
check "identity: manufacturer and product strings (got \"$m\", \"$p\")" \
	[ "$m|$p" = "$GADGET_MANUFACTURER|$DISK_PRODUCT" ]
# "interfaces" is optional in list output; when present it must show the
# mass-storage interface (class 08, SCSI 06, bulk-only 50) the policy matches on.
if i=$(gw_field "$disk" interfaces); then
	check "identity: interfaces are [\"08:06:50\"] (got $i)" [ "$i" = '["08:06:50"]' ]
else
	skip "identity: interfaces" "usbgw list --json has no interfaces member"
fi

st=$(gw_wait_state 30 "$loop" pending)
check "gateway: claims the loopback gadget ($GW_EXPORTER $loop), state pending (last seen: $st)" \
	[ "$st" = pending ]
gw_field "$loop" busid > "$E2E_STATE/gw_busid.loop"
