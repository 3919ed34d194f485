#!/usr/bin/env bash
# Control-socket privileges with real users created for the test: the
# socket's group is the first gate (a user outside it cannot connect), the
# daemon's read/approve/admin lists the second (SO_PEERCRED, supplementary
# groups from the group database).  A read-only user cannot approve; a
# user in no privilege list is refused at connect; each refusal is in the
# audit log with the user's uid and name.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

EJ=$USBGW_BUILD/e2e-json
need_prog "$USBGWD" "$USBGW" "$SIM" "$EJ" useradd userdel groupadd \
    groupdel runuser socat
[ "$(id -u)" = 0 ] || skip_all "needs root to create users"

# Short unique names (useradd allows 32 bytes).
tag=$$
G_SOCK=ugs$tag		# may open the socket
G_OPS=ugo$tag		# approve class, by group
R=ugr$tag		# read, by user name
A=uga$tag		# approve, through G_OPS
N=ugn$tag		# in G_SOCK, in no list
X=ugx$tag		# not even in G_SOCK
ADM=ugm$tag		# admin, by uid

# /etc/passwd and /etc/group are the machine's: users and groups are
# made and removed under the "users" lock, one test at a time.
cleanup_users() {
	local u
	for u in $R $A $N $X $ADM; do userdel "$u" 2>/dev/null; done
	groupdel "$G_OPS" 2>/dev/null
	groupdel "$G_SOCK" 2>/dev/null
}
trap '_st=$?; with_lock users cleanup_users; (exit $_st); _cleanup' EXIT

mk() {	# mk NAME [GROUPS]
	useradd -M -N -g nogroup -d /nonexistent -s /usr/sbin/nologin \
	    ${2:+-G "$2"} "$1" || bail_out "useradd $1 failed"
}
mk_all() {
	groupadd "$G_SOCK" && groupadd "$G_OPS" || bail_out "groupadd failed"
	mk "$R" "$G_SOCK"
	mk "$A" "$G_SOCK,$G_OPS"
	mk "$N" "$G_SOCK"
	mk "$X"
	mk "$ADM" "$G_SOCK"
}
with_lock users mk_all || bail_out "cannot make the test's users"
ADM_UID=$(id -u "$ADM")

UGW=$(for_users "$USBGW") || bail_out "cannot copy usbgw"
sim_start sim || bail_out "simulator did not start"
SOCK=$T/control.sock
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 300ms
control-group = $G_SOCK
control-socket-mode = 0660
allow-read = $R
allow-approve = @$G_OPS
allow-admin = $ADM_UID
EOF
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start"
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' list --state pending --json | \
    '$EJ' count | grep -qx 5" || bail_out "devices did not become pending"
DEV=$("$USBGW" -s "$SOCK" list --json | "$EJ" get busid exporter_busid=1-1)
DEV2=$("$USBGW" -s "$SOCK" list --json | "$EJ" get busid exporter_busid=1-2)

as() {	# as USER ARGS...: usbgw as USER (sets OUT ERR RC)
	local u=$1
	shift
	run runuser -u "$u" -- "$UGW" -s "$SOCK" "$@"
}

is "$(stat -c '%a %G' "$SOCK")" "660 $G_SOCK" "socket mode 0660, group $G_SOCK"

# Outside the socket's group: the kernel refuses the connection.
as "$X" list
is "$RC" 1 "user outside the socket group: exit 1"
like "$ERR" 'Permission denied' "permission denied on the socket"

# In the group but in no list: the daemon refuses at connect, audited.
as "$N" list
is "$RC" 1 "user with no privilege: exit 1"
like "$ERR" "uid [0-9]+ \($N\) holds no privilege" "refused at connect, explained"
as "$N" status
is "$RC" 1 "no privilege: status refused too"

# Read-only user.
as "$R" list
is "$RC" 0 "read user: list"
as "$R" show "$DEV"
is "$RC" 0 "read user: show"
as "$R" audit
is "$RC" 0 "read user: audit"
as "$R" status
like "$OUT" "you +$R \(uid [0-9]+\), privilege read" "read user: status shows read"
as "$R" approve "$DEV"
is "$RC" 1 "read user cannot approve: exit 1"
like "$ERR" "approve requires the approve privilege; uid [0-9]+ \($R\) holds read" \
    "approve refusal explained"
as "$R" deny "$DEV"
is "$RC" 1 "read user cannot deny"
as "$R" policy add 'allow id 1209:0001'
is "$RC" 1 "read user cannot add a rule"
as "$R" exporter add x 127.0.0.1:1
is "$RC" 1 "read user cannot add an exporter"
"$USBGW" -s "$SOCK" list --json | "$EJ" get state busid="$DEV" | grep -qx pending
check $? "device still pending after the refused approve"

# Approver, privilege through a supplementary group.
as "$A" approve "$DEV" -m "by the ops group"
is "$RC" 0 "approver (via @group) can approve"
as "$A" revoke "$DEV"
is "$RC" 0 "approver can revoke"
as "$A" policy add 'allow id 1209:0001'
is "$RC" 1 "approver cannot change the policy"
like "$ERR" 'requires the admin privilege' "policy refusal explained"

# Admin by uid.
as "$ADM" policy add 'block id 1209:0004'
is "$RC" 0 "admin (by uid) can add a rule"
as "$ADM" deny "$DEV2"
is "$RC" 0 "admin can deny"

# Every refusal is in the audit trail with who it was.
run "$USBGW" -s "$SOCK" audit --json --limit 10000
printf '%s' "$OUT" >"$T/audit.json"
for u in "$N" "$R" "$A"; do
	uid=$(id -u "$u")
	n=$("$EJ" count action=refused actor_uid="$uid" <"$T/audit.json")
	case $u in
	"$N") want=2 ;;	# list, status
	"$R") want=4 ;;	# approve, deny, policy add, exporter add
	"$A") want=1 ;;	# policy add
	esac
	is "$n" "$want" "refusals of $u audited ($want)"
	is "$("$EJ" get actor_name action=refused actor_uid="$uid" <"$T/audit.json")" \
	    "$u" "audit row names $u"
done
n=$("$EJ" count action=approve actor_uid="$(id -u "$A")" <"$T/audit.json")
is "$n" 1 "the approver's approve is audited under its uid"
run "$USBGW" -s "$SOCK" audit verify
is "$RC" 0 "audit trail still verifies"
asan_clean "no sanitizer reports"
done_testing
