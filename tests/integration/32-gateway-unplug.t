#!/bin/bash
# Unplug at the exporter: the device is gone at the gateway within two
# poll intervals, an attached vhci host is torn down, the gone device is
# neither listed nor importable; plugged back, it is probed again and
# its decision follows the approval's scope: a --once approval belonged
# to the presence that ended, a permanent one (a rule) still holds.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 31

POLL_MS=1000
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

gw_conf gw "exporter sim1 $SIMA" "poll-interval = ${POLL_MS}ms"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-5; do gw_wait_state gw sim1:$d pending; done

# gone_after T0 BUSID: ms from T0 (day_ms) until the daemon logged the
# device gone (99999: never, or not in 10 s).
gone_after() {
	gw_wait_state gw "$2" gone 10 || { echo 99999; return; }
	gw_log_after_ms gw "$2: [a-z]+ -> gone" "$1"
}

# ---- unplug of an attached device -------------------------------------------
gwctl gw approve sim1:1-2
is "$RC" 0 "approve sim1:1-2 (once: this presence)"
start_bg load "$TC" load "$GWA" sim1:1-2 --dir loop --seconds 60 \
    --expect-disconnect --within 1000 --ready-file "$T/load.ready"
wait_file "$T/load.ready" 10 load
check $? "loopback load through the gateway"
sleep 0.3
kill -USR1 "$(bg_pid load)"
t0=$(day_ms)
sim_ctl sim unplug 1-2
is "$RC" 0 "simulator: unplug 1-2"
ms=$(gone_after "$t0" sim1:1-2)
num_cmp "$ms" -le $((2 * POLL_MS)) "attached device gone within two poll intervals ($ms ms)"
wait_bg load 10
is "$RC" 0 "the attached client was torn down (disconnect seen within 1 s)"
like "$(cat "$(bg_log load)")" 'DISCONNECT kind=' "the client reports the disconnect"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 14 "gone device: import refused with ST_NODEV"
run "$TC" list "$GWA"
unlike "$OUT" 'sim1:1-2' "gone device is not in DEVLIST"
gwctl gw approve sim1:1-2
is "$RC" 1 "a gone device cannot be approved"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND new_state = 'gone'" 1
like "$(gw_sql gw "SELECT reason FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND new_state = 'gone'")" \
    'exporter' "audit: the device went gone, with the reason"

# ---- unplug of an idle pending device ------------------------------------------------
t0=$(day_ms)
sim_ctl sim unplug 1-1
is "$RC" 0 "simulator: unplug 1-1 (pending, idle)"
ms=$(gone_after "$t0" sim1:1-1)
num_cmp "$ms" -le $((2 * POLL_MS)) "idle pending device gone within two poll intervals ($ms ms)"

# ---- unplug of an authorized (not attached) device with a permanent rule --------------
gwctl gw approve sim1:1-5 --permanent
is "$RC" 0 "approve --permanent sim1:1-5"
id5=$(gw_field gw sim1:1-5 id)
t0=$(day_ms)
sim_ctl sim unplug 1-5
ms=$(gone_after "$t0" sim1:1-5)
num_cmp "$ms" -le $((2 * POLL_MS)) "idle authorized device gone within two poll intervals ($ms ms)"

# ---- plugged back -------------------------------------------------------------------
sim_ctl sim plug 1-2 storage
is "$RC" 0 "simulator: plug 1-2 back"
sim_ctl sim plug 1-5 sourcesink
sim_ctl sim plug 1-1 keyboard 'keys=""'
gw_wait_state gw sim1:1-5 authorized 10
is "$(gw_state gw sim1:1-5)" authorized "re-plugged 1-5: authorized again by its permanent rule"
same "$(gw_field gw sim1:1-5 id)" "$id5" "re-plugged 1-5: the same device record"
gw_wait_state gw sim1:1-1 pending 10
is "$(gw_state gw sim1:1-1)" pending "re-plugged 1-1: pending"
wait_for -t 10 eval '[ "$(gw_state gw sim1:1-2)" != gone ] && [ "$(gw_state gw sim1:1-2)" != probing ]'
is "$(gw_state gw sim1:1-2)" pending \
    "re-plugged 1-2: pending (a --once approval ended with the presence)"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 11 "re-plugged 1-2 needs a new approval: ST_NA"
gw_wait_sql gw "SELECT count(*) FROM presences p JOIN devices d ON d.id = p.device_id WHERE d.busid = 'sim1:1-2'" 2
is "$(gw_sql gw "SELECT count(*) FROM presences p JOIN devices d ON d.id = p.device_id WHERE d.busid = 'sim1:1-2'")" \
    2 "database: two presences of 1-2"
ok "script through the gateway on the re-plugged, rule-approved 1-5" \
    "$TC" load "$GWA" sim1:1-5 --dir in --bytes 16M
gwctl gw approve sim1:1-2
is "$RC" 0 "approve the re-plugged 1-2"
ok "64 MiB loopback on the re-plugged device" "$TC" script "$GWA" sim1:1-2 --bytes 64M --skip unlink
like "$OUT" 'verified bytes=67108864 ' "data verified"

# ---- a device that never comes back stays gone ------------------------------------------
sim_ctl sim unplug 1-1
gw_wait_state gw sim1:1-1 gone 5
sleep $((3 * POLL_MS / 1000))
is "$(gw_state gw sim1:1-1)" gone "still gone three poll intervals later"
gwctl gw status
is "$RC" 0 "usbgw status"
ok "audit verify" "$USBGW" -s "$(gw_sock gw)" audit verify

gw_finish gw
done_testing
