#!/usr/bin/env bash
# Enrollment (issue 15 items 2 and 6; protocol.md 1.10.10): `usbgw-attach
# enroll` makes host.key (0600) in -c DIR, opens a pairing session to the
# TLS listener, shows a 6-digit code and waits; the gateway lists the
# pairing (agent list --json: pending, the same code); approving another
# code does nothing (the candidates are listed, the pairing stays
# pending, nothing is issued); approving the code issues the certificate,
# the client stores it with the CA (host.pem, gateway-ca.pem) and exits 0;
# agent list --json then says active with the certificate's fingerprint,
# serial, role and not_after; the enrolled host imports an approved device
# over TLS with it; every step is an audit row, and no key material is in
# the log.  Usage errors exit 2, an unreachable gateway 4.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ATTACH=$USBGW_BUILD/usbgw-attach
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" "$ATTACH" sqlite3 openssl
plan 33

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type sourcesink; serial "S11"; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP"
gw_start gw || bail_out "usbgwd did not start"
TLSA=127.0.0.1:$TLSP
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
gw_wait_state gw sim1:1-1 pending || bail_out "sim1:1-1 not pending"

# agent_json NAME FIELD: FIELD of NAME's newest row in agent list --json
agent_json() {
	"$USBGW" -s "$(gw_sock gw)" agent list --json 2>/dev/null |
	    "$EJSON" get "$2" "name=$1" 2>/dev/null | tail -n 1
}

# ---- usage -------------------------------------------------------------------
run "$ATTACH" enroll "$TLSA"
is "$RC" 2 "enroll without -c DIR: usage (exit 2)"
run "$ATTACH" enroll -c "$T/x" --name 'bad/name' "$TLSA"
is "$RC" 2 "an invalid --name: exit 2"
like "$ERR" "character '/' at position 4" "... naming the character and its place"
run "$ATTACH" enroll -c "$T/y" --name vdi09 -t 5 127.0.0.1:$(free_port)
is "$RC" 4 "nobody listening: exit 4 (network)"

# ---- a pairing session ----------------------------------------------------------
start_bg enr "$ATTACH" enroll -c "$T/vdi01" --name vdi01 -t 60 "$TLSA"
wait_log enr '^pairing code: [0-9]{6}$' 15
check $? "usbgw-attach enroll shows a 6-digit code"
CODE=$(sed -n 's/^pairing code: \([0-9]\{6\}\)$/\1/p' "$(bg_log enr)")
is "$(stat -c %a "$T/vdi01/host.key" 2>&1)" 600 "host.key made 0600 on this machine"
is "$(agent_json vdi01 state)" pending "agent list: vdi01 pending"
is "$(agent_json vdi01 code)" "$CODE" "... with the code the client shows"
is "$(agent_json vdi01 address)" 127.0.0.1 "... and the address it came from"

# ---- another code: nothing happens ---------------------------------------------
WRONG=$(printf '%06d' $(( (10#$CODE + 1) % 1000000 )))
gwctl gw agent approve "$WRONG"
is "$RC" 3 "approve with another code: refused (exit 3, not found)"
like "$ERR" "no pending pairing with code $WRONG; pending: vdi01 \\(host\\) from 127.0.0.1, code $CODE" \
    "... listing the candidates"
gwctl gw agent approve "$CODE" --name vdi02
is "$RC" 3 "the right code with another name: refused too"
gwctl gw agent approve 12345
is "$RC" 2 "a code that is not 6 digits: usage error"
is "$(agent_json vdi01 state)" pending "the pairing is still pending"
ok "nothing issued: no host.pem yet" test ! -e "$T/vdi01/host.pem"

# ---- approve ----------------------------------------------------------------------
gwctl gw agent approve "$CODE"
is "$RC" 0 "agent approve CODE"
like "$OUT" '^approved vdi01 \(host\): certificate [0-9a-f]{64}, until ' "... says what it issued"
wait_bg enr 15
is "$RC" 0 "usbgw-attach enroll exits 0 (paired)"
like "$(cat "$(bg_log enr)")" "paired: certificate for vdi01 \\(host\\) stored in $T/vdi01" \
    "... and says where it stored the certificate"
is "$(stat -c %a "$T/vdi01/host.key") $(stat -c %a "$T/vdi01/host.pem") $(stat -c %a "$T/vdi01/gateway-ca.pem")" \
    "600 644 644" "host.key 0600; host.pem and gateway-ca.pem stored"
FPR=$(openssl x509 -in "$T/vdi01/host.pem" -noout -fingerprint -sha256 | sed 's/.*=//; s/://g' | tr A-F a-f)
is "$(agent_json vdi01 state) $(agent_json vdi01 fingerprint)" "active $FPR" \
    "agent list: active, with the stored certificate's fingerprint"
SER=$(openssl x509 -in "$T/vdi01/host.pem" -noout -serial | sed 's/.*=//' | tr A-F a-f | sed 's/^0*//')
is "$(agent_json vdi01 role) $(agent_json vdi01 serial | sed 's/^0*//')" "host $SER" "... its role and serial"
NA=$(date -d "$(openssl x509 -in "$T/vdi01/host.pem" -noout -enddate | sed 's/notAfter=//')" +%s)
is "$(agent_json vdi01 not_after)" "$NA" "... and its not_after (unix seconds)"
cmp -s "$T/vdi01/gateway-ca.pem" "$T/tls/ca.pem"
check $? "gateway-ca.pem is the gateway's ca.pem"
like "$(openssl x509 -in "$T/vdi01/host.pem" -noout -subject)" 'O ?= ?usbgw, OU ?= ?host, CN ?= ?vdi01' \
    "the certificate: O=usbgw, OU=host, CN=vdi01"

# ---- the enrolled host imports over TLS ------------------------------------------------
gwctl gw approve sim1:1-1 --to vdi01
run "$TC" desc "$TLSA" sim1:1-1 1:0 --tls-dir "$T/vdi01"
is "$RC" 0 "vdi01's enrolled certificate: imported over TLS, GET_DESCRIPTOR"
like "$OUT" 'data=120100' "... the device descriptor came back"

# ---- audit and log -------------------------------------------------------------------
is "$(gw_sql gw "SELECT group_concat(event, ' ') FROM (SELECT event FROM
    audit_log WHERE event LIKE 'pairing-%' OR event = 'certificate-issued'
    ORDER BY seq)")" "pairing-started pairing-code pairing-approved certificate-issued" \
    "audit: pairing started, code shown, approved, certificate issued"
like "$(gw_sql gw "SELECT actor_name FROM audit_log WHERE event = 'pairing-approved'")" "^$(id -un)\$" \
    "... the approval names the operator"
KEYB64=$(sed -n 2p "$T/vdi01/host.key" | cut -c1-24)
ok "no key material in the gateway's log or the audit log" \
    sh -c "! grep -qF -- '$KEYB64' '$T/gw.log' && ! grep -q 'PRIVATE KEY' '$T/gw.log' &&
    [ \"\$(sqlite3 '$T/gw.db' \"SELECT count(*) FROM audit_log WHERE detail LIKE '%PRIVATE%' OR detail LIKE '%BEGIN%'\")\" = 0 ]"

gw_finish gw
done_testing
