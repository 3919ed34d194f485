#!/bin/bash
# Agents over TLS, listen mode (issue 15 items 1, 5 and 7; protocol.md
# 1.10.8): the gateway opens the TCP connections (control, polls,
# claims) to an exporter declared `--tls required`, and is TLS's server
# on them; the agent is TLS's client, with a certificate whose CN must be
# the exporter's name.  Here: agent-fake.py in front of a usbgw-sim with
# tc20's certificate: control up, its device claimed and probed over TLS,
# 4 MiB of bulk data through an approved import; the same agent declared
# as tc22 (another name): refused with a tls-refused row; a stock
# exporter (the sim) declared tls=required: no handshake, refused with a
# tls-refused row, no device taken; usbgw exporter list says TLS; tls
# optional is refused for an exporter.  The real usbgw-agent with `tls
# required`: the gateway's control connection comes up over TLS; a
# gateway that speaks plaintext to it is refused with an audit line.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" "$ISSUE" "$AGENT" sqlite3 python3
plan 42

FAKE=$TOP/tests/tools/agent-fake.py
cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type storage; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)
gw_conf gw "poll-interval = 1s" "attach-pending-wait = 0" "probe-timeout = 2s" \
    "tls-dir = $T/tls"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
run "$ISSUE" -r agent "$T/tls" "$T/a20" tc20
is "$RC" 0 "an agent certificate for tc20"
run "$ISSUE" -r agent "$T/tls" "$T/a40" tc40
is "$RC" 0 "an agent certificate for tc40"

_ctl() {
	"$USBGW" -s "$T/gw.sock" exporter list --json 2>/dev/null |
	    "$EJSON" get control "name=$1" 2>/dev/null
}
_ctl_up() { [ "$(_ctl "$1")" = true ]; }

start_bg fake python3 "$FAKE" --name tc20 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --listen 127.0.0.1:0 \
    --port-file "$T/fake.port" --tls-dir "$T/a20" --log "$T/fake.events"
wait_for -t 10 test -s "$T/fake.port" || bail_out "agent-fake did not listen"
FP=$(cat "$T/fake.port")

# ---- tls optional refused for an exporter -----------------------------------------
gwctl gw exporter add tc20 "127.0.0.1:$FP" --agent --tls optional
is "$RC" 2 "exporter add --tls optional: refused (usage)"
like "$ERR" 'optional is offered for dial-out agents only' "... saying why"

# ---- tc20 over TLS: control, claim, relay ---------------------------------------------
gwctl gw exporter add tc20 "127.0.0.1:$FP" --agent --tls required
is "$RC" 0 "exporter add tc20 --agent --tls required"
wait_for -t 15 _ctl_up tc20
check $? "the control connection to tc20 is up (over TLS)"
gw_wait_state gw tc20:1-1 pending
check $? "tc20:1-1 claimed and probed over TLS: pending"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get tls name=tc20)" required "exporter list --json: tls required"
gwctl gw exporter list
like "$OUT" 'tc20 +127\.0\.0\.1:[0-9]+ \(agent, tls required\) ' "exporter list: says TLS required"
gwctl gw approve tc20:1-1
run "$TC" script "$GWA" tc20:1-1 --bytes 4M
is "$RC" 0 "the URB script through the gateway to the TLS agent"
like "$OUT" 'ok bulk-loop ' "... 4 MiB of bulk data went through, checked"
is "$(gw_sql gw "SELECT a.transport || '|' || a.up_transport || '|' || IFNULL(a.up_cert, '-')
    FROM attachments a JOIN devices d ON d.id = a.device_id WHERE d.busid = 'tc20:1-1'
    ORDER BY a.id DESC LIMIT 1")" "tcp|tls|tc20" \
    "the attachment: exporter leg tls with tc20's certificate (the gateway's own connection)"
is "$(gw_sql gw "SELECT detail FROM audit_log WHERE busid = 'tc20:1-1' AND
    new_state = 'attached' ORDER BY seq DESC LIMIT 1")" \
    "host leg tcp, exporter leg tls (certificate tc20)" "... the attach audit row says both legs"
"$TC" hold "$GWA" tc20:1-1 --seconds 0 >"$T/hold.out" 2>&1 &
HOLD=$!
gw_wait_state gw tc20:1-1 attached
check $? "held: attached"
gwctl gw show tc20:1-1 --json
like "$OUT" '"up_transport": "tls",' "show --json: up_transport tls"
like "$OUT" '"up_cert": "tc20",' "show --json: up_cert tc20"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
gw_wait_state gw tc20:1-1 authorized
check $? "the hold ended: authorized"
gwctl gw exporter remove tc20

