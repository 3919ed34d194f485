#!/bin/bash
# Red team (issue 14): a hostile gateway against usbgw-agent's dial-out
# control connection (client/agent/ctlconn.c).  The gateway admits the
# agent and then sends 2,000,000 PINGs without reading a byte: every
# PONG the agent owes would stay in its memory (40 MB) unless the agent
# bounds both ends, as the gateway does towards an agent (protocol.md
# 1.9.4): it reads at most 256 messages a second from a gateway, and it
# closes the control connection when more than 64 KiB wait to be sent.
# Expected, over a 20 s flood: the agent's memory grows by less than
# 8 MiB and its reading pauses about once a second.  (The 64 KiB close
# comes only once the kernel's socket buffers are full too, minutes at
# 256 PONGs a second: test_agent_ctlconn checks it with pushes.)  The
# listen-mode twin is 89-agent-hostile-listen.t.
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" python3
plan 6

GW_EVIL_SECS=20 start_bg evilgw python3 "$TOP/tests/tools/gw-evil.py" pingflood \
    "$T/evilgw.port" 2000000
wait_file "$T/evilgw.port" 10 evilgw || bail_out "gw-evil.py did not start"
printf '%s\n' "name tc40" "listen none" "state-file none" \
    "gateway 127.0.0.1:$(cat "$T/evilgw.port")" >"$T/agent.conf"
start_bg agent "$AGENT" -f -v -c "$T/agent.conf"
apid=$(bg_pid agent)
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$apid/status"; }
wait_for -t 10 grep -q 'RESULT admitted=1' "$T/evilgw.log"
check $? "the hostile gateway admitted the agent"
rss0=$(rss)
t0=$(date +%s%N)
rss1=$rss0
for _ in $(seq 900); do
	r=$(rss); [ -n "$r" ] && [ "$r" -gt "$rss1" ] && rss1=$r
	grep -q "RESULT closed=" "$T/evilgw.log" && break
	sleep 0.1
done
secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
grow=$(( (rss1 - rss0) / 1024 ))
note "agent VmRSS ${rss0} kB -> ${rss1} kB (+${grow} MiB) over ${secs} s"
note "metric hostile-gateway-flood-s $secs"
num_cmp "$grow" -lt 8 "the agent's memory stays bounded (grew ${grow} MiB)"
grep -q 'reading paused' "$T/agent.log"
check $? "the agent read at most 256 messages a second (reading paused)"
grep -q 'RESULT closed=' "$T/evilgw.log"
check $? "the flood was sent for 20 s ($(sed -n 's/^RESULT sent=//p' "$T/evilgw.log") PINGs taken)"
n=$(grep -c 'reading paused' "$T/agent.log")
num_cmp "$n" -ge 15 "reading paused about once a second ($n times in ${secs} s)"
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
stop_bg evilgw TERM
