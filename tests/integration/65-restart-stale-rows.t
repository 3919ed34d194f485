#!/bin/bash
# Rows a killed gateway left open (issue 12, item 6).  usbgwd is killed
# (SIGKILL) while a vhci host is attached through it (proxy mode) and
# another host's import is held as a waiting access request; one more
# device is unplugged while the gateway is down.  At the next start the
# gateway closes what the previous run left open: the attachment row
# (ended_at, end_reason), the waiting access request (outcome
# interrupted), and the presence of the device that did not come back
# (after two device lists without it), each with one audit row
# (event restart-closed) naming the row and the reason.  Presences of
# devices still plugged in continue (a --once approval still holds).
# A second restart closes nothing twice.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 25

cat >"$T/sim.conf" <<'EOF2'
device 1-1 { type storage; }
device 1-2 { type keyboard; keys ""; }
device 1-3 { type sourcesink; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)
gw_conf gw "exporter sim1 $SIMA" "poll-interval = 300ms" \
    "attach-pending-wait = 60s"
GW_LISTEN_PORT=$(free_port) || bail_out "no free port"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-3; do gw_wait_state gw sim1:$d pending; done
gwctl gw approve sim1:1-1
is "$RC" 0 "approve sim1:1-1 (once)"
gwctl gw approve sim1:1-3
is "$RC" 0 "approve sim1:1-3 (once)"

# an attachment, with some traffic, and a held access request
start_bg hold "$TC" hold "$GWA" sim1:1-1 --ready-file "$T/hold.ready"
wait_file "$T/hold.ready" 10 hold
check $? "a vhci host holds sim1:1-1 through the gateway"
gw_wait_state gw sim1:1-1 attached 5
start_bg asker "$TC" import "$GWA" sim1:1-2 -t 60000
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE outcome = 'waiting'" 1
is "$(gw_sql gw "SELECT count(*) FROM access_requests WHERE outcome = 'waiting'")" 1 \
    "the import of pending sim1:1-2 is held: one waiting access request"
gw_wait_sql gw "SELECT count(*) FROM attachments WHERE ended_at IS NULL" 1
is "$(gw_sql gw "SELECT count(*) FROM attachments WHERE ended_at IS NULL")" 1 \
    "one open attachment row before the crash"
att=$(gw_sql gw "SELECT id FROM attachments WHERE ended_at IS NULL")
req=$(gw_sql gw "SELECT id FROM access_requests WHERE outcome = 'waiting'")
gone=$(gw_sql gw "SELECT id FROM devices WHERE busid = 'sim1:1-3' AND state != 'gone'")

# ---- SIGKILL, and 1-3 unplugged while the gateway is down ------------------------
stop_bg gw KILL
is "$RC" 137 "usbgwd killed with SIGKILL"
# The vhci host and the asker see the connection close and exit by
# themselves: let them finish (under ASan their exit runs the leak
# check, and a SIGKILL in the middle of it leaves a stray report file:
# "Unable to get registers from thread").
wait_bg hold 10 || stop_bg hold KILL
wait_bg asker 10 || stop_bg asker KILL
sim_ctl sim unplug 1-3
is "$RC" 0 "sim1:1-3 unplugged while the gateway is down"
is "$(gw_sql gw "SELECT count(*) FROM attachments WHERE ended_at IS NULL") $(gw_sql gw "SELECT count(*) FROM access_requests WHERE outcome = 'waiting'")" \
    "1 1" "the killed run left the attachment and the access request open"

gw_start gw || bail_out "usbgwd did not restart"
gw_wait_state gw sim1:1-1 authorized 10
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'restart-closed' AND object = 'presence $gone'" 1 10
is "$(gw_sql gw "SELECT count(*) FROM attachments WHERE ended_at IS NULL")" 0 \
    "no attachment row left open"
like "$(gw_sql gw "SELECT end_reason FROM attachments WHERE id = $att")" \
    '^gateway restarted \(the previous run ended without closing it\)$' \
    "the attachment's end reason says why"
is "$(gw_sql gw "SELECT count(*) FROM access_requests WHERE outcome = 'waiting'")" 0 \
    "no access request left waiting"
is "$(gw_sql gw "SELECT outcome || ' ' || decided_by || ' ' || (decided_at IS NOT NULL) FROM access_requests WHERE id = $req")" \
    "interrupted system 1" "the access request is interrupted, by the system"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'restart-closed' AND object = 'attachment $att' AND busid = 'sim1:1-1' AND reason LIKE 'gateway restarted%'")" \
    1 "one audit row for the attachment"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'restart-closed' AND object = 'access-request $req' AND busid = 'sim1:1-2' AND reason LIKE 'gateway restarted%'")" \
    1 "one audit row for the access request"
is "$(gw_sql gw "SELECT state FROM devices WHERE id = $gone")" gone \
    "the device unplugged meanwhile is gone on record"
is "$(gw_sql gw "SELECT count(*) FROM presences WHERE device_id = $gone AND departed_at IS NULL")" 0 \
    "... and its presence is closed"
like "$(gw_sql gw "SELECT depart_reason FROM presences WHERE device_id = $gone ORDER BY id DESC LIMIT 1")" \
    'not at its exporter after the gateway restarted' "... with the reason"
is "$(gw_sql gw "SELECT count(*) FROM presences p JOIN devices d ON d.id = p.device_id WHERE p.departed_at IS NULL AND d.state = 'gone'")" \
    0 "no open presence of a device on record as gone"
is "$(gw_state gw sim1:1-1)" authorized \
    "the --once approval of the device that stayed plugged in still holds"
ok "audit verify" "$USBGW" -s "$(gw_sock gw)" audit verify

# ---- a second restart closes nothing twice --------------------------------------
n1=$(gw_audit_count gw restart-closed)
stop_bg gw KILL
gw_start gw || bail_out "usbgwd did not restart"
gw_wait_state gw sim1:1-1 authorized 10
wait_for -t 5 eval '[ "$(gw_audit_count gw daemon-start)" -ge 3 ]'
sleep 1		# two device lists (300 ms each): what would be closed is
is "$(gw_audit_count gw restart-closed)" "$n1" "nothing closed twice"
is "$(gw_sql gw "SELECT count(*) FROM attachments WHERE ended_at IS NULL")" 0 \
    "still no open attachment"
gw_finish gw
done_testing
