#!/usr/bin/env bash
# An agent certificate revoked at one gateway (issue 16 item 2, protocol.md
# 4.2/4.3): the TLS connection it authenticated at ANOTHER gateway of the
# same PostgreSQL store is cut there within 1 s (the change feed), with an
# agent-cut audit row written by that gateway; its next handshake there is
# refused as revoked.  Both gateways share the CA (tls-dir) and the store.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
ISSUE=$USBGW_BUILD/tlsid-issue
need_pg
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$ISSUE" openssl
plan 9

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
cat >"$T/sim.conf" <<'CONF'
device 1-1 { type sourcesink; serial "S11"; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
for g in a b; do
	eval "TLSP_$g=$(free_port)"
	p=TLSP_$g
	gw_conf "gw$g" "poll-interval = 300ms" "lease-time = 3s" \
	    "audit-key = $T/site.key" "tls-dir = $T/tls" "host-names = no" \
	    "attach-pending-wait = 0" "tls-listen = 127.0.0.1:${!p}" \
	    "exporter sim1 127.0.0.1:$(sim_port sim)"
done
gw_start gwa -d "$PG_URI" -N gw-a || bail_out "gateway a did not start"
gw_start gwb -d "$PG_URI" -N gw-b || bail_out "gateway b did not start"

H=
_held() {
	local g
	for g in a b; do
		[ "$(gw_state "gw$g" sim1:1-1)" = pending ] && { H=$g; return 0; }
	done
	return 1
}
wait_for -t 20 _held || bail_out "no gateway holds sim1"
O=a; [ "$H" = a ] && O=b
p=TLSP_$H
TLSA=127.0.0.1:${!p}
gwctl "gw$O" approve sim1:1-1 --to vdi01
gw_wait_state "gw$H" sim1:1-1 authorized 10
check $? "approved at $O for vdi01: authorized at the holder $H"

# vdi01's certificate from the shared CA, registered in the store as
# enrolment would (active, its fingerprint and expiry)
run "$ISSUE" -N "$T/tls" "$T/vdi01" vdi01
is "$RC" 0 "a host certificate for vdi01 from the gateways' CA"
fpr=$(openssl x509 -in "$T/vdi01/host.pem" -noout -fingerprint -sha256 | sed 's/.*=//; s/://g' | tr A-F a-f)
na=$(date -d "$(openssl x509 -in "$T/vdi01/host.pem" -noout -enddate | sed 's/notAfter=//')" +%s)
pg_sql "INSERT INTO agents (name, role, state, fingerprint, serial, key_fingerprint, not_after, created_at, approved_at, approved_by) VALUES ('vdi01', 'host', 'active', '$fpr', '01', 'k', $na, $(date +%s), $(date +%s), 'test')" >/dev/null

rm -f "$T/h.ready"
start_bg hold "$TC" hold "$TLSA" sim1:1-1 --tls-dir "$T/vdi01" --seconds 60 \
    --poll 100 --expect-disconnect --within 1000 --ready-file "$T/h.ready"
wait_file "$T/h.ready" 10 hold
check $? "vdi01 holds sim1:1-1 over TLS at $H"
gw_wait_state "gw$H" sim1:1-1 attached 10
check $? "... attached at $H"

# revoked at O, which has no connection of vdi01: cut at H by the feed
kill -USR1 "$(bg_pid hold)"
gwctl "gw$O" agent revoke vdi01 -m "laptop stolen"
is "$RC" 0 "agent revoke vdi01 at $O: $OUT"
wait_bg hold 10
is "$RC" 0 "the host saw its connection at $H end within 1 s of the revoke at $O"
ms=$(sed -n 's/^DISCONNECT .*since_marker_ms=\([0-9.]*\).*/\1/p' "$(bg_log hold)")
diag "revoke at $O -> connection cut at $H: ${ms:-?} ms"
is "$(pg_sql "SELECT gateway FROM audit_log WHERE event = 'agent-cut' AND detail LIKE 'vdi01 (host)%revoked at gateway gw-$O: 1 connection cut here'")" \
    "gw-$H" "an agent-cut audit row written by $H names the revoking gateway"
run "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/vdi01"
isnt "$RC" 0 "vdi01's next handshake at $H: refused (revoked)"
asan_clean "no sanitizer report (ASan build: every program of the test)"
