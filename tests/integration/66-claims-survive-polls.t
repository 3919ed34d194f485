#!/bin/bash
# Claims survive a slow or hostile device list (issue 12, item 12).  A
# claim lives on its own connection: device-list polls that time out
# (three in a row), come back malformed or are closed mark the exporter
# down, and no
# claim is dropped (the exporter keeps showing all 14 devices imported
# by the same gateway connections, and a direct import there is busy).
# After SIGKILL the restarted gateway claims all 14 again within 1 s of
# its start (the figure is printed).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 python3
plan 21

N=14
{
	for i in $(seq 1 $N); do
		case $((i % 3)) in
		0) echo "device 2-$i { type storage; }" ;;
		1) echo "device 2-$i { type keyboard; keys \"\"; }" ;;
		2) echo "device 2-$i { type sourcesink; }" ;;
		esac
	done
} >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMP=$(sim_port sim)
echo pass >"$T/mode"
start_bg proxy python3 "$(dirname "$0")/../tools/slow-exporter.py" \
    "$T/proxy.port" "$SIMP" "$T/mode"
wait_file "$T/proxy.port" 10 proxy || bail_out "proxy did not start"
PROXY=127.0.0.1:$(cat "$T/proxy.port")

gw_conf gw "exporter tc1 $PROXY" "poll-interval = 300ms" "probe-timeout = 600ms"
GW_LISTEN_PORT=$(free_port) || bail_out "no free port"
gw_start gw || bail_out "usbgwd did not start"

imported() { sim_ctl_list sim | grep -c 'state=imported'; }
peers() { sim_ctl_list sim | tr ' ' '\n' | grep '^peer=' | sort | tr '\n' ' '; }
_all_claimed() { [ "$(imported)" = "$N" ]; }
wait_for -t 20 _all_claimed
is "$(imported)" "$N" "all $N devices claimed through the proxy"
for i in $(seq 1 $N); do gw_wait_state gw tc1:2-$i pending 10 || break; done
P0=$(peers)

# watch MODE SECONDS: the exporter's list answered as MODE; sample the
# simulator meanwhile; prints the fewest devices seen imported and
# whether the claims' connections changed.
watch_claims() {
	local mode=$1 secs=$2 min=$N n end
	echo "$mode" >"$T/mode"
	end=$(($(date +%s%N) / 1000000 + secs * 1000))
	while [ $(($(date +%s%N) / 1000000)) -lt "$end" ]; do
		n=$(imported)
		[ "$n" -lt "$min" ] && min=$n
		sleep 0.1
	done
	echo "$min $([ "$(peers)" = "$P0" ] && echo same || echo changed)"
}

# ---- the list times out (a loaded machine, a stalled exporter) ------------------
down0=$(gw_audit_count gw exporter-down)
r=$(watch_claims hang 3)
is "$r" "$N same" "list timing out for 3 s: all $N stay imported, same connections"
# (down after three timed-out polls in a row: 3 x 0.6 s plus back-off)
wait_for -t 5 eval '[ "$(gw_audit_count gw exporter-down "detail LIKE '"'%timed out%'"'")" -ge 1 ]'
num_cmp "$(gw_audit_count gw exporter-down "detail LIKE '%timed out%'")" -ge 1 \
    "the polls timed out (exporter-down audited)"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE state = 'gone'")" 0 "no device gone"
is "$(usbip_import_status "$SIMP" 2-1)" 2 "a direct import at the exporter is busy meanwhile"

# ---- malformed list (a hostile exporter) and a closed one --------------------------
r=$(watch_claims garbage 2)
is "$r" "$N same" "malformed list for 2 s: all $N stay imported, same connections"
# (the exporter may still be in its back-off after the timed-out polls:
# the garbage stays on until a poll has met it)
wait_for -t 15 eval '[ "$(gw_audit_count gw malformed "object = '"'tc1'"'")" -ge 1 ]'
num_cmp "$(gw_audit_count gw malformed "object = 'tc1'")" -ge 1 "the bad list is audited"
r=$(watch_claims close 2)
is "$r" "$N same" "list connection closed for 2 s: all $N stay imported"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE state = 'gone'")" 0 "still no device gone"

# ---- good lists again ------------------------------------------------------------
echo pass >"$T/mode"
wait_for -t 10 eval '[ "$(gw_audit_count gw exporter-up)" -ge 2 ]'
num_cmp "$(gw_audit_count gw exporter-up)" -ge 2 "exporter up again"
sleep 1
is "$(imported) $([ "$(peers)" = "$P0" ] && echo same)" "$N same" \
    "the same $N claims after the exporter's lists are good again"
is "$(gw_state gw tc1:2-1)" pending "devices keep their state"

# ---- a claim's own connection failing still drops it (unplug) -----------------------
sim_ctl sim unplug 2-$N
gw_wait_state gw tc1:2-$N gone 10
is "$(gw_state gw tc1:2-$N)" gone "an unplugged device (its claim closed) goes gone"
sim_ctl sim plug 2-$N storage
gw_wait_state gw tc1:2-$N pending 10
is "$(imported)" "$N" "plugged back: claimed again"

# ---- restart: claimed again within 1 s of the start ------------------------------
stop_bg gw KILL
wait_for -t 10 eval '[ "$(imported)" = 0 ]'
is "$(imported)" 0 "SIGKILL: the exporter freed every device"
t0=$(date +%s%N)
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$T/gw.sock" \
    -l "127.0.0.1:$GW_LISTEN_PORT" -P "$T/gw.port" -p "$T/gw.pid" -v debug
while [ "$(imported)" != "$N" ] && [ $(($(date +%s%N) - t0)) -lt 10000000000 ]; do
	:
done
el=$((($(date +%s%N) - t0) / 1000000))
diag "all $N devices claimed again $el ms after usbgwd was started"
is "$(imported)" "$N" "all $N claimed again after the restart"
num_cmp "$el" -lt 1000 "within 1 s of the start ($el ms)"
wait_file "$T/gw.port" 10 gw
wait_for -t 10 test -S "$T/gw.sock"
for i in $(seq 1 $N); do gw_wait_state gw tc1:2-$i pending 10 || break; done
is "$(gw_state gw tc1:2-1)" pending "decided again after the restart"
gw_finish gw
done_testing
