#!/bin/bash
# An agent in listen mode (protocol.md 1.9.4), played by
# tests/tools/agent-fake.py in front of a usbgw-sim: the gateway keeps a
# control connection to it, and a device plugged or unplugged at the sim
# is pending or gone at the gateway within 1 s although the gateway polls
# only every 30 s; the device is still probed over an ordinary import
# (the claim path of 1.6) and relayed.  With the control connection
# refused, polling finds devices as for a stock usbipd.  A stock exporter
# (the sim itself) never receives the extension's op code 0x8067.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 python3
plan 26

FAKE=$TOP/tests/tools/agent-fake.py
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type storage; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

start_bg fake python3 "$FAKE" --name tc17 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --listen 127.0.0.1:0 \
    --port-file "$T/fake.port" --log "$T/fake.events"
wait_file "$T/fake.port" 10 fake || bail_out "agent-fake did not start"
FAKEA=127.0.0.1:$(cat "$T/fake.port")

# poll-interval 30 s: only the push can be this fast
gw_conf gw "exporter tc17 $FAKEA agent" "poll-interval = 30s"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw tc17:1-1 pending
check $? "tc17:1-1 pending (the snapshot or the first poll)"
wait_for -t 10 grep -q 'control up' "$T/fake.events"
check $? "the gateway opened a control connection (CONTROL answered)"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get kind name=tc17)" agent "exporter kind agent"
is "$(printf '%s' "$OUT" | "$EJSON" get control name=tc17)" true \
    "exporter list: control connection up"
like "$(cat "$T/gw.log")" 'agent tc17 .*control connection up' \
    "the daemon logs the control connection"

# ---- push: plug ----------------------------------------------------------
t0=$(day_ms)
ns0=$(date +%s%N)
sim_ctl sim plug 1-9 keyboard
is "$RC" 0 "simulator: plug 1-9"
gw_wait_state gw tc17:1-9 pending 5
check $? "the plugged device is pending"
seen=$(gw_log_after_ms gw 'tc17:1-9: new device' "$t0")
pend=$(gw_log_after_ms gw 'tc17:1-9: probing -> pending' "$t0")
num_cmp "$pend" -lt 1000 "plugged -> pending in ${pend} ms (new at the gateway after ${seen} ms; poll-interval 30 s)"
note "metric push-plug-new-ms $seen"
note "metric push-plug-pending-ms $pend"
like "$(cat "$T/fake.events")" 'push DEV_ADDED 1-9' "the agent pushed DEV_ADDED"
like "$(cat "$(sim_pdulog sim)")" 'OP_REQ_IMPORT busid=1-9' \
    "the gateway claimed it with an ordinary import (the probe decides)"

# ---- push: unplug --------------------------------------------------------
t0=$(day_ms)
sim_ctl sim unplug 1-9
is "$RC" 0 "simulator: unplug 1-9"
gw_wait_state gw tc17:1-9 gone 5
check $? "the unplugged device is gone"
gone=$(gw_log_after_ms gw 'tc17:1-9: [a-z]+ -> gone' "$t0")
num_cmp "$gone" -lt 1000 "unplugged -> gone in ${gone} ms"
note "metric push-unplug-gone-ms $gone"

# ---- the relay runs over an ordinary import, as for usbipd ---------------
gwctl gw approve tc17:1-5
is "$RC" 0 "approve tc17:1-5"
run -t 60 "$TC" script "$GWA" tc17:1-5 --skip iso
is "$RC" 0 "usbip-tc script through the gateway to the agent's device"

# ---- a stock exporter never sees 0x8067 ----------------------------------
sim_start sim2 -c "$T/sim.conf" || bail_out "second simulator did not start"
gwctl gw exporter add stock1 "127.0.0.1:$(sim_port sim2)"
is "$RC" 0 "a stock exporter added (no --agent)"
gw_wait_state gw stock1:1-1 pending
check $? "its device pending (polled)"
unlike "$(cat "$T/sim2.log")" 'malformed|unknown op' \
    "the stock exporter saw no unknown op code (no extension)"
# the detection works: a hello sent by hand is seen as unknown
python3 -c 'import socket,struct,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.sendall(struct.pack(">HHIHHI",0x111,0x8067,0,1,1,0)); s.recv(1)' \
    "$(sim_port sim2)" 2>/dev/null
wait_for -t 5 grep -Eq 'malformed|unknown op' "$T/sim2.log"
check $? "(control: a 0x8067 sent by hand is logged by the sim as unknown)"

# ---- control refused: polling still finds devices -----------------------
stop_bg fake TERM
rm -f "$T/fake.port"
start_bg fake2 python3 "$FAKE" --name tc18 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --listen 127.0.0.1:0 \
    --port-file "$T/fake.port" --refuse-control
wait_file "$T/fake.port" 10 fake2 || bail_out "agent-fake did not start"
sim_ctl sim plug 1-7 keyboard
gwctl gw exporter add tc18 "127.0.0.1:$(cat "$T/fake.port")" --agent
is "$RC" 0 "usbgw exporter add tc18 ... --agent"
like "$OUT" 'added agent tc18' "the CLI says it added an agent"
gwctl gw exporter remove stock1
gw_wait_state gw tc18:1-7 pending 15
check $? "with its control refused, the agent's device is found by polling"
wait_for -t 10 grep -q 'agent tc18 .*refused the control connection' "$T/gw.log"
check $? "the refusal is logged"

gw_finish gw
