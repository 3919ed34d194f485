#!/bin/bash
# SIGHUP narrowing allow-from reaches connections still in the op phase
# (protocol.md 1.9.5): a peer accepted while allowed that sends its first
# request only after the reload gets nothing, neither the device list
# (OP_REQ_DEVLIST) nor a control connection (OP_REQ_USBGW CONTROL, which
# would carry every hot-plug push from then on), with an audit line each.
# Before, only imports and control connections already up were checked
# again (a red-team finding: the device list and a new control connection
# of a revoked gateway were served on sockets opened before the reload).
. "$(dirname "$0")/../lib/common.sh"

AGENT=$USBGW_BUILD/usbgw-agent
need_prog "$AGENT" python3
plan 8

APORT=$(free_port)
printf '%s\n' "name tc147" "state-file none" "allow-from 127.0.0.1/32" \
    >"$T/agent.conf"
start_bg agent "$AGENT" -f -c "$T/agent.conf" -l "127.0.0.1:$APORT"
wait_port "$APORT" 10 agent || bail_out "usbgw-agent did not start"

# peer.py MODE: connect while allowed, say "connected", wait for "go" on
# stdin, send MODE's first request, print what came back (bytes, or EOF).
cat >"$T/peer.py" <<'PY'
import socket, struct, sys
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
print("connected", flush=True)
sys.stdin.readline()
if mode == "devlist":
    s.sendall(struct.pack(">HHI", 0x0111, 0x8005, 0))
else:
    body = b"usbgwd".ljust(32, b"\0") + struct.pack(">I", 0) + bytes(16)
    s.sendall(struct.pack(">HHIHHI", 0x0111, 0x8067, 0, 1, 1, len(body)) + body)
s.settimeout(3)
got = b""
try:
    while True:
        c = s.recv(4096)
        if not c:
            break
        got += c
except socket.timeout:
    print("RESULT timeout bytes=%d" % len(got), flush=True)
    sys.exit(0)
print("RESULT eof bytes=%d" % len(got), flush=True)
PY

# The baseline: while allowed, the same requests are answered.
bp=()
for m in devlist control; do
	echo go | timeout 20 python3 "$T/peer.py" "$APORT" $m >"$T/base-$m.out" 2>&1 &
	bp+=($!)
done
wait "${bp[@]}"
grep -Eq 'RESULT (eof|timeout) bytes=[1-9]' "$T/base-devlist.out"
check $? "allowed: OP_REQ_DEVLIST is answered ($(tail -n1 "$T/base-devlist.out"))"
grep -Eq 'RESULT (eof|timeout) bytes=[1-9]' "$T/base-control.out"
check $? "allowed: OP_REQ_USBGW CONTROL is answered ($(tail -n1 "$T/base-control.out"))"

# Connected while allowed, the request sent after the reload.
for m in devlist control; do
	mkfifo "$T/go-$m"
	timeout 30 python3 "$T/peer.py" "$APORT" $m <"$T/go-$m" >"$T/$m.out" 2>&1 &
	eval "pid_$m=\$!"
	exec {fd}>"$T/go-$m"
	eval "fd_$m=$fd"
done
wait_for -t 10 grep -q connected "$T/devlist.out" &&
    wait_for -t 10 grep -q connected "$T/control.out"
check $? "two peers connected while 127.0.0.1 is allowed"
printf '%s\n' "name tc147" "state-file none" "allow-from 10.0.0.0/8" \
    >"$T/agent.conf"
kill -HUP "$(bg_pid agent)"
wait_for -t 5 grep -q 'reloaded' "$T/agent.log"
check $? "reloaded (allow-from 10.0.0.0/8)"
for m in devlist control; do
	eval "echo go >&\$fd_$m; exec {fd_$m}>&-"
done
wait "$pid_devlist" "$pid_control"
grep -q 'RESULT eof bytes=0$' "$T/devlist.out"
check $? "after the reload: OP_REQ_DEVLIST gets nothing ($(tail -n1 "$T/devlist.out"))"
grep -q 'RESULT eof bytes=0$' "$T/control.out"
check $? "after the reload: OP_REQ_USBGW CONTROL gets nothing ($(tail -n1 "$T/control.out"))"
grep -q 'audit: refused peer=127.0.0.1 reason="device list: no longer in allow-from"' "$T/agent.log" &&
    grep -q 'audit: refused peer=127.0.0.1 reason="no longer in allow-from"' "$T/agent.log"
check $? "audit: a refused line for each"
stop_bg agent TERM
is "$RC" 0 "usbgw-agent exits 0 on SIGTERM"
