#!/usr/bin/env bash
# usbgw in five minutes, no hardware: a simulated exporter with five USB
# devices, the gateway in front of it on its embedded SQLite default, and
# a vhci-side test client.  Walks through: devices appear pending -> an
# import is refused -> the operator approves -> the client attaches
# through the gateway and moves data -> revoke -> the audit trail in SQL.
#
#   make demo            (or: contrib/demo.sh [BUILD_DIR])
#
# Everything runs on 127.0.0.1 with random ports, under ./demo/ (kept
# afterwards so you can look at demo/usbgw.db with sqlite3).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-${USBGW_BUILD:-build}}
D=$PWD/demo
for p in usbgwd usbgw usbgw-sim usbip-tc; do
	[ -x "$B/$p" ] || { echo "demo: $B/$p missing: run make first" >&2; exit 1; }
done
rm -rf "$D"; mkdir -p "$D"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
waitfile() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "demo: $1 did not appear" >&2; exit 1; }

say "1. An exporter: usbgw-sim, five emulated devices (a thin client's USB ports)"
"$B/usbgw-sim" -l 127.0.0.1:0 -p "$D/sim.port" -C "$D/sim.ctl" -L "$D/sim-pdus.log" \
	>"$D/sim.log" 2>&1 & pids+=($!)
waitfile "$D/sim.port"; SIMPORT=$(cat "$D/sim.port")
run "$B/usbip-tc" list "127.0.0.1:$SIMPORT"

say "2. The gateway: usbgwd on its embedded SQLite database"
cat >"$D/usbgwd.conf" <<EOF
# demo configuration (see contrib/usbgwd.conf for every key)
exporter desk17 127.0.0.1:$SIMPORT
poll-interval = 1s
attach-pending-wait = 0
EOF
"$B/usbgwd" -f -c "$D/usbgwd.conf" -d "$D/usbgw.db" -s "$D/control.sock" \
	-l 127.0.0.1:0 -P "$D/gw.port" >"$D/usbgwd.log" 2>&1 & pids+=($!)
waitfile "$D/gw.port"; GWPORT=$(cat "$D/gw.port")
export USBGW_SOCKET=$D/control.sock
for _ in $(seq 50); do
	n=$("$B/usbgw" list --json 2>/dev/null | grep -o '"state": *"pending"' | wc -l || true)
	[ "$n" -ge 5 ] && break; sleep 0.2
done
echo "The gateway claimed every device (the exporter now shows none to anybody else):"
run "$B/usbip-tc" list "127.0.0.1:$SIMPORT" || true
echo "Nothing is authorized by default: every device is pending."
run "$B/usbgw" list

say "3. A vhci host tries to attach the USB stick: refused, and audited as an access request"
run "$B/usbip-tc" import "127.0.0.1:$GWPORT" desk17:1-2 || echo "(refused, as it should be: exit $?)"

say "4. The operator approves it (once: for as long as it stays plugged in)"
run "$B/usbgw" approve desk17:1-2 -m "demo: Alice's stick"
run "$B/usbip-tc" list "127.0.0.1:$GWPORT"

say "5. The vhci host attaches it through the gateway and moves 64 MiB, verified"
run "$B/usbip-tc" script "127.0.0.1:$GWPORT" desk17:1-2 --bytes 64M --skip interrupt,iso

say "6. Revoke: any attachment is torn down at once, the device goes back to pending"
run "$B/usbgw" revoke desk17:1-2 -m "demo over"
sleep 0.5
run "$B/usbgw" show desk17:1-2 | head -20

say "7. Every decision is auditable with SQL (demo/usbgw.db)"
if command -v sqlite3 >/dev/null; then
	run sqlite3 -header -column "$D/usbgw.db" \
	    "SELECT seq, at_utc, event, busid, old_state, new_state, actor_name, reason FROM v_audit WHERE busid = 'desk17:1-2'"
fi
run "$B/usbgw" audit verify

say "Done.  Logs and the database are in demo/."
