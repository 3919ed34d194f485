#!/usr/bin/env bash
# Where usbgwd serves USB/IP (issue 12, item 10), read from the daemon's
# own listening sockets (ss -p, by its pid).  In local mode the gateway
# attaches devices itself: with no listen configured it opens no USB/IP
# port at all; a listen in the file opens that one only.  In proxy mode,
# no listen still means *:3240 (checked when port 3240 is free here).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

VK=$USBGW_BUILD/vhci-kernel
need_prog "$USBGWD" "$USBGW" "$VK" ss
plan 17

# listeners PID: the TCP addresses PID listens on, sorted, one a line.
listeners() {
	ss -Hltnp 2>/dev/null | awk -v p="pid=$1," 'index($0, p) { print $4 }' |
	    sort
}

# start_plain NAME [ARGS...]: usbgwd -f with $T/NAME.{conf,db,sock,pid}
# and no -l (gw_start adds one); wait until it says it started.
start_plain() {
	local name=$1
	shift
	start_bg "$name" "$USBGWD" -f -c "$T/$name.conf" -d "$T/$name.db" \
	    -s "$T/$name.sock" -p "$T/$name.pid" -v debug "$@"
	wait_log "$name" 'usbgwd .* started \(pid' 20
}

# Port 3240: a daemon that wrongly takes the default would bind it, and
# the proxy check below needs it: reserve it like free_port does.
port3240=
if ! _port_in_use 3240 && with_lock ports _port_claim 3240 >&2; then
	port3240=1
fi

# The fake vhci_hcd (one controller) that local mode starts on.
K=$T/k
PLAT=$K/sys/devices/platform
start_bg vk "$VK" -c 1 -n 2 -p "$T/lm.pid" "$K"
wait_file "$K/ready" 10 vk || bail_out "vhci-kernel did not start: $(cat "$(bg_log vk)")"

# ---- local mode, no listen --------------------------------------------------
gw_conf lm "mode = local" "vhci-root = $PLAT"
start_plain lm
bg_alive lm
check $? "usbgwd starts in local mode with no listen configured" ||
    gw_diag lm 10
is "$(listeners "$(bg_pid lm)")" "" \
    "local mode, no listen: the daemon has no listening TCP socket"
like "$(cat "$T/lm.log")" 'local mode: no USB/IP listener \(no listen configured\)' \
    "... as its log says"
gwctl lm status --json
like "$OUT" '"mode": *"local"' "the control socket answers: local mode"
gw_finish lm

# ---- local mode, listen in the file ------------------------------------------------
gw_conf lf "mode = local" "vhci-root = $PLAT" "listen = 127.0.0.1:0"
start_plain lf
bg_alive lf
check $? "usbgwd starts in local mode with listen = 127.0.0.1:0" ||
    gw_diag lf 10
like "$(listeners "$(bg_pid lf)")" '^127\.0\.0\.1:[1-9][0-9]*$' \
    "... and listens there only: one socket, on 127.0.0.1"
gw_finish lf

# ---- proxy mode, no listen: the default stays *:3240 -----------------------------
if [ -n "$port3240" ]; then
	gw_conf px "poll-interval = 1s"
	start_plain px
	bg_alive px
	check $? "usbgwd starts in proxy mode with no listen configured" ||
	    gw_diag px 10
	like "$(listeners "$(bg_pid px)" | tr '\n' ' ')" '^(0\.0\.0\.0:3240 )(\[::\]:3240 )?$' \
	    "proxy mode, no listen: *:3240, every IPv4 (and IPv6) address"
	gw_finish px
else
	skip 5 "port 3240 is in use here: the proxy default cannot be checked"
fi
done_testing
