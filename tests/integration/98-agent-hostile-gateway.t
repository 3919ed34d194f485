#!/bin/bash
# Red team (issue 14): a hostile gateway against usbgw-agent's dial-out
# control connection (client/agent/ctlconn.c).  The gateway admits the
# agent and then sends 2,000,000 PINGs without reading a byte: every
# PONG the agent owes stays in its memory unless the agent bounds what
# it queues to the gateway (as the gateway does: 64 KiB, then closed).
# Expected: the agent closes the connection, or its memory grows by
# less than 8 MiB (the 2 M PONGs are 40 MB).  Fails today (43 MiB):
# marked TODO, see the assertion.
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" python3
plan 4

start_bg evilgw python3 "$TOP/tests/tools/gw-evil.py" pingflood \
    "$T/evilgw.port" 2000000
wait_file "$T/evilgw.port" 10 evilgw || bail_out "gw-evil.py did not start"
printf '%s\n' "name tc40" "listen none" "state-file none" \
    "gateway 127.0.0.1:$(cat "$T/evilgw.port")" >"$T/agent.conf"
start_bg agent "$AGENT" -f -c "$T/agent.conf"
apid=$(bg_pid agent)
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$apid/status"; }
wait_for -t 10 grep -q 'RESULT admitted=1' "$T/evilgw.log"
check $? "the hostile gateway admitted the agent"
rss0=$(rss)
# the largest VmRSS until the gateway has judged the connection (it
# sends, waits 3 s, then tries to send again)
rss1=$rss0
for _ in $(seq 600); do
	r=$(rss); [ -n "$r" ] && [ "$r" -gt "$rss1" ] && rss1=$r
	grep -q 'RESULT closed=' "$T/evilgw.log" && break
	sleep 0.1
done
grep -q 'RESULT closed=' "$T/evilgw.log"
check $? "the flood was sent ($(sed -n 's/^RESULT sent=//p' "$T/evilgw.log") PINGs)"
closed=$(sed -n 's/^RESULT closed=//p' "$T/evilgw.log")
grow=$(( (rss1 - rss0) / 1024 ))
note "agent VmRSS ${rss0} kB -> ${rss1} kB; connection closed by the agent: $closed"
ok_if() { if "$@"; then check 0 "$MSG"; else check 1 "$MSG"; fi; }
# TODO until ctlconn.c (not the red team's to edit) bounds its output:
# prove counts the failure as expected, and says when it passes
MSG="the agent's memory stays bounded (grew ${grow} MiB, closed=$closed) # TODO ctlconn.c: cc_send queues without a bound (red-team report)"
ok_if [ "$closed" = 1 -o "$grow" -lt 8 ]
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
stop_bg evilgw TERM
