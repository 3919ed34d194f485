# A usbgw-agent over TLS with the real kernel (issue 15 items 5 and 7): the
# scenario's own agent e2e27 (root, its own directory /tmp/a27, no listen
# port, so 60-73 are not disturbed) exports a mass-storage gadget of its own
# on a free dummy_udc, with `tls required` and an agent certificate issued
# from the gateway's store by tlsid-issue, and dials out to the gateway's
# tls-listen (127.0.0.1:3245), where guest/usbgwd.conf declares it `agent
# e2e27 from 127.0.0.1/32 tls=required`.  Approved, usbip attaches it through
# the gateway's plain port; the disk's SHA-256 on vhci matches its image;
# usbgw show and the attach audit row say the exporter leg is TLS with
# e2e27's certificate.  e2e27 in plaintext (to the plain port) is refused.
# The gadget is unbound at the end, the exporter removed.
# Alone: E2E_ONLY="00 20 27" (20 starts the gateway).

T27_VID=1209 T27_PID=0027
T27_SERIAL=E2E-TLS-0027
T27_NAME=e2e27
T27_DIR=/tmp/a27
T27_IMG=$T27_DIR/disk.img
T27_LOG=$LOGS/agent27.log
T27_G=/sys/kernel/config/usb_gadget/t27
TLS_PORT=3245

why=$(agent_missing)
have_prog tlsid-issue || why=${why:-"tlsid-issue not built"}
gw_running || why=${why:-"the gateway is not running"}
if [ -n "$why" ]; then
	skip "agent TLS: a disk through a dial-out agent over TLS" "$why"
	return 0
fi
udc=$(free_udc)
if [ -z "$udc" ]; then
	not_ok "agent TLS: a free dummy_udc for the agent's disk"
	return 0
