# The agent starts unprivileged and takes the thin client's devices: the disk,
# the keyboard (exported by this config's "export" line: the built-in list
# keeps boot keyboards local, 68 checks that) and the ACM port leave their
# local drivers; the loopback "KEEP" and usbipd's gadgets stay local.  The
# proxy gateway gets it as exporter agent1 and holds every device pending.

why=$(agent_missing)
if [ -n "$why" ]; then
	skip_all "$why" "agent: usbgw-agent starts as uid $AGENT_UID and listens" \
		"agent: the gadgets leave their local drivers" \
		"agent: Debian's usbip lists the disk, keyboard and ACM at the agent" \
		"agent: KEEP and usbipd's gadgets are not offered" \
		"agent: usbgw exporter add $AGENT_EXPORTER" \
		"agent: the gateway holds disk, keyboard and ACM pending" \
		"agent: the KEEP device never reaches the gateway"
	return 0
fi
adisk=$(cat "$E2E_STATE/agent_busid.adisk")
kbd=$(cat "$E2E_STATE/agent_busid.kbd")
acm=$(cat "$E2E_STATE/agent_busid.acm")
keep=$(cat "$E2E_STATE/agent_busid.keep")
GW_EXPORTER=$AGENT_EXPORTER

agent_conf export "export id $KBD_VID:$KBD_PID"
cat "$AGENT_DIR/export.conf"
check "agent: usbgw-agent starts as $AGENT_USER and listens on 127.0.0.1:$AGENT_PORT" \
	agent_start export
pid=$(cat "$E2E_STATE/agent.pid" 2>/dev/null)
u=$(awk '$1 == "Uid:" { print $2 "/" $3 }' "/proc/$pid/status" 2>/dev/null)
check "agent: it runs as uid $AGENT_UID (real/effective $u)" [ "$u" = "$AGENT_UID/$AGENT_UID" ]

check "agent: the disk's local usb-storage disk goes away (agent claims $adisk)" \
	wait_gone 15 disk_under "*/dummy_hcd.$ADISK_UDC/*"
check "agent: the keyboard's local hidraw goes away ($kbd)" \
	wait_gone 15 class_node_under hidraw "*/dummy_hcd.$KBD_UDC/*"
check "agent: the ACM port's local ttyACM goes away ($acm)" \
	wait_gone 15 class_node_under tty "*/dummy_hcd.$ACM_UDC/*"
for b in $adisk $kbd $acm; do
	check "agent: interface $b:1.0 is held through usbfs (driver $(iface_driver "$b"))" \
		wait_for 10 iface_driver_is "$b" usbfs
	check "agent: Debian's usbip list at the agent shows $b" wait_for 10 agent_lists "$b"
done
for b in $keep $(dummy_busid 0) $(dummy_busid 1); do
	check "agent: $b is not offered (keep-local)" fails agent_lists "$b"
done
check "agent: audit keep-local line for the KEEP device $keep" \
	grep -q "audit: keep-local busid=$keep " "$AGENT_LOG"

# The gateway: an ask rule for the agent's disk id, ahead of 40's
# 'block with-interface 08:*:*', so that it waits for an operator (the same
# identity under usbipd in 68's benchmark).
check "agent: usbgw policy insert 1 'ask id $ADISK_VID:$ADISK_PID'" \
	gwctl policy insert 1 "ask id $ADISK_VID:$ADISK_PID"
touch "$E2E_STATE/agent_ask_rule"
check "agent: usbgw exporter add $AGENT_EXPORTER 127.0.0.1:$AGENT_PORT" agent_declare
for b in $adisk $kbd $acm; do
	st=$(gw_wait_state 30 "$b" pending)
	check "agent: the gateway claims $AGENT_EXPORTER:$b, state pending (last seen: $st)" \
		[ "$st" = pending ]
	gw_field "$b" busid > "$E2E_STATE/agent_gwbusid.$b"
done
s=$(gw_field "$adisk" serial)
check "agent: identity read through the agent: serial \"$ADISK_SERIAL\" (got \"$s\")" \
	[ "$s" = "$ADISK_SERIAL" ]
gwctl list --json > "$E2E_STATE/list.json"
n=$(e2e-json count serial="$KEEP_SERIAL" < "$E2E_STATE/list.json")
check "agent: the KEEP device never reaches the gateway (devices with serial KEEP: $n)" \
	[ "$n" = 0 ]
n=$(e2e-json count exporter="$AGENT_EXPORTER" < "$E2E_STATE/list.json")
check "agent: the gateway holds exactly 3 devices of $AGENT_EXPORTER ($n)" [ "$n" = 3 ]
