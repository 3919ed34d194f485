#!/bin/bash
# SIGHUP narrowing allow-from (protocol.md 1.9.5): a listen-mode control
# connection (a gateway on the agent's USB/IP listener, OP_REQ_USBGW
# CONTROL) of a peer the new allow-from no longer names ends at once,
# with an audit line, as that peer's imports do; one still allowed
# stays.  The dial-out side is the agent's own and is not touched.
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" python3
plan 6

APORT=$(free_port)
printf '%s\n' "name tc99" "state-file none" "allow-from 127.0.0.1/32" \
    >"$T/agent.conf"
start_bg agent "$AGENT" -f -c "$T/agent.conf" -l "127.0.0.1:$APORT"
wait_port "$APORT" 10 agent || bail_out "usbgw-agent did not start"
start_bg gw python3 "$TOP/tests/tools/gw-evil.py" --agent "$APORT" idle \
    "$T/gw.port"
wait_for -t 10 grep -q 'RESULT admitted=1' "$T/gw.log"
check $? "a gateway's control connection is up (listen mode)"

# a reload that keeps 127.0.0.1: the connection stays
printf '%s\n' "name tc99" "state-file none" "allow-from 127.0.0.0/8" \
    >"$T/agent.conf"
kill -HUP "$(bg_pid agent)"
wait_for -t 5 grep -q 'reloaded' "$T/agent.log"
check $? "reloaded (127.0.0.0/8)"
! wait_for -t 1 grep -q 'RESULT closed' "$T/gw.log"
check $? "a peer still allowed keeps its control connection"

# a reload that drops it: the connection ends, with an audit line
printf '%s\n' "name tc99" "state-file none" "allow-from 10.0.0.0/8" \
    >"$T/agent.conf"
t0=$(date +%s%N)
kill -HUP "$(bg_pid agent)"
wait_for -t 5 grep -q 'RESULT closed=1' "$T/gw.log"
check $? "a peer no longer allowed: its control connection ends"
note "metric reload-control-end-ms $(( ($(date +%s%N) - t0) / 1000000 ))"
grep -q 'audit: refused peer=127.0.0.1 reason="control: no longer in allow-from"' \
    "$T/agent.log"
check $? "audit: refused peer=127.0.0.1 ... no longer in allow-from"
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
stop_bg gw TERM
