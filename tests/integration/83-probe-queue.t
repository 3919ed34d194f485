#!/bin/bash
# Claims wait in a queue for a probe slot (issue 13, item 2): with
# max-probes = 2 and max-probes-per-exporter = 1, three exporters of four
# devices each.  While the exporters are stopped (SIGSTOP) right after
# their lists were read, exactly two imports wait at the simulator (one
# per exporter at most) and `usbgw status` shows 2 probing, 10 queued;
# the queued ones have no connection yet (nothing fails).  The
# daemon's log of claim transitions never has more than two claims
# between connecting and the end of their probe, nor two of one
# exporter; all twelve end pending.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 ss python3
plan 15

NEXP=3
PER=4
N=$((NEXP * PER))
printf 'exporters %d devices-per-exporter %d type sourcesink\n' "$NEXP" \
    "$PER" >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" -P "$T/sim.ports" ||
    bail_out "simulator did not start"
SIMPID=$(bg_pid sim)
conf=("poll-interval = 1s" "probe-timeout = 20s" "max-probes = 2"
    "max-probes-per-exporter = 1")
while read -r name port; do
	conf+=("exporter $name 127.0.0.1:$port")
done <"$T/sim.ports"
gw_conf gw "${conf[@]}"

# a bad value names the file, the line and what was expected
gw_conf bad "max-probes = 0" "max-probes-per-exporter = x"
run "$USBGWD" -n -c "$T/bad.conf"
like "$ERR" 'bad.conf:1: max-probes: expected a number from 1 to 4096, got "0"' \
    "max-probes = 0: an error naming file:line, the key and the range"
like "$ERR" 'bad.conf:2: max-probes-per-exporter: expected a number' \
    "max-probes-per-exporter = x: reported too"

kill -STOP "$SIMPID"	# the first lists wait ...
gw_start gw || bail_out "usbgwd did not start"
on_fail() { gw_diag gw 40; }
GWPID=$(bg_pid gw)
sim_wait_unread sim $NEXP
kill -STOP "$GWPID"
kill -CONT "$SIMPID"	# ... answered while the gateway is stopped
wait_for -t 5 _sim_unread_none sim
sleep 0.3
kill -STOP "$SIMPID"	# the exporters stall: imports wait
kill -CONT "$GWPID"
sim_wait_unread sim 2
sleep 0.5		# (more would show up by now)
is "$(sim_unread sim)" 2 "two imports wait at the stopped exporters, no more"
claims() {
	"$USBGW" -s "$T/gw.sock" status --json | python3 -c '
import json, sys
c = json.load(sys.stdin).get("claims", {})
print(c.get("probing"), c.get("queued"))'
}
is "$(claims)" "2 10" "usbgw status: 2 probing, 10 queued"
run "$USBGW" -s "$T/gw.sock" status
like "$OUT" 'claims +2 probing, 10 queued' "usbgw status prints them"
sleep 1
kill -CONT "$SIMPID"
states() {
	local j
	j=$("$USBGW" -s "$T/gw.sock" list --json 2>/dev/null) || { echo error; return; }
	echo "$(printf '%s' "$j" | "$EJSON" count state=pending)/$(printf '%s' "$j" |
	    "$EJSON" count)"
}
_states_are() { [ "$(states)" = "$1" ]; }
wait_for -t 30 _states_are "$N/$N"
is "$(states)" "$N/$N" "all $N devices pending"
is "$(claims)" "0 0" "nothing probing or queued at the end"
is "$(grep -c 'claim failed' "$T/gw.log")" 0 "no claim failed (queued ones never timed out)"

# the log's claim transitions: the most claims in a slot at once
concurrency() {
	awk '/: claim [a-z]+ -> [a-z]+/ {
		for (i = 1; i <= NF; i++) if ($i == "claim") break
		busid = $(i - 1); sub(/:$/, "", busid)
		ex = busid; sub(/:.*/, "", ex)
		to = $(i + 3); sub(/:$/, "", to)
		act = (to == "connecting" || to == "importing" || to == "probing")
		if (act && !(busid in on)) {
			on[busid] = 1; n++; pe[ex]++
			if (n > max) max = n
			if (pe[ex] > pmax) pmax = pe[ex]
		} else if (!act && (busid in on)) {
			delete on[busid]; n--; pe[ex]--
		}
		starts += (to == "connecting")
	    }
	    END { print max + 0, pmax + 0, starts + 0 }' "$T/gw.log"
}
r=$(concurrency)
is "$(echo "$r" | cut -d' ' -f1)" 2 \
    "never more than 2 claims probing at once (max-probes)"
is "$(echo "$r" | cut -d' ' -f2)" 1 \
    "never more than 1 of one exporter (max-probes-per-exporter)"
num_cmp "$(echo "$r" | cut -d' ' -f3)" -ge $N "each of the $N claims started"
sim_ctl sim exporters
is "$(printf '%s\n' "$CTL_OUT" | grep -c "imported=$PER ")" $NEXP \
    "every exporter has its $PER devices imported"
gw_finish gw
done_testing
