#!/bin/bash
# A whole probe has a deadline (issue 13: the probe queue must not be
# held).  probe-timeout is an inactivity timeout; an exporter that
# dribbles its replies one byte every 0.3 s never trips it, and would
# hold its probe slots for ever (with max-probes of them, every slot of
# the gateway: no other device would be claimed).  The probe of a
# dribbling exporter ends after 4 x probe-timeout, frees its slot, the
# device is not gone, and once the exporter answers normally it is
# claimed and pending.  A gateway stopped past the deadline is not the
# exporter's fault: the probe goes on.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

need_prog "$SIM" "$USBGWD" "$USBGW" sqlite3 python3
plan 9

printf 'device 1-1 { type storage; }\ndevice 1-2 { type keyboard; keys ""; }\n' \
    >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
echo dribble >"$T/mode"
start_bg proxy python3 "$(dirname "$0")/../tools/slow-exporter.py" \
    "$T/proxy.port" "$(sim_port sim)" "$T/mode"
wait_file "$T/proxy.port" 10 proxy || bail_out "proxy did not start"

gw_conf gw "exporter tc1 127.0.0.1:$(cat "$T/proxy.port")" \
    "poll-interval = 500ms" "probe-timeout = 1s" "max-probes = 2"
GW_LISTEN_PORT=$(free_port) || bail_out "no free port"
gw_start gw || bail_out "usbgwd did not start"

probing() {
	"$USBGW" -s "$T/gw.sock" status --json | python3 -c '
import json, sys
print(json.load(sys.stdin).get("claims", {}).get("probing"))'
}
wait_for -t 10 eval '[ "$(probing)" = 2 ]'
is "$(probing)" 2 "both claims probe the dribbling exporter"
t0=$(date +%s%N)
wait_for -t 15 eval 'grep -q "probe not finished within 4000 ms" "$T/gw.log"'
el=$((($(date +%s%N) - t0) / 1000000))
ok "the probe is ended at its deadline (4 x probe-timeout; $el ms after both probed)" \
    grep -q 'probe not finished within 4000 ms' "$T/gw.log"
num_cmp "$el" -lt 8000 "within the deadline plus one probe-timeout"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE new_state = 'gone'")" 0 \
    "no device gone for it"

# the exporter answers normally again: claimed on a retry, pending
echo pass >"$T/mode"
gw_wait_state gw tc1:1-1 pending 20
gw_wait_state gw tc1:1-2 pending 20
is "$(gw_state gw tc1:1-1) $(gw_state gw tc1:1-2)" "pending pending" \
    "both pending once the exporter answers"
is "$(probing)" 0 "no probe slot held"

# a gateway stopped past the deadline during a probe keeps the probe
sim_ctl sim unplug 1-2
gw_wait_state gw tc1:1-2 gone 20
echo dribble >"$T/mode"
sim_ctl sim plug 1-2 keyboard
wait_for -t 10 eval '[ "$(probing)" = 1 ]'
echo pass >"$T/mode"	# (the connection already dribbles; new ones do not)
n0=$(grep -c "probe not finished" "$T/gw.log")
kill -STOP "$(cat "$T/gw.pid")"
sleep 5
kill -CONT "$(cat "$T/gw.pid")"
sleep 0.5
is "$(grep -c "probe not finished" "$T/gw.log")" "$n0" \
    "a gateway stopped for 5 s (past the deadline) does not end the probe"
wait_for -t 15 eval 'grep -c "probe not finished" "$T/gw.log" | grep -qv "^$n0\$"'
num_cmp "$(grep -c "probe not finished" "$T/gw.log")" -gt "$n0" \
    "the dribbling probe still ends, later (the stop is granted again)"
gw_wait_state gw tc1:1-2 pending 20
is "$(gw_state gw tc1:1-2)" pending "and the device is pending after its retry"
