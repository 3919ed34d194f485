#!/usr/bin/env bash
# Every column of an exporter that the gateways apply reaches the other
# gateway through the change feed (protocol.md 4.3; migration 14): two
# gateways on one PostgreSQL, an exporter added at a.  A kind or TLS
# change made at a (usbgw exporter import --replace) and a change of each
# applied column written to the store by any other writer (an operator's
# SQL: the feed is written by triggers so that no writer can forget it)
# -- tls, kind, source and file, host, port, name, removal -- shows in
# b's `usbgw exporter list --json` within 2 s.  The status columns the
# poller writes (status, last_seen, last_error, last_error_at) append no
# feed row; every other column, present or added later, does (checked
# column by column from information_schema in a rolled-back
# transaction); no feed trigger is limited to a column list.  Before
# migration 14 the exporters trigger fired only on name, host, port and
# removed_at: a TLS- or kind-only change never reached b.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$SIM" "$USBGWD" "$USBGW" jq
plan 28
BOUND_MS=2000

pg_gw_pair 3

# xfield GW NAME FIELD: FIELD of exporter NAME in GW's exporter list
# (jq's text: null for JSON null; nothing if GW has no such exporter).
xfield() {
	"$USBGW" -s "$(gw_sock "$1")" exporter list --json 2>/dev/null |
	    jq -r --arg n "$2" --arg f "$3" '.[] | select(.name == $n) | .[$f]'
}
_b_is() { [ "$(xfield gwb "$1" "$2")" = "$3" ]; }
# at_b NAME FIELD WANT DESC: b shows it within BOUND_MS (waits up to 8 s
# to say how long it took when it is late).
at_b() {
	local t0 ms rc
	t0=$(date +%s%N)
	wait_for -t 8 _b_is "$1" "$2" "$3"
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	if [ "$rc" = 0 ]; then
		num_cmp "$ms" -lt "$BOUND_MS" "$4: b shows $2 = $3 in $ms ms"
	else
		fail "$4: b shows $2 = $3 within $BOUND_MS ms (after 8 s: '$(xfield gwb "$1" "$2")')"
	fi
}
store() { pg_sql "$1" >/dev/null || diag "SQL failed: $1"; }

gwctl gwa exporter add sim1 "$SIMA"
is "$RC" 0 "usbgw exporter add sim1 at a"
at_b sim1 tls off "added at a"

# a's CLI: kind and TLS only (same name, host and port)
printf 'sim1 %s tls=required\n' "$SIMA" >"$T/imp1"
gwctl gwa exporter import --replace "$T/imp1"
is "$RC" 0 "a: exporter import --replace: sim1 tls=required"
at_b sim1 tls required "TLS changed by a's CLI"
printf 'sim1 %s agent\n' "$SIMA" >"$T/imp2"
gwctl gwa exporter import --replace "$T/imp2"
at_b sim1 kind agent "kind changed by a's CLI"

