#!/usr/bin/env bash
# tls-listen's bounds: connections in their handshake count against
# max-sessions-per-host (a third from the same address is closed at
# once while two are pending), and the op-phase deadline runs from
# accept: a peer that sends nothing, and one that starts a handshake and
# stops, are both cut after 10 s with a tls-refused row each.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$USBGWD" "$USBGW" sqlite3 timeout
plan 10

sim_start sim || bail_out "simulator did not start"
TLSP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "host-names = no" \
    "tls-listen = 127.0.0.1:$TLSP" "max-sessions-per-host = 2"
gw_start gw || bail_out "usbgwd did not start"
wait_port "$TLSP" 10 || bail_out "no TLS listener on $TLSP"

# two connections that never finish a handshake: one silent, one that
# sends the start of a TLS record (0x16 0x03 0x01) and stops
exec 3<>"/dev/tcp/127.0.0.1/$TLSP" || bail_out "cannot connect"
exec 4<>"/dev/tcp/127.0.0.1/$TLSP" || bail_out "cannot connect"
printf '\026\003\001' >&4
START=$SECONDS
wait_log gw 'TLS connection, handshake' 5
sleep 0.5

# a third from the same address: closed at once (2 requests in progress)
T0=$(date +%s%N)
run timeout 5 bash -c "exec 5<>/dev/tcp/127.0.0.1/$TLSP && cat <&5"
T1=$(date +%s%N)
is "$RC" 0 "a third connection from 127.0.0.1 is closed by the gateway (EOF)"
num_cmp $(( (T1 - T0) / 1000000 )) -lt 2000 "... at once, not after a deadline"
like "$(cat "$T/gw.log")" 'refused: 2 requests in progress from 127.0.0.1' \
    "... logged: two requests (handshakes) in progress"

# the deadline: 10 s from accept
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused'" 2 15
check $? "both pending connections refused with a tls-refused row"
num_cmp $((SECONDS - START)) -ge 9 "... not before the op-phase deadline (10 s)"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused' AND
    detail = 'nothing sent in time (op-phase deadline)'")" 1 "the silent one: nothing sent in time"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'tls-refused' AND
    detail = 'no TLS handshake in time (op-phase deadline)'")" 1 \
    "the one that started a record: no TLS handshake in time"
exec 3>&- 4>&-

gw_finish gw
done_testing
