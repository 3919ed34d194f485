#!/bin/bash
# Agents over TLS, dial-out (issue 15 items 1 and 7; protocol.md 1.10.8).
# The gateway is always TLS's server and the agent TLS's client.  A
# dial-out agent declared `tls=required` connects to the gateway's
# tls-listen port with an agent certificate whose CN is its name: its
# control connection comes up, its devices are claimed over dial-backs
# that are TLS too, and an approved device's URBs (4 MiB of bulk data,
# checked) run through gateway and agent.  Refused, each with a log line
# and an audit row: the certificate of tc17 announcing itself as tc18, a
# vhci host's certificate sending an agent's hello, an agent's
# certificate importing as a vhci host, tc17 in plaintext (tls required).
# The real usbgw-agent dials out over TLS (`tls required`), refuses to
# start with a 0644 key or a certificate of another name, and pointed at
# the plaintext port it fails the handshake with an audit line.
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
TLSP=$(free_port)
gw_conf gw "agent tc17 from 127.0.0.1/32 tls=required" \
    "agent tc18 from 127.0.0.1/32 tls=required" \
    "agent tc30 from 127.0.0.1/32 tls=required" \
    "poll-interval = 1s" "attach-pending-wait = 0" "host-names = no" \
    "tls-listen = 127.0.0.1:$TLSP"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
TLSA=127.0.0.1:$TLSP
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"

run "$ISSUE" -r agent "$T/tls" "$T/a17" tc17
is "$RC" 0 "an agent certificate for tc17 (tlsid-issue, standing in for enrollment)"
run "$ISSUE" -r agent "$T/tls" "$T/a30" tc30
is "$RC" 0 "an agent certificate for tc30"
run "$ISSUE" "$T/tls" "$T/vdi01" vdi01
is "$RC" 0 "a vhci host certificate for vdi01"

n_rows() {	# EVENT PATTERN
	gw_sql gw "SELECT count(*) FROM audit_log WHERE event = '$1' AND detail LIKE '$2'"
}

# ---- tc17 over TLS: control, dial-back claims, relay ---------------------------
start_bg fake python3 "$FAKE" --name tc17 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "$TLSA" --tls-dir "$T/a17" \
    --log "$T/fake.events"
gw_wait_state gw tc17:1-1 pending
check $? "tc17 over TLS: its device claimed and probed (pending)"
like "$(cat "$T/gw.log")" 'agent tc17 \(127.0.0.1 \(tls tc17\), calls itself tc17\): control connection up \(dial-out\)' \
    "the gateway logs the control connection as TLS with tc17's certificate"
like "$(cat "$T/gw.log")" 'tc17:1-1: dial-back from agent tc17 \(127.0.0.1 \(tls tc17\)\)' \
    "the claim's dial-back came over TLS with tc17's certificate"
like "$(cat "$T/fake.events")" 'dialback 1-1 ok' "the agent dialled back (TLS)"
gwctl gw approve tc17:1-1
is "$RC" 0 "approve tc17:1-1"
run "$TC" script "$GWA" tc17:1-1 --bytes 4M
is "$RC" 0 "the URB script through gateway and TLS agent legs"
like "$OUT" 'ok bulk-loop ' "... 4 MiB of bulk data went through both ways, checked"

# ---- both legs recorded: the exporter leg TLS with tc17's certificate -----------------
is "$(gw_sql gw "SELECT a.transport || '|' || IFNULL(a.host_cert, '-') || '|' ||
    a.up_transport || '|' || IFNULL(a.up_cert, '-') FROM attachments a JOIN devices d
    ON d.id = a.device_id WHERE d.busid = 'tc17:1-1' ORDER BY a.id DESC LIMIT 1")" \
    "tcp|-|tls|tc17" "the attachment: host leg tcp, exporter leg tls with tc17's certificate"
is "$(gw_sql gw "SELECT detail FROM audit_log WHERE busid = 'tc17:1-1' AND
    new_state = 'attached' ORDER BY seq DESC LIMIT 1")" \
    "host leg tcp, exporter leg tls (certificate tc17)" "... the attach audit row says both legs"
is "$(gw_sql gw "SELECT up_transport || '|' || up_cert FROM v_attachment_traffic
    WHERE busid = 'tc17:1-1' ORDER BY attachment_id DESC LIMIT 1")" "tls|tc17" \
    "... and the view v_attachment_traffic"
"$TC" hold "$GWA" tc17:1-1 --seconds 0 >"$T/hold.out" 2>&1 &
HOLD=$!
gw_wait_state gw tc17:1-1 attached
check $? "held: attached"
gwctl gw show tc17:1-1 --json
like "$OUT" '"up_transport": "tls",' "show --json: up_transport tls"
like "$OUT" '"up_cert": "tc17",' "show --json: up_cert tc17"
gwctl gw show tc17:1-1
like "$OUT" 'exporter leg +tls \(certificate tc17\)' "show: the exporter leg tls, certificate tc17"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
gw_wait_state gw tc17:1-1 authorized
check $? "the hold ended: authorized"

