#!/usr/bin/env bash
# The change feed carries every kind of decision (issue 16 item 2,
# protocol.md 4.3), and survives a lost LISTEN connection.  Three
# gateways on one PostgreSQL, b holds the simulator's exporter:
#   a rule added at c authorizes the pending device at b, its removal
#   makes it pending again; an approval at c and a revocation at c are
#   applied at b (a revoked device stays pending though approved
#   before); a deny at c blocks it at b;
#   b's listening connection cut (pg_terminate_backend): a rule added at
#   a still reaches b (the 1 s catch-up read), b LISTENs again, and a
#   later change arrives by notification again.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$SIM" "$USBGWD" "$USBGW"
plan 17

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
cat >"$T/sim.conf" <<'CONF'
device 1-2 { type storage; vendor 0x1234; product 0x5678; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)
for g in a b c; do
	gw_conf "gw$g" "poll-interval = 500ms" "audit-key = $T/site.key"
done
gw_start gwa -d "$PG_URI" -N gw-a || bail_out "gateway a did not start"
gw_start gwb -d "$PG_URI" -N gw-b || bail_out "gateway b did not start"
gw_start gwc -d "$PG_URI" -N gw-c || bail_out "gateway c did not start"
gwctl gwb exporter add sim1 "$SIMA"
# the exporter's lease decides which gateway holds the device: "b" below
# is that holder, "c" and "a" the two others (the feed told them of it)
B=
_held() {
	local g
	for g in a b c; do
		[ "$(gw_state "gw$g" sim1:1-2)" = pending ] && { B=$g; return 0; }
	done
	return 1
}
wait_for -t 20 _held
set -- $(printf '%s\n' a b c | grep -v "^$B\$")
C=$1 A=$2
is "$(gw_state "gw$B" sim1:1-2)" pending "the device is pending at its holder ($B; c is $C, a is $A)"

# rules at c
gwctl "gw$C" policy add "allow id 1234:5678" --json
is "$RC" 0 "a rule added at c"
id=$(jq -r .id <<<"$OUT" 2>/dev/null)
gw_wait_state "gw$B" sim1:1-2 authorized 3
is "$(gw_state "gw$B" sim1:1-2)" authorized "b applies it: authorized by the rule"
gwctl "gw$C" policy remove "$id"
is "$RC" 0 "the rule removed at c (id $id)"
gw_wait_state "gw$B" sim1:1-2 pending 3
is "$(gw_state "gw$B" sim1:1-2)" pending "b applies it: pending again"

# approval and revocation at c
gwctl "gw$C" approve sim1:1-2 -m "at c"
is "$RC" 0 "approved at c"
gw_wait_state "gw$B" sim1:1-2 authorized 3
is "$(gw_state "gw$B" sim1:1-2)" authorized "b: authorized by c's approval"
gwctl "gw$C" revoke sim1:1-2 -m "revoked at c"
is "$RC" 0 "revoked at c: $OUT$ERR"
gw_wait_state "gw$B" sim1:1-2 pending 3
is "$(gw_state "gw$B" sim1:1-2)" pending "b: pending after c's revocation"
gwctl "gw$B" show sim1:1-2 --json
is "$(jq -r '[.decisions.active[]?] | length' <<<"$OUT" 2>/dev/null)" 0 \
    "b holds no active approval of the device any more"
gwctl "gw$C" deny sim1:1-2 -m "denied at c"
gw_wait_state "gw$B" sim1:1-2 blocked 3
is "$(gw_state "gw$B" sim1:1-2)" blocked "b: blocked by c's denial"

# the listening connection cut: the catch-up read still brings changes
n=$(pg_sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'usbgwd/gw-$B/listen'")
is "$n" 1 "b's LISTEN connection terminated"
gwctl "gw$A" approve sim1:1-2 -m "after the cut"
t0=$(date +%s%N)
gw_wait_state "gw$B" sim1:1-2 authorized 5
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
diag "with the LISTEN connection cut: applied at b after $ms ms"
is "$(gw_state "gw$B" sim1:1-2)" authorized "b applies a's approval without its LISTEN connection"
wait_for -t 5 grep -q "listening connection was lost" "$T/gw$B.log"
like "$(cat "$T/gw$B.log")" "feed: the listening connection was lost" "b says its LISTEN connection was lost"
wait_for -t 5 test "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'usbgwd/gw-$B/listen'")" = 1
is "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'usbgwd/gw-$B/listen'")" 1 \
    "b LISTENs again"
gwctl "gw$A" revoke sim1:1-2
t0=$(date +%s%N)
gw_wait_state "gw$B" sim1:1-2 pending 5
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
diag "after the new LISTEN: a's revocation applied at b after $ms ms"
is "$(gw_state "gw$B" sim1:1-2)" pending "a revocation at a reaches b again"
asan_clean "no sanitizer report (ASan build: every program of the test)"
done_testing
