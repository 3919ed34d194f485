#!/usr/bin/env bash
# usbgw-attach --follow renews the host's certificate while it runs (issue
# 15 item 6): a certificate ending within 30 days is renewed at the next
# check (--renew-check) through the first gateway, the attachment in
# progress goes on (no drop), and the next device is attached with the new
# certificate (the gateway refuses the replaced one).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
ATTACH=$USBGW_BUILD/usbgw-attach
VK=$USBGW_BUILD/vhci-kernel
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" "$ISSUE" "$ATTACH" "$VK" sqlite3 openssl
plan 12

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type sourcesink; serial "S11"; }
device 1-2 { type sourcesink; serial "S12"; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP" \
    "tls-cert-days = 200"
gw_start gw || bail_out "usbgwd did not start"
TLSA=127.0.0.1:$TLSP
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
for b in 1-1 1-2; do
	gw_wait_state gw sim1:$b pending || bail_out "sim1:$b not pending"
done
# 20 days: within the 30 days before its end
"$ISSUE" -d 20 "$T/tls" "$T/vdi01" vdi01 >/dev/null || bail_out "no certificate"
OLD=$(openssl x509 -in "$T/vdi01/host.pem" -noout -fingerprint -sha256)
gwctl gw approve sim1:1-1 --to vdi01 --permanent
# the gateway goes down: follow starts without it, so the renewal at its
# start fails and the one on the timer (--renew-check) does it
stop_bg gw TERM

K=$T/k
start_bg vk "$VK" -c 1 -n 4 -p "$T/att.pid" "$K"
wait_file "$K/ready" 10 vk || bail_out "vhci-kernel did not start"
if [ "$(cat "$K/ready")" != grab ]; then
	skip 10 "pidfd_getfd(2) not permitted: the fake kernel cannot take the socket"
	gw_start gw
	gw_finish gw
	done_testing
	exit 0
fi
start_bg fol sh -c 'echo $$ >"$0"; exec "$@"' "$T/att.pid" "$ATTACH" --follow \
    -v -T -c "$T/vdi01" -R "$K" --renew-check 2 "$TLSA"
wait_log fol 'renewal failed; trying the certificate held' 15
check $? "at its start, with the gateway down, the renewal fails (and follow runs on)"
gw_start gw || bail_out "usbgwd did not start again"
wait_log fol 'sim1:1-1 from .* on vhci port' 20
check $? "the gateway back: follow attaches sim1:1-1"
wait_log fol 'the renewed certificate is in use for new connections' 20
check $? "follow renews the certificate on its timer while it runs"
NEW=$(openssl x509 -in "$T/vdi01/host.pem" -noout -fingerprint -sha256)
isnt "$NEW" "$OLD" "host.pem is a new certificate"
num_cmp $(( ($(date -d "$(openssl x509 -in "$T/vdi01/host.pem" -noout -enddate | sed 's/notAfter=//')" +%s) - $(date +%s)) / 86400 )) -ge 199 \
    "... for the gateway's 200 days"
is "$(gw_state gw sim1:1-1)" attached "the attachment in progress goes on"
is "$(grep -c 'sim1:1-1 from .* on vhci port' "$(bg_log fol)")" 1 "... not attached again"
gwctl gw approve sim1:1-2 --to vdi01
wait_log fol 'sim1:1-2 from .* on vhci port' 15
check $? "the next device is attached with the renewed certificate"
is "$(gw_field gw sim1:1-2 host_cert)" vdi01 "... over TLS as vdi01"
stop_bg fol
gw_finish gw
