#!/usr/bin/env bash
# The op phase has one deadline from accept (10 s): a vhci peer that
# drips its import request a byte a second is cut off when the deadline
# passes, like one that sends nothing.  The timeout used to restart on
# every byte, so 256 such peers held every session indefinitely.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" socat
plan 7

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type storage; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 300ms"
gw_start gw || bail_out "usbgwd did not start"
PORT=$(gw_port gw)
gw_wait_state gw sim1:1-1 pending 10

# drip NAME: an OP_REQ_IMPORT for sim1:1-1, one byte a second, on its own
# connection; writes "closed SECONDS" to $T/NAME.out when the gateway
# closes it (a write fails or a read sees EOF), "open" after 25 s.
drip() {
	local name=$1 t0 i hex
	hex=$(printf '0111800300000000'; printf 'sim1:1-1' | od -An -tx1 | tr -d ' \n'; printf '%048d' 0)
	exec 3<>"/dev/tcp/127.0.0.1/$PORT" || { echo "noconnect" >"$T/$name.out"; return; }
	t0=$(date +%s)
	for ((i = 0; i < 80 && i < 25; i++)); do
		if ! printf "\\x${hex:$((i * 2)):2}" >&3 2>/dev/null; then
			echo "closed $(($(date +%s) - t0))" >"$T/$name.out"
			return
		fi
		if read -r -t 1 -u 3 -N 1 _; [ $? -eq 1 ]; then
			echo "closed $(($(date +%s) - t0))" >"$T/$name.out"
			return
		fi
	done
	echo "open" >"$T/$name.out"
}
(trap '' PIPE; drip d1) &
dpid=$!
wait "$dpid"
out=$(cat "$T/d1.out")
like "$out" '^closed [0-9]+$' "a peer dripping its request a byte a second is cut off ($out)"
n=${out#closed }
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 9 ] && [ "$n" -le 13 ]
check $? "... when the 10 s op-phase deadline passes (${n:-?} s)"
grep -q "op-phase deadline" "$(bg_log gw)"
check $? "the gateway says why"
run "$TC" list "$(gw_addr gw)"
is "$RC" 0 "a well-behaved peer is served afterwards"
gw_finish gw
