#!/usr/bin/env bash
# usbgwd on PostgreSQL (issue 16, the interface tests rely on):
#   usbgwd -f -d postgresql://USER@/DB?host=DIR -s SOCK -l 127.0.0.1:PORT
# starts on a new database (created at schema version 10, migrated to
# the newest), `usbgw
# exporter add` and a simulator device reach pending, `usbgw approve`
# authorizes it, a vhci host (usbip-tc) imports it through the gateway,
# and every step is in PostgreSQL's tables and audit log (no SQLite file
# is made).  After the stop, `usbgw audit verify --database URI --key`
# verifies the chain on PostgreSQL, and a forged row there is found.  A
# second start on the same database migrates nothing and keeps the
# rules.  A server that is not there stops the start with a message
# naming the URI without its password.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON"
plan 30

pg_start "$T/pg" || bail_out "PostgreSQL did not start"

cat >"$T/sim.conf" <<'CONF'
device 1-2 { type storage; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

gw_conf gw "poll-interval = 500ms" "audit-key = $T/gw.key"
gw_start gw -d "$PG_URI" || bail_out "usbgwd did not start on PostgreSQL"
SCHEMA_V=$(sed -n 's/^-- @migration \([0-9]*\)$/\1/p' "$TOP/schema.sql" | sort -n | tail -n 1)
like "$(cat "$T/gw.log")" "database postgresql://$PG_USER@/usbgw\?host=[^ ]+ \(schema version $SCHEMA_V\)" \
    "usbgwd -d postgresql://...: it runs on PostgreSQL, schema version $SCHEMA_V (schema.sql's newest)"
is "$(pg_sql 'SELECT version FROM schema_version')" "$SCHEMA_V" "the version is in schema_version"
like "$(cat "$T/gw.log")" "migrated to schema version 10" \
    "a new database: created at version 10 (schema_pg.sql's first section), then migrated"
[ ! -e "$T/gw.db" ] && [ ! -e "$T/gw.db.lock" ]
check $? "no SQLite file and no lock file was made"

gwctl gw exporter add sim1 "$SIMA"
is "$RC" 0 "usbgw exporter add sim1"
gw_wait_state gw sim1:1-2 pending 20
is "$(gw_state gw sim1:1-2)" pending "the simulator's device is pending"
is "$(pg_sql "SELECT state FROM devices WHERE busid = 'sim1:1-2'")" pending \
    "... in PostgreSQL's devices table"
is "$(pg_sql "SELECT name || ' ' || status FROM exporters")" "sim1 up" \
    "the exporter row, up"

# refused while pending
run "$TC" import "$(gw_addr gw)" sim1:1-2
unlike "$OUT" 'RESULT status=ST_OK' "an import while pending is refused"

gwctl gw approve sim1:1-2 -m "pg test"
is "$RC" 0 "usbgw approve sim1:1-2"
gw_wait_state gw sim1:1-2 authorized
is "$(gw_state gw sim1:1-2)" authorized "authorized"
is "$(pg_sql "SELECT decision || ' ' || scope || ' ' || reason FROM approvals WHERE ended_at IS NULL")" \
    "allow once pg test" "the approval row in PostgreSQL"

run "$TC" import "$(gw_addr gw)" sim1:1-2
like "$OUT" 'RESULT status=ST_OK' "a vhci host imports the approved device through the gateway"
wait_for -t 10 test "$(pg_sql 'SELECT count(*) FROM attachments')" -ge 1
is "$(pg_sql 'SELECT count(*) FROM attachments')" 1 "the attachment row in PostgreSQL"

gwctl gw policy add "allow id 1234:5678" 
is "$RC" 0 "a policy rule added"
wait_for -t 10 test "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'approve'")" -ge 1
is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'approve'")" 1 \
    "the approval is in PostgreSQL's audit log"
gw_finish gw

nrows=$(pg_sql 'SELECT count(*) FROM audit_log')
num_cmp "$nrows" -ge 5 "audit rows written ($nrows)"
run "$USBGW" audit verify --database "$PG_URI" --key "$T/gw.key"
is "$RC" 0 "usbgw audit verify --database URI --key: the chain verifies on PostgreSQL"
like "$OUT" "intact" "it says so: $(head -n 1 <<<"$OUT")"

# a second start on the same database: nothing to migrate, rules kept
gw_start gw -d "$PG_URI" || bail_out "usbgwd did not start again"
unlike "$(cat "$T/gw.log")" "migrated to schema version" "a restart migrates nothing"
gwctl gw policy list
like "$OUT" "allow id 1234:5678" "the rule is still there"
stop_bg gw TERM

# a forged row on PostgreSQL is found (the trigger forbids UPDATE: drop it)
pg_sql "ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update; UPDATE audit_log SET reason = 'forged' WHERE event = 'approve'" >/dev/null
run "$USBGW" audit verify --database "$PG_URI" --key "$T/gw.key"
isnt "$RC" 0 "a changed row: verify fails"
like "$OUT$ERR" "does not match its hash" "naming why"

# no server there
run -t 30 "$USBGWD" -f -c "$T/gw.conf" \
    -d "postgresql://$PG_USER:s3cret@/usbgw?host=$T/nowhere&connect_timeout=2" \
    -s "$T/gw3.sock" -l 127.0.0.1:0 -p "$T/gw3.pid"
isnt "$RC" 0 "no PostgreSQL server: usbgwd does not start"
like "$ERR" "postgresql://$PG_USER@/usbgw\?host=$T/nowhere" "the message names the URI"
unlike "$ERR" "s3cret" "without the password"
asan_clean "no sanitizer report (ASan build: every program of the test)"
done_testing
