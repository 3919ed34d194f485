#!/usr/bin/env bash
# usbgw policy import: a USBGuard rules.conf is mapped line by line; every
# line that does not map is reported with its number and reason, and
# nothing is imported unless --partial.  Imported rules decide at once.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
need_prog "$USBGWD" "$USBGW" "$SIM"
plan 40

sim_start sim || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 500ms" \
    "audit-retention = 0"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-5 pending || { gw_diag gw; bail_out "no pending device"; }

cat >"$T/rules.conf" <<'RULES'
# written by usbguard generate-policy, then edited
allow id 1209:0005 serial "SIM-1-5" name "Simulated Source/Sink"
allow with-connect-type "hotplug"
block with-interface one-of { 08:*:* 06:*:* }
allow id zzz
RULES
gwctl gw policy import "$T/rules.conf"
is "$RC" 2 "an import with unmappable lines fails (usage)"
like "$ERR" "rules.conf:3: not imported: .*with-connect-type" "line 3 reported with its reason"
like "$ERR" "rules.conf:5: not imported: column 10: expected vid:pid" "line 5 reported with the parser's error"
gwctl gw policy list --json
is "$OUT" "[]" "nothing was imported"

gwctl gw policy import --partial "$T/rules.conf"
is "$RC" 0 "--partial imports the lines that map"
like "$OUT" "imported 2 rules" "two rules imported"
gwctl gw policy list
like "$OUT" 'allow id 1209:0005 name "Simulated Source/Sink" serial "SIM-1-5"' "the allow rule is listed in canonical form (attributes in order)"
like "$OUT" 'block with-interface one-of \{ 08:\*:\* 06:\*:\* \}' "the block rule is listed"
gw_wait_state gw sim1:1-5 authorized 5
is "$(gw_state gw sim1:1-5)" authorized "the imported allow rule decides the pending device at once"
gw_wait_state gw sim1:1-2 blocked 5
is "$(gw_state gw sim1:1-2)" blocked "the imported block rule blocks the mass-storage device"

# --- the rest of the policy commands, against the daemon -------------------
gwctl gw policy insert 1 'allow id 1209:0002' -c "storage first"
is "$RC" 0 "policy insert 1 (human output)"
gwctl gw policy list --json
is "$("$EJSON" get rule position=1 <<<"$OUT")" "allow id 1209:0002" "the inserted rule is at position 1"
id=$("$EJSON" get id position=1 <<<"$OUT")
gw_wait_state gw sim1:1-2 authorized 5
is "$(gw_state gw sim1:1-2)" authorized "a rule inserted before the block rule decides at once"
gwctl gw policy list --json
nrules=$("$EJSON" count <<<"$OUT")
gwctl gw policy move "$id" 99
is "$RC" 0 "policy move ID 99 (past the end: $nrules rules)"
like "$OUT" "^moved rule $id to position $nrules, not 99 \\($nrules rules; past the end: moved last\\)" \
    "... says where it went and why"
gwctl gw policy list --json
is "$("$EJSON" get id position="$nrules" <<<"$OUT")" "$id" "... and it is last"
gwctl gw audit --json
like "$OUT" "rule $id to $nrules \\(asked 99\\)" "... the audit row says so too"
gwctl gw policy move "$id" 3
is "$RC" 0 "policy move ID 3"
is "$OUT" "moved rule $id to position 3" "... said plainly when it is where asked"
gwctl gw policy list --json
is "$("$EJSON" get id position=3 <<<"$OUT")" "$id" "the rule is now third"
gw_wait_state gw sim1:1-2 blocked 5
is "$(gw_state gw sim1:1-2)" blocked "a move re-decides at once: the block rule now comes first"
# a database writer changes the rules behind the daemon: apply reads them
sqlite3 -cmd ".timeout 5000" "$T/gw.db" "UPDATE rules SET position = position + 1 WHERE position IS NOT NULL AND position < 3; UPDATE rules SET position = 1 WHERE id = $id"
is "$?" 0 "a database writer moves the allow rule first"
gwctl gw policy apply --json
is "$RC" 0 "policy apply --json"
like "$OUT" '"busid": *"sim1:1-2"' "apply reports the device it changed"
like "$OUT" '"to": *"authorized"' "...which the moved allow rule now authorizes"
is "$(gw_state gw sim1:1-2)" authorized "after apply the device is authorized"
# the rows so far must be older than the cut-off: a fast run writes them
# all within the second that "now" names, and then nothing is older
t=$(date +%s)
while [ "$(date +%s)" -le "$t" ]; do sleep 0.1; done
gwctl gw audit prune --before "@$(date +%s)"
is "$RC" 0 "audit prune --before now (audit-retention 0: every older row)"
gwctl gw audit verify --json
like "$OUT" '"ok": *true' "the chain still verifies after the prune"
gwctl gw audit --json
like "$OUT" 'audit-prune' "the prune left its own audit row"

# --- importing never widens a rule silently (issue 18 item 7) --------------
cat >"$T/wide.conf" <<'RULES'
allow id 1209:0003 hash "JDOb0BiktYs2ct3mSQKopnOOV2h9MGYADwhT+oUtF2s="
allow id 1209:0004 via-port "1-4"
block id 1209:0001 parent-hash "4PHGcaDKWtPjKDwYpIRG722cB9SlGz9l9Iea93+Gt9c="
RULES
gwctl gw policy list --json
before=$("$EJSON" count <<<"$OUT")
gwctl gw policy import --drop-unmapped "$T/wide.conf"
is "$RC" 2 "--drop-unmapped: an allow rule that would get wider is refused"
like "$ERR" "wide.conf:1: not imported: dropping hash \\(column 20\\) would make this allow rule wider than USBGuard's.*--allow-wider" \
    "... saying it would widen and how to ask for it"
like "$ERR" "wide.conf:2: not imported: via-port names that port on every exporter here: --exporter NAME" \
    "via-port without --exporter: refused"
unlike "$ERR" "wide.conf:3: not imported" "a block rule that lost parent-hash (blocks more) is fine"
gwctl gw policy import --allow-wider "$T/wide.conf"
is "$RC" 2 "--allow-wider without --drop-unmapped: a usage error"
gwctl gw policy import --drop-unmapped --allow-wider --exporter sim1 "$T/wide.conf"
is "$RC" 0 "--drop-unmapped --allow-wider --exporter sim1: imported"
gwctl gw policy list --json
is "$("$EJSON" count <<<"$OUT")" "$((before + 3))" "... three rules more"
like "$OUT" '"allow id 1209:0004 via-port \\"1-4\\" via-exporter sim1"' \
    "... via-port bound to the exporter named"
gw_finish gw
done_testing
