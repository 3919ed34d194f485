#!/usr/bin/env bash
# Pairings that end without a certificate (protocol.md 1.10.10): `usbgw
# agent reject CODE` ends the client (exit 1, "rejected") and the row
# (rejected); a second pairing from the same address while one is pending
# is refused (one per address), one from another address (::1) over
# max-pairings is refused (too many), a pending pairing expires after
# pairing-timeout (client exit 1, row lapsed), new pairing sessions over
# max-pairings-per-minute are refused, Ctrl-C at the client ends its
# pairing (abandoned), a pairing pending when the gateway stops lapses.
# Nothing is issued in any of them; each is an audit row.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ATTACH=$USBGW_BUILD/usbgw-attach
need_prog "$USBGWD" "$USBGW" "$EJSON" "$ATTACH" sqlite3
ip -6 addr show lo 2>/dev/null | grep -q '::1' || skip_all "no IPv6 loopback"
plan 28

TLSP=$(free_port)
TLSP6=$(free_port)
gw_conf gw "tls-listen = 127.0.0.1:$TLSP" "tls-listen = [::1]:$TLSP6" \
    "pairing-timeout = 3s" "max-pairings = 1" "max-pairings-per-minute = 3"
gw_start gw || bail_out "usbgwd did not start"
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
wait_port "$TLSP6" 10 || bail_out "no TLS listener on $TLSP6"

agent_json() {
	"$USBGW" -s "$(gw_sock gw)" agent list --json 2>/dev/null |
	    "$EJSON" get "$2" "name=$1" 2>/dev/null | tail -n 1
}
# enroll_bg JOB NAME [ADDRESS]: usbgw-attach enroll in the background
enroll_bg() {
	start_bg "$1" "$ATTACH" enroll -c "$T/$2" --name "$2" -t 60 "${3:-127.0.0.1:$TLSP}"
}
code_of() { sed -n 's/^pairing code: \([0-9]\{6\}\)$/\1/p' "$(bg_log "$1")"; }
audit_count() { gw_sql gw "SELECT count(*) FROM audit_log WHERE event = '$1'"; }

# ---- reject ---------------------------------------------------------------------
enroll_bg a vdia
wait_log a '^pairing code: ' 15
check $? "vdia: pairing pending, code shown"
gwctl gw agent reject "$(code_of a)" -m "not one of ours"
is "$RC" 0 "agent reject CODE"
wait_bg a 10
is "$RC" 1 "the client exits 1"
like "$(cat "$(bg_log a)")" "refused by the gateway: rejected by the gateway's operator" "... saying it was rejected"
is "$(agent_json vdia state)" rejected "agent list: vdia rejected"
ok "nothing stored for vdia" test ! -e "$T/vdia/host.pem"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'pairing-rejected'")" 'not one of ours' \
    "audit: pairing-rejected, with the operator's message"

# ---- one per address; max-pairings in all -------------------------------------------
enroll_bg b vdib
wait_log b '^pairing code: ' 15
check $? "vdib: pending"
run "$ATTACH" enroll -c "$T/vdic" --name vdic -t 10 "127.0.0.1:$TLSP"
is "$RC" 1 "a second pairing from the same address: refused (exit 1)"
like "$OUT" 'one per address' "... one per address"
run "$ATTACH" enroll -c "$T/vdix" --name vdix -t 10 "[::1]:$TLSP6"
is "$RC" 1 "a pairing from ::1 over max-pairings = 1: refused"
like "$OUT" 'too many pairings in progress \(max-pairings\)' "... too many pairings"
is "$(audit_count pairing-refused)" 2 "two pairing-refused audit rows"

# ---- expiry -----------------------------------------------------------------------
wait_bg b 15
is "$RC" 1 "vdib, never approved: the client exits 1 after pairing-timeout"
like "$(cat "$(bg_log b)")" 'expired: not approved within 3 s' "... saying it expired"
is "$(agent_json vdib state)" lapsed "agent list: vdib lapsed"
is "$(audit_count pairing-expired)" 1 "audit: pairing-expired"

# ---- new sessions per minute ------------------------------------------------------------
enroll_bg d vdid "[::1]:$TLSP6"
wait_log d '^pairing code: ' 15
check $? "vdid from ::1: pending (the third session this minute)"
# ---- the client cancels ---------------------------------------------------------------------
stop_bg d INT
is "$RC" 1 "Ctrl-C at the client: exit 1"
wait_for -t 10 sh -c "[ \"\$(\"$USBGW\" -s '$(gw_sock gw)' agent list --json | '$EJSON' get state name=vdid)\" = lapsed ]"
check $? "... the gateway lapses its pairing"
is "$(audit_count pairing-abandoned)" 1 "audit: pairing-abandoned"

run "$ATTACH" enroll -c "$T/vdie" --name vdie -t 10 "127.0.0.1:$TLSP"
is "$RC" 1 "a fourth pairing session within the minute (none pending): refused"
like "$OUT" 'this minute \(max-pairings-per-minute\)' "... max-pairings-per-minute"

gw_sql gw "SELECT name, state FROM agents ORDER BY id" >"$T/rows"
is "$(gw_sql gw "SELECT count(*) FROM agents WHERE fingerprint IS NOT NULL")" 0 \
    "no certificate was issued in any of them"
ok "no host.pem anywhere" sh -c "! ls $T/vdi*/host.pem 2>/dev/null"

gw_finish gw
done_testing
