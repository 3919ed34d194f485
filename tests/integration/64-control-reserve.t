#!/usr/bin/env bash
# The control socket keeps connections for admins whatever others hold,
# and what refused users can make it write is bounded.  Four users with
# the read privilege hold idle `usbgw watch` connections up to
# max-connections (4): a fifth read user is refused (limit), but root
# still runs `usbgw status` and `usbgw revoke`, and a user made admin in
# allow-admin still gets in.  A user with no privilege connecting 3000
# times, and a read user sending 3000 approve requests, write at most
# control-audit-limit-per-uid `refused` rows each, and one audit-suppressed
# row each ("control uid U") counts the rest; the log stays bounded too.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

EJ=$USBGW_BUILD/e2e-json
FLOOD0=$TOP/tests/tools/ctl-flood.py
PY=/usr/bin/python3
need_prog "$USBGWD" "$USBGW" "$SIM" "$EJ" "$PY" useradd userdel groupadd \
    groupdel runuser sqlite3
[ "$(id -u)" = 0 ] || skip_all "needs root to create users"
plan 24

tag=$$
G_SOCK=ucg$tag			# may open the socket
RS="ucr1$tag ucr2$tag ucr3$tag ucr4$tag"	# read, each holds a watch
R5=ucr5$tag			# read, the one too many
ADM=ucm$tag			# admin, by name
N=ucn$tag			# in G_SOCK, in no list

cleanup_users() {
	local u
	for u in $RS $R5 $ADM $N; do userdel "$u" 2>/dev/null; done
	groupdel "$G_SOCK" 2>/dev/null
}
trap '_st=$?; with_lock users cleanup_users; (exit $_st); _cleanup' EXIT
mk_all() {
	local u
	groupadd "$G_SOCK" || return 1
	for u in $RS $R5 $ADM $N; do
		useradd -M -N -g nogroup -d /nonexistent -s /usr/sbin/nologin \
		    -G "$G_SOCK" "$u" || return 1
	done
}
with_lock users mk_all || bail_out "cannot make the test's users"
N_UID=$(id -u "$N")
R5_UID=$(id -u "$R5")

UGW=$(for_users "$USBGW") || bail_out "cannot copy usbgw"
# (the users may not read the checkout: a clone in a 0700 directory)
FLOOD=$(for_users "$FLOOD0") || bail_out "cannot copy ctl-flood.py"
sim_start sim || bail_out "simulator did not start"
SOCK=$T/control.sock
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 300ms
control-group = $G_SOCK
control-socket-mode = 0660
allow-read = $(echo $RS $R5 | tr ' ' ,)
allow-admin = $ADM
max-connections = 4
control-admin-reserve = 3
control-audit-limit-per-uid = 5
control-audit-limit-total = 50
EOF
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start"
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' list --state pending --json | \
    '$EJ' count | grep -qx 5" || bail_out "devices did not become pending"
DEV=$("$USBGW" -s "$SOCK" list --json | "$EJ" get busid exporter_busid=1-1)
ok "root approves a device" "$USBGW" -s "$SOCK" approve "$DEV"

as() {	# as USER ARGS...: usbgw as USER (sets OUT ERR RC)
	local u=$1
	shift
	run runuser -u "$u" -- "$UGW" -s "$SOCK" "$@"
}
gwstat() {	# gwstat KEY: a number of `usbgw status --json`
	"$USBGW" -s "$SOCK" status --json | sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p"
}
gwstat_is() { [ "$(gwstat "$1")" = "$2" ]; }

# --- four read users fill max-connections with idle watchers -----------------
i=0
for u in $RS; do
	i=$((i + 1))
	start_bg "w$i" runuser -u "$u" -- "$UGW" -s "$SOCK" watch
done
wait_for -t 10 gwstat_is watchers 4
is "$(gwstat watchers)" 4 "four read users watch (max-connections = 4)"