fi
n=${udc#dummy_udc.}

mkdir -p "$T27_DIR"
out=$(tlsid-issue -r agent "$GW_DIR/tls" "$T27_DIR/tls" "$T27_NAME" 2>&1)
check "agent TLS: tlsid-issue gives $T27_NAME an agent certificate ($out)" [ $? -eq 0 ]
check "agent TLS: agent.key is 0600 ($(stat -c %a "$T27_DIR/tls/agent.key" 2>&1))" \
	[ "$(stat -c %a "$T27_DIR/tls/agent.key" 2>/dev/null)" = 600 ]

# 2 MiB of random data: its checksum is the file's
dd if=/dev/urandom of="$T27_IMG" bs=1k count=2048 2>/dev/null
make_gadget() {
	gadget_new t27 "$T27_VID" "$T27_PID" "$T27_SERIAL" "E2E TLS disk" &&
	gadget_storage t27 "$T27_IMG" &&
	gadget_bind t27 "$udc"
}
if ! check "agent TLS: a mass-storage gadget (2 MiB) bound to $udc" make_gadget; then
	dmesg | tail -n 20
	return 0
fi
busid=$(dummy_busid "$n")
check "agent TLS: it enumerates as ${busid:-?}" \
	wait_for 10 usb_dev_is "$busid" "$T27_VID" "$T27_PID"

# t27_conf NAME LINE...: the agent's configuration file $T27_DIR/NAME.conf
t27_conf() {
	local f=$T27_DIR/$1.conf l
	shift
	{
		echo "name $T27_NAME"
		echo "listen none"
		echo "state-file none"
		echo "tls-dir $T27_DIR/tls"
		for l in "$@"; do
			echo "$l"
		done
		echo "keep-local id *:*"
	} > "$f"
}
t27_ctl() {	# the gateway's control connection to e2e27 is up
	[ "$(gwctl exporter list --json 2>/dev/null |
	    e2e-json get control name="$T27_NAME" 2>/dev/null)" = true ]
}

# ---- plaintext as e2e27 (declared tls=required): refused ------------------------
t27_conf plain "tls off" "gateway 127.0.0.1:$GW_PORT"
usbgw-agent -f -v -c "$T27_DIR/plain.conf" >> "$T27_LOG" 2>&1 &
apid=$!
check "agent TLS: $T27_NAME in plaintext to the plain port: refused (agent-refused row)" \
	wait_for 15 sh -c 'usbgw -s "$1" audit --limit 10000 --json 2>/dev/null |
	    grep -q "CONTROL from agent $2 in plaintext: its tls is required"' _ "$GW_SOCK" "$T27_NAME"
check "agent TLS: ... no control connection" fails t27_ctl
kill -TERM $apid 2>/dev/null
wait_gone 10 kill -0 $apid

# ---- over TLS: control, claim, import -------------------------------------------
t27_conf tls "tls required" "export id $T27_VID:$T27_PID" "gateway 127.0.0.1:$TLS_PORT"
usbgw-agent -f -v -c "$T27_DIR/tls.conf" >> "$T27_LOG" 2>&1 &
apid=$!
check "agent TLS: usbgw-agent ($T27_NAME, tls required) dials out: control connection up" \
	wait_for 20 t27_ctl
check "agent TLS: the agent verified the gateway's certificate" \
	grep -q "gateway 127.0.0.1:$TLS_PORT: TLS, certificate CN=" "$T27_LOG"
GW_EXPORTER=$T27_NAME
st=$(gw_wait_state 30 "$busid" pending)
check "agent TLS: the gateway holds $T27_NAME:$busid pending, claimed over a TLS dial-back (last seen: $st)" \
	[ "$st" = pending ]
b=$(gw_field "$busid" busid)
check "agent TLS: usbgw approve ${b:-?}" gwctl approve "$b"
gw_wait_state 10 "$busid" authorized >/dev/null
if check "agent TLS: usbip attach through the gateway (-b $b)" usbip_attach "$GW_PORT" "$b" &&
    check "agent TLS: the disk appears under vhci_hcd" wait_for 30 vhci_disk_ready; then
	d=$(vhci_disk)
	check "agent TLS: whole-disk SHA-256 through the TLS agent leg matches the image" \
		[ "$(disk_sha "$d")" = "$(file_sha "$T27_IMG")" ]
	sh=$(gwctl show "$b" 2>&1)
	echo "$sh"
	check "agent TLS: usbgw show says the exporter leg is tls with $T27_NAME's certificate" \
		sh -c 'echo "$1" | grep -q "^exporter leg *tls (certificate $2)"' _ "$sh" "$T27_NAME"
	js=$(gwctl show "$b" --json 2>&1)
	check "agent TLS: show --json: up_transport tls, up_cert $T27_NAME" \
		sh -c 'echo "$1" | grep -q "\"up_transport\": \"tls\"" &&
		    echo "$1" | grep -q "\"up_cert\": \"$2\""' _ "$js" "$T27_NAME"
	check "agent TLS: the attach audit row names both legs" \
		sh -c 'usbgw -s "$1" audit --device "$3" --json 2>/dev/null |
		    grep -q "host leg tcp, exporter leg tls (certificate $2)"' _ "$GW_SOCK" "$T27_NAME" "$b"
fi
vhci_detach_all
check "agent TLS: detach removes the vhci disk" wait_gone 15 vhci_disk
# claimed again, not attached: authorized, or pending when the agent's reset
# after the release made the re-claim find no device for a moment (ST_NODEV:
# gone, which ends a once approval)
st=$(gw_wait_state 15 "$busid" authorized pending)
check "agent TLS: the gateway holds the disk again, not attached (last seen: $st)" \
	gw_state_in "$busid" authorized pending

kill -TERM $apid 2>/dev/null
check "agent TLS: the agent exits on SIGTERM" wait_gone 10 kill -0 $apid
check "agent TLS: usbgw exporter remove $T27_NAME" gwctl exporter remove "$T27_NAME"
gadget_unbind t27
cat "$T27_LOG"
