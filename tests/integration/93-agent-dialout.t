#!/bin/bash
# Dial-out through NAT (protocol.md 1.9.4): the agent (agent-fake.py in
# front of a usbgw-sim) has no listener; it connects to the gateway's
# USB/IP port and sends CONTROL; the gateway admits `agent NAME from
# CIDR` only (another name, or the right name from another address:
# ST_NA, closed, an agent-refused row), claims each device by
# OPEN_IMPORT, and takes the agent's DIALBACK as the claim's connection:
# probe, approval and relay run over it.  Two gateways listed: when the
# first goes away the agent fails over to the second (one control
# connection at a time), whose claims take the devices.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 python3
plan 25

FAKE=$TOP/tests/tools/agent-fake.py
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type storage; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

gw_conf gwa "agent tc17 from 127.0.0.1/32" "agent tc99 from 127.0.0.0/8" \
    "poll-interval = 1s"
gw_start gwa || bail_out "usbgwd gwa did not start"
gw_conf gwb "agent tc17 from 127.0.0.0/8" "poll-interval = 1s"
gw_start gwb || bail_out "usbgwd gwb did not start"

# ---- refused: a name not declared; the right name from elsewhere -------
start_bg nobody python3 "$FAKE" --name tc42 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "$(gw_addr gwa)" \
    --log "$T/nobody.events"
wait_for -t 10 grep -q 'control refused' "$T/nobody.events"
check $? "an undeclared agent's CONTROL is refused (ST_NA)"
stop_bg nobody TERM
start_bg far python3 "$FAKE" --name tc17 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "$(gw_addr gwa)" \
    --source 127.0.0.2 --log "$T/far.events"
wait_for -t 10 grep -q 'control refused' "$T/far.events"
check $? "tc17 from 127.0.0.2 (outside 127.0.0.1/32) is refused"
stop_bg far TERM
gw_wait_sql gwa "SELECT count(*) FROM audit_log WHERE event = 'agent-refused'" 2
check $? "two agent-refused audit rows"
like "$(gw_sql gwa "SELECT group_concat(detail, ' | ') FROM audit_log WHERE event = 'agent-refused'")" \
    'tc42.*no such agent declared.*tc17: address outside 127.0.0.1/32' \
    "the rows say why (name, then address)"
is "$(gw_sql gwa "SELECT count(*) FROM devices")" 0 \
    "a refused agent's devices were never taken"

# ---- admitted: claims by dial-back ---------------------------------------
start_bg fake python3 "$FAKE" --name tc17 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "$(gw_addr gwa)" \
    --gateway "$(gw_addr gwb)" --log "$T/fake.events"
gw_wait_state gwa tc17:1-1 pending
check $? "gwa: tc17:1-1 pending, probed over a dial-back connection"
gw_wait_state gwa tc17:1-5 pending
check $? "gwa: tc17:1-5 pending"
like "$(cat "$T/fake.events")" 'dialback 1-1 ok' "the agent dialled back for 1-1"
like "$(cat "$T/gwa.log")" 'tc17:1-1: dial-back from agent tc17' \
    "the gateway took the dial-back as the claim's connection"
gwctl gwa exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get kind name=tc17)" agent-dialout \
    "exporter kind agent-dialout"
is "$(printf '%s' "$OUT" | "$EJSON" get status name=tc17)" up \
    "exporter up while its control connection is"
gwctl gwa approve tc17:1-5
is "$RC" 0 "approve tc17:1-5"
run -t 60 "$TC" script "$(gw_addr gwa)" tc17:1-5 --skip iso
is "$RC" 0 "usbip-tc script through the gateway and the dial-back connection"

# plug while dialled out: pushed, claimed by a new dial-back
t0=$(day_ms)
sim_ctl sim plug 1-9 keyboard
gw_wait_state gwa tc17:1-9 pending 5
check $? "a device plugged at the agent is pending"
pend=$(gw_log_after_ms gwa 'tc17:1-9: probing -> pending' "$t0")
num_cmp "$pend" -lt 1000 "dial-out: plugged -> pending in ${pend} ms"
note "metric dialout-plug-pending-ms $pend"

# ---- failover ------------------------------------------------------------
t0=$(day_ms)
gw_finish gwa
gw_wait_state gwb tc17:1-1 pending 20
check $? "gwa gone: the agent failed over to gwb, which claimed tc17:1-1"
gw_wait_state gwb tc17:1-9 pending 10
check $? "and tc17:1-9"
up=$(gw_log_after_ms gwb 'agent tc17 .*control connection up' "$t0")
num_cmp "$up" -lt 10000 "failover: control connection up at gwb after ${up} ms"
note "metric dialout-failover-ms $up"
is "$(grep -c 'control up' "$T/fake.events")" 2 \
    "one control connection at a time: gwa's, then gwb's"

gw_finish gwb
