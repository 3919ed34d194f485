#!/usr/bin/env bash
# The agent daemon renews its own certificate on a timer (issue 15 item 6,
# protocol.md 1.10.10): with agent.pem ending within tls-renew-days, the
# running usbgw-agent renews it through its TLS gateway line (a new CSR
# for the same key, over a session its current certificate
# authenticates); its control connection stays up (no attachment drops),
# new connections use the new certificate, and a certificate that is not
# due is left alone.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$USBGWD" "$USBGW" "$EJSON" "$ISSUE" "$AGENT" openssl
plan 20

TLSP=$(free_port)
gw_conf gw "agent tc30 from 127.0.0.1/32 tls=required" "host-names = no" \
    "tls-listen = 127.0.0.1:$TLSP" "tls-cert-days = 20"
gw_start gw || bail_out "usbgwd did not start"
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
TLSA=127.0.0.1:$TLSP

# a certificate for one hour: within tls-renew-days (1) of its end
run "$ISSUE" -r agent -e 3600 "$T/tls" "$T/a30" tc30
is "$RC" 0 "an agent certificate for tc30 that ends in one hour"
fp() { openssl x509 -in "$T/a30/agent.pem" -noout -fingerprint -sha256; }
end() { date -d "$(openssl x509 -in "$T/a30/agent.pem" -noout -enddate |
    sed 's/notAfter=//')" +%s; }
OLD=$(fp)
KEY=$(openssl pkey -in "$T/a30/agent.key" -pubout 2>/dev/null | sha256sum)

printf '%s\n' "name tc30" "listen none" "state-file none" "tls required" \
    "tls-dir $T/a30" "gateway $TLSA" "tls-renew-days 1" \
    "tls-renew-check 1s" >"$T/agent.conf"
start_bg agent "$AGENT" -f -c "$T/agent.conf"
_ctl_up() {
	[ "$("$USBGW" -s "$(gw_sock gw)" exporter list --json 2>/dev/null |
	    "$EJSON" get control name="$1" 2>/dev/null)" = true ]
}
wait_for -t 10 _ctl_up tc30
check $? "usbgw-agent tc30 (tls required): its control connection is up"
unlike "$(cat "$T/gw.log")" 'plaintext on a TLS listener' \
    "... and it never dialled in plaintext (its first dial-out was, before)"
wait_log agent 'TLS renewal: .*agent.pem renewed through' 20
check $? "the agent renews its certificate by itself (the timer)"
isnt "$(fp)" "$OLD" "agent.pem is a new certificate"
num_cmp $(( ($(end) - $(date +%s) + 1800) / 86400 )) -eq 20 \
    "... for 20 days (the gateway's tls-cert-days)"
is "$(openssl pkey -in "$T/a30/agent.key" -pubout 2>/dev/null | sha256sum)" "$KEY" \
    "... for the same key (it never left the machine)"
is "$(stat -c %a "$T/a30/agent.key")" 600 "agent.key still 0600"
_ctl_up tc30
check $? "the control connection stayed up through the renewal"
is "$(grep -c 'control connection up (dial-out)' "$T/gw.log")" 1 \
    "... one control connection in all (none dropped and made again)"
is "$(gw_sql gw "SELECT state FROM agents WHERE name = 'tc30' ORDER BY id DESC LIMIT 1")" active \
    "the agents table holds the new certificate as active"
# not due any more (20 days left, tls-renew-days 1): left alone
sleep 3
is "$(grep -c 'renewed through' "$T/agent.log")" 1 "a certificate not due is left alone"
awk '/control .*state=up/ { u = 1 } /control .*state=down/ { u = 0 }
    /renewed through/ { if (u) r = 1 } END { exit !r }' "$T/agent.log"
check $? "the renewal came while the control connection was up"
# revoke: the control connection runs on the renewed-away (replaced)
# certificate, and is cut all the same (revoke cuts by name and role)
gwctl gw agent revoke tc30
is "$RC" 0 "agent revoke tc30"
wait_for -t 3 sh -c "! '$USBGW' -s '$(gw_sock gw)' exporter list --json 2>/dev/null |
    '$EJSON' get control name=tc30 2>/dev/null | grep -qx true"
check $? "... its control connection, made with the replaced certificate, is cut"
like "$(cat "$T/gw.log")" 'certificate [0-9a-f]{16}\.\.\. revoked: .*[1-9] connections? cut' \
    "... and the log counts it"
wait_log gw 'TLS connection refused: refused: certificate CN=tc30 .* is revoked' 15
check $? "its next handshake (the renewed certificate) is refused: revoked"
stop_bg agent
gw_finish gw
