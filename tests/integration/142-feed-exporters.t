#!/usr/bin/env bash
# Exporters are shared state (issue 16 items 2 and 3, protocol.md 4.2-4.4):
# one added with `usbgw exporter add` at one gateway (no config file
# declares it) reaches the other through the change feed; when its lease
# holder is killed, the other takes the lease within the lease time and
# claims the device; removed at one gateway, it is gone at the other
# (its claims end there: fail closed).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$SIM" "$USBGWD" "$USBGW" jq
plan 10
LEASE_S=3

pg_gw_pair "$LEASE_S"

knows() { "$USBGW" -s "$(gw_sock "$1")" exporter list --json 2>/dev/null |
    jq -e '.[] | select(.name == "sim1")' >/dev/null; }

gwctl gwa exporter add sim1 "$SIMA"
is "$RC" 0 "usbgw exporter add sim1 at a"
t0=$(date +%s%N)
wait_for -t 10 knows gwb
check $? "b learns the exporter added at a ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"

H=
_held() {
	local g
	for g in a b; do
		[ "$(gw_state "gw$g" sim1:1-2)" = pending ] && { H=$g; return 0; }
	done
	return 1
}
wait_for -t 20 _held
check $? "one gateway holds sim1 and has its device pending (${H:-none})"
O=a; [ "$H" = a ] && O=b
is "$(gw_state "gw$O" sim1:1-2)" "" "the other ($O) does not list it"

# the holder killed: the other takes the lease and claims the device
stop_bg "gw$H" KILL
t0=$(date +%s%N)
wait_for -t $((LEASE_S + 10)) eval '[ "$(gw_state "gw$O" sim1:1-2)" = pending ]'
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
diag "takeover of a CLI-added exporter after SIGKILL: $ms ms (lease ${LEASE_S} s)"
check $rc "$O claims the device of the exporter added at a ($ms ms after the kill)"
num_cmp "$ms" -lt $(( (LEASE_S + 3) * 1000 )) "within the lease time + 3 s"

# the killed one back; the exporter removed at O: gone at H too
gw_start "gw$H" -d "$PG_URI" -N "gw-$H" || bail_out "gateway $H did not restart"
wait_for -t 10 knows "gw$H"
check $? "$H, restarted, has the exporter from the store"
gwctl "gw$O" exporter remove sim1
is "$RC" 0 "usbgw exporter remove sim1 at $O"
t0=$(date +%s%N)
wait_for -t 10 eval '! knows "gw$H"'
check $? "$H drops the exporter removed at $O ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
like "$(cat "$T/gw$H.log")" "exporter sim1: removed at another gateway" \
    "$H's log says why"
