#!/bin/bash
# usbgw-agent's dial-out with `gateway` lines given by name (protocol.md
# 1.9.4, ctlconn.c): names are resolved asynchronously (evdns, hosts file
# and name servers), numeric addresses without a lookup.  A name that
# does not resolve is logged and the next line is tried at once;
# `localhost` reaches the gateway; the agent's loop stays responsive
# while it resolves (its USB/IP listener answers a DEVLIST).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gw.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" "$USBGWD" "$USBGW" "$EJSON" "$TC" sqlite3
plan 14

_ctl_up() {
	[ "$("$USBGW" -s "$T/$1.sock" exporter list --json 2>/dev/null |
	    "$EJSON" get control "name=$2" 2>/dev/null)" = true ]
}

gw_conf gw "agent tc92 from 127.0.0.0/8"
gw_start gw || bail_out "usbgwd did not start"
GP=$(gw_port gw)

# ---- an unresolvable name, then localhost ---------------------------------
APORT=$(free_port)
printf '%s\n' "name tc92" "state-file none" "listen 127.0.0.1:$APORT" \
    "allow-from 127.0.0.1" "gateway no-such-gateway.invalid:$GP" \
    "gateway localhost:$GP" >"$T/agent.conf"
t0=$(day_ms)
start_bg agent "$AGENT" -f -c "$T/agent.conf"
wait_for -t 15 _ctl_up gw tc92
check $? "the agent reached the gateway by the name localhost"
like "$(cat "$T/agent.log")" "gateway no-such-gateway\.invalid:$GP: cannot resolve no-such-gateway\.invalid \(.*\): trying the next gateway line" \
    "the unresolvable name is logged, naming it"
like "$(cat "$T/agent.log")" "audit: control gateway=localhost:$GP state=up name=usbgwd" \
    "the control connection is up on the second line (audit line)"
up=$(gw_log_after_ms gw 'agent tc92 .*control connection up' "$t0")
num_cmp "$up" -lt 5000 "up ${up} ms after the agent started"
note "metric gateway-name-failover-ms $up"
run "$TC" list "127.0.0.1:$APORT"
is "$RC" 0 "the agent's listener serves meanwhile"
unlike "$(cat "$T/gw.log")" 'malformed' "no malformed message"
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
wait_for -t 10 grep -q 'agent tc92 .*control closed: the agent said BYE' "$T/gw.log"
check $? "it said BYE"

# ---- only unresolvable names: the agent keeps trying, and serves ----------
printf '%s\n' "name tc92" "state-file none" "listen 127.0.0.1:$APORT" \
    "allow-from 127.0.0.1" "gateway no-such-gateway.invalid:$GP" \
    "gateway also-not-there.invalid" >"$T/agent2.conf"
start_bg agent2 "$AGENT" -f -c "$T/agent2.conf"
wait_for -t 10 grep -q 'also-not-there\.invalid:3240: cannot resolve' "$T/agent2.log"
check $? "the second name is tried after the first (default port 3240)"
wait_port "$APORT" 10 agent2
run "$TC" list "127.0.0.1:$APORT"
is "$RC" 0 "while every name fails, the listener still answers"
stop_bg agent2 TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM (nothing up, nothing leaked)"
gw_finish gw
