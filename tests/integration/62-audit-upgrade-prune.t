#!/usr/bin/env bash
# The keyed audit chain over a database from before keys, and across a
# prune (issue 12, item 7).  A log whose rows carry no MAC and no key
# file (as an older usbgwd left it) is upgraded: the key is created, its
# chain starts at the next row, the old rows verify by hash and the
# upgrade is not reported as tampering.  An old row edited and every
# later row re-chained is still found with the key (the first keyed row
# covers its predecessor).  A prune keeps the log verifiable, is signed
# by a checkpoint, and an anchor older than the kept rows is reported as
# not checkable, not as intact-and-checked.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
FORGE=$USBGW_BUILD/audit-forge
need_prog "$USBGWD" "$USBGW" "$FORGE" "$EJSON" sqlite3
plan 26

gw_conf gw "poll-interval = 1s" "audit-retention = 0"
gw_start gw || bail_out "usbgwd did not start"
for i in 1 2; do gwctl gw policy add "block id dead:000$i"; done
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'policy-add'" 2
gw_finish gw

# ---- what an older usbgwd left: no MACs, no checkpoints, no key ------------------
"$FORGE" "$T/gw.db" strip
"$FORGE" "$T/gw.db" edit "DELETE FROM audit_checkpoints"
rm -f "$T/gw.db.key" "$T/gw.db.pub"
old=$(gw_sql gw "SELECT max(seq) FROM audit_log")
gw_start gw || bail_out "usbgwd did not start on the old log"
wait_log gw "audit key $T/gw.db.key created: rows from seq $((old + 1)) on carry its MAC" 10
check $? "a new key is created; its chain starts at seq $((old + 1))"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'audit-key'" 2
is "$(gw_sql gw "SELECT max(seq) FROM audit_log WHERE event = 'audit-key'")" "$((old + 1))" \
    "... and the first keyed row says so (audit-key)"
gwctl gw audit verify --json
like "$OUT" '"ok": *true' "the upgraded log verifies: an upgrade is not tampering"
like "$OUT" '"keyed": *true' "... with the key"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE mac IS NULL")" "$old" \
    "... the $old old rows have no MAC, every new one has"
gwctl gw audit anchor -o "$T/before-prune"
is "$RC" 0 "an anchor before the prune"
gwctl gw policy add "block id dead:0003"	# rows after the anchor
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'policy-add'" 3
gwctl gw audit pubkey
printf '%s\n' "$OUT" >"$T/pub.pem"

# ---- a prune ------------------------------------------------------------------------
sleep 1.1	# every row so far is from an earlier second than the cut-off
gwctl gw audit prune --before "@$(date +%s)"
is "$RC" 0 "audit prune --before now (audit-retention 0)"
gwctl gw audit verify --anchor "$T/before-prune"
is "$RC" 0 "the pruned log verifies through the daemon"
like "$OUT" "intact" "... intact"
gw_finish gw
verify() { run "$USBGW" audit verify --database "$T/$1" "${@:2}"; }
verify gw.db --anchor "$T/before-prune" --pubkey "$T/pub.pem"
is "$RC" 0 "... and here with the public key (the prune was checkpointed)"
like "$OUT" "some anchors are older than the first kept row \\(pruned\\) and were not checked" \
    "... saying the anchor from before the prune could not be checked"
verify gw.db --key "$T/gw.db.key"
is "$RC" 0 "... and with the key"

# ---- an old row rewritten, re-chained (before the prune: a fresh copy) -------------
gw_start gw2 || bail_out "usbgwd gw2 did not start"
gwctl gw2 policy add "block id dead:0001"
gw_wait_sql gw2 "SELECT count(*) FROM audit_log WHERE event = 'policy-add'" 1
gw_finish gw2
"$FORGE" "$T/gw2.db" strip
"$FORGE" "$T/gw2.db" edit "DELETE FROM audit_checkpoints"
rm -f "$T/gw2.db.key"
old=$(gw_sql gw2 "SELECT max(seq) FROM audit_log")
gw_start gw2 || bail_out "usbgwd gw2 did not restart"
gw_finish gw2
X=$(gw_sql gw2 "SELECT seq FROM audit_log WHERE event = 'policy-add'")
"$FORGE" "$T/gw2.db" edit "UPDATE audit_log SET actor_name = 'mallory' WHERE seq = $X"
"$FORGE" "$T/gw2.db" rechain "$X"
verify gw2.db --key "$T/gw2.db.key"
is "$RC" 1 "an old (unkeyed) row rewritten and re-chained: found with the key"
like "$OUT" "seq $((old + 1)): its MAC does not match" \
    "... at the first keyed row, whose MAC covers the old chain"
done_testing