# ---- the certificate of tc17 announcing tc18 -------------------------------------
start_bg liar python3 "$FAKE" --name tc18 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "$TLSA" --tls-dir "$T/a17" \
    --log "$T/liar.events"
wait_for -t 10 grep -q 'control refused' "$T/liar.events"
check $? "tc17's certificate saying CONTROL tc18: refused (ST_NA)"
stop_bg liar TERM
is "$(n_rows agent-refused '%as agent tc18 with the certificate of tc17%')" 1 \
    "... an agent-refused row: the name must be the certificate's"
like "$(cat "$T/gw.log")" 'refused: CONTROL as agent tc18 with the certificate of tc17' \
    "... and a log line"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE busid LIKE 'tc18:%'")" 0 \
    "no device was taken for tc18"

# ---- roles: a host's certificate as an agent, an agent's as a host ----------------
start_bg hostag python3 "$FAKE" --name vdi01 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "$TLSA" --tls-dir "$T/vdi01" \
    --tls-role host --log "$T/hostag.events"
wait_for -t 10 grep -q 'control down' "$T/hostag.events"
check $? "a vhci host's certificate sending an agent's hello: closed"
stop_bg hostag TERM
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused'
    AND detail LIKE '%CN=vdi01 is a host''s: only an agent may announce devices%'" 1
check $? "... a tls-refused row: only an agent may announce devices"
mkdir -p "$T/a17h"
cp "$T/a17/agent.key" "$T/a17h/host.key"
cp "$T/a17/agent.pem" "$T/a17h/host.pem"
cp "$T/a17/gateway-ca.pem" "$T/a17h/"
chmod 600 "$T/a17h/host.key"
run "$TC" import "$TLSA" tc17:1-1 --tls-dir "$T/a17h"
isnt "$RC" 0 "an agent's certificate importing as a vhci host: refused"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused'
    AND detail LIKE '%CN=tc17 is an agent''s: an agent cannot import or list devices%'" 1
check $? "... a tls-refused row: an agent cannot import"

# ---- tls required: tc17 in plaintext -------------------------------------------------
start_bg plain python3 "$FAKE" --name tc17 --sim "$SIMA" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "$GWA" --log "$T/plain.events"
wait_for -t 10 grep -q 'control refused' "$T/plain.events"
check $? "tc17 in plaintext (declared tls=required): refused"
stop_bg plain TERM
is "$(n_rows agent-refused '%CONTROL from agent tc17 in plaintext: its tls is required%')" 1 \
    "... an agent-refused row says so"
wait_for -t 5 _gw_sql_ge gw "SELECT count(*) FROM devices WHERE busid = 'tc17:1-1' AND state != 'gone'" 1
check $? "the TLS agent's device is still there"
stop_bg fake TERM

# ---- the real usbgw-agent: dial-out over TLS --------------------------------------
printf '%s\n' "name tc30" "listen none" "state-file none" "tls required" \
    "tls-dir $T/a30" "gateway $TLSA" >"$T/agent.conf"
start_bg agent "$AGENT" -f -c "$T/agent.conf"
_ctl_up() {
	[ "$("$USBGW" -s "$T/gw.sock" exporter list --json 2>/dev/null |
	    "$EJSON" get control name="$1" 2>/dev/null)" = true ]
}
wait_for -t 10 _ctl_up tc30
check $? "usbgw-agent tc30 (tls required): its control connection is up"
like "$(cat "$T/agent.log")" "gateway $TLSA: TLS, certificate CN=" \
    "the agent verified the gateway's certificate (pinned gateway-ca.pem)"
like "$(cat "$T/gw.log")" 'agent tc30 \(127.0.0.1 \(tls tc30\)' "the gateway saw tc30's certificate"
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0"

# plaintext port, tls required: the handshake fails, an audit line at the agent
printf '%s\n' "name tc30" "listen none" "state-file none" "tls required" \
    "tls-dir $T/a30" "gateway $GWA" >"$T/agent2.conf"
start_bg agent2 "$AGENT" -f -c "$T/agent2.conf"
wait_for -t 10 grep -q "audit: control gateway=$GWA state=refused reason=\"tls: " "$T/agent2.log"
check $? "usbgw-agent (tls required) against the plaintext port: refused, audit line"
stop_bg agent2 TERM
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused' AND
    detail = 'TLS on a plaintext listener'" 1
check $? "... the gateway: a tls-refused row (TLS on a plaintext listener)"

# key file mode and certificate name checked at start
chmod 644 "$T/a30/agent.key"
run "$AGENT" -f -c "$T/agent.conf"
is "$RC" 1 "agent.key 0644: usbgw-agent refuses to start"
like "$ERR" 'agent.key: mode 0644: expected 0600' "... naming the file and the mode expected"
chmod 600 "$T/a30/agent.key"
sed -i 's/^name tc30/name tc31/' "$T/agent.conf"
run "$AGENT" -f -c "$T/agent.conf"
is "$RC" 1 "a certificate of another name: refused at start"
like "$ERR" 'agent.pem is the certificate of "tc30": expected the agent.s name, "tc31"' \
    "... saying whose certificate it is"

gw_finish gw
done_testing
