#!/bin/bash
# `listen = ADDRESS:PORT tls=optional` (issue 15 item 5; protocol.md
# 1.10.8): the first byte decides.  A plaintext usbip import and a TLS
# import with a host certificate both work on the same port; each
# attachment records its transport and certificate name; an agent's
# certificate is still refused the import there; a tls-listen port still
# refuses plaintext and a plain listen port still refuses TLS, each with
# a tls-refused row.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" "$ISSUE" sqlite3
plan 19

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type storage; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
OP=$(free_port)
PP=$(free_port)
TP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" \
    "listen = 127.0.0.1:$OP tls=optional" "listen = 127.0.0.1:$PP" \
    "tls-listen = 127.0.0.1:$TP"
# gw_start's -l would replace the file's listen lines: started here
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$T/gw.sock" \
    -P "$T/gw.port" -p "$T/gw.pid" -v debug
wait_file "$T/gw.port" 20 gw || bail_out "usbgwd did not start"
wait_for -t 10 test -S "$T/gw.sock"
wait_port "$OP" 10 || bail_out "no optional listener"
gw_wait_state gw sim1:1-1 pending || bail_out "sim1:1-1 not pending"
run "$ISSUE" "$T/tls" "$T/vdi01" vdi01
is "$RC" 0 "a host certificate for vdi01"
run "$ISSUE" -r agent "$T/tls" "$T/a17" tc17
mkdir -p "$T/a17h"; cp "$T/a17/agent.pem" "$T/a17h/host.pem"
cp "$T/a17/agent.key" "$T/a17h/host.key"; cp "$T/a17/gateway-ca.pem" "$T/a17h/"

gwctl gw approve sim1:1-1
is "$RC" 0 "approve sim1:1-1 (any host)"
run "$TC" desc "127.0.0.1:$OP" sim1:1-1 1:0
is "$RC" 0 "plaintext on the optional listener: imported, GET_DESCRIPTOR"
gw_wait_state gw sim1:1-1 authorized
run "$TC" desc "127.0.0.1:$OP" sim1:1-1 1:0 --tls-dir "$T/vdi01"
is "$RC" 0 "TLS (vdi01) on the same listener: imported, GET_DESCRIPTOR"
gw_wait_state gw sim1:1-1 authorized
is "$(gw_sql gw "SELECT group_concat(transport || ':' || IFNULL(host_cert, '-'), ' ')
    FROM (SELECT transport, host_cert FROM attachments ORDER BY id)")" "tcp:- tls:vdi01" \
    "the attachments: tcp without a certificate, then tls with vdi01's"
is "$(gw_sql gw "SELECT group_concat(detail, ' / ') FROM (SELECT detail FROM audit_log
    WHERE busid = 'sim1:1-1' AND new_state = 'attached' ORDER BY seq)")" \
    "host leg tcp, exporter leg tcp / host leg tls (certificate vdi01), exporter leg tcp" \
    "... the attach audit rows say both legs"
"$TC" hold "127.0.0.1:$OP" sim1:1-1 --seconds 0 --tls-dir "$T/vdi01" >"$T/hold.out" 2>&1 &
HOLD=$!
gw_wait_state gw sim1:1-1 attached
gwctl gw show sim1:1-1 --json
like "$OUT" '"transport": "tls",' "usbgw show: transport tls"
like "$OUT" '"host_cert": "vdi01",' "usbgw show: host_cert vdi01"
like "$OUT" '"up_transport": "tcp",' "usbgw show: up_transport tcp (a plain sim)"
gwctl gw show sim1:1-1
like "$OUT" 'certificate +vdi01' "usbgw show: the host leg's certificate"
like "$OUT" 'exporter leg +tcp' "usbgw show: the exporter leg tcp"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
gw_wait_state gw sim1:1-1 authorized

run "$TC" import "127.0.0.1:$OP" sim1:1-1 --tls-dir "$T/a17h"
isnt "$RC" 0 "an agent's certificate on the optional listener: no import"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused'
    AND detail LIKE '%CN=tc17 is an agent''s%'" 1
check $? "... a tls-refused row"
run "$TC" import "127.0.0.1:$TP" sim1:1-1
isnt "$RC" 0 "plaintext on the TLS-only listener: refused"
run "$TC" import "127.0.0.1:$PP" sim1:1-1 --tls-dir "$T/vdi01"
isnt "$RC" 0 "TLS on the plain listener: refused"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused' AND
    detail IN ('plaintext on a TLS listener', 'TLS on a plaintext listener')" 2
check $? "... each with a tls-refused row"

gw_finish gw
done_testing
