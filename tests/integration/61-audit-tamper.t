#!/usr/bin/env bash
# An audit log that cannot be rewritten quietly (issue 12, item 7).  The
# attacker can write the database file and nothing else: not the key
# file beside it (DATABASE.key, 0600), not the anchors kept elsewhere
# (a file from `usbgw audit anchor`, the checkpoint lines in the
# daemon's log).  Four rewrites, each done with sqlite3 and the plain
# SHA-256 chain as it is documented (tests/tools/audit-forge.c):
#   1. an operator row's actor changed, every later row re-chained;
#   2. the newest rows deleted (the log cut short);
#   3. a row edited, nothing re-chained;
#   4. the key-less parts replaced consistently: edit, re-chain, every
#      row's MAC removed (a "legacy, never keyed" log), the stored
#      checkpoints deleted.
# Each is reported by `usbgw audit verify` given the key (the daemon, or
# --key) and given an anchor and the public key (--database, no secret),
# naming the first bad row, or saying the log was cut short (exit 6).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
FORGE=$USBGW_BUILD/audit-forge
need_prog "$USBGWD" "$USBGW" "$FORGE" sqlite3 stat
plan 62

gw_conf gw "poll-interval = 1s"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'daemon-start'" 1
for i in 1 2 3; do
	gwctl gw policy add "block id dead:000$i"
done
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'policy-add'" 3

# ---- the key, the anchor, the public key ------------------------------------------
is "$(stat -c '%a %U' "$T/gw.db.key" 2>&1)" "600 $(id -un)" \
    "the audit key DATABASE.key was created 0600, owned by the daemon's user"
gwctl gw audit anchor -o "$T/anchor"
is "$RC" 0 "usbgw audit anchor -o FILE"
like "$(cat "$T/anchor" 2>/dev/null)" \
    '^usbgw-audit-anchor seq=[0-9]+ hash=[0-9a-f]{64} time=[0-9]+ key=[0-9a-f]{16} sig=[0-9a-f]{128}$' \
    "... the file holds one signed anchor line"
ASEQ=$(sed -n 's/^usbgw-audit-anchor seq=\([0-9]*\) .*/\1/p' "$T/anchor" 2>/dev/null)
ASEQ=${ASEQ:-0}
gwctl gw audit pubkey
is "$RC" 0 "usbgw audit pubkey"
like "$OUT" 'BEGIN PUBLIC KEY' "... prints the public key (PEM)"
printf '%s\n' "$OUT" >"$T/pub.pem"
unlike "$(cat "$T/gw.log")" "$(sed -n 's/^mac \(.\{16\}\).*/\1/p' "$T/gw.db.key" 2>/dev/null || echo NOKEY)" \
    "no key bytes in the daemon's log"
# the first operator row, and the row the anchor names
X=$(gw_sql gw "SELECT min(seq) FROM audit_log WHERE event = 'policy-add'")
X=${X:-0}
gw_finish gw
grep -o 'usbgw-audit-anchor .*' "$T/gw.log" | tail -n 1 >"$T/logged"
like "$(cat "$T/logged")" '^usbgw-audit-anchor seq=[0-9]+ hash=' \
    "the daemon logged a signed checkpoint at shutdown (an anchor line)"
sqlite3 "$T/gw.db" ".backup '$T/pristine.db'"

# verify DB ARGS...: usbgw audit verify --database DB ARGS (sets OUT ERR RC)
verify() {
	local db=$1
	shift
	run "$USBGW" audit verify --database "$db" "$@"
}
PUB=(--pubkey "$T/pub.pem")
KEY=(--key "$T/gw.db.key")

verify "$T/pristine.db" --anchor "$T/anchor" "${PUB[@]}"
is "$RC" 0 "untouched: verifies against the anchor and the public key (no secret)"
like "$OUT" '^audit trail intact: ' "... 'audit trail intact'"
verify "$T/pristine.db" "${KEY[@]}"
is "$RC" 0 "untouched: verifies with the key"
verify "$T/pristine.db" --anchor "$T/logged" "${PUB[@]}"
is "$RC" 0 "untouched: verifies against the checkpoint line from the daemon's log"

