#!/usr/bin/env bash
# A man in the middle of an enrollment (issue 15 item 7; protocol.md
# 1.10.4, 1.10.10): tests/tools/enroll-mitm terminates the client's TLS
# with its own certificate and pairs at the gateway with its own key.
# The two sessions give two codes: the client shows the MITM's session's
# code, the gateway lists the other; they differ.  Approving the code the
# client shows finds nothing at the gateway; approving the gateway's code
# (the operator not comparing) issues a certificate for the MITM's key,
# which the client refuses (the CA is not its session's chain's): it
# exits 1 and stores nothing.  A MITM that forwards the client's CSR is
# refused by the gateway (not the session's key).  An enrolled host that
# reaches a MITM instead of its gateway refuses the handshake (the pinned
# CA).  And a client takes two messages that arrive together (PENDING and
# REFUSED in one write: a reject right after the request).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ATTACH=$USBGW_BUILD/usbgw-attach
MITM=$USBGW_BUILD/enroll-mitm
ISSUE=$USBGW_BUILD/tlsid-issue
need_prog "$TC" "$USBGWD" "$USBGW" "$EJSON" "$ATTACH" "$MITM" "$ISSUE" openssl
plan 24

TLSP=$(free_port)
gw_conf gw "tls-listen = 127.0.0.1:$TLSP"
gw_start gw || bail_out "usbgwd did not start"
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"

gw_code() {
	"$USBGW" -s "$(gw_sock gw)" agent list --json 2>/dev/null |
	    "$EJSON" get code "name=$1" 2>/dev/null | tail -n 1
}
line() { sed -n "s/^$2 //p" "$(bg_log "$1")" | head -n 1; }

# ---- the MITM pairs with its own key ------------------------------------------------
MP=$(free_port)
start_bg mitm "$MITM" "$MP" "127.0.0.1:$TLSP" "$T/mitm"
wait_log mitm '^listening' 10 || bail_out "enroll-mitm did not start"
start_bg enr "$ATTACH" enroll -c "$T/vdi01" --name vdi01 -t 60 "127.0.0.1:$MP"
wait_log enr '^pairing code: [0-9]{6}$' 15
check $? "the client, talking to the MITM, shows a code"
CCODE=$(sed -n 's/^pairing code: \([0-9]\{6\}\)$/\1/p' "$(bg_log enr)")
GCODE=$(gw_code vdi01)
like "$GCODE" '^[0-9]{6}$' "the gateway lists a pending pairing for vdi01 (the MITM's)"
is "$(line mitm client-code)" "$CCODE" "the client's code is that of its session with the MITM"
is "$(line mitm gateway-code)" "$GCODE" "the gateway's code is that of the MITM's session with it"
isnt "$CCODE" "$GCODE" "the agent's code differs from the gateway's"

gwctl gw agent approve "$CCODE"
is "$RC" 3 "approving the code the client shows: no such pending pairing (exit 3)"
gwctl gw agent approve "$GCODE"
is "$RC" 0 "approving the gateway's code (the operator did not compare): issued"
wait_bg enr 15
is "$RC" 1 "the client refuses what the MITM relays (exit 1)"
like "$(cat "$(bg_log enr)")" "not acceptable: the CA sent is not the one in the session's certificate chain; nothing stored" \
    "... the CA is not its session's chain's"
ok "nothing stored at the client" test ! -e "$T/vdi01/host.pem"
wait_bg mitm 10
like "$(cat "$(bg_log mitm)")" 'mitm-stored' "the certificate is for the MITM's key (it could store it)"
isnt "$(openssl x509 -in "$T/mitm/host.pem" -noout -pubkey | sha256sum)" \
    "$(openssl pkey -in "$T/vdi01/host.key" -pubout | sha256sum)" "... not for the client's key"

# ---- the MITM forwards the client's CSR ------------------------------------------------
gwctl gw agent revoke vdi01
MP2=$(free_port)
start_bg mitm2 "$MITM" -f "$MP2" "127.0.0.1:$TLSP" "$T/mitm2"
wait_log mitm2 '^listening' 10 || bail_out "enroll-mitm -f did not start"
run "$ATTACH" enroll -c "$T/vdi01" --name vdi01 -t 20 "127.0.0.1:$MP2"
is "$RC" 1 "the client's CSR in the MITM's session: refused (exit 1)"
like "$OUT" "the CSR's key is not the session's \\(the pairing certificate's\\) key" \
    "... the gateway says: not the session's key"
wait_bg mitm2 10
like "$(cat "$(bg_log mitm2)")" 'answer REFUSED' "... the MITM got REFUSED"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'pairing-refused' AND
    detail LIKE '%not the session''s%'")" 1 "... and a pairing-refused audit row"

# ---- an enrolled host meets a MITM ------------------------------------------------------
run "$ISSUE" "$T/tls" "$T/vdi02" vdi02
is "$RC" 0 "vdi02 enrolled"
MP3=$(free_port)
start_bg mitm3 "$MITM" "$MP3" "127.0.0.1:$TLSP" "$T/mitm3"
wait_log mitm3 '^listening' 10 || bail_out "enroll-mitm did not start"
run "$TC" import "127.0.0.1:$MP3" sim1:1-1 --tls-dir "$T/vdi02"
isnt "$RC" 0 "vdi02 (gateway-ca.pem pinned) refuses the MITM's certificate"
like "$ERR" 'not issued by|certificate' "... at the handshake: $(echo "$ERR" | head -n 1)"
stop_bg mitm3

# ---- two messages in one read -------------------------------------------------------
MP4=$(free_port)
start_bg mitm4 "$MITM" -r "$MP4" "127.0.0.1:$TLSP" "$T/mitm4"
wait_log mitm4 '^listening' 10 || bail_out "enroll-mitm -r did not start"
run "$ATTACH" enroll -c "$T/vdi04" --name vdi04 -t 20 "127.0.0.1:$MP4"
is "$RC" 1 "PENDING and REFUSED together: the client exits 1 (refused), not 4"
like "$OUT" "pairing code: [0-9]{6}.*refused by the gateway: refused at once" \
    "... it showed the code, then read the refusal"
wait_bg mitm4 10

gw_finish gw
done_testing