as "$R5" status
is "$RC" 5 "a fifth read user is refused (exit 5, limit)"
like "$ERR" "too many control connections" "with a limit error"
like "$ERR" "reserved for admins" "which says why"

run "$USBGW" -s "$SOCK" status
is "$RC" 0 "root: status works with max-connections held by others"
run "$USBGW" -s "$SOCK" revoke "$DEV"
is "$RC" 0 "root: revoke works" || _diag_output
is "$("$USBGW" -s "$SOCK" list --json | "$EJ" get state busid="$DEV")" pending \
    "the device is pending after the revoke"
as "$ADM" status
is "$RC" 0 "an admin of allow-admin gets in too" || _diag_output
like "$OUT" "privilege admin" "as admin"
# root holding the reserve does not open it to others
start_bg r1 "$USBGW" -s "$SOCK" watch
start_bg r2 "$USBGW" -s "$SOCK" watch
wait_for -t 10 gwstat_is watchers 6
as "$R5" status
is "$RC" 5 "admins' watchers do not make room for a read user"
run "$USBGW" -s "$SOCK" status
is "$RC" 0 "root still gets in (its per-uid cap is what bounds it)"
stop_bg r1
stop_bg r2
for i in 1 2 3 4; do stop_bg "w$i"; done
wait_for -t 10 gwstat_is connections 1
as "$R5" status
is "$RC" 0 "once the watchers are gone, the fifth read user gets in"

# --- refusals are bounded per uid ------------------------------------------
run -t 120 runuser -u "$N" -- "$PY" "$FLOOD" "$SOCK" connect 3000
like "$OUT" "RESULT sent=3000 ok=0 refused=3000 " \
    "3000 connects of a user with no privilege: each refused" || _diag_output
run -t 120 runuser -u "$R5" -- "$PY" "$FLOOD" "$SOCK" command 3000 approve
like "$OUT" "RESULT sent=3000 ok=0 refused=3000 " \
    "3000 approves of a read user: each refused" || _diag_output
sql() { sqlite3 "$T/gw.db" "PRAGMA busy_timeout=10000; $1" | tail -n 1; }
wait_for -t 10 sh -c "[ \"\$(sqlite3 '$T/gw.db' \"SELECT count(*) FROM audit_log WHERE event = 'refused' AND actor_uid = $R5_UID\")\" -ge 5 ]"
is "$(sql "SELECT count(*) FROM audit_log WHERE event = 'refused' AND actor_uid = $N_UID")" 5 \
    "the no-privilege user: 5 refused rows (control-audit-limit-per-uid)"
is "$(sql "SELECT count(*) FROM audit_log WHERE event = 'refused' AND actor_uid = $R5_UID")" 5 \
    "the read user: 5 refused rows"
nlog=$(grep "control: refus" "$(bg_log gw)" | grep -vc "not audited")
num_cmp "$nlog" -le 20 "the log has a bounded number of refusal lines ($nlog)"

# the minute's summary rows: written when the window ends, or at shutdown
stop_bg gw TERM
is "$RC" 0 "usbgwd exits 0 on SIGTERM"
row=$(sql "SELECT detail FROM audit_log WHERE event = 'audit-suppressed' AND object = 'control uid $N_UID'")
like "$row" "not written one by one: 2995 refused connect" \
    "one audit-suppressed row counts the no-privilege user's other 2995"
row=$(sql "SELECT detail FROM audit_log WHERE event = 'audit-suppressed' AND object = 'control uid $R5_UID'")
like "$row" "2995 refused command" \
    "and one the read user's other 2995"
like "$row" "connections refused \\(max-connections" \
    "counting its connection over max-connections too"
is "$(sql "SELECT count(*) FROM audit_log WHERE event IN ('refused', 'audit-suppressed')")" 12 \
    "12 rows in all for 6002 refusals"
asan_clean "no sanitizer reports"
done_testing
