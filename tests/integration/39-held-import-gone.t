#!/usr/bin/env bash
# A held import belongs to its device.  A vhci host waits for an approval
# (attach-pending-wait); then the device goes away: unplugged, or its
# exporter removed (the device object is freed).  Every import held for
# it is answered at once (it waited for the whole wait before, or was
# never answered), and the host hanging up afterwards touches nothing of
# the freed device (a heap use-after-free under ASan before).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" socat sqlite3
plan 14

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type storage; }
device 1-2 { type storage; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)
gw_conf gw "poll-interval = 300ms" "attach-pending-wait = 30s"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gwctl gw exporter add sim1 "127.0.0.1:$(sim_port sim)"
is "$RC" 0 "exporter sim1 added"
for d in 1-1 1-2; do gw_wait_state gw sim1:$d pending 10; done
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# ---- unplugged while two hosts wait for it -----------------------------------
start_bg a1 "$TC" import "$GWA" sim1:1-1 -t 40000
start_bg a2 "$TC" import "$GWA" sim1:1-1 -t 40000
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE busid = 'sim1:1-1'
    AND outcome = 'waiting'" 2 5
check $? "two imports of sim1:1-1 held"
t0=$(now_ms)
sim_ctl sim unplug 1-1
is "$RC" 0 "sim1:1-1 unplugged at the exporter"
wait_bg a1 10
r1=$RC
wait_bg a2 10
r2=$RC
t1=$(now_ms)
is "$r1/$r2" "14/14" "both held imports refused (ST_NODEV) when the device left"
ok_ms=$((t1 - t0))
[ "$ok_ms" -lt 5000 ]
check $? "... at once: ${ok_ms} ms (the wait was 30 s)"
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE busid = 'sim1:1-1'
    AND outcome != 'waiting'" 2 3
is "$(gw_sql gw "SELECT group_concat(DISTINCT outcome) FROM access_requests
    WHERE busid = 'sim1:1-1'")" refused "both requests recorded as answered (refused)"

# ---- the exporter removed (the device freed), then the host hangs up ----------
start_bg b1 "$TC" import "$GWA" sim1:1-2 -t 40000
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE busid = 'sim1:1-2'
    AND outcome = 'waiting'" 1 5
check $? "an import of sim1:1-2 held"
t0=$(now_ms)
gwctl gw exporter remove sim1
is "$RC" 0 "exporter sim1 removed"
wait_bg b1 10
rb=$RC
t1=$(now_ms)
like "$rb" '^1[14]$' "the held import is refused (exit $rb) when its device is freed"
[ $((t1 - t0)) -lt 5000 ]
check $? "... at once: $((t1 - t0)) ms"
gwctl gw status
is "$RC" 0 "the daemon lives on"

gw_finish gw
