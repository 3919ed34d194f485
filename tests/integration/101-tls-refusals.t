#!/usr/bin/env bash
# tls-listen refuses, each with a log line naming the reason and a
# tls-refused audit row (bounded per address like the other refusals):
# no client certificate, a certificate from another CA, an expired one,
# an agent's certificate importing (1.10.8), TLS 1.2, plaintext USB/IP to
# the TLS port, and
# TLS to the plaintext port; none of them reaches the device (it stays
# authorized, no attachment).  Past audit-limit-per-host the rows are
# summed up in an audit-suppressed row.  The gateway's key files: a 0644
# key stops the start, naming the file.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$ISSUE" sqlite3 openssl
plan 43

sim_start sim || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP" \
    "audit-limit-per-host = 8"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
TLSA=127.0.0.1:$TLSP
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
gw_wait_state gw sim1:1-1 pending || bail_out "sim1:1-1 not pending"
gwctl gw approve sim1:1-1
is "$RC" 0 "sim1:1-1 approved for every host"

run "$ISSUE" "$T/tls" "$T/good" vdi01
is "$RC" 0 "a good host certificate (vdi01)"
run "$ISSUE" -o "$T/tls" "$T/other" vdi09
is "$RC" 0 "a host certificate from another CA (vdi09)"
run "$ISSUE" -x "$T/tls" "$T/old" vdi08
is "$RC" 0 "an expired host certificate (vdi08)"
run "$ISSUE" -r agent "$T/tls" "$T/agent" tc17
is "$RC" 0 "an agent's certificate (tc17)"

rows() { gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused'"; }
# refused CMD... REASON-ERE DESC: the client fails, then one more row, whose
# detail and the log line match REASON-ERE.
refused() {
	local re=$1 desc=$2 before
	shift 2
	before=$(rows)
	nok "$desc: the client fails" "$@"
	gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused'" \
	    $((before + 1))
	check $? "... a tls-refused audit row"
	like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'tls-refused'
	    ORDER BY seq DESC LIMIT 1")" "$re" "... whose detail says why"
	like "$(grep 'TLS connection refused: \|closed: TLS on a plaintext' "$T/gw.log" |
	    tail -n 1 | sed 's/.*\(TLS connection refused\|closed\): //')" "$re" \
	    "... and a log line"
}

refused '^no client certificate$' "no client certificate" \
    "$TC" import "$TLSA" sim1:1-1 --tls-nocert
refused "CN=vdi09 not issued by this gateway's CA" "another CA's certificate" \
    "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/other" --tls-any-server
refused 'CN=vdi08 expired \(notAfter' "an expired certificate" \
    "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/old"
refused "^certificate CN=tc17 is an agent's: an agent cannot import or list devices" \
    "an agent's certificate" \
    "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/agent"
refused '^plaintext on a TLS listener$' "plaintext USB/IP to the TLS port" \
    "$TC" import "$TLSA" sim1:1-1
refused '^TLS on a plaintext listener$' "TLS to the plaintext port" \
    "$TC" import "$GWA" sim1:1-1 --tls-dir "$T/good"
refused '^peer does not speak TLS 1.3$' "a TLS 1.2 client" \
    timeout 10 openssl s_client -connect "$TLSA" -tls1_2 -quiet

is "$(gw_state gw sim1:1-1)" authorized "none of them reached the device: still authorized"
is "$(gw_sql gw "SELECT count(*) FROM attachments")" 0 "... and no attachment"

# ---- bounded: past audit-limit-per-host (8), counted, not written -----------
for i in 1 2 3 4 5; do
	"$TC" import "$TLSA" sim1:1-1 >/dev/null 2>&1
done
sleep 0.5
is "$(rows)" 8 "five more plaintext attempts: one more row, then the limit (8 a minute)"

# ---- the good certificate still gets in ---------------------------------------
run "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/good"
is "$RC" 0 "vdi01's certificate imports (over the audit limit: refusals only are bounded)"

gw_finish gw
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'audit-suppressed'
    ORDER BY seq DESC LIMIT 1")" '4 tls-refused' \
    "at the stop, an audit-suppressed row counts the 4 tls-refused rows not written"

# ---- key file modes -------------------------------------------------------------
chmod 0644 "$T/tls/gateway.key"
run timeout 20 "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$T/gw2.sock" \
    -l 127.0.0.1:0 -p "$T/gw2.pid"
isnt "$RC" 0 "a 0644 gateway.key stops the start"
like "$ERR" "tls/gateway.key: mode 0644: expected 0600" "... naming the file and the mode expected"
chmod 0600 "$T/tls/gateway.key"
done_testing
