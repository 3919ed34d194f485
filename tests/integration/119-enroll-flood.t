#!/usr/bin/env bash
# Pairing sessions are bounded, refused ones too (red-team finding): each
# holds a TLS pump until it is answered, and a refused one is kept up to
# 10 s so that its client reads why.  With max-pairings = 1, past
# 2 x 1 + 8 = 10 pairing sessions held, a new one is closed at once
# (before: every refused session was held, without bound: descriptors
# and memory before authentication).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gw.sh"

ATTACH=$USBGW_BUILD/usbgw-attach
need_prog "$USBGWD" "$USBGW" "$ATTACH"
plan 7

TLSP=$(free_port)
gw_conf gw "tls-listen = 127.0.0.1:$TLSP" "max-pairings = 1" \
    "max-pairings-per-minute = 1000" "max-sessions-per-host = 64" \
    "log-level = debug"
gw_start gw || bail_out "usbgwd did not start"
wait_port "$TLSP" 10 || bail_out "no TLS listener"
# a pairing placeholder (self-signed, a valid name and role): the TLS
# handshake completes, then the client holds the session and sends nothing
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/O=usbgw/OU=host/CN=flood" -days 30 -keyout "$T/f.key" \
    -out "$T/f.pem" >/dev/null 2>&1 || bail_out "openssl req failed"
python3 - "$TLSP" "$T/f.pem" "$T/f.key" "$T/held" <<'PY' &
import socket, ssl, sys, time
port, cert, key, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(cert, key)
held, done = [], 0
for i in range(24):
    try:
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), 5))
        held.append(s)
        done += 1
    except Exception as e:
        pass
open(out, "w").write("%d\n" % done)
time.sleep(12)
PY
flood=$!
wait_log gw 'enroll: pairing session from 127.0.0.1 closed: 10 pairing sessions held' 20
check $? "past 10 pairing sessions held, a new one is closed at once"
n=$(grep -c 'pairing of flood from 127.0.0.1 refused' "$T/gw.log")
num_cmp "$n" -le 9 "at most 9 refused sessions held at once and answered ($n)"
wait_file "$T/held" 20
num_cmp "$(cat "$T/held")" -ge 10 "the handshakes themselves went through ($(cat "$T/held"))"
kill "$flood" 2>/dev/null
wait "$flood" 2>/dev/null
ok "the gateway lives on" kill -0 "$(bg_pid gw)"
gw_finish gw
