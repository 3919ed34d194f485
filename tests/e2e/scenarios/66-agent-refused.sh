# allow-from: the agent admits only 127.0.0.1 (-a).  A peer at 127.0.0.5 gets a
# closed socket (no op reply, no device list) and an audit line.

why=$(agent_missing)
agent_running || why=${why:-"usbgw-agent not running"}
have_prog usbip-tc || why=${why:-"usbip-tc not built"}
if [ -n "$why" ]; then
	skip_all "$why" "agent refused: an allowed peer gets the device list" \
		"agent refused: a list from 127.0.0.5 gets a closed socket" \
		"agent refused: an import from 127.0.0.5 gets a closed socket" \
		"agent refused: audit refused line"
	return 0
fi
adisk=$(cat "$E2E_STATE/agent_busid.adisk")

out=$(usbip-tc list "127.0.0.1:$AGENT_PORT" 2>&1)
rc=$?
echo "$out"
check "agent refused: usbip-tc list from 127.0.0.1 (allowed) gets the list (exit $rc)" [ $rc -eq 0 ]
out=$(usbip-tc list "127.0.0.1:$AGENT_PORT" --source 127.0.0.5 2>&1)
rc=$?
echo "$out"
check "agent refused: usbip-tc list --source 127.0.0.5 gets a closed socket, no list (exit $rc)" \
	sh -c '[ "$1" -eq 3 ] && ! echo "$2" | grep -q "busid\|RESULT ndev"' _ "$rc" "$out"
out=$(usbip-tc import "127.0.0.1:$AGENT_PORT" "$adisk" --source 127.0.0.5 2>&1)
rc=$?
echo "$out"
check "agent refused: usbip-tc import $adisk --source 127.0.0.5 gets a closed socket (exit $rc)" \
	sh -c '[ "$1" -eq 3 ] && ! echo "$2" | grep -q "status="' _ "$rc" "$out"
check "agent refused: 'audit: refused peer=127.0.0.5' in the agent's log" \
	wait_for 5 grep -q "audit: refused peer=127.0.0.5" "$AGENT_LOG"
check "agent refused: ... and in its audit-log file" \
	grep -q "audit: refused peer=127.0.0.5" "$AGENT_DIR/audit.log"
check "agent refused: the agent still runs" agent_running
