#!/usr/bin/env bash
# The storage layer's unit tests on a real PostgreSQL (issue 16, item 6):
# build/tests/test_db runs its SQLite tests always and, with
# USBGW_PG_URI set, the same helper and batching tests, a new-schema test
# and a lost-connection test on PostgreSQL; build/tests/test_audit its
# chain (two writers, a flush inside the caller's transaction), actors,
# prune (and a forged prune checkpoint) and cost tests.  This script
# starts a private server (tests/lib/pg.sh: initdb in $T, a Unix socket
# only), points the unit tests at it, and checks that their PostgreSQL
# parts ran and passed (under ASan too, with the sanitized build).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
UNIT=$USBGW_BUILD/tests/test_db
AUNIT=$USBGW_BUILD/tests/test_audit
need_prog "$UNIT" "$AUNIT"
plan 10

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
like "$PG_URI" '^postgresql://[a-z]+@/usbgw\?host=/' "a Unix-socket URI: $PG_URI"
is "$(grep -E '^listen_addresses' "$T/pg/data/postgresql.conf")" \
    "listen_addresses = ''" "no TCP address configured"
is "$(ss -Htlnp 2>/dev/null | grep -c "pid=$(head -n 1 "$T/pg/data/postmaster.pid"),")" 0 \
    "the server listens on no TCP port"

# the unit test's own fixture lookup works from the tree's top
run -t 120 env USBGW_PG_URI="$PG_URI" "$UNIT"
is "$RC" 0 "test_db passes with PostgreSQL"
[ "$RC" = 0 ] || _diag_text "$(grep -E '^(not ok|#)' <<<"$OUT" | head -n 40)"
like "$OUT" "# PostgreSQL: postgresql://" "its PostgreSQL part ran"
num_cmp "$(grep -c '^ok' <<<"$OUT")" -ge 400 "and ran all its checks ($(grep -c '^ok' <<<"$OUT"))"

run -t 120 env USBGW_PG_URI="$PG_URI" "$AUNIT"
is "$RC" 0 "test_audit passes with PostgreSQL"
[ "$RC" = 0 ] || _diag_text "$(grep -E '^(not ok|#)' <<<"$OUT" | head -n 40)"
like "$OUT" "# PostgreSQL: postgresql://" "its PostgreSQL part ran"
num_cmp "$(grep -c '^ok' <<<"$OUT")" -ge 180 "and ran all its checks ($(grep -c '^ok' <<<"$OUT"))"
diag "$(grep 'audit cost' <<<"$OUT" | sed -n '1s/^# /SQLite: /p;2s/^# /PostgreSQL: /p')"
asan_clean "no sanitizer report"
done_testing
