#!/usr/bin/env bash
# usbgw-attach -T (issue 15 item 3): the vhci host's program over TLS
# with its certificate, against the fake vhci_hcd (tests/tools/vhci-
# kernel, -R): the kernel gets a socketpair (not the TCP socket) and
# enumerates the device through usbgw-attach, the TLS connection and the
# gateway's pump (descriptors and the serial string read back); bulk IN
# flows (the fake kernel's load, data from the simulator's source); the
# gateway records the attachment as tls, certificate vdi01; a revoke at
# the gateway ends the program (exit 0) and frees the port.  Another
# host's certificate is refused the import (exit 1); -T against the
# plaintext port fails (exit 4); -T without -c, or with a directory
# without a certificate, is a usage error (exit 2).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ISSUE=$USBGW_BUILD/tlsid-issue
ATTACH=$USBGW_BUILD/usbgw-attach
VK=$USBGW_BUILD/vhci-kernel
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" "$ISSUE" "$ATTACH" "$VK" sqlite3
plan 20

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type sourcesink; serial "S11"; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no" "tls-listen = 127.0.0.1:$TLSP"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
TLSA=127.0.0.1:$TLSP
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"
gw_wait_state gw sim1:1-1 pending || bail_out "sim1:1-1 not pending"
"$ISSUE" "$T/tls" "$T/vdi01" vdi01 >/dev/null || bail_out "no certificate for vdi01"
"$ISSUE" "$T/tls" "$T/vdi02" vdi02 >/dev/null || bail_out "no certificate for vdi02"

# ---- usage ---------------------------------------------------------------------
run "$ATTACH" -T "$TLSA" sim1:1-1
is "$RC" 2 "-T without -c: usage error (exit 2)"
mkdir -m 0700 "$T/empty"
run "$ATTACH" -T -c "$T/empty" "$TLSA" sim1:1-1
is "$RC" 2 "-c with no certificate: exit 2"
like "$ERR" 'no host certificate yet' "... saying so"

# ---- the fake vhci_hcd --------------------------------------------------------------
K=$T/k
start_bg vk "$VK" -c 1 -n 2 -p "$T/att.pid" "$K"
wait_file "$K/ready" 10 vk || bail_out "vhci-kernel did not start: $(cat "$(bg_log vk)")"
if [ "$(cat "$K/ready")" != grab ]; then
	skip 17 "pidfd_getfd(2) not permitted: the fake kernel cannot take the socket"
	gw_finish gw
	done_testing
	exit 0
fi
vk_log() { cat "$(bg_log vk)"; }
vk_wait() { wait_log vk "$1" "${2:-10}"; }
vk_ctl() { printf '%s\n' "$1" >"$K/ctl"; }
# attach ARGS...: usbgw-attach in the background, its pid where the fake
# kernel looks for the attacher (written before it execs)
attach_bg() {
	start_bg att sh -c 'echo $$ >"$0"; exec "$@"' "$T/att.pid" "$ATTACH" -v -R "$K" "$@"
}

gwctl gw approve sim1:1-1 --to vdi01
is "$RC" 0 "approve sim1:1-1 --to vdi01"

run timeout 20 "$ATTACH" -T -c "$T/vdi02" -R "$K" "$TLSA" sim1:1-1
is "$RC" 1 "vdi02's certificate: the import refused (exit 1)"
run timeout 20 "$ATTACH" -T -c "$T/vdi01" -R "$K" -t 3 "$GWA" sim1:1-1
is "$RC" 4 "-T to the plaintext port: exit 4 (the gateway refused TLS there)"

attach_bg -T -c "$T/vdi01" "$TLSA" sim1:1-1
vk_wait '^enumerated port=' 15
check $? "vdi01's certificate: attached, and the fake kernel enumerated the device"
like "$(vk_log)" 'grabbed port=0 kind=socketpair' "... vhci got a socketpair, not the network socket"
like "$(vk_log)" 'enumerated port=0 .*vid=1209 pid=0005 serial=S11' \
    "... descriptors and the serial string came through TLS"
gw_wait_state gw sim1:1-1 attached
check $? "the gateway holds sim1:1-1 attached"
is "$(gw_field gw sim1:1-1 transport) $(gw_field gw sim1:1-1 host_cert)" "tls vdi01" \
    "... over tls, certificate vdi01"
is "$(gw_sql gw "SELECT transport || ' ' || host_cert || ' ' || host_name FROM
    attachments WHERE ended_at IS NULL")" "tls vdi01 vdi01" "... and so says the attachments table"

vk_ctl "load 0 16 64 8"
vk_wait '^(load port=0|error load)' 30
like "$(vk_log)" 'load port=0 bytes=16777216 ' "16 MiB of bulk IN through usbgw-attach, TLS and the gateway"
MIBPS=$(vk_log | sed -n 's/^load port=0 .*mibps=\([0-9.]*\).*/\1/p' | tail -n 1)
diag "bulk IN over TLS (fake vhci, simulator source, 64 KiB URBs x 8): $MIBPS MiB/s"

# ---- a revoke at the gateway ends it -----------------------------------------------
gwctl gw revoke sim1:1-1
is "$RC" 0 "revoke sim1:1-1"
wait_bg att 15
is "$RC" 0 "usbgw-attach ends, exit 0"
like "$(cat "$(bg_log att)")" 'the gateway closed the connection' "... because the gateway closed it"
wait_for -t 10 grep -qE '^(detach|connection-lost|unplug)[a-z-]* port=0' "$(bg_log vk)"
check $? "... and the port was freed"

gw_finish gw
done_testing
