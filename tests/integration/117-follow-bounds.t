#!/usr/bin/env bash
# Follow subscriptions, their bounds and a hostile gateway (protocol.md
# 1.10.8; tests/tools/follow-peer.py plays either end byte by byte).
# At the gateway: a subscription gets the list (empty, then AUTHORIZED
# when `approve --to 127.0.0.1` and WITHDRAWN reason 1 on revoke) and
# the host's name; FOLLOW_PER_HOST (4) subscriptions per host, the fifth
# refused ST_NA with a follow-refused row; an unsolicited PONG closes the
# subscription with a malformed row; another version is refused ST_NA;
# stock DEVLIST answers unchanged meanwhile.  At usbgw-attach --follow:
# a gateway that sends a busid with '/', a sequence gap, a list longer
# than its count or a busid twice ends the subscription with a log line
# and nothing of it is imported; the one good list's busid is imported
# through the normal import (and refused there), nothing else ever is.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

PEER=$TOP/tests/tools/follow-peer.py
ATTACH=$USBGW_BUILD/usbgw-attach
VK=$USBGW_BUILD/vhci-kernel
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" "$ATTACH" "$VK" "$TC" python3 sqlite3
plan 22

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type sourcesink; serial "S11"; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw sim1:1-1 pending || bail_out "sim1:1-1 not pending"

# ---- the gateway's side -------------------------------------------------------------
start_bg s1 python3 "$PEER" sub "$GWA" --hold 30
wait_log s1 'msg LIST_END seq=2' 10
check $? "a subscription: the reply, then an empty list (nothing authorized)"
like "$(cat "$(bg_log s1)")" 'reply status=0 host=127.0.0.1 heartbeat=15' \
    "... the reply names the host as the gateway knows it (its address)"
gwctl gw approve sim1:1-1 --to 127.0.0.1
wait_log s1 'msg AUTHORIZED seq=3 busid=sim1:1-1' 10
check $? "approve --to 127.0.0.1: AUTHORIZED pushed at once"
gwctl gw revoke sim1:1-1
wait_log s1 'msg WITHDRAWN seq=4 busid=sim1:1-1 reason=1' 10
check $? "revoke: WITHDRAWN (not authorized)"
ok "stock DEVLIST still answers beside the subscription" "$TC" list "$GWA"

for i in 2 3 4; do
	start_bg s$i python3 "$PEER" sub "$GWA" --hold 30
	wait_log s$i 'msg LIST_END' 10 || bail_out "subscription $i failed"
done
run python3 "$PEER" sub "$GWA" --hold 1
is "$OUT" "reply status=1" "a fifth subscription of the same host: refused ST_NA"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'follow-refused'" 1
check $? "... with a follow-refused audit row"
stop_bg s4
wait_log gw 'follow: the host closed' 10
run python3 "$PEER" sub "$GWA" --hold 1
like "$OUT" 'reply status=0' "one ends: a new one is admitted"

stop_bg s3
wait_for -t 10 test "$(grep -c 'follow: the host closed' "$T/gw.log")" -ge 2
run python3 "$PEER" sub "$GWA" --hold 5 --pong-first
like "$OUT" 'closed' "an unsolicited PONG: the gateway closes the subscription"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'malformed' AND
    detail LIKE 'follow: malformed message: PONG without its PING%'" 1
check $? "... with a malformed audit row saying why"
run python3 "$PEER" sub "$GWA" --hold 1 --version 2
is "$OUT" "reply status=1" "another follow version: refused ST_NA"

# ---- a hostile gateway -----------------------------------------------------------------
K=$T/k
start_bg vk "$VK" -c 1 -n 2 -p "$T/att.pid" "$K"
wait_file "$K/ready" 10 vk || bail_out "vhci-kernel did not start"
EP=$(free_port)
start_bg evil python3 "$PEER" evil "$EP" badbusid,gap,overcount,dup,good
wait_log evil '^listening' 10 || bail_out "the hostile gateway did not start"
start_bg fol "$ATTACH" --follow -v -R "$K" "127.0.0.1:$EP"
wait_log fol 'malformed message: follow busid invalid' 15
check $? "a busid with '/': the subscription ends (malformed)"
wait_log fol 'malformed message: sequence number out of order' 15
check $? "a sequence gap: ended"
wait_log fol "malformed message: more devices than the list's count" 20
check $? "a list longer than its count: ended"
wait_log fol 'malformed message: a busid twice in the list' 30
check $? "a busid twice: ended"
wait_log evil '^import evil-1$' 40
check $? "the good list: its busid imported through the normal import"
is "$(grep '^import ' "$(bg_log evil)" | sort -u | tr '\n' ' ')" "import evil-1 " \
    "nothing but that busid was ever imported"
bg_alive fol
check $? "follow keeps running"
stop_bg fol
is "$RC" 0 "SIGTERM: exit 0"
stop_bg evil
for i in 1 2; do stop_bg s$i; done

gw_finish gw
done_testing
