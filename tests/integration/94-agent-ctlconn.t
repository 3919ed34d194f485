#!/bin/bash
# usbgw-agent's own dial-out (client/agent/ctlconn.c, protocol.md 1.9.4)
# against two gateways: with `gateway` lines and `listen none` it opens
# no port, connects to the first gateway and sends CONTROL as its name;
# the gateway admits it (`agent NAME from CIDR`) and shows the exporter
# up with its control connection; when the first gateway goes, the agent
# fails over to the second.  The agent here has no USB devices (no usbfs
# on the test machine): its snapshot is empty.  A name the gateway does
# not declare is refused, and the agent keeps trying (back-off).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gw.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" "$USBGWD" "$USBGW" "$EJSON" sqlite3
plan 17

gw_conf gwa "agent tc30 from 127.0.0.1/32"
gw_start gwa || bail_out "usbgwd gwa did not start"
gw_conf gwb "agent tc30 from 127.0.0.0/8"
gw_start gwb || bail_out "usbgwd gwb did not start"

printf '%s\n' "name tc30" "listen none" "state-file none" \
    "gateway $(gw_addr gwa)" "gateway $(gw_addr gwb)" >"$T/agent.conf"
start_bg agent "$AGENT" -f -c "$T/agent.conf"

_ctl_up() {
	[ "$("$USBGW" -s "$T/$1.sock" exporter list --json 2>/dev/null |
	    "$EJSON" get control name=tc30 2>/dev/null)" = true ]
}
wait_for -t 10 _ctl_up gwa
check $? "gwa: agent tc30's control connection up"
gwctl gwa exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get status name=tc30)" up "gwa: tc30 up"
like "$(cat "$T/agent.log")" "audit: control gateway=$(gw_addr gwa) state=up name=usbgwd" \
    "the agent logs its control connection (audit line)"
like "$(cat "$T/gwa.log")" 'agent tc30 .*calls itself tc30.*control connection up \(dial-out\)' \
    "gwa logs the dial-out agent"
unlike "$(cat "$T/gwa.log")" 'malformed' "the agent's snapshot and messages are well-formed"

t0=$(day_ms)
gw_finish gwa
wait_for -t 15 _ctl_up gwb
check $? "gwa gone: the agent failed over to gwb"
up=$(gw_log_after_ms gwb 'agent tc30 .*control connection up' "$t0")
num_cmp "$up" -lt 5000 "failover in ${up} ms"
note "metric agent-failover-ms $up"

# a name the gateway does not declare: refused, the agent retries
printf '%s\n' "name tc31" "listen none" "state-file none" \
    "gateway $(gw_addr gwb)" >"$T/agent2.conf"
start_bg agent2 "$AGENT" -f -c "$T/agent2.conf"
gw_wait_sql gwb "SELECT count(*) FROM audit_log WHERE event = 'agent-refused' AND detail LIKE '%tc31%'" 1
check $? "tc31 (not declared) is refused with an agent-refused row"
stop_bg agent2 TERM
is "$RC" 0 "the refused agent exits 0 on SIGTERM"

stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
wait_for -t 10 grep -q 'agent tc30 .*control closed: the agent said BYE' "$T/gwb.log"
check $? "it said BYE to the gateway"
gw_finish gwb
