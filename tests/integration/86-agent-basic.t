#!/usr/bin/env bash
# usbgw-agent's network side without USB (this machine has no usbfs: the
# device layer finds no device, or cannot start and the agent says so;
# either way it serves an empty list):
# an allowed peer lists through usbip-tc and Debian's usbip; a peer not
# in allow-from gets a closed socket with no byte and an audit line;
# more than 60 refusals a minute from one address give 60 lines and one
# "suppressed" summary; nobody is allowed by default (and a warning says
# so); bad configuration files exit 1 naming FILE:LINE:COLUMN; -n; SIGTERM
# exits 0; the audit-log file gets the lines too (mode 0600).
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" "$TC"

plan 36

# start_agent NAME PORT ARGS...: start it and wait for its listener.
start_agent() {
	local name=$1 port=$2
	shift 2
	start_bg "$name" "$AGENT" -f -l "127.0.0.1:$port" "$@"
	wait_port "$port" 10 "$name" || {
		diag "usbgw-agent $name did not start:"
		_diag_text "$(cat "$(bg_log "$name")")"
		return 1
	}
}

# bytes_back PORT: connect, send an OP_REQ_DEVLIST, print how many bytes
# came back before the peer closed (bash /dev/tcp: no extra client).
bytes_back() {
	local n
	exec 7<>"/dev/tcp/127.0.0.1/$1" || { echo "noconnect"; return; }
	printf '\001\021\200\005\000\000\000\000' >&7 2>/dev/null
	n=$(timeout 5 cat <&7 2>/dev/null | wc -c)
	exec 7<&- 7>&-
	echo "$n"
}

: >"$T/empty.conf"

# ---- an allowed peer ---------------------------------------------------
port=$(free_port)
start_agent ok "$port" -c "$T/empty.conf" -a 127.0.0.1 ||
    bail_out "the agent did not start"
# libusb may or may not start without usbfs; either way the agent serves.
if grep -q 'USB devices unavailable' "$(bg_log ok)"; then
	like "$(cat "$(bg_log ok)")" 'USB devices unavailable .*: serving an empty device list' \
	    "libusb cannot start here: a warning, and the agent keeps serving"
else
	like "$(cat "$(bg_log ok)")" 'usbgw-agent [0-9.]+ started' \
	    "libusb started (no devices here): the agent serves"
fi
run "$TC" list "127.0.0.1:$port"
is "$RC" 0 "usbip-tc list: an allowed peer gets the device list"
is "$(field ndev "$OUT")" 0 "... with no device"
if command -v usbip >/dev/null 2>&1; then
	run usbip --tcp-port "$port" list -r 127.0.0.1
	is "$RC" 0 "Debian's usbip list -r accepts the agent's DEVLIST"
	like "$OUT$ERR" 'no exportable devices found on 127.0.0.1' "... an empty one"
else
	skip 2 "usbip tool not installed"
fi
run "$TC" list "127.0.0.1:$port" --source 127.0.0.5
isnt "$RC" 0 "127.0.0.5 (not in allow-from) gets no list"
wait_log ok 'audit: refused peer=127\.0\.0\.5 listen=127\.0\.0\.1:[0-9]+ reason="not in allow-from"' 5
check $? "... and an audit: refused line names it and the listener"
unlike "$(cat "$(bg_log ok)")" 'allow-from is empty' "no 'nobody' warning when -a is given"
stop_bg ok
is "$RC" 0 "SIGTERM: exit 0"
like "$(cat "$(bg_log ok)")" 'signal 15: shutting down' "... after saying why"

