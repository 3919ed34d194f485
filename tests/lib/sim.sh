# tests/lib/sim.sh -- helpers for tests that run usbgw-sim (bash).
#
# Source it after common.sh:
#
#	. "$(dirname "$0")/../lib/common.sh"
#	. "$(dirname "$0")/../lib/sim.sh"
#	sim_start sim -c "$T/sim.conf"	# port 0, control socket, PDU log
#	port=$(sim_port sim)
#	sim_ctl sim plug 1-9 storage serial=X	# reply in $CTL_OUT, RC 0 if "ok"
#	grep -q 'cmd=OP_REQ_IMPORT busid=1-9' "$(sim_pdulog sim)"
#
# Raw op-phase requests without the test client, through bash's
# /dev/tcp (no extra process holds the connection):
#	usbip_open FD PORT; usbip_send_import FD BUSID; usbip_read_hex FD N
#	usbip_import_status PORT BUSID	-> prints the reply's status (0..5),
#					   "closed" or "short"
# Files of instance NAME: $T/NAME.port, $T/NAME.ctl, $T/NAME.pdu,
# $T/NAME.log (stderr).

# sim_start NAME [ARGS...]: start usbgw-sim on 127.0.0.1:0 with a control
# socket and a PDU log; wait until its port file is written.
sim_start() {
	local name=$1
	shift
	rm -f "$T/$name.port" "$T/$name.ctl"
	start_bg "$name" "$SIM" -l 127.0.0.1:0 -p "$T/$name.port" \
	    -C "$T/$name.ctl" -L "$T/$name.pdu" "$@"
	if ! wait_file "$T/$name.port" 10; then
		diag "usbgw-sim $name did not start:"
		_diag_text "$(cat "$T/$name.log" 2>/dev/null)"
		return 1
	fi
	wait_for -t 10 test -S "$T/$name.ctl"
}

sim_port() { cat "$T/$1.port"; }
sim_pdulog() { echo "$T/$1.pdu"; }
sim_ctlpath() { echo "$T/$1.ctl"; }

# sim_ctl NAME WORDS...: send one control command; CTL_OUT = the reply
# (all lines), RC = 0 when its last line is "ok".
sim_ctl() {
	local name=$1
	shift
	CTL_OUT=$(printf '%s\n' "$*" | timeout 10 socat -t 5 - \
	    "UNIX-CONNECT:$T/$name.ctl" 2>&1)
	if [ "$(printf '%s\n' "$CTL_OUT" | tail -n 1)" = ok ]; then
		RC=0
	else
		RC=1
	fi
	return 0
}

# sim_ctl_list NAME: the `list` lines (without the final "ok").
sim_ctl_list() {
	sim_ctl "$1" list
	printf '%s\n' "$CTL_OUT" | sed '$d'
}

# sim_wait_pdu NAME ERE [SECONDS]: until the PDU log has a matching line.
sim_wait_pdu() {
	wait_for -t "${3:-10}" grep -Eq -- "$2" "$T/$1.pdu"
}

# ---- raw USB/IP op requests over /dev/tcp ---------------------------------

# usbip_open FD PORT: open fd FD (a number, 3..9) to 127.0.0.1:PORT.
usbip_open() {
	eval "exec $1<>/dev/tcp/127.0.0.1/$2"
}

usbip_close() {
	eval "exec $1>&-"
}

# The 40-byte OP_REQ_IMPORT: version 0x0111, code 0x8003, status 0, busid
# NUL-padded to 32 bytes.
usbip_send_import() {
	local fd=$1 busid=$2 pad
	pad=$((32 - ${#busid}))
	{
		printf '\x01\x11\x80\x03\x00\x00\x00\x00%s' "$busid"
		head -c "$pad" /dev/zero
	} >&"$fd"
}

usbip_send_devlist() {
	printf '\x01\x11\x80\x05\x00\x00\x00\x00' >&"$1"
}

# usbip_read_hex FD N [SECONDS]: read exactly N bytes (or up to EOF) and
# print them as one lowercase hex string.
usbip_read_hex() {
	timeout "${3:-5}" dd bs="$2" count=1 iflag=fullblock status=none \
	    <&"$1" | od -An -v -tx1 | tr -d ' \n'
}

# usbip_import_status PORT BUSID: one import on a fresh connection; prints
# the status code (0..5), or "closed" if the peer closed without one.
# The connection is closed afterwards (a successful import is released).
usbip_import_status() {
	local hex
	usbip_open 9 "$1" || { echo closed; return 0; }
	usbip_send_import 9 "$2"
	hex=$(usbip_read_hex 9 8)
	usbip_close 9
	if [ ${#hex} -ne 16 ]; then
		echo closed
		return 0
	fi
	echo $((16#${hex:8:8}))
}

# usbip_peer_closed FD [SECONDS]: true when reading FD hits EOF in time
# (whatever bytes come first are discarded).
usbip_peer_closed() {
	timeout "${2:-5}" cat <&"$1" >/dev/null 2>&1
}

# usbip_send_hex FD HEX: write the bytes HEX spells (blanks ignored).
usbip_send_hex() {
	# shellcheck disable=SC2059
	printf "$(printf '%s' "$2" | tr -d ' \t\n' | sed 's/../\\x&/g')" >&"$1"
}

# sim_unread NAME: how many connections to simulator NAME's ports (its
# -P file, else its port file) hold bytes it has not read: requests that
# wait at a stopped (SIGSTOP) simulator.
sim_unread() {
	local ports
	if [ -s "$T/$1.ports" ]; then
		ports=" $(awk '{ printf "%s ", $2 }' "$T/$1.ports")"
	else
		ports=" $(cat "$T/$1.port") "
	fi
	ss -Htn 2>/dev/null | awk -v ports="$ports" '
	    $1 == "ESTAB" && $2 > 0 { n = split($4, a, ":")
		if (index(ports, " " a[n] " ")) c++ }
	    END { print c + 0 }'
}
_sim_unread_ge() { [ "$(sim_unread "$1")" -ge "$2" ]; }
_sim_unread_none() { [ "$(sim_unread "$1")" = 0 ]; }

# sim_wait_unread NAME N [SECONDS]: until N requests wait at NAME.
sim_wait_unread() {
	wait_for -t "${3:-10}" _sim_unread_ge "$1" "$2"
}
