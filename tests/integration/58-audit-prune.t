#!/usr/bin/env bash
# usbgw audit prune (issue 12, item 9).  A cut-off later than now would
# delete every row, the newest included: refused (exit 2), nothing
# deleted.  Rows younger than audit-retention (default 30d) are kept: a
# cut-off inside it is refused (exit 1, a "refused" audit row) naming the
# latest one allowed; one at the edge is taken.  With audit-retention = 0
# (a SIGHUP applies it) a prune up to now removes every older row, and
# its own checkpoint row stays, the chain verifying.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
need_prog "$USBGWD" "$USBGW" "$EJSON" sqlite3 date
plan 24

rows() { gw_sql gw "SELECT count(*) FROM audit_log"; }

gw_conf gw "poll-interval = 1s"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'daemon-start'" 1
n0=$(rows)

# ---- a cut-off in the future ------------------------------------------------------
gwctl gw audit prune --before "$(date -d '+1 hour' +%Y-%m-%dT%H:%M:%S)"
is "$RC" 2 "audit prune --before an hour from now: refused as a bad time (exit 2)"
like "$ERR" 'before [0-9-]+T[0-9:]+Z is later than now \([0-9-]+T[0-9:]+Z\): expected a time no later than now' \
    "... naming the time, now, and what was expected"
is "$(rows)" "$n0" "... and no row is deleted"
gwctl gw audit prune --before "@$(( $(date +%s) + 86400 * 365 ))"
is "$RC" 2 "a year from now (@unix-seconds): refused too"

# ---- inside the retention (default 30d) --------------------------------------------
gwctl gw audit prune --before 1d
is "$RC" 1 "audit prune --before 1d (a day ago), audit-retention 30d: refused (exit 1)"
like "$ERR" 'would delete rows younger than audit-retention \(30d\): expected a time no later than [0-9-]+T[0-9:]+Z' \
    "... naming the retention and the latest cut-off allowed"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'refused' AND detail LIKE 'audit.prune: before %'" 1
is "$(gw_audit_count gw refused "detail LIKE 'audit.prune: before %'")" 1 \
    "... and the refusal is audited"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'audit-prune'")" 0 \
    "... no prune happened"
gwctl gw audit prune --before 29d
is "$RC" 1 "--before 29d: refused as well"
gwctl gw audit prune --before 30d
is "$RC" 0 "--before 30d (the retention's edge): allowed"
like "$OUT" '^deleted 0 audit rows older than ' "... and deletes nothing (every row is younger)"
gwctl gw audit verify --json
like "$OUT" '"ok": *true' "the chain verifies"

# ---- audit-retention = 0, by SIGHUP: up to now ------------------------------------
gw_conf gw "poll-interval = 1s" "audit-retention = 0"
kill -HUP "$(bg_pid gw)"
wait_log gw 'SIGHUP: reloading configuration' 10
sleep 1.2			# every row so far is from an earlier second
n1=$(rows)
cut=$(date +%s)
gwctl gw audit prune --before "@$(( cut + 60 ))"
is "$RC" 2 "audit-retention 0: a cut-off in the future is still refused"
gwctl gw audit prune --before "@$cut"
is "$RC" 0 "audit-retention 0: audit prune --before now"
like "$OUT" "^deleted $n1 audit rows older than " "... deletes every row so far ($n1)"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'audit-prune'" 2
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE ts < $cut")" 0 \
    "no row older than the cut-off is left"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'audit-prune' ORDER BY seq DESC LIMIT 1")" \
    "^through_seq=[0-9]+ last_hash=[0-9a-f]{64} rows=$n1 before=$cut\$" \
    "the prune's own checkpoint row is kept, naming what it removed"
gwctl gw audit verify --json
like "$OUT" '"ok": *true' "the chain still verifies from the checkpoint"

# ---- bad values of audit-retention -------------------------------------------------
printf 'audit-retention = soon\naudit-retention = 1500ms\n' >"$T/bad.conf"
run "$USBGWD" -n -c "$T/bad.conf"
is "$RC" 2 "usbgwd -n: a bad audit-retention is a configuration error"
like "$ERR" 'bad.conf:1: audit-retention: expected a duration like 30s, 10m, 2h or 90d, got "soon"' \
    "... naming what was expected"
like "$ERR" 'bad.conf:2: audit-retention: expected whole seconds, got "1500ms"' \
    "... and a part of a second is refused"
gw_finish gw
done_testing
