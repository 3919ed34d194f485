#!/bin/bash
# The agent's USB/IP connections have TCP keepalives (protocol.md 1.9.2):
# an idle import (a disk nobody reads, an interrupt IN waiting) carries
# nothing, and only keepalives find a gateway host that is gone (power,
# cable), which ends its imports.  Before, only control connections had
# them; the rest had only the kernel's 2-hour default, inherited from the
# listening socket libevent sets SO_KEEPALIVE on (a red-team finding).  Checked on
# the agent's end of an accepted connection: SO_KEEPALIVE's timer, armed
# with the 10 s idle time (`ss -o` shows "timer:(keepalive,...)").
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" python3 ss
plan 3

APORT=$(free_port)
printf '%s\n' "name tc148" "state-file none" "allow-from 127.0.0.1/32" \
    >"$T/agent.conf"
start_bg agent "$AGENT" -f -c "$T/agent.conf" -l "127.0.0.1:$APORT"
wait_port "$APORT" 10 agent || bail_out "usbgw-agent did not start"

# a peer that connects and says nothing (the op phase's limit is 30 s)
start_bg peer python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("connected", flush=True)
time.sleep(20)' "$APORT"
wait_for -t 10 grep -q connected "$T/peer.log"
check $? "a peer is connected"
agent_end() { ss -tnoH state established "( sport = :$APORT )"; }
wait_for -t 5 sh -c "ss -tnoH state established '( sport = :$APORT )' | grep -q ."
note "agent's end: $(agent_end)"
agent_end | grep -Eq 'timer:\(keepalive,([0-9]+(\.[0-9]+)?(ms|sec)|[0-9]+min)'
check $? "the agent's end has a keepalive timer"
# 10 s idle, not the kernel's 7200 s: under a minute, so ss counts it in
# seconds or ms (Debian 12's ss prints "9.928ms" for 9.9 s), not "119min"
agent_end | grep -Eq 'timer:\(keepalive,[0-9]+(\.[0-9]+)?(sec|ms),'
check $? "armed for 10 s idle, not the kernel's 2 hours"
stop_bg peer TERM
stop_bg agent TERM
