# Isochronous IN through usbgw-agent and the gateway (issue 14 item 8): a UAC2
# audio gadget (usb_f_uac2: 48 kHz, 16-bit stereo playback to the host, no
# capture endpoint) on dummy_hcd with ISO (fetch.sh builds it from
# dummy_hcd-iso.patch).  The agent (root, own config, 127.0.0.1:3268, kind
# agent at the gateway: pushed arrivals) exports it; the gateway holds it
# pending until approved; usbip attaches it through the gateway and
# usbfs-torture -C captures 3000 ms from the vhci side: every packet back with
# status 0 and exactly 3 s x 48,000 frames of 4 bytes (the gadget fills 192 of
# the endpoint's 196 bytes a packet: a full-packet fabrication would count
# 147,000); then 8 URBs in flight are unlinked and the stream goes on.
# Before dummy_hcd-iso.patch the gadget does not even bind ("afunc_bind:
# Error!": the stock driver offers no ISO endpoint).
# Alone: E2E_ONLY="00 20 73" (20 starts the gateway).

T73_VID=1209 T73_PID=0073
T73_SERIAL=E2E-UAC2-73
T73_PORT=3268
T73_EXP=uac2
T73_DIR=/tmp/a73
T73_LOG=$LOGS/agent73.log
T73_G=/sys/kernel/config/usb_gadget/t73
T73_MS=3000
T73_RATE=48000

why=$(agent_missing)
have_prog usbfs-torture || why=${why:-"usbfs-torture not built"}
gw_running || why=${why:-"the gateway is not running"}
if [ -n "$why" ]; then
	skip "agent UAC2: 3 s captured through the agent and the gateway" "$why"
	return 0
fi
udc=$(free_udc)
if [ -z "$udc" ]; then
	not_ok "agent UAC2: a free dummy_udc for the audio gadget"
	return 0
fi
n=${udc#dummy_udc.}
check "agent UAC2: usb_f_uac2 loads" modprobe usb_f_uac2
make_gadget() {
	local f=$T73_G/functions/uac2.usb0
	gadget_new t73 "$T73_VID" "$T73_PID" "$T73_SERIAL" "E2E UAC2" &&
	mkdir "$f" &&
	echo 3 > "$f/p_chmask" && echo $T73_RATE > "$f/p_srate" && echo 2 > "$f/p_ssize" &&
	echo 0 > "$f/c_chmask" &&
	ln -s "$f" "$T73_G/configs/c.1/" &&
	gadget_bind t73 "$udc"
}
if ! check "agent UAC2: UAC2 gadget (48 kHz 16-bit stereo to the host) bound to $udc" make_gadget; then
	dmesg | tail -n 20
	return 0
fi
busid=$(dummy_busid "$n")
check "agent UAC2: it enumerates as ${busid:-?}" \
	wait_for 10 usb_dev_is "$busid" "$T73_VID" "$T73_PID"

mkdir -p "$T73_DIR"
cat > "$T73_DIR/agent.conf" <<EOT
name e2e73
listen 127.0.0.1:$T73_PORT
allow-from 127.0.0.1
state-file $T73_DIR/held
export id $T73_VID:$T73_PID
keep-local id *:*
EOT
usbgw-agent -f -v -c "$T73_DIR/agent.conf" >> "$T73_LOG" 2>&1 &
apid=$!
GW_EXPORTER=$T73_EXP
check "agent UAC2: usbgw exporter add $T73_EXP 127.0.0.1:$T73_PORT --agent" \
	gwctl exporter add "$T73_EXP" "127.0.0.1:$T73_PORT" --agent
st=$(gw_wait_state 30 "$busid" pending)
check "agent UAC2: the gateway holds $T73_EXP:$busid pending (last seen: $st)" [ "$st" = pending ]
b=$(gw_field "$busid" busid)
check "agent UAC2: usbip attach through the gateway is refused while pending (-b ${b:-?})" \
	fails usbip_attach "$GW_PORT" "$b"
check "agent UAC2: nothing appears on vhci while pending" fails vhci_usbdev "$T73_VID" "$T73_PID"
check "agent UAC2: usbgw approve $b" gwctl approve "$b"
gw_wait_state 10 "$busid" authorized >/dev/null
if check "agent UAC2: usbip attach through the gateway (-b $b)" usbip_attach "$GW_PORT" "$b" &&
    check "agent UAC2: the audio device appears under vhci_hcd" \
	wait_for 20 vhci_usbdev "$T73_VID" "$T73_PID"; then
	node=$(usbdev_node "$(vhci_usbdev "$T73_VID" "$T73_PID")")
	wait_for 5 [ -c "$node" ]
	dmesg_mark
	usbfs-torture -C $T73_MS -t 10000 "$node" > "$T73_DIR/cap.out" 2>&1
	rc=$?
	cat "$T73_DIR/cap.out"
	while IFS= read -r line; do
		case $line in
		"ok - "*)	ok "agent UAC2: ${line#ok - }" ;;
		"not ok - "*)	not_ok "agent UAC2: ${line#not ok - }" ;;
		"# "*)		e2e_diag "agent UAC2: ${line#\# }" ;;
		esac
	done < "$T73_DIR/cap.out"
	check "agent UAC2: usbfs-torture -C $T73_MS exits 0 ($rc)" [ $rc -eq 0 ]
	bytes=$(sed -n 's/^bytes //p' "$T73_DIR/cap.out")
	ms=$(sed -n 's/^elapsed_ms //p' "$T73_DIR/cap.out")
	frames=$(( ${bytes:-0} / 4 ))
	want=$(( T73_MS * T73_RATE / 1000 ))
	e2e_metric uac2_frames_captured "$frames"
	[ -n "$ms" ] && e2e_metric uac2_capture_elapsed_ms "$ms"
	check "agent UAC2: $T73_MS ms at $T73_RATE Hz = $want frames captured (got $frames in ${ms:-?} ms)" \
		[ "$frames" -eq "$want" ]
	why=$(dmesg_since | grep -E "vhci_hcd.*(cannot find|connection closed)|USB disconnect" || true)
	check "agent UAC2: vhci kept the device (dmesg: ${why:-nothing})" [ -z "$why" ]
fi
vhci_detach_all
wait_gone 10 vhci_any_used
check "agent UAC2: usbgw exporter remove $T73_EXP" gwctl exporter remove "$T73_EXP"
kill -TERM $apid
check "agent UAC2: the agent exits on SIGTERM" wait_gone 10 kill -0 $apid
gadget_unbind t73
cat "$T73_LOG"
