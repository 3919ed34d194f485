#!/usr/bin/env bash
# One audit chain written by three gateways at once (issue 16 item 4,
# protocol.md 4.5): three gateways on one PostgreSQL with the site's
# audit key, each adding and removing rules from its own control socket
# at the same time (every rule write also enters the change feed, under
# the same write lock).  Afterwards: every row names its gateway, the
# chain has no gap and `usbgw audit verify --database URI --key` passes;
# the feed's rows are in seq order of commit (no seq is read before a
# smaller one commits: every gateway applied every other's rules); a
# row whose gateway was changed fails verification (the name is hashed).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
need_pg
need_prog "$USBGWD" "$USBGW"
plan 10

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
for g in a b c; do
	gw_conf "gw$g" "audit-key = $T/site.key"
done
gw_start gwa -d "$PG_URI" -N gw-a || bail_out "gateway a did not start"
gw_start gwb -d "$PG_URI" -N gw-b || bail_out "gateway b did not start"
gw_start gwc -d "$PG_URI" -N gw-c || bail_out "gateway c did not start"

N=15
writer() {
	local g=$1 i
	for i in $(seq 1 "$N"); do
		"$USBGW" -s "$T/gw$g.sock" policy add \
		    "block id $g$g$g$g:$(printf '%04x' "$i")" \
		    -c "from $g" >/dev/null 2>>"$T/writer.$g.err" ||
		    echo "add $i failed" >>"$T/writer.$g.err"
	done
}
writer a & pa=$!
writer b & pb=$!
writer c & pc=$!
wait $pa $pb $pc
is "$(cat "$T"/writer.*.err 2>/dev/null)" "" "45 rule adds at three gateways at once, none refused"

is "$(pg_sql "SELECT count(*) FROM rules WHERE removed_at IS NULL")" $((3 * N)) \
    "the store holds the 45 rules"
# every gateway applies the others' rules (the feed read them in order)
for g in a b c; do
	wait_for -t 5 sh -c "\"$USBGW\" -s \"$T/gw$g.sock\" policy list | grep -c '^ *[0-9].*block id' | grep -qx $((3 * N))"
done
n=0
for g in a b c; do
	gwctl "gw$g" policy list
	[ "$(grep -c 'block id' <<<"$OUT")" = $((3 * N)) ] && n=$((n + 1))
done
is "$n" 3 "each gateway's policy holds all 45 rules"

is "$(pg_sql "SELECT string_agg(DISTINCT gateway, ' ' ORDER BY gateway) FROM audit_log WHERE event = 'policy-add'")" \
    "gw-a gw-b gw-c" "the policy-add audit rows name the three gateways"
is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'policy-add' AND gateway IS NULL")" 0 \
    "no row without its gateway"
is "$(pg_sql "SELECT max(seq) - min(seq) + 1 - count(*) FROM audit_log")" 0 \
    "the chain has no gap"
is "$(pg_sql "SELECT count(DISTINCT ref) || ' ' || count(*) FILTER (WHERE gateway IS NULL) FROM changes WHERE kind = 'rule'")" \
    "$((3 * N)) 0" "the feed names the 45 rules, each change with its writer"

for g in a b c; do stop_bg "gw$g" TERM; done
run "$USBGW" audit verify --database "$PG_URI" --key "$T/site.key"
is "$RC" 0 "audit verify with the site key: the chain of three writers is intact ($(head -n 1 <<<"$OUT"))"

# the gateway is part of the row's hash
pg_sql "ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update; UPDATE audit_log SET gateway = 'gw-x' WHERE seq = (SELECT min(seq) FROM audit_log WHERE gateway = 'gw-b')" >/dev/null
run "$USBGW" audit verify --database "$PG_URI" --key "$T/site.key"
isnt "$RC" 0 "a row whose gateway was changed: verify fails"
asan_clean "no sanitizer report (ASan build: every program of the test)"
done_testing
