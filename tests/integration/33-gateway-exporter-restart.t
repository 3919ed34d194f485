#!/bin/bash
# The exporter dies (SIGKILL) and comes back on the same port: its
# devices go gone (an attached client is cut off), the exporter shows
# down, and when it answers again every device is reclaimed under the
# same busid and database record with its decision kept as its scope
# says: a permanent approval (rule), a timed approval and a permanent
# denial hold; a --once approval belonged to the presence that ended;
# an undecided device is pending again.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 34

POLL_MS=500
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type composite; keys ""; }
device 1-4 { type audio; }
device 1-5 { type sourcesink; }
EOF
SIMPORT=$(free_port) || bail_out "no free port"

# sim_start_at NAME: the simulator on the fixed port $SIMPORT.
sim_start_at() {
	local name=$1
	rm -f "$T/$name.port"
	start_bg "$name" "$SIM" -l "127.0.0.1:$SIMPORT" -p "$T/$name.port" \
	    -C "$T/$name.ctl" -L "$T/$name.pdu" -c "$T/sim.conf"
	wait_file "$T/$name.port" 10 "$name" && wait_for -t 5 test -S "$T/$name.ctl"
}
sim_start_at sim || bail_out "simulator did not start: $(cat "$T/sim.log")"
SIMA=127.0.0.1:$SIMPORT

gw_conf gw "exporter sim1 $SIMA" "poll-interval = ${POLL_MS}ms"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-3 1-4 1-5; do gw_wait_state gw sim1:$d pending; done

gwctl gw approve sim1:1-2 --permanent
is "$RC" 0 "approve --permanent sim1:1-2"
gwctl gw approve sim1:1-3 --for 10m
is "$RC" 0 "approve --for 10m sim1:1-3"
gwctl gw deny sim1:1-4 --permanent
is "$RC" 0 "deny --permanent sim1:1-4"
gwctl gw approve sim1:1-5 --once
is "$RC" 0 "approve --once sim1:1-5"

# busid, record id and state of every device, one line each
snapshot() {
	for d in 1-1 1-2 1-3 1-4 1-5; do
		printf '%s id=%s\n' "sim1:$d" "$(gw_field gw "sim1:$d" id)"
	done
}
before=$(snapshot)
is "$(gw_state gw sim1:1-2)/$(gw_state gw sim1:1-3)/$(gw_state gw sim1:1-4)/$(gw_state gw sim1:1-5)/$(gw_state gw sim1:1-1)" \
    authorized/authorized/blocked/authorized/pending "decisions in force before the crash"

start_bg hold "$TC" hold "$GWA" sim1:1-2 --expect-disconnect --within 1000 \
    --ready-file "$T/hold.ready"
wait_file "$T/hold.ready" 10 hold
check $? "a vhci host holds sim1:1-2"

# ---- the exporter dies --------------------------------------------------------
kill -USR1 "$(bg_pid hold)"
t0=$(day_ms)
stop_bg sim KILL
all_gone() {
	local d
	for d in 1-1 1-2 1-3 1-4 1-5; do
		[ "$(gw_state gw sim1:$d)" = gone ] || return 1
	done
}
wait_for -t 10 all_gone
check $? "every device of the killed exporter is gone"
ms=0
for d in 1-1 1-2 1-3 1-4 1-5; do
	m=$(gw_log_after_ms gw "sim1:$d: [a-z]+ -> gone" "$t0")
	[ "$m" -gt "$ms" ] && ms=$m
done
num_cmp "$ms" -le $((2 * POLL_MS)) "... within two poll intervals, by the daemon's log ($ms ms)"
wait_bg hold 10
is "$RC" 0 "the attached client saw the disconnect within 1 s"
# (the devices go gone when their claims cannot reconnect, which may be
# before the next poll finds the exporter down)
exp_down() { gwctl gw exporter list --json; printf '%s' "$OUT" | grep -q '"status": "down"'; }
wait_for -t $((3 * POLL_MS / 1000 + 2)) exp_down
like "$OUT" '"status": "down"' "usbgw exporter list: sim1 is down (by the next poll)"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 14 "import of a device of the dead exporter: ST_NODEV"
run "$TC" list "$GWA"
is "$(field ndev "$OUT")" 0 "DEVLIST is empty while the exporter is down"

# ---- it comes back on the same port ---------------------------------------------------
sim_start_at sim || bail_out "simulator did not restart: $(cat "$T/sim.log")"
gw_wait_state gw sim1:1-2 authorized 20
is "$(gw_state gw sim1:1-2)" authorized "permanent approval kept: authorized"
gw_wait_state gw sim1:1-3 authorized 5
is "$(gw_state gw sim1:1-3)" authorized "approval --for 10m kept: authorized"
gw_wait_state gw sim1:1-4 blocked 5
is "$(gw_state gw sim1:1-4)" blocked "permanent denial kept: blocked"
gw_wait_state gw sim1:1-1 pending 5
is "$(gw_state gw sim1:1-1)" pending "undecided device: pending again"
gw_wait_state gw sim1:1-5 pending 5
is "$(gw_state gw sim1:1-5)" pending "--once approval ended with the presence: pending"
is "$(snapshot)" "$before" "same busids and device records after the exporter's restart"
gwctl gw exporter list --json
like "$OUT" '"status": "up"' "usbgw exporter list: sim1 is up again"

sim_ctl sim list
is "$(printf '%s\n' "$CTL_OUT" | grep -c 'state=imported')" 5 \
    "the gateway claimed all five devices again"
run "$TC" import "$SIMA" 1-2
is "$RC" 12 "direct import at the restarted exporter: ST_DEV_BUSY"
run "$TC" import "$GWA" sim1:1-4
is "$RC" 11 "blocked device still refused (ST_NA)"
run "$TC" import "$GWA" sim1:1-5
is "$RC" 11 "--once device needs a new approval (ST_NA)"

ok "64 MiB loopback through the gateway after the exporter's restart" \
    "$TC" script "$GWA" sim1:1-2 --bytes 64M --skip unlink
like "$OUT" 'verified bytes=67108864 ' "data verified"
ok "composite device usable under its timed approval" \
    "$TC" script "$GWA" sim1:1-3 --bytes 4M --skip unlink,interrupt
# (a device is out of DEVLIST for the moment its exporter resets it
# after a detach, until the gateway's fresh claim is in place)
wait_for -t 10 eval '[ "$("$TC" list "$GWA" | sed -n "s/^RESULT ndev=//p")" = 2 ]'
run "$TC" list "$GWA"
is "$(field ndev "$OUT")" 2 "DEVLIST: the two authorized devices"

gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND new_state = 'gone'" 1
num_cmp "$(gw_audit_count gw state "busid = 'sim1:1-2' AND new_state = 'gone'")" -ge 1 \
    "audit: the device went gone"
num_cmp "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND new_state = 'authorized' AND actor = 'rule'")" \
    -ge 1 "audit: authorized again by the rule, no operator involved"
is "$(gw_sql gw "SELECT count(*) FROM presences p JOIN devices d ON d.id = p.device_id WHERE d.busid = 'sim1:1-2'")" \
    2 "database: a second presence of 1-2"
ok "audit verify" "$USBGW" -s "$(gw_sock gw)" audit verify

gw_finish gw
done_testing
