#!/usr/bin/env bash
# usbgw-agent enroll (the agent's key in the configuration's tls-dir),
# answered in `usbgw watch --prompt` (protocol.md 1.10.10): the prompt
# shows the pairing's name, role, address and code; [a]pprove issues the
# agent's certificate (agent.key 0600, agent.pem OU=agent), [r]eject
# refuses another.  The enrolled agent dials out over TLS with that
# certificate (tests/tools/agent-fake.py), renews it over its own
# session (`usbgw-agent renew --force`), and `usbgw agent revoke tc17`
# cuts its control connection at once; its next handshake is refused.
# Then the gateway's own certificate on its timer:
# gateway.pem that comes within tls-renew-days of its end while the
# gateway runs is issued anew (same key), a TLS attachment made before
# goes on, and a new connection is served the new certificate.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

AGENT=$USBGW_BUILD/usbgw-agent
CHAT=$USBGW_BUILD/pty-chat
ISSUE=$USBGW_BUILD/tlsid-issue
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" "$AGENT" "$CHAT" "$ISSUE" sqlite3 openssl python3
plan 36

FAKE=$TOP/tests/tools/agent-fake.py
printf 'device 1-1 { type sourcesink; serial "S11"; }\n' >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "tls-listen = 127.0.0.1:$TLSP" "agent tc17 from 127.0.0.1/32 tls=required" \
    "poll-interval = 500ms" "tls-cert-days = 20"
gw_start gw || bail_out "usbgwd did not start"
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"

agent_json() {
	"$USBGW" -s "$(gw_sock gw)" agent list --json 2>/dev/null |
	    "$EJSON" get "$2" "name=$1" 2>/dev/null | tail -n 1
}
for n in tc17 tc18; do
	printf 'name %s\ntls-dir %s\nlisten none\nstate-file none\n' "$n" "$T/$n-tls" >"$T/$n.conf"
done

# ---- usage ---------------------------------------------------------------------
run "$AGENT" enroll -c "$T/nonexistent.conf" "127.0.0.1:$TLSP"
is "$RC" 2 "enroll with a missing configuration file: exit 2"
printf 'tls-dir relative/dir\n' >"$T/bad.conf"
run "$AGENT" enroll -c "$T/bad.conf" "127.0.0.1:$TLSP"
like "$RC $ERR" "^2 .*bad.conf:1:9: tls-dir: expected an absolute path" "a relative tls-dir: exit 2, file:line:column"

# ---- the prompt approves one, rejects the other -----------------------------------
{
	echo "expect q or Ctrl-D to quit"
	# setsid: the enrollments outlive the prompt's terminal
	echo "sh setsid '$AGENT' enroll -c '$T/tc17.conf' -t 60 127.0.0.1:$TLSP >'$T/tc17.out' 2>&1 &"
	echo "expect Pairing request (enrollment):"
	echo "expect tc17 (agent)"
	echo "expect from        127.0.0.1"
	echo "expect code"
	echo "expect [q]uit?"
	echo "send maybe"
	echo "expect please answer a, r, s or q:"
	echo "send a"
	echo "expect approved tc17: certificate"
	echo "sh setsid '$AGENT' enroll -c '$T/tc18.conf' -t 60 127.0.0.1:$TLSP >'$T/tc18.out' 2>&1 &"
	echo "expect tc18 (agent)"
	echo "expect [q]uit?"
	echo "send r"
	echo "expect rejected tc18"
	echo "send q"
	echo "wait"
} >"$T/chat"
run -t 60 "$CHAT" -t 30 -o "$T/transcript" -f "$T/chat" "$USBGW" -s "$(gw_sock gw)" watch --prompt
is "$RC" 0 "watch --prompt: the pairing shown, approved; the next rejected"
[ "$RC" = 0 ] || diag "$(tail -n 20 "$T/transcript" 2>/dev/null)"
wait_for -t 10 grep -q '^paired' "$T/tc17.out"
check $? "usbgw-agent enroll (tc17) says paired"
PCODE=$(sed -n 's/.*code  *\([0-9]\{6\}\).*/\1/p' "$T/transcript" | head -n 1)
ACODE=$(sed -n 's/^pairing code: \([0-9]\{6\}\)$/\1/p' "$T/tc17.out")
is "$PCODE" "$ACODE" "the prompt showed the code the agent showed ($ACODE)"
is "$(stat -c %a "$T/tc17-tls/agent.key")" 600 "agent.key 0600 in the configuration's tls-dir"
like "$(openssl x509 -in "$T/tc17-tls/agent.pem" -noout -subject)" 'OU ?= ?agent, CN ?= ?tc17' \
    "agent.pem: OU=agent, CN=tc17"
is "$(agent_json tc17 role) $(agent_json tc17 state)" "agent active" "agent list: tc17, agent, active"
wait_for -t 10 grep -q 'rejected' "$T/tc18.out"
check $? "usbgw-agent enroll (tc18) says rejected"
is "$(agent_json tc18 state)" rejected "agent list: tc18 rejected"
ok "tc18 got no certificate" test ! -e "$T/tc18-tls/agent.pem"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'pairing-approved' AND object = 'tc17'")" 1 \
    "audit: pairing-approved for tc17"

