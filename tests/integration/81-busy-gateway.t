#!/bin/bash
# A busy gateway does not mark devices gone (issue 13, item 4).  Four
# exporters of five devices each (one usbgw-sim); poll-interval 1 s,
# probe-timeout 2 s.  The exporters answer while usbgwd is stopped
# (SIGSTOP, 2.8 s: longer than both), so on SIGCONT every expired timeout
# of the gateway fires, possibly before the read event of the reply that
# sits in its socket: the gateway was slow to read it, nobody timed out.
#   1. polls in flight: no exporter down, the 20 claims unchanged;
#   2. new devices' lists, imports and probes in flight: every one is
#      pending after one import each, no claim failed or timed out;
# and throughout no device is ever anything but pending (sampled), no
# `gone` audit row.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 21

NEXP=4
PER=5
N=$((NEXP * PER))
printf 'exporters %d devices-per-exporter %d type sourcesink\n' "$NEXP" \
    "$PER" >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" -P "$T/sim.ports" ||
    bail_out "simulator did not start"
conf=("poll-interval = 1s" "probe-timeout = 2s" "max-probes-per-exporter = $PER")
while read -r name port; do
	conf+=("exporter $name 127.0.0.1:$port")
done <"$T/sim.ports"
gw_conf gw "${conf[@]}"
gw_start gw || bail_out "usbgwd did not start"
on_fail() { gw_diag gw 40; }

states() {	# "PENDING/ALL" of `usbgw list`
	local j
	j=$("$USBGW" -s "$T/gw.sock" list --json 2>/dev/null) || { echo error; return; }
	echo "$(printf '%s' "$j" | "$EJSON" count state=pending)/$(printf '%s' "$j" |
	    "$EJSON" count)"
}
# every device of every exporter: "EXP/BUSID state imports peer" lines
claims() {
	local e
	for e in $(seq 1 $NEXP); do
		sim_ctl sim list "sim$e"
		printf '%s\n' "$CTL_OUT" | sed '$d' | awk -v e="sim$e" '{
		    s = i = p = ""
		    for (k = 2; k <= NF; k++) {
			if ($k ~ /^state=/) s = $k
			if ($k ~ /^imports=/) i = $k
			if ($k ~ /^peer=/) p = $k
		    }
		    print e "/" $1, s, i, p }'
	done
}
_all_pending() { [ "$(states)" = "$1/$1" ]; }
wait_for -t 30 _all_pending $N
is "$(states)" "$N/$N" "all $N devices pending"
C0=$(claims)
is "$(printf '%s\n' "$C0" | grep -c 'state=imported imports=1 ')" $N \
    "each device imported once, by the gateway"

GWPID=$(bg_pid gw)
SIMPID=$(bg_pid sim)
bad_states=
# sample SECONDS: `usbgw list` every 0.1 s; any state but pending is kept
sample() {
	local end=$((SECONDS + $1)) s
	while [ $SECONDS -lt $end ]; do
		s=$(states)
		case $s in
		"$N/$N"|"$N2/$N2") ;;
		*) bad_states="$bad_states [$s]" ;;
		esac
		sleep 0.1
	done
}

queued() {	# queued N WHAT: N requests wait at the stopped simulator
	sim_wait_unread sim "$1"
	num_cmp "$(sim_unread sim)" -ge "$1" "$2 wait at the stopped simulator"
}
# gw_slept: the simulator answers what is queued while the gateway is
# stopped, then stops again; the gateway sleeps on past its timeouts
gw_slept() {
	kill -STOP "$GWPID"
	kill -CONT "$SIMPID"
	wait_for -t 5 _sim_unread_none sim
	sleep 0.3
	kill -STOP "$SIMPID"
	sleep 2.5		# > probe-timeout since the requests were sent
	kill -CONT "$GWPID"
}

# ---- 1. polls in flight while the gateway is stopped ----------------------
down0=$(gw_audit_count gw exporter-down)
kill -STOP "$SIMPID"
queued $NEXP "$NEXP polls"	# sent, unanswered
gw_slept		# the lists wait in the gateway's sockets
kill -CONT "$SIMPID"
sample 4
is "$bad_states" "" "every device pending at every sample after SIGCONT"
is "$(gw_audit_count gw exporter-down)" "$down0" "no exporter marked down"
is "$(claims)" "$C0" "the same $N claims (connections, one import each)"
num_cmp "$(gw_audit_count gw exporter-up)" -ge $NEXP "polls answered"

# ---- 2. new devices: lists, imports and probes in flight ------------------
kill -STOP "$GWPID"	# no poll may list them before the simulator stops
for e in $(seq 1 $NEXP); do
	for d in $(seq 1 $PER); do
		sim_ctl sim plug "sim$e/3-$d" sourcesink
	done
done
kill -STOP "$SIMPID"
kill -CONT "$GWPID"
queued $NEXP "$NEXP polls (listing the new devices)"
gw_slept		# lists read late: the claims connect and import
queued $N "$N imports"
gw_slept		# import replies read late: the probes start
queued $N "$N probes' first requests"
gw_slept		# the first descriptor read late
kill -CONT "$SIMPID"
N2=$((2 * N))
wait_for -t 20 _all_pending $N2
is "$(states)" "$N2/$N2" "all $N2 devices pending"
C1=$(claims)
is "$(printf '%s\n' "$C1" | grep -c 'state=imported imports=1 ')" $N2 \
    "each of the $N2 devices imported once: no claim was retried"
is "$(printf '%s\n' "$C1" | grep -v '/3-')" "$C0" "the first $N claims unchanged"
is "$(grep -c 'claim failed' "$T/gw.log")" 0 "no claim failed in the log" ||
    _diag_text "$(grep 'claim failed' "$T/gw.log" | head -n 5)"
is "$(gw_audit_count gw exporter-down)" "$down0" "still no exporter down"
is "$(gw_audit_count gw state "new_state = 'gone'")" 0 "no gone audit row"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE state = 'gone'")" 0 \
    "no device gone in the database"
bad_states=
sample 2
is "$bad_states" "" "all pending at every sample afterwards"
gw_finish gw
done_testing