# tamper NAME: a copy of the untouched database, with the key beside it
tamper() {
	cp "$T/pristine.db" "$T/$1.db"
	cp -p "$T/gw.db.key" "$T/$1.db.key"
}

# ---- 1. actor changed, every later row re-chained -------------------------------------
tamper t1
"$FORGE" "$T/t1.db" edit "UPDATE audit_log SET actor_name = 'mallory' WHERE seq = $X"
"$FORGE" "$T/t1.db" rechain "$X"
verify "$T/t1.db"
is "$RC" 1 "1. re-chained: even with no key, the checkpoints stored in the database disagree"
like "$OUT" "seq $ASEQ: its hash differs from checkpoint id 1" \
    "... (unsigned without a key: 4. deletes them too)"
verify "$T/t1.db" --anchor "$T/anchor" "${PUB[@]}"
is "$RC" 1 "1. re-chained: exit 1 against the anchor (no secret needed)"
like "$OUT" "does NOT verify: seq $ASEQ: its hash differs from the anchor" \
    "... naming the anchored row"
verify "$T/t1.db" --seq "$ASEQ" --hash "$(sed -n 's/.* hash=\([0-9a-f]*\) .*/\1/p' "$T/anchor")"
is "$RC" 1 "1. re-chained: exit 1 against --seq N --hash H"
verify "$T/t1.db" "${KEY[@]}"
is "$RC" 1 "1. re-chained: exit 1 with the key"
like "$OUT" "does NOT verify: seq $X: its MAC does not match" \
    "... naming the first rewritten row (seq $X)"
gw_conf t1 "poll-interval = 1s"
gw_start t1 || bail_out "usbgwd t1 did not start"
gwctl t1 audit verify
is "$RC" 1 "1. re-chained: the daemon's usbgw audit verify (it holds the key) exits 1"
like "$OUT" "seq $X: its MAC does not match" "... naming seq $X"
gwctl t1 audit verify --anchor "$T/anchor"
is "$RC" 1 "1. ... and against the anchor through the daemon"
gw_finish t1

# ---- 2. the newest rows deleted ------------------------------------------------------
tamper t2
"$FORGE" "$T/t2.db" edit "DELETE FROM audit_log WHERE seq >= $ASEQ"
verify "$T/t2.db" --anchor "$T/anchor" "${PUB[@]}"
is "$RC" 6 "2. cut short: exit 6 against the anchor"
like "$OUT" "does NOT verify: the log was cut short: it ends at seq $((ASEQ - 1)), the anchor \\($T/anchor:1\\) names seq $ASEQ" \
    "... saying where it ends and what the anchor names"
verify "$T/t2.db" --anchor "$T/logged" "${PUB[@]}"
is "$RC" 6 "2. cut short: exit 6 against the logged checkpoint"
verify "$T/t2.db" "${KEY[@]}"
is "$RC" 6 "2. cut short: exit 6 with the key (the signed checkpoints in the database)"
"$FORGE" "$T/t2.db" edit "DELETE FROM audit_checkpoints"
verify "$T/t2.db" "${KEY[@]}"
is "$RC" 0 "2. ... checkpoints deleted too: the key alone cannot see a cut tail (documented)"
verify "$T/t2.db" "${KEY[@]}" --anchor "$T/anchor"
is "$RC" 6 "2. ... an anchor kept elsewhere does"

# ---- 3. a row edited, not re-chained ----------------------------------------------------
tamper t3
"$FORGE" "$T/t3.db" edit "UPDATE audit_log SET actor_name = 'mallory' WHERE seq = $X"
verify "$T/t3.db"
is "$RC" 1 "3. edited: exit 1 (the plain chain)"
like "$OUT" "seq $X: its content does not match its hash" "... naming seq $X"
verify "$T/t3.db" --anchor "$T/anchor" "${PUB[@]}"
is "$RC" 1 "3. edited: exit 1 against the anchor"
like "$OUT" "seq $X: its content does not match its hash" "... naming seq $X"
verify "$T/t3.db" "${KEY[@]}"
is "$RC" 1 "3. edited: exit 1 with the key"