# ---- allow-from 127.0.0.2/32 only: 127.0.0.1 is refused -----------------
port=$(free_port)
cat >"$T/audit.conf" <<EOF2
allow-from 127.0.0.2/32
audit-log $T/audit.log
EOF2
start_agent refuse "$port" -c "$T/audit.conf" || bail_out "the agent did not start"
is "$(bytes_back "$port")" 0 "a refused peer's DEVLIST: the socket closes with no byte"
run "$TC" list "127.0.0.1:$port"
isnt "$RC" 0 "usbip-tc list from 127.0.0.1: refused"
wait_log refuse 'audit: refused peer=127\.0\.0\.1 listen=127\.0\.0\.1:' 5
check $? "audit: refused peer=127.0.0.1 in the log"
# The budget: 70 more refusals in well under a minute -> 60 lines in all,
# the rest counted in one "suppressed" line (written at the latest when
# the agent stops).
for i in $(seq 1 70); do
	(exec 8<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
done
refused_60() { [ "$(grep -c 'audit: refused peer=127.0.0.1 ' "$(bg_log refuse)")" -ge 60 ]; }
wait_for -t 10 refused_60
stop_bg refuse
is "$RC" 0 "SIGTERM: exit 0"
log=$(cat "$(bg_log refuse)")
is "$(grep -c 'audit: refused peer=127.0.0.1 ' <<<"$log")" 60 \
    "72 refusals within a minute: 60 audit lines (the budget)"
is "$(grep -c 'audit: suppressed ' <<<"$log")" 1 "... and one suppressed line"
like "$log" 'audit: suppressed peer=127\.0\.0\.1 detail="in [0-9]+ s, not written one by one: 12 refused' \
    "... counting the 12 held back"
ok "audit-log file written" test -s "$T/audit.log"
is "$(grep -c ' audit: refused peer=127.0.0.1 ' "$T/audit.log")" 60 "... with the same 60 lines"
is "$(stat -c %a "$T/audit.log")" 600 "... mode 0600"

# ---- nobody by default ----------------------------------------------------
port=$(free_port)
start_agent nobody "$port" -c "$T/empty.conf" || bail_out "the agent did not start"
like "$(cat "$(bg_log nobody)")" 'warning.*allow-from is empty: nobody may list or import' \
    "no allow-from: a warning at start"
is "$(bytes_back "$port")" 0 "... and even loopback gets a closed socket, no byte"
stop_bg nobody INT
is "$RC" 0 "SIGINT: exit 0"

# ---- SIGHUP reloads allow-from ---------------------------------------------
port=$(free_port)
printf 'allow-from 127.0.0.2\n' >"$T/hup.conf"
start_agent hup "$port" -c "$T/hup.conf" || bail_out "the agent did not start"
run "$TC" list "127.0.0.1:$port"
isnt "$RC" 0 "before SIGHUP: 127.0.0.1 refused"
printf 'allow-from 127.0.0.0/8\n' >"$T/hup.conf"
kill -HUP "$(bg_pid hup)"
wait_log hup 'reloaded ' 5
run "$TC" list "127.0.0.1:$port"
is "$RC" 0 "after SIGHUP: the new allow-from admits 127.0.0.1"
printf 'allow-from 127.0.0.1/8\n' >"$T/hup.conf"
kill -HUP "$(bg_pid hup)"
wait_log hup 'reload: configuration unchanged' 5
check $? "a bad file on SIGHUP: errors logged, configuration unchanged"
run "$TC" list "127.0.0.1:$port"
is "$RC" 0 "... the old allow-from still applies"
stop_bg hup TERM

# ---- configuration errors, -n ---------------------------------------------
cat >"$T/bad.conf" <<'EOF2'
name tc1
allow-from 10.1.2.3/8
keep-local id 1234:5678 to-host vdi01
max-connections lots
EOF2
run "$AGENT" -n -c "$T/bad.conf"
is "$RC" 1 "a bad file: exit 1"
like "$ERR" "bad.conf:2:12: allow-from: 10.1.2.3/8 has host bits set" \
    "line 2 named with its column"
like "$ERR" "bad.conf:3:25: keep-local: attribute 'to-host' is not allowed" \
    "line 3 too: every error at once"
like "$ERR" "bad.conf:4:17: max-connections: expected a number" "and line 4"
printf 'name tc1\nallow-from 10.0.0.0/8\nkeep-local serial "KEEP"\n' >"$T/good.conf"
run "$AGENT" -n -c "$T/good.conf"
is "$RC" 0 "-n on a good file: exit 0"
like "$OUT" 'configuration OK' "... says so"
run "$AGENT" -n -c "$T/missing.conf"
is "$RC" 1 "a missing -c file: exit 1"
run "$AGENT" -n -c "$T/good.conf" -a 10.0.0.1/8
is "$RC" 1 "a bad -a: exit 1"

asan_clean "no sanitizer report"
done_testing
