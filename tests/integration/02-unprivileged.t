#!/usr/bin/env bash
# usbgwd in proxy mode needs no privilege, as contrib/usbgwd.service runs
# it: as a fresh system user with no capabilities, no_new_privs and umask
# 077 it claims a device, its own uid administers it, verified data moves
# through it, and its database is private.  The shipped unit is rated
# "OK" by systemd-analyze security, and every system call the daemon and
# its hooks make (strace over a claim/approve/relay/revoke/reload/stop
# session) is in the unit's @system-service allow list.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

need_prog "$USBGWD" "$USBGW" "$SIM" "$TC" useradd userdel runuser setpriv
[ "$(id -u)" = 0 ] || skip_all "needs root to create a user"
plan 19

# (/etc/passwd is the machine's: one test at a time changes it)
U=ugu$$
with_lock users useradd -r -M -N -g nogroup -d /nonexistent \
    -s /usr/sbin/nologin "$U" || bail_out "useradd failed"
trap '_st=$?; with_lock users userdel "$U" 2>/dev/null; (exit $_st); _cleanup' EXIT
UID_U=$(id -u "$U")

chmod 0755 "$T"
UGWD=$(for_users "$USBGWD") && UGW=$(for_users "$USBGW") ||
    bail_out "cannot copy the binaries for $U"
D=$T/state
mkdir -m 0700 "$D" && chown "$U" "$D"
sim_start sim || bail_out "simulator did not start"
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 300ms
hook all sh -c 'echo "\$USBGW_EVENT" >>"$D/hook.out"'
EOF
chmod 0644 "$T/gw.conf"

# What systemd does for User=, CapabilityBoundingSet=, NoNewPrivileges=
# and UMask=.
start_bg gw setpriv --reuid="$U" --regid=nogroup --clear-groups \
    --inh-caps=-all --bounding-set=-all --no-new-privs \
    sh -c "umask 077; exec '$UGWD' -f -p none -c '$T/gw.conf' \
    -d '$D/gw.db' -s '$D/gw.sock' -l 127.0.0.1:0 -P '$D/gw.port'"
wait_file "$D/gw.port" 10 gw || bail_out "usbgwd did not start: $(cat "$(bg_log gw)")"
PID=$(bg_pid gw)
st=$(cat "/proc/$PID/status")
like "$st" $'\nUid:\t'"$UID_U"$'\t'"$UID_U"$'\t'"$UID_U"$'\t'"$UID_U"$'\n' \
    "the daemon runs as $U (real, effective, saved, fs)"
like "$st" $'\nCapEff:\t0000000000000000\n' "no effective capability"
like "$st" $'\nCapBnd:\t0000000000000000\n' "an empty bounding set"
like "$st" $'\nNoNewPrivs:\t1\n' "no_new_privs"
read -r soft hard < <(awk '/^Max open files/ { print $4, $5 }' "/proc/$PID/limits")
want=$hard
[ "$hard" = unlimited ] || [ "$hard" -gt 65536 ] && want=65536
is "$soft" "$want" "descriptors: the soft limit raised to the hard one (at most 64 Ki)"

as_u() { run runuser -u "$U" -- "$UGW" -s "$D/gw.sock" "$@"; }
wait_for -t 10 sh -c "runuser -u '$U' -- '$UGW' -s '$D/gw.sock' list --state pending | grep -q 'sim:1-2'"
check $? "sim:1-2 claimed and pending"
as_u status
like "$OUT" "privilege admin" "the daemon's own uid administers it"
as_u approve sim:1-2
is "$RC" 0 "approve as $U"
ok "verified 8 MiB loopback through the unprivileged gateway" \
    "$TC" script "127.0.0.1:$(cat "$D/gw.port")" sim:1-2 --bytes 8M \
    --skip unlink,unlink-pending,unlink-completed,interrupt,iso
is "$(field failed "$OUT")" 0 "no step failed"
is "$(stat -c '%a %U' "$D/gw.db")" "600 $U" "the database is $U's, mode 0600"
wait_for -t 5 grep -q attach "$D/hook.out"
check $? "hooks run (as $U)"
stop_bg gw TERM
is "$RC" 0 "SIGTERM: clean exit"
unlike "$(cat "$(bg_log gw)")" 'warning|error|denied' \
    "nothing in its log needed a privilege it lacks"

# ---- the shipped unit --------------------------------------------------------
UNIT=$TOP/contrib/usbgwd.service
if command -v systemd-analyze >/dev/null 2>&1; then
	run systemd-analyze security --offline=true --threshold=20 "$UNIT"
	is "$RC" 0 "systemd-analyze security: exposure at most 2.0" || _diag_output
	like "$OUT" 'Overall exposure level for usbgwd.service: [01]\.[0-9] OK' \
	    "rated OK"
else
	skip 2 "systemd-analyze not installed"
fi

# Every system call of a session is in the unit's allow list.
if command -v strace >/dev/null 2>&1 && command -v systemd-analyze >/dev/null 2>&1; then
	grep -qx 'SystemCallFilter=@system-service' "$UNIT"
	check $? "the unit's allow list is @system-service"
	allowed=$T/allowed
	for g in @system-service $(systemd-analyze syscall-filter @system-service |
	    grep -o '@[a-z-]*' | sort -u); do
		systemd-analyze syscall-filter "$g"
	done | sed 's/^ *//' | grep -E '^[a-z_0-9]+$' | sort -u >"$allowed"
	rm -f "$D/hook.out"
	start_bg st strace -f -qq -o "$T/trace" setpriv --reuid="$U" \
	    --regid=nogroup --clear-groups --inh-caps=-all --bounding-set=-all \
	    sh -c "umask 077; exec '$UGWD' -f -p none -c '$T/gw.conf' \
	    -d '$D/gw.db' -s '$D/gw.sock' -l 127.0.0.1:0 -P '$D/gw2.port'"
	wait_file "$D/gw2.port" 20 st || bail_out "usbgwd under strace did not start"
	wait_for -t 10 sh -c "runuser -u '$U' -- '$UGW' -s '$D/gw.sock' list --state authorized | grep -q 'sim:1-2'"
	"$TC" script "127.0.0.1:$(cat "$D/gw2.port")" sim:1-2 --bytes 1M \
	    --skip unlink,unlink-pending,unlink-completed,interrupt,iso >/dev/null 2>&1
	as_u revoke sim:1-2
	as_u audit verify
	gpid=$(pgrep -P "$(bg_pid st)" -x usbgwd)
	kill -HUP "$gpid" 2>/dev/null
	sleep 0.5
	as_u list
	kill -TERM "$gpid" 2>/dev/null
	wait_bg st 20
	# from the daemon's exec on (before it: setpriv doing systemd's job)
	used=$(awk -v bin="$UGWD" 'on { print $2 }
	    index($0, "execve(\"" bin "\"") { on = 1 }' "$T/trace" |
	    grep -o '^[a-z_0-9]*(' | tr -d '(' | sort -u)
	outside=$(printf '%s\n' "$used" | comm -23 - "$allowed" | tr '\n' ' ')
	num_cmp "$(printf '%s\n' "$used" | grep -c .)" -ge 30 \
	    "strace saw the session ($(printf '%s\n' "$used" | grep -c .) distinct calls)"
	is "$outside" "" "no system call outside @system-service"
else
	skip 3 "strace or systemd-analyze not installed"
fi

done_testing
