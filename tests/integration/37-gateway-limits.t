#!/usr/bin/env bash
# What an unauthenticated peer can cost is bounded per address: requests
# the gateway refuses or holds write at most audit-limit-per-host rows a
# minute (the rest are still refused; an access request past the budget
# is neither announced nor held), and one audit-suppressed row counts
# what was held back; at most max-sessions-per-host connections from one
# address wait in the request phase, while attachments do not count.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$USBGWD" "$USBGW" "$SIM" "$TC" sqlite3
plan 20

sim_start sim || bail_out "simulator did not start"
gw_conf gw "exporter sim 127.0.0.1:$(sim_port sim)" "poll-interval = 300ms" \
    "audit-limit-per-host = 5" "max-sessions-per-host = 3" \
    "attach-pending-wait = 5s" \
    "hook access-request sh -c 'echo x >>\"$T/hook.out\"'"
gw_start gw || bail_out "usbgwd did not start"
P=$(gw_port gw)
gw_wait_state gw sim:1-2 pending || bail_out "sim:1-2 did not become pending"
gwctl gw approve sim:1-5
is "$RC" 0 "approve sim:1-5 (for the attachment below)"

# ---- audit rows: 5 a minute from 127.0.0.1 ------------------------------------
st=
for i in 1 2 3; do st+="$(usbip_import_status "$P" nosuch:$i) "; done
is "$st" "4 4 4 " "three imports of unknown busids: ST_NODEV"
# two access requests fit in the budget; they are held (attach-pending)
# until withdrawn, so send them on connections of their own and close
usbip_open 5 "$P" && usbip_send_import 5 sim:1-2
usbip_open 6 "$P" && usbip_send_import 6 sim:1-2
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'access-request'" 2
is "$(gw_audit_count gw access-request)" 2 "two access requests audited"
st=$(usbip_import_status "$P" sim:1-2)
is "$st" 1 "the third, over the budget: ST_NA at once, not held"
for i in 1 2 3 4 5 6; do st+=" $(usbip_import_status "$P" nosuch:x$i)"; done
like "$st" '^1 4 4 4 4 4 4$' "six more unknown imports: still refused"
usbip_close 5
usbip_close 6
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE outcome = 'withdrawn'" 2
is "$(gw_sql gw "SELECT group_concat(outcome) FROM access_requests")" \
    "withdrawn,withdrawn" "held requests whose host gave up: withdrawn at once"
is "$(gw_audit_count gw import-unknown)" 3 "only the first 3 import-unknown rows written"
is "$(gw_audit_count gw access-request)" 2 "and 2 access-request rows"
is "$(gw_sql gw "SELECT count(*) FROM access_requests")" 2 \
    "two access_requests rows"
wait_for -t 5 test -s "$T/hook.out"
sleep 0.5
is "$(wc -l <"$T/hook.out")" 2 "the access-request hook ran twice, not three times"

# ---- sessions: 3 at once in the request phase from one address --------------------
start_bg hold "$TC" hold "127.0.0.1:$P" sim:1-5 --ready-file "$T/hold.ready"
wait_file "$T/hold.ready" 10 hold
check $? "an attachment from 127.0.0.1 (sim:1-5)"
usbip_open 5 "$P"
usbip_open 6 "$P"
usbip_open 7 "$P"
sleep 0.3
run "$TC" list "127.0.0.1:$P"
isnt "$RC" 0 "a fourth connection in the request phase is refused"
usbip_close 5
sleep 0.3
ok "with one of the three gone, a device list is sent" "$TC" list "127.0.0.1:$P"
like "$OUT" 'sim:1-5' "the list shows the approved device"
usbip_close 6
usbip_close 7
bg_alive hold
check $? "the attachment was never counted against the limit"
stop_bg hold

# ---- the summary row ----------------------------------------------------------------
# (a minute would end the window; a clean stop writes what is held back)
gw_finish gw
row=$(gw_sql gw "SELECT object || ' | ' || detail FROM audit_log WHERE event = 'audit-suppressed'")
like "$row" '^127\.0\.0\.1 \| in [0-9]+ s, not written one by one: 6 import-unknown, 1 access-request; 1 connections refused \(max-sessions-per-host\) \(limits: 5 rows a minute from one address, 600 from all\)$' \
    "one audit-suppressed row counts what was held back, by kind"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'audit-suppressed'")" 1 \
    "one row for the address"
done_testing
