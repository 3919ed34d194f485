#!/usr/bin/env bash
# usbgw-attach --follow over plain USB/IP (issue 15 item 4; protocol.md
# 1.10.8), the fake vhci_hcd and the simulator: started while the gateway
# is down, it keeps trying (bounded back-off) and subscribes once the
# gateway is up; `approve --permanent --to 127.0.0.1` -> attached (the
# host's identity on a plain listener is its address); the gateway killed
# (SIGKILL) and restarted on the same port and database -> the approval
# persists and the device is attached again; an exporter blip (the
# simulator killed and restarted on its port) -> the device is withdrawn
# as gone, then attached again when it is back.  Times are printed.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

ATTACH=$USBGW_BUILD/usbgw-attach
VK=$USBGW_BUILD/vhci-kernel
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" "$ATTACH" "$VK"
plan 16

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type sourcesink; serial "S11"; }
EOF2
SP=$(free_port)
sim_up() {
	start_bg sim "$SIM" -l "127.0.0.1:$SP" -c "$T/sim.conf"
	wait_port "$SP" 10 sim
}
sim_up || bail_out "simulator did not start"
GW_LISTEN_PORT=$(free_port)
export GW_LISTEN_PORT
GWA=127.0.0.1:$GW_LISTEN_PORT
gw_conf gw "exporter sim1 127.0.0.1:$SP" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no"

K=$T/k
start_bg vk "$VK" -c 1 -n 2 -p "$T/att.pid" "$K"
wait_file "$K/ready" 10 vk || bail_out "vhci-kernel did not start: $(cat "$(bg_log vk)")"
if [ "$(cat "$K/ready")" != grab ]; then
	skip 13 "pidfd_getfd(2) not permitted: the fake kernel cannot take the socket"
	gw_start gw
	gw_finish gw
	done_testing
	exit 0
fi
flog() { cat "$(bg_log fol)"; }
nattached() { flog | grep -c 'sim1:1-1 from .* on vhci port'; }
# attached_ge N: sim1:1-1 attached at least N times so far
attached_ge() { [ "$(nattached)" -ge "$1" ]; }
tries_ge() { [ "$(flog | grep -c 'follow: .*connect: Connection refused')" -ge "$1" ]; }
ms() { date +%s%3N; }

# ---- the gateway down at start ---------------------------------------------------
start_bg fol sh -c 'echo $$ >"$0"; exec "$@"' "$T/att.pid" "$ATTACH" --follow \
    -v -t 2 -R "$K" "$GWA"
wait_for -t 10 tries_ge 2
check $? "the gateway down: follow keeps trying"
bg_alive fol
check $? "... and keeps running"

gw_start gw || bail_out "usbgwd did not start"
wait_log fol 'follow: 0 devices authorized for this host' 40
check $? "the gateway up: follow subscribes (its back-off is bounded)"
gw_wait_state gw sim1:1-1 pending || bail_out "sim1:1-1 not pending"

t0=$(ms)
gwctl gw approve sim1:1-1 --permanent --to 127.0.0.1
wait_for -t 10 attached_ge 1
check $? "approve --permanent --to 127.0.0.1: follow attaches sim1:1-1"
diag "approve -> attached by follow (plain): $(($(ms) - t0)) ms"
wait_log vk '^enumerated port=.*serial=S11' 10
check $? "... and the fake kernel enumerated it"

# ---- the gateway killed and restarted ---------------------------------------------
stop_bg gw KILL
wait_log fol 'follow: subscription closed' 10
check $? "the gateway killed: the subscription ends"
wait_for -t 10 grep -qE '^(detach|connection-lost|unplug)[a-z-]* port=0' "$(bg_log vk)"
check $? "... and the attachment with it (vhci port freed)"
t0=$(ms)
gw_start gw || bail_out "usbgwd did not restart"
wait_for -t 40 attached_ge 2
check $? "the gateway restarted: sim1:1-1 attached again (the approval persisted)"
diag "gateway restarted -> attached again: $(($(ms) - t0)) ms"
gw_wait_state gw sim1:1-1 attached
check $? "... the gateway holds it attached"

# ---- an exporter blip ---------------------------------------------------------------
stop_bg sim KILL
wait_log fol 'sim1:1-1 withdrawn \(gone\)' 20
check $? "the exporter gone: sim1:1-1 withdrawn as gone"
t0=$(ms)
sim_up || bail_out "simulator did not restart"
wait_for -t 40 attached_ge 3
check $? "the exporter back: sim1:1-1 attached again"
diag "exporter back -> attached again: $(($(ms) - t0)) ms"
is "$(flog | grep -c 'malformed')" 0 "no malformed message on the way"

stop_bg fol
is "$RC" 0 "SIGTERM: follow exits 0"
gw_finish gw
done_testing
