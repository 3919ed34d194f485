#!/bin/bash
# Local mode (issue 7): usbgwd attaches approved devices to "this host's"
# vhci_hcd itself.  The vhci_hcd is tests/tools/vhci-kernel, a fake sysfs
# tree (vhci-root) whose attach/detach files it reads as the kernel
# would: it takes its own reference to the socket the gateway names (the
# real TCP claim in direct mode, a socketpair end in inspected mode) and
# enumerates the simulator's device over it.  So this checks what the
# gateway hands over actually carries URBs, without a kernel.
#
#  1. direct, lock-down, per-interface: attach with the exporter's devid
#     on the right hub; authorized_default=0 on every root hub; the
#     device authorized, the interface a block rule names kept without a
#     driver; clean and SIGKILL restarts adopt the attachment; a foreign
#     port is reported and left alone; revoke detaches; held after
#     `usbgw detach` and after the host lets go; `usbgw attach`; SS hub.
#  2. inspected: the kernel talks to the gateway's relay (devid rewritten,
#     URBs counted, an endpoint the device lacks closes the attachment
#     with a malformed audit row); revoke; clean stop ends it.
#  3. proxy mode refuses attach; a lock-down that cannot be put in force
#     stops the start.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

VK=$USBGW_BUILD/vhci-kernel
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" "$VK" socat sqlite3
plan 72

