#!/usr/bin/env bash
# Three gateways on one PostgreSQL (issue 16 item 2, protocol.md 4.3):
# an approval made at a gateway that does not hold the device reaches
# the holder through the change feed and authorizes the device there
# within 1 s (the figure is printed); a vhci host (usbip-tc) then imports
# it through the holder.  Each gateway has its name (-N), its row in
# gateways (`usbgw gateways` at any of them lists the three), and the
# feed and audit rows name the gateway that wrote them.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW"
plan 20

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
cat >"$T/sim.conf" <<'CONF'
device 1-2 { type storage; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

# one site audit key for every gateway (protocol.md 4.5)
for g in a b c; do
	gw_conf "gw$g" "poll-interval = 500ms" "audit-key = $T/site.key"
done
# a first, alone: it makes the schema and the key; then b and c
gw_start gwa -d "$PG_URI" -N gw-a || bail_out "gateway a did not start"
gw_start gwb -d "$PG_URI" -N gw-b || bail_out "gateway b did not start"
gw_start gwc -d "$PG_URI" -N gw-c || bail_out "gateway c did not start"

gwctl gwc gateways --json
is "$(jq -r '[.[].name] | join(" ")' <<<"$OUT")" "gw-a gw-b gw-c" \
    "usbgw gateways at c lists the three gateways"
is "$(jq -r '.[] | select(.self) | .name' <<<"$OUT")" "gw-c" "... c is marked as itself"
gwctl gwa gateways
like "$OUT" "gw-a .*\(this one\)" "the table form: $(grep gw-a <<<"$OUT")"

# b holds the exporter (added at b; a and c never claim it)
gwctl gwb exporter add sim1 "$SIMA"
is "$RC" 0 "usbgw exporter add sim1 at b"
gw_wait_state gwb sim1:1-2 pending 20
is "$(gw_state gwb sim1:1-2)" pending "the device is pending at b"
is "$(gw_state gwa sim1:1-2)" "" "a does not hold it"

run "$TC" import "$(gw_addr gwb)" sim1:1-2
unlike "$OUT" 'RESULT status=ST_OK' "an import at b while pending is refused"

# approve at a: written to the store, applied at b by the feed
gwctl gwa approve sim1:1-2 -m "approved at a"
is "$RC" 0 "usbgw approve at a (which does not hold the device): $OUT$ERR"
t0=$(date +%s%N)
until [ "$(gw_state gwb sim1:1-2)" = authorized ]; do
	[ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 10000 ] && break
	sleep 0.02
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
diag "approval propagation a -> b: $ms ms (from approve's return to b's state)"
is "$(gw_state gwb sim1:1-2)" authorized "b authorized the device"
num_cmp "$ms" -lt 1000 "within 1 s of the approval ($ms ms)"

run "$TC" import "$(gw_addr gwb)" sim1:1-2
like "$OUT" 'RESULT status=ST_OK' "a vhci host imports the device through b"

is "$(pg_sql "SELECT gateway FROM changes WHERE kind = 'approval' ORDER BY seq LIMIT 1")" \
    gw-a "the feed row names the writer, gw-a"
is "$(pg_sql "SELECT gateway FROM audit_log WHERE event = 'approve'")" gw-a \
    "the approve audit row names gw-a"
is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'state' AND new_state = 'authorized' AND gateway = 'gw-b' AND actor_name = 'gw-a'")" \
    1 "the state change is b's row, by the decision of gw-a"

# a busid nobody holds: still "not found", at a gateway on PostgreSQL too
gwctl gwa approve sim1:9-9
isnt "$RC" 0 "approve of a busid no gateway has: refused"
like "$ERR" "sim1:9-9" "naming it: $ERR"

for g in a b c; do stop_bg "gw$g" TERM; done
run "$USBGW" audit verify --database "$PG_URI" --key "$T/site.key"
is "$RC" 0 "audit verify: the one chain written by three gateways verifies ($(head -n 1 <<<"$OUT"))"
# a bad name is refused at start, naming the key and what is expected
printf 'gateway-name = gw/a\n' >"$T/bad.conf"
run "$USBGWD" -n -c "$T/bad.conf" -d "$PG_URI"
like "$RC $ERR" "^2 .*bad.conf:1: gateway-name: expected a gateway name \\(1-63 of" \
    "gateway-name = gw/a: refused with file:line ($ERR)"
: >"$T/empty.conf"
run "$USBGWD" -n -c "$T/empty.conf" -d "$PG_URI" -N "gw a"
like "$RC $ERR" '^2 .*gateway-name: expected a gateway name .*got "gw a"' \
    "usbgwd -N 'gw a': refused"
asan_clean "no sanitizer report (ASan build: every program of the test)"
done_testing
