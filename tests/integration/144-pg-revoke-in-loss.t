#!/usr/bin/env bash
# A revocation made while PostgreSQL is away (issue 16 item 5, protocol.md
# 4.6): revoke still applies at once (it only takes access away), and it
# is not lost: the writes that failed (the approval ended, the revocation
# recorded) are written when the store is back, so that neither the
# reconcile nor a restart brings the device back to authorized.  And an
# outage longer than the lease does not free the device at the exporter:
# the gateway cannot renew its lease, stops serving the exporter, but
# keeps its claim until it knows another gateway holds the lease.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
. "$(dirname "$0")/../lib/lease.sh"
need_pg
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW"
plan 13

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
cat >"$T/sim.conf" <<'CONF'
device 1-1 { type storage; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "poll-interval = 500ms" "audit-key = $T/gw.key" \
    "store-loss = keep" "lease-time = 3s" "exporter sim1 127.0.0.1:$(sim_port sim)"
gw_start gw -d "$PG_URI" || bail_out "usbgwd did not start on PostgreSQL"
gw_wait_state gw sim1:1-1 pending 20
gwctl gw approve sim1:1-1 --for 1h -m "before the loss"
gw_wait_state gw sim1:1-1 authorized
check $? "sim1:1-1 approved for an hour before the loss"

store_state() { "$USBGW" -s "$T/gw.sock" status --json 2>/dev/null |
    sed -n 's/.*"store": *"\([a-z]*\)".*/\1/p'; }
_store_is() { [ "$(store_state)" = "$1" ]; }
pg_stop "$T/pg" fast
wait_for -t 5 _store_is degraded
check $? "PostgreSQL stopped: the gateway is degraded"
gwctl gw revoke sim1:1-1 -m "during the loss"
is "$RC" 0 "revoke during the loss applies ($OUT$ERR)"
isnt "$(gw_state gw sim1:1-1)" authorized "sim1:1-1 is no longer authorized"
sleep 5	# past the 3 s lease, unrenewed (nothing to wait for)
like "$(cat "$T/gw.log")" "lease not renewed" "the lease lapsed unrenewed during the outage"
is "$(sim_state sim 1-1)" imported "... and the device is still claimed at the exporter (not freed for anyone)"

pg_start "$T/pg" || bail_out "PostgreSQL did not start again"
wait_for -t 15 _store_is ok
check $? "the store is back"
sleep 1	# a loop pass or two after the reconcile (nothing to wait for)
isnt "$(gw_state gw sim1:1-1)" authorized "after the reconcile: still not authorized"
gw_finish gw
gw_start gw -d "$PG_URI" || bail_out "usbgwd did not restart"
gw_wait_state gw sim1:1-1 pending 20
isnt "$(gw_state gw sim1:1-1)" authorized "after a restart: still not authorized (the revocation was written)"
is "$(pg_sql "SELECT count(*) FROM approvals WHERE ended_at IS NULL AND decision = 'allow'")" 0 \
    "no approval left active in the store"
