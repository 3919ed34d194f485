#!/usr/bin/env bash
# One schema, two back ends (issue 16, item 1): schema.sql (SQLite) and
# gateway/db/schema_pg.sql (PostgreSQL) describe the same tables and views.
# Both databases are made as usbgwd makes them (db_open: created and
# migrated); tests/tools/db-schema.c compares every table's and view's
# columns (names, order, coarse type), then fills both with the same rows
# through db.h and runs every query of contrib/audit-queries.sql on each:
# the answers must be the same, row for row (durations counted from
# "now" masked, ties sorted).  A column dropped on one side is caught.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
DBS=$USBGW_BUILD/db-schema
need_prog "$DBS"
plan 14

pg_start "$T/pg" || bail_out "PostgreSQL did not start"

run "$DBS" compare "$T/a.db" "$PG_URI"
is "$RC" 0 "the schemas match"
like "$OUT" '^([0-9]+) columns in SQLite, \1 in PostgreSQL, 0 differences' \
    "column for column: $(tail -n 1 <<<"$OUT")"
num_cmp "$(grep -Eo '^[0-9]+' <<<"$OUT")" -ge 300 "every table and view counted"
[ "$RC" = 0 ] || _diag_text "$OUT$ERR"

run "$DBS" dump "$PG_URI"
like "$OUT" 'view v_storage_attachments bytes_to_device integer' \
    "views are compared too (v_storage_attachments)"

# the answers of every audit query, row for row
pg_sql "DROP SCHEMA public CASCADE; CREATE SCHEMA public" >/dev/null 2>&1
run "$DBS" queries -f "$T/q.db" "$TOP/contrib/audit-queries.sql"
is "$RC" 0 "every audit query runs on SQLite"
lite=$OUT
run "$DBS" queries -f "$PG_URI" "$TOP/contrib/audit-queries.sql"
is "$RC" 0 "every audit query runs on PostgreSQL"
[ "$RC" = 0 ] || _diag_text "$(grep -v '^row' <<<"$OUT$ERR")"
pg=$OUT
nq=$(grep -Ec '^ok ' <<<"$pg")
is "$nq" "$(grep -c -- '^-- name:' "$TOP/contrib/audit-queries.sql")" \
    "all $nq queries of the file"
num_cmp "$(grep -c '^row ' <<<"$pg")" -ge 20 "they return rows ($(grep -c '^row ' <<<"$pg"))"
norm() { sed -E 's/\|[0-9]{8,10}(\||$)/|SECONDS\1/g' | sort; }
diff <(norm <<<"$lite") <(norm <<<"$pg") >"$T/answers.diff"
is "$?" 0 "the same answers on both"
[ -s "$T/answers.diff" ] && _diag_text "$(head -n 20 "$T/answers.diff")"

# a drifted schema is caught
pg_sql "DROP VIEW v_storage_attachments; DROP VIEW v_attachment_traffic; ALTER TABLE attachments DROP COLUMN up_cert" >/dev/null
run "$DBS" compare "$T/a.db" "$PG_URI"
is "$RC" 1 "a column missing on PostgreSQL is a difference"
like "$OUT" 'attachments.up_cert' "naming it"
# another type in the column's own place (a column added back would go
# last, after the ones later migrations added)
pg_sql "DROP SCHEMA public CASCADE; CREATE SCHEMA public" >/dev/null 2>&1
run "$DBS" compare "$T/a.db" "$PG_URI"
is "$RC" 0 "made again: no difference"
pg_sql "DROP VIEW v_storage_attachments; DROP VIEW v_attachment_traffic; ALTER TABLE attachments ALTER COLUMN up_cert TYPE BIGINT USING NULL" >/dev/null
run "$DBS" compare "$T/a.db" "$PG_URI"
like "$OUT" 'differ: SQLite table attachments.up_cert text, PostgreSQL table attachments.up_cert integer' \
    "so is a column of another type"
asan_clean "no sanitizer report (ASan build: every program of the test)"
done_testing
