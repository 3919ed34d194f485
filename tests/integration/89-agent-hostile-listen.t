#!/bin/bash
# Red team (issue 14), listen mode: a hostile gateway connects to the
# agent's USB/IP listener, is admitted as a control connection
# (OP_REQ_USBGW CONTROL), then sends 2,000,000 PINGs without reading a
# byte.  As in dial-out (98-agent-hostile-gateway.t): the agent reads at
# most 256 messages a second from it and closes the connection when more
# than 64 KiB wait to be sent; over a 20 s flood its memory grows by less
# than 8 MiB, its reading pauses about once a second, and its listener
# keeps serving meanwhile.
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" "$TC" python3
plan 7

APORT=$(free_port)
printf '%s\n' "name tc89" "state-file none" >"$T/agent.conf"
start_bg agent "$AGENT" -f -v -c "$T/agent.conf" -l "127.0.0.1:$APORT" \
    -a 127.0.0.1
wait_port "$APORT" 10 agent || bail_out "usbgw-agent did not start"
apid=$(bg_pid agent)
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$apid/status"; }
GW_EVIL_SECS=20 start_bg evilgw python3 "$TOP/tests/tools/gw-evil.py" --agent "$APORT" \
    pingflood "$T/evilgw.port" 2000000
wait_for -t 10 grep -q 'RESULT admitted=1' "$T/evilgw.log"
check $? "the agent admitted the hostile gateway's CONTROL"
rss0=$(rss)
t0=$(date +%s%N)
rss1=$rss0
served=1
for i in $(seq 900); do
	r=$(rss); [ -n "$r" ] && [ "$r" -gt "$rss1" ] && rss1=$r
	grep -q "RESULT closed=" "$T/evilgw.log" && break
	# the listener still answers a device list while the flood lasts
	if [ "$i" = 50 ]; then
		run timeout 5 "$TC" list "127.0.0.1:$APORT"
		[ "$RC" = 0 ] || served=0
	fi
	sleep 0.1
done
secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
grow=$(( (rss1 - rss0) / 1024 ))
note "agent VmRSS ${rss0} kB -> ${rss1} kB (+${grow} MiB) over ${secs} s"
note "metric hostile-listen-flood-s $secs"
num_cmp "$grow" -lt 8 "the agent's memory stays bounded (grew ${grow} MiB)"
grep -q 'reading paused' "$T/agent.log"
check $? "the agent read at most 256 messages a second (reading paused)"
is "$served" 1 "the listener served a device list during the flood"
grep -q 'RESULT closed=' "$T/evilgw.log"
check $? "the flood was sent for 20 s ($(sed -n 's/^RESULT sent=//p' "$T/evilgw.log") PINGs taken)"
n=$(grep -c 'reading paused' "$T/agent.log")
num_cmp "$n" -ge 15 "reading paused about once a second ($n times in ${secs} s)"
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
stop_bg evilgw TERM
