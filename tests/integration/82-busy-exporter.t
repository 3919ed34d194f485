#!/bin/bash
# A busy exporter is slow, not gone (issue 13, item 4).  Two exporters
# of four devices each (one usbgw-sim), poll-interval 1 s, probe-timeout
# 1 s, the simulator stopped (SIGSTOP) while usbgwd runs:
#   1. for one poll timeout: the poll is retried, no exporter down;
#   2. for more than three probe timeouts while new devices' claims
#      import: the claims time out and are retried with back-off, the
#      polls time out three times in a row (the exporter is down then),
#      and on SIGCONT every device ends pending, none ever gone;
#   3. a dead exporter (the simulator killed): down at once (connection
#      refused), and every device gone (its claim cannot be taken again).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 ss python3
plan 18

NEXP=2
PER=4
N=$((NEXP * PER))
printf 'exporters %d devices-per-exporter %d type sourcesink\n' "$NEXP" \
    "$PER" >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" -P "$T/sim.ports" ||
    bail_out "simulator did not start"
conf=("poll-interval = 1s" "probe-timeout = 1s")
while read -r name port; do
	conf+=("exporter $name 127.0.0.1:$port")
done <"$T/sim.ports"
gw_conf gw "${conf[@]}"
gw_start gw || bail_out "usbgwd did not start"
on_fail() { gw_diag gw 40; }
GWPID=$(bg_pid gw)
SIMPID=$(bg_pid sim)

states() {	# "PENDING/GONE/ALL" of `usbgw list`
	local j
	j=$("$USBGW" -s "$T/gw.sock" list --json 2>/dev/null) || { echo error; return; }
	echo "$(printf '%s' "$j" | "$EJSON" count state=pending)/$(printf '%s' "$j" |
	    "$EJSON" count state=gone)/$(printf '%s' "$j" | "$EJSON" count)"
}
_states_are() { [ "$(states)" = "$1" ]; }
wait_for -t 30 _states_are "$N/0/$N"
is "$(states)" "$N/0/$N" "all $N devices pending"
gone_rows() { gw_audit_count gw state "new_state = 'gone'"; }
_log_count_ge() { [ "$(grep -cE "$1" "$T/gw.log")" -ge "$2" ]; }

# ---- 1. one poll timeout: retried, not down -------------------------------
kill -STOP "$SIMPID"
sim_wait_unread sim $NEXP
wait_for -t 5 _log_count_ge 'device list timed out \(1 in a row\)' $NEXP
kill -CONT "$SIMPID"
like "$(grep 'device list timed out' "$T/gw.log" | head -n 1)" \
    'polled again' "a poll timed out: polled again"
wait_for -t 5 eval '[ "$(gw_audit_count gw exporter-up)" -ge 1 ]'
sleep 1.5		# the retried polls answered
is "$(gw_audit_count gw exporter-down)" 0 \
    "one timed-out poll does not mark the exporter down"
is "$(states)" "$N/0/$N" "every device still pending"

# ---- 2. the exporter stopped while claims import --------------------------
up0=$(gw_audit_count gw exporter-up)
kill -STOP "$GWPID"	# the new devices are listed only to a stopped sim
for e in $(seq 1 $NEXP); do
	for d in 1 2; do sim_ctl sim plug "sim$e/3-$d" sourcesink; done
done
kill -STOP "$SIMPID"
kill -CONT "$GWPID"
sim_wait_unread sim $NEXP	# the polls that list them
kill -STOP "$GWPID"
kill -CONT "$SIMPID"	# the lists are answered ...
wait_for -t 5 _sim_unread_none sim
sleep 0.3
kill -STOP "$SIMPID"	# ... and the exporter stalls
kill -CONT "$GWPID"
N2=$((N + 2 * NEXP))
sim_wait_unread sim $((2 * NEXP))
num_cmp "$(sim_unread sim)" -ge $((2 * NEXP)) \
    "$((2 * NEXP)) imports wait at the stopped exporter"
wait_for -t 10 _log_count_ge 'device list timed out \(3 polls in a row\)' 1
sleep 0.5
kill -CONT "$SIMPID"
num_cmp "$(grep -c 'claim failed: exporter timed out' "$T/gw.log")" -ge \
    $((2 * NEXP)) "the imports timed out"
like "$(grep 'claimed again in' "$T/gw.log" | head -n 1)" \
    'claimed again in [0-9]+ ms \(try 2\)' "and were retried with back-off"
num_cmp "$(gw_audit_count gw exporter-down "detail LIKE '%timed out (3 polls in a row)%'")" \
    -ge 1 "three polls timed out in a row: the exporter is down"
wait_for -t 30 _states_are "$N2/0/$N2"
is "$(states)" "$N2/0/$N2" "SIGCONT: all $N2 devices pending"
is "$(gone_rows)" 0 "no device was ever gone"
sim_ctl sim list sim1
like "$CTL_OUT" '3-1 .*state=imported' "the new devices are claimed"
wait_for -t 20 eval '[ "$(gw_audit_count gw exporter-up)" -gt "$up0" ]'
num_cmp "$(gw_audit_count gw exporter-up)" -gt "$up0" "the exporter is up again"


# ---- 3. a dead exporter: down, its devices gone ---------------------------
_all_up() {
	[ "$("$USBGW" -s "$T/gw.sock" status --json | python3 -c \
	    'import json, sys; print(json.load(sys.stdin)["exporters"]["up"])')" = $NEXP ]
}
wait_for -t 20 _all_up
down0=$(gw_audit_count gw exporter-down)
stop_bg sim KILL
wait_for -t 30 _states_are "0/$N2/$N2"
is "$(states)" "0/$N2/$N2" "the simulator killed: all $N2 devices gone"
wait_for -t 10 eval '[ "$(gw_audit_count gw exporter-down)" -ge $((down0 + NEXP)) ]'
is "$(gw_audit_count gw exporter-down)" $((down0 + NEXP)) \
    "both exporters down"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'exporter-down' ORDER BY rowid DESC LIMIT 1")" \
    'refused|closed' "down for the refused or closed connection, not a timeout"
gw_finish gw
done_testing
