#!/usr/bin/env bash
# The agents table behind the TLS check (protocol.md 1.10.10): a
# certificate the gateway's CA issued but that is not an active row is
# refused at the handshake ("unknown"), as is an expired one, each with a
# log line and a tls-refused audit row; `usbgw agent revoke NAME` cuts a
# live import over TLS within 1 s (the pump of that certificate closes)
# and refuses the next handshake ("revoked"); revoking a name that has no
# active certificate is refused (exit 3).  Renewal: a certificate that
# expires within 30 days is renewed over its own session (same key, new
# certificate; `usbgw-attach renew`), a held import goes on across it,
# the new certificate imports and the old one is refused ("replaced");
# one that is not due is left alone.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
ATTACH=$USBGW_BUILD/usbgw-attach
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" "$ISSUE" "$ATTACH" sqlite3 openssl
plan 40

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type sourcesink; serial "S11"; }
device 1-2 { type sourcesink; serial "S12"; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP"
gw_start gw || bail_out "usbgwd did not start"
TLSA=127.0.0.1:$TLSP
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
gw_wait_state gw sim1:1-1 pending || bail_out "sim1:1-1 not pending"
gw_wait_state gw sim1:1-2 pending || bail_out "sim1:1-2 not pending"
gwctl gw approve sim1:1-1 --to vdi01
gwctl gw approve sim1:1-2 --to vdi03

agent_json() {
	"$USBGW" -s "$(gw_sock gw)" agent list --json 2>/dev/null |
	    "$EJSON" get "$2" "name=$1" 2>/dev/null | tail -n 1
}
refused_rows() { gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused' AND detail LIKE '$1'"; }
fpr_of() { openssl x509 -in "$1" -noout -fingerprint -sha256 | sed 's/.*=//; s/://g' | tr A-F a-f; }

# ---- unknown: the CA issued it, the agents table does not have it -----------------
run "$ISSUE" -N "$T/tls" "$T/ghost" vdi01
is "$RC" 0 "a certificate from the gateway's CA, not registered (tlsid-issue -N)"
run "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/ghost"
isnt "$RC" 0 "refused"
wait_log gw 'TLS connection refused: refused: certificate CN=vdi01 \(fingerprint [0-9a-f]{16}\.\.\.\) is unknown: not enrolled at this gateway' 5
check $? "... the log says: unknown, not enrolled here"
is "$(refused_rows '%vdi01%is unknown%')" 1 "... and a tls-refused audit row says so"

# ---- expired ----------------------------------------------------------------------
run "$ISSUE" -e 2 "$T/tls" "$T/old" vdi02
is "$RC" 0 "a registered certificate valid for 2 s"
sleep 2.5	# (the certificate's clock: nothing to wait for)
run "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/old"
isnt "$RC" 0 "expired: refused"
wait_log gw 'TLS connection refused: certificate CN=vdi02 expired' 5
check $? "... the log says expired"
is "$(refused_rows '%vdi02 expired%')" 1 "... and an audit row"

# ---- revoke cuts a live import ------------------------------------------------------
run "$ISSUE" "$T/tls" "$T/vdi01" vdi01
is "$RC" 0 "vdi01 enrolled (registered active)"
rm -f "$T/h.ready"
start_bg hold "$TC" hold "$TLSA" sim1:1-1 --tls-dir "$T/vdi01" --seconds 60 \
    --poll 100 --expect-disconnect --within 1000 --ready-file "$T/h.ready"
wait_file "$T/h.ready" 10 hold
check $? "vdi01 holds sim1:1-1 over TLS"
gw_wait_state gw sim1:1-1 attached
check $? "... attached at the gateway"
kill -USR1 "$(bg_pid hold)"
gwctl gw agent revoke vdi01 -m "laptop stolen"
is "$RC" 0 "agent revoke vdi01"
like "$OUT" 'revoked vdi01: 1 certificate\(s\), 1 connection\(s\) cut' "... one connection cut"
wait_bg hold 10
is "$RC" 0 "the host saw its connection end within 1 s (--expect-disconnect --within 1000)"
ms=$(sed -n 's/^DISCONNECT .*since_marker_ms=\([0-9.]*\).*/\1/p' "$(bg_log hold)")
num_cmp "${ms:-9999}" -lt 1000 "cut ${ms} ms after the revoke"
gw_wait_state gw sim1:1-1 authorized
check $? "the gateway ended the attachment (authorized again)"
is "$(agent_json vdi01 state)" revoked "agent list: vdi01 revoked"
run "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/vdi01"
isnt "$RC" 0 "vdi01's next handshake: refused"
wait_log gw 'TLS connection refused: refused: certificate CN=vdi01 \(fingerprint [0-9a-f]{16}\.\.\.\) is revoked' 5
check $? "... the log says revoked"
is "$(refused_rows '%vdi01%is revoked%')" 1 "... and a tls-refused audit row"
like "$(gw_sql gw "SELECT actor_name || ': ' || detail FROM audit_log WHERE event = 'agent-revoked'")" \
    "^$(id -un): vdi01 \\(host\\) certificate [0-9a-f]{16}\\.\\.\\. revoked: laptop stolen; 1 connection cut" \
    "audit: agent-revoked, by whom, why, what was cut"
gwctl gw agent revoke vdi01
is "$RC" 3 "revoking it again: no active certificate (exit 3)"
gwctl gw agent revoke 'vdi/1'
is "$RC" 2 "an invalid name: usage error"

# ---- renewal --------------------------------------------------------------------------
run "$ISSUE" -d 10 "$T/tls" "$T/vdi03" vdi03
is "$RC" 0 "vdi03 enrolled with a certificate for 10 days"
cp "$T/vdi03/host.pem" "$T/vdi03-old.pem"
OLD=$(fpr_of "$T/vdi03/host.pem")
rm -f "$T/h3.ready"
start_bg hold3 "$TC" hold "$TLSA" sim1:1-2 --tls-dir "$T/vdi03" --seconds 60 \
    --poll 100 --ready-file "$T/h3.ready"
wait_file "$T/h3.ready" 10 hold3
check $? "vdi03 holds sim1:1-2 over TLS"
run "$ATTACH" renew -c "$T/vdi03" "$TLSA"
is "$RC" 0 "usbgw-attach renew: exit 0"
like "$OUT" "renewed: certificate for vdi03 \\(host\\) stored in $T/vdi03" "... renewed"
NEW=$(fpr_of "$T/vdi03/host.pem")
isnt "$NEW" "$OLD" "host.pem is a new certificate"
is "$(openssl x509 -in "$T/vdi03/host.pem" -noout -pubkey | sha256sum)" \
    "$(openssl x509 -in "$T/vdi03-old.pem" -noout -pubkey | sha256sum)" "... for the same key"
is "$("$USBGW" -s "$(gw_sock gw)" agent list --json | "$EJSON" get state "fingerprint=$NEW")" active \
    "agent list: the new certificate active"
is "$(gw_sql gw "SELECT state FROM agents WHERE fingerprint = '$OLD'")" replaced "... the old one replaced"
bg_alive hold3
check $? "the held import went on across the renewal"
is "$(gw_state gw sim1:1-2)" attached "... sim1:1-2 still attached"
stop_bg hold3
gw_wait_state gw sim1:1-2 authorized
run "$TC" desc "$TLSA" sim1:1-2 1:0 --tls-dir "$T/vdi03"
is "$RC" 0 "the renewed certificate imports"
mkdir -m 0700 "$T/vdi03-old" && cp "$T/vdi03/host.key" "$T/vdi03/gateway-ca.pem" "$T/vdi03-old/" &&
    cp "$T/vdi03-old.pem" "$T/vdi03-old/host.pem"
run "$TC" import "$TLSA" sim1:1-2 --tls-dir "$T/vdi03-old"
isnt "$RC" 0 "the old certificate is refused"
wait_log gw 'certificate CN=vdi03 \(fingerprint [0-9a-f]{16}\.\.\.\) was replaced by a newer one' 5
check $? "... replaced by a newer one"
run "$ATTACH" renew -c "$T/vdi03" "$TLSA"
like "$RC $OUT" '^0 renew: not due' "a fresh certificate: not due, left alone (exit 0)"

gw_finish gw
done_testing