cat >"$T/sim.conf" <<'EOF'
device 1-2 { type storage; serial "S12"; }
device 1-3 { type composite; keys ""; serial "S13"; }
device 1-5 { type sourcesink; speed super; serial "S15"; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

# The fake vhci_hcd: 2 controllers of 2 hs + 2 ss ports (ports 0-1 hs,
# 2-3 ss on controller 0; 4-7 on controller 1, status.1).
K=$T/k
PLAT=$K/sys/devices/platform
HCD=$PLAT/vhci_hcd.0
start_bg vk "$VK" -c 2 -n 2 -p "$T/gw.pid" "$K"
wait_file "$K/ready" 10 vk || bail_out "vhci-kernel did not start: $(cat "$(bg_log vk)")"
GRAB=$(cat "$K/ready")

vk_log() { cat "$(bg_log vk)"; }
vk_wait() { wait_log vk "$1" "${2:-10}"; }
vk_count() { grep -cE -- "$1" "$(bg_log vk)"; }
vk_ctl() { printf '%s\n' "$1" >"$K/ctl"; }
devid_of() {		# the exporter's devid of a simulator busid
	echo $(( $(sim_dev_field sim "$1" busnum) << 16 | $(sim_dev_field sim "$1" devnum) ))
}
cur_port() {		# the vhci port a device is attached to, per `usbgw list`
	gw_field "$1" "$2" attached_to | sed -n 's/^local:vhci //p'
}
port_line() {		# the status line of a port
	cat "$HCD"/status* | awk -v p="$(printf '%04d' "$1")" '$2 == p'
}
need_grab() {		# skip N tests when pidfd_getfd is not allowed here
	[ "$GRAB" = grab ] && return 0
	skip "$1" "pidfd_getfd(2) not permitted: the fake kernel cannot take the socket"
	return 1
}

# ---- 1. direct, lock-down, per-interface ---------------------------------
gw_conf gw "mode = local" "vhci-root = $PLAT" "local-attach = direct" \
    "vhci-lockdown = yes" "vhci-per-interface = yes" \
    "poll-interval = 500ms" "pid-file = $T/gw.pid" "exporter sim1 $SIMA"
gw_start gw || bail_out "usbgwd did not start in local mode: $(tail -n 5 "$T/gw.log")"

defaults=$(cat "$PLAT"/vhci_hcd.*/usb*/authorized_default \
    "$PLAT"/vhci_hcd.*/usb*/interface_authorized_default | tr -d '\n')
is "$defaults" 00000000 "lock-down: authorized_default and interface_authorized_default 0 on all 4 root hubs"
gwctl gw status --json
like "$OUT" '"mode": *"local"' "status says local mode"

gwctl gw policy add 'block serial "S12"'
is "$RC" 0 "a rule blocks the storage device"
# One rule means the same in proxy and local mode (issue 17): the
# interface-policy of the rule that matched, kept by an approval.
gwctl gw policy add 'ask interface-policy allow { block 08:*:* }'
is "$RC" 0 "an ask rule whose interface-policy denies mass storage interfaces"
gw_wait_state gw sim1:1-2 blocked
gw_wait_state gw sim1:1-3 pending
gw_wait_state gw sim1:1-5 pending
sleep 1
is "$(vk_count '^attach ')" 0 "nothing pending or blocked is attached"
gwctl gw attach sim1:1-3
is "$RC" 1 "usbgw attach of a pending device is refused"
like "$ERR" 'pending, not authorized' "... saying why"

DEVID13=$(devid_of 1-3)
gwctl gw approve sim1:1-3
is "$RC" 0 "approve sim1:1-3 (composite: keyboard + storage)"
gw_wait_state gw sim1:1-3 attached
vk_wait '^attach port='
like "$(vk_log)" "attach port=0 sockfd=[0-9]+ devid=$DEVID13 speed=3 hub=hs" \
    "attached at once: port 0 on the hs hub, the exporter's devid ($DEVID13), high speed"
if need_grab 3; then
	vk_wait '^enumerated port=0'
	like "$(vk_log)" 'grabbed port=0 kind=tcp' "the kernel got the claim's TCP socket itself"
	like "$(vk_log)" 'enumerated port=0 busid=3-1 vid=1209 pid=0003 serial=S13 ifaces=03:01:01,08:06:50 authorized=0' \
	    "the device answers the kernel over it (descriptors, serial), unauthorized by default"
	wait_for -t 10 grep -qx 1 "$HCD/usb3/3-1/authorized"
	is "$(cat "$HCD/usb3/3-1/authorized")" 1 "the gateway authorized the device on the host"
fi
if need_grab 4; then
	wait_for -t 10 grep -q 'probe 3-1:1.0' "$(bg_log vk)"
	is "$(cat "$HCD/usb3/3-1/3-1:1.0/authorized")" 1 "keyboard interface 3-1:1.0 authorized"
	is "$(cat "$HCD/usb3/3-1/3-1:1.1/authorized")" 0 "storage interface 3-1:1.1 kept without a driver (interface-policy)"
	unlike "$(vk_log)" 'probe 3-1:1.1' "drivers probed for the allowed interface only"
	Q="SELECT count(*) FROM audit_log WHERE event = 'local-authorize' AND detail LIKE '%1 interface allowed, 1 kept without a driver: 3-1:1.1 08:06:50 (interface-policy, approval %'"
	gw_wait_sql gw "$Q" 1
	is "$(gw_sql gw "$Q")" 1 "audit: the interface kept without a driver, by the interface-policy"
	is "$(gw_audit_count gw local-authorize)" 1 "audit: local-authorize names the interface kept without a driver and why"
fi
is "$(gw_field gw sim1:1-3 attached_to)" "local:vhci 0" "list: attached to local vhci port 0"
like "$(gw_field gw sim1:1-3 local)" '"mode": *"direct"' "list: local mode direct"
is "$(gw_sql gw "SELECT mode || ' ' || host_addr || ' ' || (ended_at IS NULL) FROM attachments")" \
    "local vhci port 0 1" "database: an open local attachment on vhci port 0"
sleep 1.5
is "$(gw_state gw sim1:1-3)" attached "still attached after 3 polls (the exporter holds it for the kernel)"

# ---- restarts -----------------------------------------------------------------
vk_ctl "foreign 1 00050007 33 3"
vk_wait '^foreign port=1'
stop_bg gw TERM
is "$RC" 0 "clean stop"
like "$(port_line 0)" '^hs +0000 006 003 00010003' "port 0 still in use after the stop (direct: the kernel holds the socket)"
is "$(gw_audit_count gw local-keep)" 1 "audit: local-keep"
is "$(vk_count 'detach port=0|connection-lost port=0')" 0 "the stop neither detached nor broke the attachment"

gw_start gw || bail_out "usbgwd did not restart"
gw_wait_state gw sim1:1-3 attached
is "$(gw_audit_count gw local-adopt)" 1 "restart: the attachment is adopted (audit local-adopt)"
is "$(gw_field gw sim1:1-3 attached_to)" "local:vhci 0" "... on the same port"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'vhci-foreign' AND detail LIKE 'vhci port 1 %'" 1
is "$(gw_audit_count gw vhci-foreign "detail LIKE 'vhci port 1 %'")" 1 "the foreign port 1 is reported"
is "$(gw_sql gw "SELECT count(*) || ' ' || sum(ended_at IS NULL) FROM attachments")" "1 1" \
    "the same attachment row, still open"

stop_bg gw KILL
gw_start gw || bail_out "usbgwd did not restart after SIGKILL"
gw_wait_state gw sim1:1-3 attached
is "$(gw_audit_count gw local-adopt)" 2 "SIGKILL and restart: adopted again"
is "$(vk_count 'detach port=[01]$')" 0 "neither our port nor the foreign one was detached"
like "$(port_line 1)" '^hs +0001 006 003 00050007 000033' "the foreign port is untouched"

# ---- revoke, approve, detach, attach, host lets go ------------------------------
gwctl gw revoke sim1:1-3
is "$RC" 0 "revoke"
vk_wait '^detach port=0'
is "$(vk_count '^detach port=0')" 1 "revoke detached vhci port 0"
gw_wait_state gw sim1:1-3 pending
is "$(gw_sql gw "SELECT end_reason FROM attachments WHERE ended_at IS NOT NULL")" \
    "no longer authorized (now pending)" "the attachment row ended with the reason"

gwctl gw approve sim1:1-3
gw_wait_state gw sim1:1-3 attached
is "$(vk_count '^attach port=[0-9]+ .*devid='"$DEVID13"' ')" 2 "approved again: attached again"
P=$(cur_port gw sim1:1-3)
like "$P" '^(0|4|5)$' "... to a free hs port ($P)"
gwctl gw detach sim1:1-3
is "$RC" 0 "usbgw detach"
gw_wait_state gw sim1:1-3 authorized
is "$(vk_count "^detach port=$P\$")" 1 "... detached port $P"
sleep 1.5
is "$(gw_state gw sim1:1-3)" authorized "not attached again on its own (held)"
like "$(gw_field gw sim1:1-3 local)" '"held": *true' "list: local.held"
attach_when_ready() {	# `usbgw attach` refuses while the claim is renewed
	gwctl "$1" attach "$2"
	! { [ "$RC" = 1 ] && [[ $ERR == *"not ready"* ]]; }
}
wait_for -t 15 attach_when_ready gw sim1:1-3
is "$RC" 0 "usbgw attach"
gw_wait_state gw sim1:1-3 attached
is "$(vk_count '^attach port=[0-9]+ .*devid='"$DEVID13"' ')" 3 "attached again on the operator's order"
P=$(cur_port gw sim1:1-3)
vk_ctl "unplug $P"
gw_wait_state gw sim1:1-3 authorized 8
check $? "the host let go of port $P: back to authorized within the check interval"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'local-detach' AND detail = 'vhci host let go'" 1
is "$(gw_audit_count gw local-detach "detail = 'vhci host let go'")" 1 "audit: local-detach, vhci host let go"

DEVID15=$(devid_of 1-5)
gwctl gw approve sim1:1-5
gw_wait_state gw sim1:1-5 attached
like "$(vk_log)" "attach port=2 sockfd=[0-9]+ devid=$DEVID15 speed=5 hub=ss" \
    "a SuperSpeed device goes to the ss hub (port 2)"
if need_grab 1; then
	vk_wait '^enumerated port=2'
	like "$(vk_log)" 'enumerated port=2 busid=4-1 vid=1209 pid=0005 serial=S15' \
	    "... and answers there"
fi
if need_grab 1; then
	vk_ctl "load 2 64 64 16"
	vk_wait '^(load|error load) port=2' 60
	like "$(vk_log)" 'load port=2 bytes=67108864 ' "direct: 64 MiB of bulk IN from the source (64 KiB URBs, 16 in flight)"
	MIB_DIRECT=$(vk_log | sed -n 's/^load port=2 .*mibps=//p' | tail -n 1)
	diag "direct: ${MIB_DIRECT:-?} MiB/s"
fi
gw_finish gw

# ---- 2. inspected ------------------------------------------------------------
# (port 2 still holds sim1:1-5, kept across the stop; port 1 the foreign one)
vk_ctl "unplug 2"
vk_wait '^unplug port=2'
gw_conf gw2 "mode = local" "vhci-root = $PLAT" "local-attach = inspected" \
    "poll-interval = 500ms" "pid-file = $T/gw.pid" "exporter sim1 $SIMA"
gw_start gw2 || bail_out "usbgwd (inspected) did not start"
gw_wait_sql gw2 "SELECT count(*) FROM audit_log WHERE event = 'vhci-foreign'" 1
is "$(gw_audit_count gw2 vhci-foreign)" 1 "a fresh database: port 1 is foreign"
gw_wait_state gw2 sim1:1-2 pending
DEVID12=$(devid_of 1-2)
gwctl gw2 approve sim1:1-2
gw_wait_state gw2 sim1:1-2 attached
vk_wait '^attach port=0 .*speed=3'
kd=$(vk_log | sed -n 's/^attach port=0 .*devid=\([0-9]*\) speed=3.*/\1/p' | tail -n 1)
isnt "$kd" "$DEVID12" "inspected: the kernel gets the gateway's devid ($kd), not the exporter's"
is "$(gw_field gw2 sim1:1-2 attached_to)" "local:vhci 0" "attached to local vhci port 0 through a relay session"
if need_grab 5; then
	vk_wait 'enumerated port=0 busid=3-1 vid=1209 pid=0002'
	like "$(vk_log)" 'grabbed port=0 kind=socketpair' "the kernel got a socketpair end"
	like "$(vk_log)" 'enumerated port=0 busid=3-1 vid=1209 pid=0002 serial=S12' \
	    "the device answers the kernel through the gateway's relay"
	num_cmp "$(gw_field gw2 sim1:1-2 urbs)" -ge 4 "the gateway counted the kernel's URBs"
	vk_ctl "badurb 0"
	gw_wait_state gw2 sim1:1-2 authorized
	check $? "a URB to an endpoint the device does not have ends the attachment"
	is "$(gw_audit_count gw2 malformed "detail LIKE '%endpoint the device does not have%'")" 1 \
	    "audit: malformed PDU from the vhci host"
fi
gwctl gw2 revoke sim1:1-2
gwctl gw2 approve sim1:1-2
gw_wait_state gw2 sim1:1-2 attached
gwctl gw2 revoke sim1:1-2
gw_wait_state gw2 sim1:1-2 pending
wait_for -t 10 eval '[ "$(port_line 0 | awk "{print \$3}")" = 004 ]'
like "$(port_line 0)" '^hs +0000 004 ' "revoke (inspected): port 0 free again"
if need_grab 2; then
	gw_wait_state gw2 sim1:1-5 pending
	gwctl gw2 approve sim1:1-5
	gw_wait_state gw2 sim1:1-5 attached
	P=$(cur_port gw2 sim1:1-5)
	vk_wait "^enumerated port=$P .*pid=0005"
	n0=$(vk_count '^(load|error load) ')
	vk_ctl "load $P 64 64 16"
	wait_for -t 60 eval '[ "$(vk_count "^(load|error load) ")" -gt "$n0" ]'
	like "$(vk_log | grep -E '^(load|error load) ' | tail -n 1)" "^load port=$P bytes=67108864 " \
	    "inspected: 64 MiB of bulk IN through the relay"
	MIB_INSP=$(vk_log | sed -n "s/^load port=$P .*mibps=//p" | tail -n 1)
	diag "inspected: ${MIB_INSP:-?} MiB/s (direct ${MIB_DIRECT:-?} MiB/s)"
	num_cmp "$(gw_field gw2 sim1:1-5 bytes_to_host)" -ge 67108864 "the relay counted every byte"
fi
gwctl gw2 approve sim1:1-2
gw_wait_state gw2 sim1:1-2 attached
stop_bg gw2 TERM
is "$RC" 0 "clean stop with an inspected attachment"
wait_for -t 10 eval '[ "$(port_line 0 | awk "{print \$3}")" = 004 ]'
like "$(port_line 0)" '^hs +0000 004 ' "the stop ended it: port 0 free (its relay ends with the process)"
is "$(gw_sql gw2 "SELECT count(*) FROM attachments WHERE ended_at IS NULL")" 0 \
    "no attachment row left open"
is "$(gw_sql gw2 "SELECT count(*) FROM attachments WHERE mode = 'local'")" \
    "$(gw_sql gw2 "SELECT count(*) FROM attachments")" "every attachment row says local"
gw_log_sanitizer_clean gw2
check $? "usbgwd gw2: no sanitizer report in its log"

# ---- 3. proxy mode, lock-down not in force -----------------------------------
gw_conf gw3 "poll-interval = 500ms" "exporter sim1 $SIMA"
gw_start gw3 || bail_out "usbgwd (proxy) did not start"
gwctl gw3 attach sim1:1-2
is "$RC" 1 "proxy mode: usbgw attach refused"
like "$ERR" 'local mode is off' "... because local mode is off"
gwctl gw3 detach sim1:1-2
is "$RC" 1 "proxy mode: usbgw detach refused"
stop_bg gw3 TERM

B=$T/bare/sys/devices/platform/vhci_hcd.0
mkdir -p "$B"
echo 4 >"$B/nports"
: >"$B/attach"
: >"$B/detach"
printf 'hs  %04d 004 000 00000000 000000 0-0\n' 0 1 >"$B/status"
printf 'ss  %04d 004 000 00000000 000000 0-0\n' 2 3 >>"$B/status"
gw_conf gw4 "mode = local" "vhci-root = $T/bare/sys/devices/platform" "vhci-lockdown = yes"
start_bg gw4 "$USBGWD" -f -c "$T/gw4.conf" -d "$T/gw4.db" -s "$T/gw4.sock" \
    -l 127.0.0.1:0 -p "$T/gw4.pid" -v debug
wait_bg gw4 10
isnt "$RC" 0 "a lock-down that cannot be put in force (no root hubs) stops the start"
like "$(cat "$(bg_log gw4)")" 'lock-down requested but not in force' "... saying so"

done_testing