# ---- the enrolled agent over TLS: renewal, revocation ---------------------------
NA=$(date -d "$(openssl x509 -in "$T/tc17-tls/agent.pem" -noout -enddate | sed 's/notAfter=//')" +%s)
num_cmp $(( (NA - $(date +%s) + 1800) / 3600 )) -eq 480 "tls-cert-days = 20: the certificate is for 20 days"
OLD=$(openssl x509 -in "$T/tc17-tls/agent.pem" -noout -fingerprint -sha256)
run "$AGENT" renew -c "$T/tc17.conf" --force "127.0.0.1:$TLSP"
is "$RC" 0 "usbgw-agent renew --force over the agent's own TLS session: exit 0"
like "$OUT" '^renewed: certificate for tc17 \(agent\)' "... renewed"
isnt "$(openssl x509 -in "$T/tc17-tls/agent.pem" -noout -fingerprint -sha256)" "$OLD" \
    "agent.pem is a new certificate"
start_bg fake python3 "$FAKE" --name tc17 --sim "127.0.0.1:$(sim_port sim)" \
    --sim-ctl "$(sim_ctlpath sim)" --gateway "127.0.0.1:$TLSP" --tls-dir "$T/tc17-tls" \
    --log "$T/fake.events"
gw_wait_state gw tc17:1-1 pending
check $? "tc17 dials out over TLS with the renewed certificate: its device is pending"
gwctl gw agent revoke tc17
is "$RC" 0 "agent revoke tc17"
like "$OUT" '1 connection\(s\) cut|[2-9] connection\(s\) cut' "... its TLS connection(s) cut"
wait_for -t 1 grep -q 'control down' "$T/fake.events"
check $? "the agent's control connection ends within 1 s"
wait_log gw 'TLS connection refused: refused: certificate CN=tc17 \(fingerprint [0-9a-f]{16}\.\.\.\) is revoked' 15
check $? "its next handshake is refused: revoked"
gw_wait_state gw tc17:1-1 gone 15
check $? "the gateway holds nothing of tc17 any more (tc17:1-1 gone)"
stop_bg fake
stop_bg sim
gw_finish gw

# ---- gateway.pem renewed on the timer ------------------------------------------------------
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP2=$(free_port)
gw_conf gw2 "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP2" \
    "tls-dir = $T/tls2" "tls-renew-days = 1" "tls-renew-check = 300ms"
gw_start gw2 || bail_out "usbgwd gw2 did not start"
stop_bg gw2
"$ISSUE" -G $((86400 + 4)) "$T/tls2" >/dev/null || bail_out "cannot shorten gateway.pem"
F1=$(openssl x509 -in "$T/tls2/gateway.pem" -noout -fingerprint -sha256)
gw_start gw2 || bail_out "usbgwd gw2 did not start again"
wait_port "$TLSP2" 10 || bail_out "no TLS listener on $TLSP2"
"$ISSUE" -D "$T/gw2.db" "$T/tls2" "$T/vdi05" vdi05 >/dev/null || bail_out "no certificate for vdi05"
is "$(openssl x509 -in "$T/tls2/gateway.pem" -noout -fingerprint -sha256)" "$F1" \
    "at start, gateway.pem (1 day and 4 s left) is kept (tls-renew-days = 1)"
gw_wait_state gw2 sim1:1-1 pending || bail_out "sim1:1-1 not pending"
gwctl gw2 approve sim1:1-1 --to vdi05
rm -f "$T/h.ready"
start_bg hold "$TC" hold "127.0.0.1:$TLSP2" sim1:1-1 --tls-dir "$T/vdi05" --seconds 60 \
    --poll 100 --ready-file "$T/h.ready"
wait_file "$T/h.ready" 10 hold
check $? "vdi05 holds sim1:1-1 over TLS"
wait_for -t 15 sh -c "[ \"\$(openssl x509 -in '$T/tls2/gateway.pem' -noout -fingerprint -sha256)\" != '$F1' ]"
check $? "while running, gateway.pem is renewed on the timer"
is "$(openssl x509 -in "$T/tls2/gateway.pem" -noout -pubkey | sha256sum)" \
    "$(openssl pkey -in "$T/tls2/gateway.key" -pubout | sha256sum)" "... for the same key"
gw_wait_sql gw2 "SELECT count(*) FROM audit_log WHERE event = 'gateway-certificate-renewed'" 1
check $? "... with an audit row"
bg_alive hold
check $? "the attachment made before goes on"
is "$(gw_state gw2 sim1:1-1)" attached "... sim1:1-1 still attached"
SERVED=$(openssl s_client -connect "127.0.0.1:$TLSP2" -cert "$T/vdi05/host.pem" \
    -key "$T/vdi05/host.key" </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256)
is "$SERVED" "$(openssl x509 -in "$T/tls2/gateway.pem" -noout -fingerprint -sha256)" \
    "a new connection is served the renewed certificate"
stop_bg hold
gw_finish gw2
done_testing
