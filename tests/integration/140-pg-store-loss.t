#!/usr/bin/env bash
# Losing the database fails closed (protocol.md 4.6; issue 16, "loss"):
# PostgreSQL stopped (pg_ctl stop -m fast) under a gateway with a device
# attached.  The gateway notices at once and is degraded (status, hello,
# the usbgw_store_up gauge): an approval and a policy change are refused
# with "store unavailable", a device that arrives stays pending although
# a rule allows it, no import is granted, and with store-loss = stop the
# attachment ends after store-grace (not before), the device staying
# claimed.  PostgreSQL started again: the gateway connects again within
# its backoff without a restart, decides again (the new device is
# authorized by its rule), the approval made before the loss still
# applies (an import works), and the audit chain verifies.
# STORE_LOSS=keep (141) runs the same with store-loss = keep: the
# attachment runs on through the outage.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW"
MODE=${STORE_LOSS:-stop}
GRACE_MS=2000
[ "$MODE" = stop ] && plan 29 || plan 28

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
cat >"$T/sim.conf" <<'CONF'
device 1-1 { type storage; }
device 1-2 { type storage; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
MPORT=$(free_port)
gw_conf gw "poll-interval = 500ms" "audit-key = $T/gw.key" \
    "store-loss = $MODE" "store-grace = ${GRACE_MS}ms" \
    "metrics-listen = 127.0.0.1:$MPORT" \
    "exporter sim1 127.0.0.1:$(sim_port sim)"
gw_start gw -d "$PG_URI" || bail_out "usbgwd did not start on PostgreSQL"
gw_wait_state gw sim1:1-2 pending 20
gw_wait_state gw sim1:1-1 pending 20
gwctl gw policy add 'allow id 1234:5678'
is "$RC" 0 "a rule allows 1234:5678 (no such device yet)"
gwctl gw approve sim1:1-2 -m "before the loss"
is "$RC" 0 "sim1:1-2 approved before the loss"
gw_wait_state gw sim1:1-2 authorized
start_bg hold "$TC" hold "$(gw_addr gw)" sim1:1-2 --expect-disconnect \
    --ready-file "$T/hold.ready"
wait_file "$T/hold.ready" 10 hold
check $? "a vhci host holds sim1:1-2"
gw_wait_state gw sim1:1-2 attached

store_state() { "$USBGW" -s "$T/gw.sock" status --json 2>/dev/null |
    sed -n 's/.*"store": *"\([a-z]*\)".*/\1/p'; }
_store_is() { [ "$(store_state)" = "$1" ]; }
metric() { curl -s "http://127.0.0.1:$MPORT/metrics" | sed -n "s/^$1 //p"; }
is "$(store_state)" ok "status: store ok"
is "$(metric usbgw_store_up)" 1 "usbgw_store_up 1"

# ---- the server goes away ------------------------------------------------
t0=$(day_ms)
pg_stop "$T/pg" fast
check $? "PostgreSQL stopped (fast: connections closed)"
wait_for -t 5 _store_is degraded
check $? "the gateway is degraded ($(( $(day_ms) - t0 )) ms after the stop)"
is "$(metric usbgw_store_up)" 0 "usbgw_store_up 0"
run "$USBGW" -s "$T/gw.sock" status
like "$OUT" 'store +degraded for .*nothing new is authorized' "usbgw status says so"
gwctl gw approve sim1:1-1
is "$RC" 5 "approve during the loss: refused (exit 5)"
like "$ERR" "store unavailable" "it says the store is unavailable"
gwctl gw policy add 'allow id 1209:0001'
like "$RC/$ERR" "^5/.*store unavailable" "a policy change is refused too"
is "$(gw_state gw sim1:1-1)" pending "sim1:1-1 still pending"
sim_ctl sim "plug 1-3 keyboard vendor=0x1234 product=0x5678" >/dev/null
gw_wait_state gw sim1:1-3 pending 15
is "$(gw_state gw sim1:1-3)" pending "a device arriving during the loss stays pending (its rule waits for the store)"
run "$TC" import "$(gw_addr gw)" sim1:1-3
like "$OUT" 'RESULT status=ST_NA' "its import is refused"

if [ "$MODE" = stop ]; then
	wait_bg hold $((GRACE_MS / 1000 + 5))
	held=$(( $(day_ms) - t0 ))
	is "$RC" 0 "store-loss = stop: the attachment ended (${held} ms after the stop)"
	# by the daemon's own clock: from noticing the loss to the cut
	lost=$(gw_log_after_ms gw 'unreachable .*degraded' "$t0")
	cut=$(gw_log_after_ms gw 'attachments? ended [(]store-loss = stop[)]' "$t0")
	ok "cut $((cut - lost)) ms after the loss was noticed: not before store-grace ($GRACE_MS ms), within 500 ms of it" \
	    [ $((cut - lost)) -ge $((GRACE_MS - 20)) -a $((cut - lost)) -le $((GRACE_MS + 500)) ]
	isnt "$(gw_state gw sim1:1-2)" attached "sim1:1-2 is not attached"
	run "$TC" import "$(gw_addr gw)" sim1:1-2
	like "$OUT" 'RESULT status=ST_NA' "and no import is granted while degraded"
else
	# the outage outlasts store-grace by 2 s: nothing may end it
	sleep $((GRACE_MS / 1000 + 2))
	bg_alive hold
	check $? "store-loss = keep: the attachment runs on past store-grace"
	is "$(gw_state gw sim1:1-2)" attached "sim1:1-2 still attached"
	run "$TC" import "$(gw_addr gw)" sim1:1-1
	like "$OUT" 'RESULT status=ST_NA' "no new import is granted while degraded"
fi
bg_alive gw
check $? "the gateway keeps running"

# ---- and comes back ------------------------------------------------------
pg_start "$T/pg" || bail_out "PostgreSQL did not start again"
t1=$(day_ms)
wait_for -t 15 _store_is ok
check $? "reconnected without a restart, $(( $(day_ms) - t1 )) ms after the server was back (backoff at most 10 s + jitter)"
gw_wait_state gw sim1:1-3 authorized 10
is "$(gw_state gw sim1:1-3)" authorized "decided again: the rule now authorizes sim1:1-3"
if [ "$MODE" = stop ]; then
	run "$TC" import "$(gw_addr gw)" sim1:1-2
	like "$OUT" 'RESULT status=ST_OK' "the approval made before the loss still applies: imported"
else
	kill -USR1 "$(bg_pid hold)" 2>/dev/null; stop_bg hold
	gw_wait_state gw sim1:1-2 authorized 10
	is "$(gw_state gw sim1:1-2)" authorized "the approval made before the loss still applies"
fi
gwctl gw approve sim1:1-1 -m "after the loss"
is "$RC" 0 "an approval is recorded again"
like "$(pg_sql "SELECT string_agg(event, ' ') FROM audit_log")" \
    'store-lost.*store-back' "the audit log has store-lost and store-back"
gw_finish gw
run "$USBGW" audit verify --database "$PG_URI" --key "$T/gw.key"
is "$RC" 0 "the audit chain verifies afterwards"
done_testing
