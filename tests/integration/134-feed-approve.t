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
plan 21

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

# the exporter is added at b; the feed tells a and c (exporters are shared
# state), and its lease decides which one of the three claims it: H.
gwctl gwb exporter add sim1 "$SIMA"
is "$RC" 0 "usbgw exporter add sim1 at b"
H=
_held() {
	local g
	for g in a b c; do
		[ "$(gw_state "gw$g" sim1:1-2)" = pending ] && { H=$g; return 0; }
	done
	return 1
}
wait_for -t 20 _held
is "$(gw_state "gw$H" sim1:1-2)" pending "the device is pending at its holder ($H)"
# O: a gateway that does not hold it, which approves
O=a; [ "$H" = a ] && O=c
is "$(gw_state "gw$O" sim1:1-2)" "" "$O does not hold it"
gwctl "gw$O" exporter list --json
like "$OUT" '"name": *"sim1"' "$O knows the exporter added at b (the feed)"

run "$TC" import "$(gw_addr "gw$H")" sim1:1-2
unlike "$OUT" 'RESULT status=ST_OK' "an import at $H while pending is refused"

# approve at O: written to the store, applied at H by the feed
gwctl "gw$O" approve sim1:1-2 -m "approved at $O"
is "$RC" 0 "usbgw approve at $O (which does not hold the device): $OUT$ERR"
t0=$(date +%s%N)
until [ "$(gw_state "gw$H" sim1:1-2)" = authorized ]; do
	[ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 10000 ] && break
	sleep 0.02
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
diag "approval propagation $O -> $H: $ms ms (from approve's return to $H's state)"
is "$(gw_state "gw$H" sim1:1-2)" authorized "$H authorized the device"
num_cmp "$ms" -lt 1000 "within 1 s of the approval ($ms ms)"

run "$TC" import "$(gw_addr "gw$H")" sim1:1-2
like "$OUT" 'RESULT status=ST_OK' "a vhci host imports the device through $H"

is "$(pg_sql "SELECT gateway FROM changes WHERE kind = 'approval' ORDER BY seq LIMIT 1")" \
    "gw-$O" "the feed row names the writer, gw-$O"
is "$(pg_sql "SELECT gateway FROM audit_log WHERE event = 'approve'")" "gw-$O" \
    "the approve audit row names gw-$O"
is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'state' AND new_state = 'authorized' AND gateway = 'gw-$H' AND actor_name = 'gw-$O'")" \
    1 "the state change is $H's row, by the decision of gw-$O"

# a busid nobody holds: still "not found", at a gateway on PostgreSQL too
gwctl "gw$O" approve sim1:9-9
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
