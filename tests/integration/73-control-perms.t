#!/usr/bin/env bash
# The control socket's group and mode (issue 18 item 5): SIGHUP applies a
# changed control-group or control-socket-mode to the live socket, or says
# it cannot and leaves the socket 0600 (root only: closed, not open);
# usbgwd -n checks that the users and groups the allow lists and
# control-group name exist.
. "$(dirname "$0")/../lib/common.sh"

need_prog "$USBGWD" "$USBGW" stat getent
[ "$(id -u)" -eq 0 ] || skip_all "needs root (chown of the socket to a group)"
getent group daemon >/dev/null && getent group users >/dev/null ||
	skip_all "needs the groups daemon and users"

SOCK=$T/control.sock
conf() {
	printf 'control-group = %s\ncontrol-socket-mode = %s\n' "$1" "$2" >"$T/gw.conf"
}
perms() { stat -c '%G %a' "$SOCK"; }

# ---- usbgwd -n ---------------------------------------------------------------
printf 'allow-read = nosuchuser9, @nosuchgroup9, 4000, root, @daemon\ncontrol-group = nogroup9x\n' >"$T/bad.conf"
run "$USBGWD" -n -c "$T/bad.conf"
is "$RC" 2 "usbgwd -n: unknown users and groups are errors (exit 2)"
like "$ERR" 'bad.conf: allow-read: user "nosuchuser9": does not exist on this system' \
    "... the unknown user named, with the file and the key"
like "$ERR" 'bad.conf: allow-read: group "@nosuchgroup9": does not exist' \
    "... the unknown group named"
like "$ERR" 'bad.conf: control-group: group "nogroup9x": does not exist' \
    "... the unknown control-group named"
unlike "$ERR" '"root"|"@daemon"|4000' "... existing names and numbers are not"
printf 'allow-read = root, @daemon, 4000\ncontrol-group = users\n' >"$T/good.conf"
run "$USBGWD" -n -c "$T/good.conf"
is "$RC" 0 "usbgwd -n: existing names pass"
is "$OUT" "configuration OK" "... configuration OK"

# ---- SIGHUP applies group and mode ---------------------------------------
conf daemon 0660
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start"
is "$(perms)" "daemon 660" "at start: group daemon, mode 0660"
conf users 0600
kill -HUP "$(cat "$T/gw.pid")"
wait_for -t 10 sh -c "[ \"\$(stat -c '%G %a' '$SOCK')\" = 'users 600' ]"
is "$(perms)" "users 600" "SIGHUP: the socket's group and mode follow the file"
wait_log gw 'control: reload: socket .* now mode 0600, group users' 5
check $? "... and the log says so"
run "$USBGW" -s "$SOCK" status
is "$RC" 0 "... and the socket still serves"
conf nogroup9x 0660
kill -HUP "$(cat "$T/gw.pid")"
wait_log gw 'control: reload: control-group nogroup9x: no such group: the socket is 0600 now' 10
check $? "an unknown group at reload: said so"
is "$(stat -c '%a' "$SOCK")" 600 "... and the socket is 0600 (closed, not left as it was)"
conf daemon 0660
kill -HUP "$(cat "$T/gw.pid")"
wait_for -t 10 sh -c "[ \"\$(stat -c '%G %a' '$SOCK')\" = 'daemon 660' ]"
is "$(perms)" "daemon 660" "a good file again: applied"
stop_bg gw
done_testing
