#!/usr/bin/env bash
# PostgreSQL stopped and started under a running gateway (issue 16, items
# 5 and 6, the storage half).  While the server is down nothing new is
# authorized: `usbgw approve` fails (the decision cannot be recorded) and
# the pending device stays out of reach of a vhci host.  When the server
# is back, the gateway's connection is made again (sqldb_pg.c: a new
# connection after a loss, retried with a backoff of 0.5 s doubling to
# 10 s with jitter) without a restart of the gateway: an approval works again, the
# device is imported, and the audit rows held during the outage are
# written: the chain verifies afterwards.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON"
plan 16

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
cat >"$T/sim.conf" <<'CONF'
device 1-2 { type storage; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "poll-interval = 500ms" "audit-key = $T/gw.key" \
    "exporter sim1 127.0.0.1:$(sim_port sim)"
gw_start gw -d "$PG_URI" || bail_out "usbgwd did not start on PostgreSQL"
gw_wait_state gw sim1:1-2 pending 20
is "$(gw_state gw sim1:1-2)" pending "the device is pending"

# ---- the server goes away ------------------------------------------------
pg_stop "$T/pg" immediate
check $? "PostgreSQL stopped (immediate: connections cut)"
gwctl gw approve sim1:1-2
is "$RC" 5 "approve while the database is gone: refused (exit 5)"
like "$ERR" "cannot record the decision" "it says why"
is "$(gw_state gw sim1:1-2)" pending "the device is still pending"
run "$TC" import "$(gw_addr gw)" sim1:1-2
like "$OUT" 'RESULT status=ST_NA' "a vhci host's import is refused: nothing new is authorized"
bg_alive gw
check $? "the gateway keeps running"

# ---- and comes back ------------------------------------------------------
pg_start "$T/pg" || bail_out "PostgreSQL did not start again"
_approve_ok() { "$USBGW" -s "$T/gw.sock" approve sim1:1-2 -m "after the outage" >/dev/null 2>&1; }
t0=$SECONDS
wait_for -t 45 _approve_ok
if ! check $? "the same gateway records an approval again once the server is back ($((SECONDS - t0)) s)"; then
	gwctl gw approve sim1:1-2 -m "after the outage"
	diag "approve: $RC $ERR"
	gw_diag gw 30
fi
gw_wait_state gw sim1:1-2 authorized
is "$(gw_state gw sim1:1-2)" authorized "authorized"
run "$TC" import "$(gw_addr gw)" sim1:1-2
like "$OUT" 'RESULT status=ST_OK' "and imported through the gateway"
like "$(cat "$T/gw.log")" "database .*: connected again" "the log says the connection was made again"
is "$(pg_sql "SELECT count(*) FROM approvals WHERE reason = 'after the outage'")" 1 \
    "the approval is in PostgreSQL"
gw_finish gw
run "$USBGW" audit verify --database "$PG_URI" --key "$T/gw.key"
is "$RC" 0 "the audit chain verifies afterwards (rows held during the outage written after it)"
done_testing