# ---- the same agent declared under another name -----------------------------------------
gwctl gw exporter add tc22 "127.0.0.1:$FP" --agent --tls required
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused' AND
    object = 'tc22' AND detail LIKE '%certificate CN=tc20, expected tc22%'" 1
check $? "tc20's certificate at the exporter declared tc22: a tls-refused row"
like "$(cat "$T/gw.log")" 'exporter tc22: TLS with 127.0.0.1:[0-9]+ refused: certificate CN=tc20, expected tc22' \
    "... and a log line"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE busid LIKE 'tc22:%'")" 0 \
    "no device taken for tc22"
is "$(_ctl tc22)" false "no control connection to tc22"
gwctl gw exporter remove tc22
stop_bg fake TERM

# ---- a stock exporter (plaintext) declared tls=required ----------------------------------
gwctl gw exporter add sim1 "$SIMA" --tls required
is "$RC" 0 "exporter add sim1 (a plain usbgw-sim) --tls required"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused' AND
    object = 'sim1' AND detail LIKE 'no TLS handshake from 127.0.0.1:%(a plaintext usbipd?)'" 1 15
check $? "no TLS from the stock exporter: a tls-refused row"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE busid LIKE 'sim1:%'")" 0 \
    "no device taken from it (fail closed)"
gwctl gw exporter remove sim1

# ---- the same sim declared plain: the exporter leg is tcp, no certificate ---------------
gwctl gw exporter add sim2 "$SIMA"
is "$RC" 0 "exporter add sim2 (the sim, plain)"
gw_wait_state gw sim2:1-1 pending
check $? "sim2:1-1 claimed in plaintext: pending"
gwctl gw approve sim2:1-1
"$TC" hold "$GWA" sim2:1-1 --seconds 0 >"$T/hold2.out" 2>&1 &
HOLD=$!
gw_wait_state gw sim2:1-1 attached
check $? "held: attached"
gwctl gw show sim2:1-1 --json
like "$OUT" '"up_transport": "tcp",' "show --json: up_transport tcp"
unlike "$OUT" '"up_cert"' "... and no up_cert"
gwctl gw show sim2:1-1
like "$OUT" 'exporter leg +tcp' "show: the exporter leg tcp"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
gw_wait_state gw sim2:1-1 authorized
check $? "the hold ended: authorized"
is "$(gw_sql gw "SELECT a.up_transport || '|' || IFNULL(a.up_cert, '-') FROM attachments a
    JOIN devices d ON d.id = a.device_id WHERE d.busid = 'sim2:1-1'")" "tcp|-" \
    "the attachment: exporter leg tcp, no certificate"
is "$(gw_sql gw "SELECT detail FROM audit_log WHERE busid = 'sim2:1-1' AND
    new_state = 'attached'")" "host leg tcp, exporter leg tcp" "... the attach audit row"
gwctl gw exporter remove sim2

# ---- the real usbgw-agent, tls required, listen mode ----------------------------------------
APORT=$(free_port)
printf '%s\n' "name tc40" "state-file none" "tls required" "tls-dir $T/a40" >"$T/a.conf"
start_bg agent "$AGENT" -f -l "127.0.0.1:$APORT" -c "$T/a.conf" -a 127.0.0.1
wait_port "$APORT" 10 || bail_out "usbgw-agent did not listen"
gwctl gw exporter add tc40 "127.0.0.1:$APORT" --agent --tls required
wait_for -t 15 _ctl_up tc40
check $? "usbgw-agent tc40 (tls required): the gateway's control connection is up"
like "$(cat "$T/agent.log")" 'on 127.0.0.1:[0-9]+: TLS, gateway certificate CN=' \
    "the agent verified the gateway's certificate"
like "$(cat "$T/agent.log")" 'audit: control peer=127.0.0.1 state=up name=usbgwd via=listen' \
    "the agent's audit line: control up"
gwctl gw exporter remove tc40
gwctl gw exporter add tc40p "127.0.0.1:$APORT" --agent
wait_for -t 15 grep -q 'audit: refused peer=127.0.0.1 listen=127.0.0.1:[0-9]* reason="tls required: ' "$T/agent.log"
check $? "a gateway speaking plaintext to it: refused, audit line"
is "$(_ctl tc40p)" false "no plaintext control connection"
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0"

gw_finish gw
done_testing