# every applied column, written alone by another writer
store "UPDATE exporters SET kind = 'usbip', tls = 'off' WHERE name = 'sim1'"
at_b sim1 kind usbip "kind (SQL)"
store "UPDATE exporters SET tls = 'required' WHERE name = 'sim1'"
at_b sim1 tls required "tls alone (SQL)"
store "UPDATE exporters SET source = 'file', origin = 'site.conf:7' WHERE name = 'sim1'"
at_b sim1 file site.conf:7 "source and origin (SQL)"
is "$(xfield gwb sim1 source)" file "... b's source is file"
store "UPDATE exporters SET host = '127.0.0.2' WHERE name = 'sim1'"
at_b sim1 host 127.0.0.2 "host (SQL)"
store "UPDATE exporters SET port = port + 1 WHERE name = 'sim1'"
at_b sim1 port $(( ${SIMA##*:} + 1 )) "port (SQL)"
store "UPDATE exporters SET name = 'sim2' WHERE name = 'sim1'"
at_b sim2 name sim2 "name (SQL)"
is "$(xfield gwb sim1 name)" "" "... the old name is gone at b"

# the poller's status columns are not in the feed
n0=$(pg_sql "SELECT count(*) FROM changes WHERE kind = 'exporter'")
store "UPDATE exporters SET status = 'down', last_seen = 1, last_error = 'x', last_error_at = 2 WHERE name = 'sim2'"
is "$(pg_sql "SELECT count(*) FROM changes WHERE kind = 'exporter'")" "$n0" \
    "status, last_seen, last_error, last_error_at: no feed row"

store "UPDATE exporters SET removed_at = 3 WHERE name = 'sim2'"
t0=$(date +%s%N)
wait_for -t 8 eval '[ -z "$(xfield gwb sim2 name)" ]'
check $? "removed (SQL): b drops it ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"

# The class: every column of exporters but id and the status columns
# appends a feed row when it alone changes; found from the catalog, so a
# column a later migration adds is covered (or this fails).
STATUS_COLS="id last_error last_error_at last_seen status"
want=$(pg_sql "SELECT string_agg(column_name, ' ' ORDER BY column_name)
    FROM information_schema.columns WHERE table_schema = current_schema()
    AND table_name = 'exporters' AND column_name NOT IN
    ('$(sed "s/ /','/g" <<<"$STATUS_COLS")')")
got=$(pg_sql "BEGIN;
CREATE TEMP TABLE fired (col TEXT, n BIGINT);
INSERT INTO exporters (name, host, port, created_at)
    VALUES ('probe', '192.0.2.1', 3240, 1);
DO \$\$
DECLARE
	c	RECORD;
	v	TEXT;
	pid	BIGINT;
	n0	BIGINT;
	n1	BIGINT;
BEGIN
	SELECT id INTO pid FROM exporters WHERE name = 'probe';
	FOR c IN SELECT column_name, data_type FROM information_schema.columns
	    WHERE table_schema = current_schema() AND table_name = 'exporters'
	    AND column_name != 'id' LOOP
		v := CASE c.column_name
		    WHEN 'kind' THEN quote_literal('agent')
		    WHEN 'tls' THEN quote_literal('required')
		    WHEN 'source' THEN quote_literal('file')
		    WHEN 'status' THEN quote_literal('down')
		    WHEN 'port' THEN '3241'
		    ELSE CASE WHEN c.data_type = 'bigint'
			THEN format('COALESCE(%I, 0) + 1', c.column_name)
			ELSE format('COALESCE(%I, '''') || ''x''', c.column_name)
		    END END;
		SELECT count(*) INTO n0 FROM changes;
		EXECUTE format('UPDATE exporters SET %I = %s WHERE id = %s',
		    c.column_name, v, pid);
		SELECT count(*) INTO n1 FROM changes;
		INSERT INTO fired VALUES (c.column_name, n1 - n0);
	END LOOP;
END \$\$;
SELECT string_agg(col, ' ' ORDER BY col) FROM fired WHERE n > 0;
ROLLBACK;")
is "$got" "$want" "every column but id and the status columns appends a feed row when it alone changes"
is "$(pg_sql "SELECT count(*) FROM pg_trigger WHERE tgfoid = 'usbgw_feed'::regproc AND tgattr::text != ''")" 0 \
    "no feed trigger (rules, approvals, settings, agents, exporters) is limited to a column list"
is "$(pg_sql "SELECT string_agg(DISTINCT c.relname, ' ' ORDER BY c.relname) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.tgfoid = 'usbgw_feed'::regproc AND (t.tgtype & 16) != 0")" \
    "agents approvals exporters rules settings" "every fed table has an UPDATE trigger"
num_cmp "$(pg_sql "SELECT max(version) FROM schema_version")" -ge 14 "schema version 14 or later"

# b's own writes are still in the feed for a: an exporter added at b
gwctl gwb exporter add sim3 "$SIMA"
t0=$(date +%s%N)
wait_for -t 8 eval '[ "$(xfield gwa sim3 name)" = sim3 ]'
check $? "an exporter added at b reaches a ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"

gw_finish gwa
gw_finish gwb
run "$USBGW" audit verify --database "$PG_URI" --key "$T/site.key"
is "$RC" 0 "audit verify passes ($(head -n 1 <<<"$OUT$ERR"))"
asan_clean "no sanitizer report (ASan build: every program of the test)"
done_testing