# ---- 4. the key-less parts replaced consistently -----------------------------------------
tamper t4
"$FORGE" "$T/t4.db" edit "UPDATE audit_log SET actor_name = 'mallory' WHERE seq = $X"
"$FORGE" "$T/t4.db" rechain "$X"
"$FORGE" "$T/t4.db" strip
"$FORGE" "$T/t4.db" edit "DELETE FROM audit_checkpoints"
verify "$T/t4.db"
is "$RC" 0 "4. replaced: the plain chain alone says intact"
verify "$T/t4.db" "${KEY[@]}"
is "$RC" 1 "4. replaced: exit 1 with the key"
like "$OUT" "does NOT verify: seq 1: no MAC, but the key's chain starts at seq 1" \
    "... a row the key must have signed carries no MAC (a downgrade to unkeyed)"
verify "$T/t4.db" --anchor "$T/anchor" "${PUB[@]}"
is "$RC" 1 "4. replaced: exit 1 against the anchor"
gw_conf t4 "poll-interval = 1s"
gw_start t4 || bail_out "usbgwd t4 did not start"
gwctl t4 audit verify
is "$RC" 1 "4. replaced: the daemon's usbgw audit verify exits 1"
gw_finish t4

# ---- anchors that are not what they claim --------------------------------------------------
# (the signature's first hex digit changed, whatever it was)
perl -pe 's/ sig=([0-9a-f])/" sig=" . ($1 eq "0" ? "1" : "0")/e' "$T/anchor" >"$T/badsig"
cmp -s "$T/anchor" "$T/badsig"
isnt "$?" 0 "the forged anchor differs from the real one"
verify "$T/pristine.db" --anchor "$T/badsig" "${PUB[@]}"
is "$RC" 1 "an anchor whose signature is not the gateway's: exit 1"
like "$OUT$ERR" "badsig:1: the signature does not verify with the public key" \
    "... naming the file and line"
printf 'usbgw-audit-anchor seq=12x hash=abc\n' >"$T/garbage"
verify "$T/pristine.db" --anchor "$T/garbage"
is "$RC" 2 "a malformed anchor file: usage error (exit 2)"
like "$ERR" "garbage:1: seq: expected a number from 1" "... naming the file, line and field"
verify "$T/pristine.db" --seq 5
is "$RC" 2 "--seq without --hash: usage error"

# ---- the key file: refused when others may read it -----------------------------------------
chmod 0640 "$T/gw.db.key"
TEST_TIMEOUT=5 run "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$T/gw2.sock" \
    -l 127.0.0.1:0 -p "$T/gw2.pid"
is "$RC" 1 "usbgwd refuses a group-readable key file"
like "$ERR" "audit key $T/gw.db.key: mode 0640: expected 0600" "... naming the file"
chmod 0600 "$T/gw.db.key"
mv "$T/gw.db.key" "$T/gw.db.key.moved"
TEST_TIMEOUT=5 run "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$T/gw2.sock" \
    -l 127.0.0.1:0 -p "$T/gw2.pid"
is "$RC" 1 "usbgwd refuses to start without its key once the log has keyed rows"
like "$ERR" "audit key $T/gw.db.key is missing, but the audit log has keyed rows" \
    "... and says so (a new key would not verify them)"
mv "$T/gw.db.key.moved" "$T/gw.db.key"
verify "$T/gw.db" "${KEY[@]}"
is "$RC" 0 "nothing was written by the refused starts"

# ---- who may read what ---------------------------------------------------------------------
gw_start gw || bail_out "usbgwd did not start again"
gwctl gw audit verify --json
like "$OUT" '"ok": *true' "the restarted daemon verifies its log"
like "$OUT" '"keyed": *true' "... with the key (keyed: true)"
gw_finish gw
done_testing
