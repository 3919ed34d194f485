# ISO OUT through usbgw-agent (the stock dummy_hcd has no ISO; 73 uses a patched one for IN): QEMU's
# usb-audio on a qemu-xhci controller, present when run.t boots with
# E2E_AUDIO=1.  The agent (root, own config, 127.0.0.1:3267) exports it;
# usbfs-torture -I plays 3 s of 48 kHz stereo through vhci (ISO OUT, 8 URBs
# of 8 packets in flight); run.t counts the non-silent frames QEMU wrote
# to its wav file against the "iso_frames_sent" metric.
# Alone: E2E_AUDIO=1 E2E_ONLY="00 67".

ISO_VID=46f4 ISO_PID=0002
T67_PORT=3267
T67_DIR=/tmp/a67
T67_LOG=$LOGS/agent67.log

for p in usbgw-agent usbfs-torture; do
	if ! have_prog "$p"; then
		skip "agent ISO: 3 s of audio through the agent" "$p not built"
		return 0
	fi
done
modprobe xhci_pci 2>/dev/null
audio_busid() {
	local d
	for d in /sys/bus/usb/devices/*; do
		[ -f "$d/idVendor" ] || continue
		case $(readlink -f "$d") in */vhci_hcd*) continue ;; esac
		[ "$(cat "$d/idVendor")" = $ISO_VID ] && [ "$(cat "$d/idProduct")" = $ISO_PID ] &&
			{ echo "${d##*/}"; return 0; }
	done
	return 1
}
if ! wait_for 10 audio_busid; then
	skip "agent ISO: 3 s of audio through the agent" "no QEMU usb-audio (run.t adds it with E2E_AUDIO=1)"
	return 0
fi
busid=$(audio_busid)
mkdir -p "$T67_DIR"
cat > "$T67_DIR/agent.conf" <<EOT
name e2e67
listen 127.0.0.1:$T67_PORT
allow-from 127.0.0.1
state-file $T67_DIR/held
export id $ISO_VID:$ISO_PID
keep-local id *:*
EOT
usbgw-agent -f -v -c "$T67_DIR/agent.conf" >> "$T67_LOG" 2>&1 &
apid=$!
t67_lists() { timeout 5 usbip --tcp-port $T67_PORT list -r 127.0.0.1 2>/dev/null | grep -q " $busid:"; }
if check "agent ISO: the agent exports QEMU's usb-audio ($busid)" wait_for 20 t67_lists &&
    check "agent ISO: usbip attach from the agent" usbip_attach $T67_PORT "$busid" &&
    check "agent ISO: the audio device appears under vhci_hcd" \
	wait_for 20 vhci_usbdev $ISO_VID $ISO_PID; then
	node=$(usbdev_node "$(vhci_usbdev $ISO_VID $ISO_PID)")
	wait_for 5 [ -c "$node" ]
	dmesg_mark
	usbfs-torture -I 3000 -t 10000 "$node" > "$T67_DIR/iso.out" 2>&1
	rc=$?
	cat "$T67_DIR/iso.out"
	while IFS= read -r line; do
		case $line in
		"ok - "*)	ok "agent ISO: ${line#ok - }" ;;
		"not ok - "*)	not_ok "agent ISO: ${line#not ok - }" ;;
		"# "*)		e2e_diag "agent ISO: ${line#\# }" ;;
		esac
	done < "$T67_DIR/iso.out"
	check "agent ISO: usbfs-torture -I 3000 exits 0 ($rc)" [ $rc -eq 0 ]
	frames=$(sed -n 's/^frames //p' "$T67_DIR/iso.out")
	[ -n "$frames" ] && e2e_metric iso_frames_sent "$frames"
	why=$(dmesg_since | grep -E "vhci_hcd.*(cannot find|connection closed)|USB disconnect" || true)
	check "agent ISO: vhci kept the device (dmesg: ${why:-nothing})" [ -z "$why" ]
fi
vhci_detach_all
wait_gone 10 vhci_any_used
check "agent ISO: the agent is still running after the stream" kill -0 $apid
kill -TERM $apid
check "agent ISO: the agent exits on SIGTERM" wait_gone 10 kill -0 $apid
cat "$T67_LOG"
