#!/usr/bin/env bash
# Gateways started at the same instant on a fresh store (protocol.md 4.1
# "Start-up"): three usbgwd on one new PostgreSQL database, sharing one
# audit-key path that does not exist yet and declaring the same exporter
# (a simulator) in their files, launched together, five
# rounds (each on a dropped and created database and a fresh key path).
# Each round: all three are running and answer `usbgw status`; the key
# file is one key (every gateway logs the same public key), mode 0600,
# created by one of them (one audit-key row), and no temporary key file
# is left beside it; the schema is migrated once; no statement failed
# at the server (its log); `usbgw audit verify --database URI --key FILE` passes on the
# chain the three wrote.  Before the fix a loser of the key race exited
# ("cannot create it: File exists"; it could also have read the winner's
# half-written file); and schema_version was created
# ahead of the migration lock, where two CREATE TABLE IF NOT EXISTS at
# once can fail in PostgreSQL's catalog: "duplicate key value violates
# unique constraint pg_type_typname_nsp_index", and the gateway exits
# (seen here in one round of five, and in 8 of 100 pairs with psql).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/pg.sh"
. "$(dirname "$0")/../lib/lease.sh"
need_pg
need_prog "$USBGWD" "$USBGW"
ROUNDS=5
plan $((ROUNDS * 8 + 1))
LEASE_GWS="ga gb gc"

pg_start "$T/pg" || bail_out "PostgreSQL did not start"
cat >"$T/sim.conf" <<'CONF'
device 1-2 { type storage; }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)

fresh_db() {
	_pg_as "$PG_BIN/dropdb" -h "$PG_DIR" -U "$PG_USER" --if-exists usbgw &&
	    _pg_as "$PG_BIN/createdb" -h "$PG_DIR" -U "$PG_USER" usbgw
}

for r in $(seq 1 "$ROUNDS"); do
	fresh_db || bail_out "round $r: cannot make a fresh database"
	mkdir -p "$T/keys$r"
	KEY=$T/keys$r/site.key
	for g in $LEASE_GWS; do
		gw_conf "$g" "audit-key = $KEY" "lease-time = 3s" \
		    "poll-interval = 300ms" "exporter sim1 $SIMA"
		rm -f "$T/$g.log" "$T/$g.log.old"
	done
	log0=$(wc -l <"$PG_DIR/server.log")
	# the three launched back to back, nobody waited for
	for g in $LEASE_GWS; do lease_launch "$g"; done
	up=0 down=
	for g in $LEASE_GWS; do
		if lease_ready "$g" && bg_alive "$g" &&
		    "$USBGW" -s "$T/$g.sock" status >/dev/null 2>&1; then
			up=$((up + 1))
		else
			down="$down $g"
		fi
	done
	is "$up" 3 "round $r: the three gateways run and answer usbgw status"
	for g in $down; do
		diag "round $r: $g:"
		_diag_text "$(grep -E 'warn|error|fatal|audit key|database' "$T/$g.log" | tail -n 6)"
	done
	fprs=$(for g in $LEASE_GWS; do
		sed -n 's/.*audit key .*: public key \([0-9a-f]*\),.*/\1/p' "$T/$g.log"
	done | sort -u)
	is "$(wc -w <<<"$fprs" | tr -d ' ')" 1 "round $r: one key, every gateway uses it (${fprs//$'\n'/ })"
	is "$(stat -c %a "$KEY" 2>&1)" 600 "round $r: the key file is 0600"
	is "$(pg_sql "SELECT count(*) FROM audit_log WHERE event = 'audit-key'")/$(grep -l 'audit key .* created: rows from seq' "$T"/g?.log | wc -l)" \
	    "1/1" "round $r: one gateway created it (one audit-key row, one log line)"
	is "$(cd "$T/keys$r" && ls -A | grep -v -e '^site\.key$' -e '^site\.pub$' | tr '\n' ' ')" "" \
	    "round $r: no temporary file left beside the key"
	is "$(pg_sql "SELECT count(*) FROM schema_version")/$(grep -l 'migrated to schema version' "$T"/g?.log | wc -l)" \
	    "1/1" "round $r: one schema_version row, one gateway migrated"
	errs=$(tail -n +"$((log0 + 1))" "$PG_DIR/server.log" | grep -E 'ERROR|FATAL' | grep -v 'terminating connection' | head -n 3)
	is "$errs" "" "round $r: no statement failed at the server (a deadlock, a catalog race)"
	for g in $LEASE_GWS; do stop_bg "$g" TERM; done
	run "$USBGW" audit verify --database "$PG_URI" --key "$KEY"
	is "$RC" 0 "round $r: audit verify passes on the chain of the three ($(head -n 1 <<<"$OUT$ERR"))"
done
asan_clean "no sanitizer report (ASan build: every program of the test)"
done_testing
