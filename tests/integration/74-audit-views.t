#!/usr/bin/env bash
# Audit views that answer in one SELECT (issue 18 item 6), fed by the real
# daemon: v_refused_requests has every import a host asked for and did not
# get (an unknown busid, a blocked device, a pending one refused), with the
# asking host and the busid, so contrib/audit-queries.sql's
# access-unknown-busids and hosts-refused find them (before: the unknown
# busid's row named neither host nor busid, and the README's query
# returned nothing); v_storage_attachments has mass-storage attachments
# only, for a time range.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" sqlite3
plan 17

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type sourcesink; }
device 1-2 { type storage; }
device 1-3 { type keyboard; keys ""; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "host-names = no"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw sim1:1-3 pending 10 || bail_out "devices not pending"
gwctl gw deny sim1:1-3 -m "no keyboards"
gwctl gw approve sim1:1-2 --permanent
gwctl gw approve sim1:1-1 --permanent
gw_wait_state gw sim1:1-2 authorized 5

t0=$(date +%s)
run "$TC" import "$GWA" sim1:9-9
isnt "$RC" 0 "an unknown busid: refused"
run "$TC" import "$GWA" sim1:1-3
isnt "$RC" 0 "the denied keyboard: refused"
"$TC" import "$GWA" sim1:1-2 >/dev/null 2>&1	# storage: attached, then closed
"$TC" import "$GWA" sim1:1-1 >/dev/null 2>&1	# sourcesink: not storage
gw_wait_sql gw "SELECT count(*) FROM attachments WHERE ended_at IS NOT NULL" 2
check $? "two attachments made and ended"
t1=$(( $(date +%s) + 1 ))

q() { sqlite3 -cmd ".timeout 5000" "$(gw_db gw)" "$1"; }
gw_wait_sql gw "SELECT count(*) FROM v_refused_requests" 2
is "$(q "SELECT host || ' ' || busid || ' ' || why FROM v_refused_requests ORDER BY busid")" \
"127.0.0.1 sim1:1-3 device blocked
127.0.0.1 sim1:9-9 unknown busid" \
    "v_refused_requests: the asking host, the busid, why"

sql=$(awk '/^-- name: access-unknown-busids/{f=1;next} /^-- name:/{f=0} f && !/^--/' \
    "$(dirname "$0")/../../contrib/audit-queries.sql")
like "$(q "$sql")" '^127\.0\.0\.1\|1\|sim1:9-9\|' \
    "contrib query access-unknown-busids finds the host and its busid"
sql=$(awk '/^-- name: hosts-refused/{f=1;next} /^-- name:/{f=0} f && !/^--/' \
    "$(dirname "$0")/../../contrib/audit-queries.sql")
like "$(q "$(printf '%s' "$sql" | sed "s/:since/$t0/")")" \
    '^127\.0\.0\.1\|2\|2\|' "contrib query hosts-refused: 2 requests, 2 busids"

sql=$(awk '/^-- name: storage-attached-between/{f=1;next} /^-- name:/{f=0} f && !/^--/' \
    "$(dirname "$0")/../../contrib/audit-queries.sql")
out=$(q "$(printf '%s' "$sql" | sed "s/:from/$t0/; s/:to/$t1/")")
like "$out" '^sim1:1-2\|1209:0002\|' "storage-attached-between: the storage device"
is "$(printf '%s\n' "$out" | grep -c .)" 1 "... and only it (not the sourcesink)"
out=$(q "$(printf '%s' "$sql" | sed "s/:from/$((t0 - 7200))/; s/:to/$((t0 - 3600))/")")
is "$out" "" "... and nothing for an hour before"
is "$(q "SELECT count(*) FROM v_storage_attachments")" 1 "v_storage_attachments: one row"

# Their times are UTC text in columns that say so (issue 18 item 5),
# whatever the reader's zone.
qz() { TZ=Asia/Kolkata q "$1"; }
is "$(qz "SELECT count(*) FROM v_refused_requests WHERE at_utc BETWEEN
    datetime($t0, 'unixepoch') AND datetime($t1, 'unixepoch')")" 2 \
    "v_refused_requests.at_utc: UTC text within the test's window"
is "$(qz "SELECT count(*) FROM v_storage_attachments WHERE started_at_utc
    >= datetime($t0, 'unixepoch') AND ended_at_utc <= datetime($t1,
    'unixepoch') AND started_at_utc <= ended_at_utc")" 1 \
    "v_storage_attachments.started_at_utc/ended_at_utc: UTC text"
is "$(q "SELECT group_concat(name, ' ') FROM pragma_table_info('v_refused_requests')
    WHERE name IN ('at', 'at_utc')")" at_utc "v_refused_requests: at is named at_utc"
is "$(q "SELECT count(*) FROM audit_log WHERE event = 'import-unknown' AND host = '127.0.0.1' AND busid = 'sim1:9-9'")" 1 \
    "the import-unknown row names the host and the busid in their columns"
gw_finish gw
