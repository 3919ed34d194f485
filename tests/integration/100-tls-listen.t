#!/usr/bin/env bash
# tls-listen (issue 15 item 3, gateway side): a vhci host with a
# certificate from the gateway's CA imports an approved device over TLS,
# and URBs flow (GET_DESCRIPTOR, the whole script with bulk data); the
# gateway names the host by its certificate: `approve --to vdi01` lets
# vdi01's certificate import, another host's certificate is refused the
# import, a rule's `to-host vdi01` matches it too; attachments record the
# transport and the certificate's name (SQL, usbgw show --json); the
# gateway's tls-dir is made 0700 with 0600 keys on the first start.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" "$ISSUE" sqlite3
plan 33

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type sourcesink; }
device 1-2 { type storage; }
device 1-3 { type keyboard; keys ""; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
TLSA=127.0.0.1:$TLSP
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
for d in 1-1 1-2 1-3; do
	gw_wait_state gw sim1:$d pending || { gw_diag gw; bail_out "sim1:$d not pending"; }
done

# ---- the store: made on the first start, beside the database ----------------
is "$(stat -c %a "$T/tls")" 700 "tls-dir (beside the database) is 0700"
is "$(stat -c %a "$T/tls/ca.key") $(stat -c %a "$T/tls/gateway.key")" "600 600" \
    "ca.key and gateway.key are 0600"
ok "ca.pem and gateway.pem exist" test -s "$T/tls/ca.pem" -a -s "$T/tls/gateway.pem"

# ---- certificates for two vhci hosts ------------------------------------------
run "$ISSUE" "$T/tls" "$T/vdi01" vdi01
is "$RC" 0 "a host certificate for vdi01"
run "$ISSUE" "$T/tls" "$T/vdi02" vdi02
is "$RC" 0 "a host certificate for vdi02"

# ---- approve --to the certificate's name ------------------------------------
gwctl gw approve sim1:1-1 --to vdi01
is "$RC" 0 "approve sim1:1-1 --to vdi01 (a name although host-names = no)"
run "$TC" import "$GWA" sim1:1-1
is "$RC" 11 "plaintext from 127.0.0.1 (no name): refused the import (ST_NA)"
run "$TC" import "$TLSA" sim1:1-1 --tls-dir "$T/vdi02"
is "$RC" 11 "TLS with vdi02's certificate: refused the import (ST_NA)"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'import-refused'
    AND object LIKE '%tls vdi02%' AND host = '127.0.0.1' AND busid = 'sim1:1-1'
    AND detail = 'not authorized for this host'" 1
check $? "... an import-refused row names vdi02's TLS session"
run "$TC" desc "$TLSA" sim1:1-1 1:0 --tls-dir "$T/vdi01"
is "$RC" 0 "TLS with vdi01's certificate: imported, GET_DESCRIPTOR round trip"
like "$OUT" 'data=120100' "... the device descriptor came back (bLength 18, type 1, USB 2.00)"
gw_wait_state gw sim1:1-1 authorized
check $? "... detached again at its close: authorized"

# ---- URBs flow: the whole script, bulk data checked ------------------------
gwctl gw approve sim1:1-2 --to vdi01
run "$TC" script "$TLSA" sim1:1-2 --bytes 4M --tls-dir "$T/vdi01"
is "$RC" 0 "the URB script over TLS (descriptors, strings, bulk loopback, unlink)"
like "$OUT" 'ok bulk-loop ' "... 4 MiB of bulk data went through, checked"

# ---- a hold: transport and name in show --json and the attachments table ----
"$TC" hold "$TLSA" sim1:1-1 --seconds 0 --tls-dir "$T/vdi01" \
    >"$T/hold.out" 2>&1 &
HOLD=$!
gw_wait_state gw sim1:1-1 attached
check $? "held over TLS: attached"
gwctl gw show sim1:1-1 --json
is "$RC" 0 "usbgw show --json"
like "$OUT" '"transport": "tls",' "... transport tls"
like "$OUT" '"host_cert": "vdi01",' "... host_cert vdi01"
is "$(gw_field gw sim1:1-1 transport) $(gw_field gw sim1:1-1 host_cert)" "tls vdi01" \
    "usbgw list --json says so too"
is "$(gw_sql gw "SELECT transport || ' ' || host_cert || ' ' || host_name || ' ' ||
    host_addr FROM attachments WHERE ended_at IS NULL")" "tls vdi01 vdi01 127.0.0.1" \
    "the open attachment: transport tls, certificate vdi01, name vdi01, address kept"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
gw_wait_state gw sim1:1-1 authorized
check $? "the TLS client gone: the session ends, device authorized again"
is "$(gw_sql gw "SELECT count(*) FROM attachments a JOIN devices d ON
    d.id = a.device_id WHERE d.busid = 'sim1:1-1' AND transport = 'tls'
    AND host_cert = 'vdi01' AND ended_at IS NOT NULL")" 2 \
    "both TLS attachments of sim1:1-1 (desc, hold) recorded as vdi01's, all ended"

# ---- a plaintext attachment says tcp --------------------------------------------
gwctl gw approve sim1:1-2 --to 127.0.0.1
is "$RC" 0 "approve sim1:1-2 --to 127.0.0.1 as well"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 0 "a plaintext import from 127.0.0.1"
is "$(gw_sql gw "SELECT transport || '|' || IFNULL(host_cert, '') FROM attachments
    a JOIN devices d ON d.id = a.device_id WHERE d.busid = 'sim1:1-2'
    ORDER BY a.id DESC LIMIT 1")" "tcp|" \
    "... recorded as transport tcp, no certificate"

# ---- a rule's to-host matches the certificate's name --------------------------
VP=$(gw_field gw sim1:1-3 vid):$(gw_field gw sim1:1-3 pid)
gwctl gw policy add "allow id $VP to-host vdi02"
is "$RC" 0 "a rule: allow id $VP to-host vdi02"
run "$TC" import "$TLSA" sim1:1-3 --tls-dir "$T/vdi01"
is "$RC" 11 "vdi01's certificate: refused (ST_NA)"
run "$TC" import "$TLSA" sim1:1-3 --tls-dir "$T/vdi02"
is "$RC" 0 "vdi02's certificate: the rule's to-host vdi02 lets it import"
run "$TC" import "$GWA" sim1:1-3
is "$RC" 11 "plaintext 127.0.0.1 (no name): refused"

# ---- the name is the certificate's only: the hostname column never from DNS ----
is "$(gw_sql gw "SELECT count(*) FROM attachments WHERE transport = 'tls'
    AND host_name IS NOT host_cert")" 0 "every TLS attachment's host_name is its certificate's"

gw_finish gw
done_testing
