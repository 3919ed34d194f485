#!/bin/bash
# `usbgw list` at scale (issue 13): for each size in LIST_DEVICES (default
# "1000 10000"; 10 devices per exporter, one usbgw-sim), a fresh usbgwd
# gets every exporter (tests/tools/scale-ctl.py add) and, once every
# device is pending, at rest:
#
#   gateway     a `list` request answered in full on one connection, from
#               the request to the last byte of the reply, not parsed:
#               median of LIST_REPEAT (default 5)
#   e2e         `usbgw -s SOCK list --json > file` and `usbgw list > file`,
#               the whole command: median of LIST_REPEAT
#   client      the same two commands against a fake daemon that answers
#               with the gateway's recorded reply at once (scale-ctl.py
#               serve): what the CLI itself costs
#
# Target (issue 13): list --json of 10,000 devices <= 100 ms end to end.
# The last line is
#   RESULT list_json_ms=... list_ms=... gw_ms=... client_json_ms=...
#     client_table_ms=...
# with the figures of the largest size.  Exit status 0 when the run
# completed (target met or not), 1 when a measurement could not be made.
set -u
B=${USBGW_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
SIZES=${LIST_DEVICES:-1000 10000}
PER=10
REPEAT=${LIST_REPEAT:-5}
SIM=$B/usbgw-sim
GWD=$B/usbgwd
CLI=$B/usbgw
CTL="python3 $(cd "$(dirname "$0")/../tools" && pwd)/scale-ctl.py"

for p in "$SIM" "$GWD" "$CLI"; do
	[ -x "$p" ] || { echo "list bench: $p not built"; exit 1; }
done

NAME=list
. "$(dirname "$0")/lib.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/usbgw-bench-list.XXXXXX") || exit 1
ulimit -n "$(ulimit -Hn)" 2>/dev/null

f() {			# f KEY LINE: KEY= of a RESULT line
	printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}
verdict() {
	case $1 in ''|n/a|nan) echo MISSED; return ;; esac
	awk -v v="$1" -v t="$2" 'BEGIN { print v <= t ? "ok" : "MISSED" }'
}
stop() {		# stop PID: SIGTERM, then SIGKILL after 10 s
	local i
	kill "$1" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
# timed SOCK OUT ARGS...: median ms of REPEAT runs of usbgw -s SOCK ARGS > OUT
timed() {
	local sock=$1 out=$2 k s lt=()
	shift 2
	for ((k = 0; k < REPEAT; k++)); do
		s=$(date +%s%N)
		"$CLI" -s "$sock" "$@" >"$out" 2>"$W/cli.err" ||
		    { echo "  usbgw $* failed: $(head -c 300 "$W/cli.err")" >&2; }
		lt+=($(( ($(date +%s%N) - s) / 1000000 )))
	done
	median "${lt[@]}"
}

declare -A JS TB GW CJ CT
last=
for N in $SIZES; do
	NEXP=$(( (N + PER - 1) / PER ))
	echo "-- $N devices: $NEXP exporters x $PER"
	printf 'exporters %d devices-per-exporter %d type sourcesink\n' \
	    "$NEXP" "$PER" >"$W/s$N.conf"
	"$SIM" -c "$W/s$N.conf" -P "$W/s$N.ports" >"$W/s$N-sim.log" 2>&1 &
	SIMPID=$!
	PIDS+=($SIMPID)
	wait_file "$W/s$N.ports" || die "simulator did not start"
	printf '%s\n' "poll-interval = 3s" "max-devices-per-exporter = 64" \
	    "log-level = warning" >"$W/s$N-gw.conf"
	SOCK=$W/s$N.sock
	"$GWD" -f -c "$W/s$N-gw.conf" -d "$W/s$N.db" -s "$SOCK" -p none \
	    -l 127.0.0.1:0 -P "$W/s$N.gwport" -v warning \
	    >"$W/s$N-gw.log" 2>&1 &
	GWPID=$!
	PIDS+=($GWPID)
	wait_file "$W/s$N.gwport" || die "usbgwd did not start"
	for ((i = 0; i < 100; i++)); do
		[ -S "$SOCK" ] && break
		sleep 0.1
	done
	$CTL "$SOCK" add "$W/s$N.ports" >/dev/null ||
	    die "exporter.add failed"
	w=$($CTL "$SOCK" watch "$N" 180 2>/dev/null)
	[ "$(f reached "$w")" = 1 ] ||
	    die "not every device pending after 180 s: $w"
	r=$($CTL "$SOCK" list-raw "$REPEAT" "$W/frame$N")
	GW[$N]=$(f median_ms "$r")
	JS[$N]=$(timed "$SOCK" "$W/list$N.json" list --json)
	TB[$N]=$(timed "$SOCK" "$W/list$N.txt" list)
	listed=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' \
	    "$W/list$N.json" 2>/dev/null || echo "?")
	rows=$(($(wc -l <"$W/list$N.txt") - 1))
	stop "$GWPID"
	stop "$SIMPID"

	$CTL "$W/fake.sock" serve "$W/frame$N" 2>"$W/fake.log" &
	FAKEPID=$!
	PIDS+=($FAKEPID)
	for ((i = 0; i < 100; i++)); do
		[ -S "$W/fake.sock" ] && break
		sleep 0.05
	done
	CJ[$N]=$(timed "$W/fake.sock" "$W/fake$N.json" list --json)
	CT[$N]=$(timed "$W/fake.sock" "$W/fake$N.txt" list)
	stop "$FAKEPID"
	rm -f "$W/fake.sock"
	cmp -s "$W/fake$N.json" "$W/list$N.json" ||
	    echo "  (the fake daemon's list --json differs from the gateway's)"

	printf '  reply frame              %s bytes, %s devices listed, %s table rows\n' \
	    "$(f bytes "$r")" "$listed" "$rows"
	printf '  gateway: list reply      %s ms (median of %s, request to last byte)\n' \
	    "${GW[$N]}" "$REPEAT"
	printf '  usbgw list --json        %-8s ms (client alone %s ms; target <= 100 ms at 10,000)  %s\n' \
	    "${JS[$N]}" "${CJ[$N]}" "$(verdict "${JS[$N]}" 100)"
	printf '  usbgw list               %-8s ms (client alone %s ms)\n' \
	    "${TB[$N]}" "${CT[$N]}"
	last=$N
done

echo "RESULT list_json_ms=${JS[$last]} list_ms=${TB[$last]} gw_ms=${GW[$last]} client_json_ms=${CJ[$last]} client_table_ms=${CT[$last]}"
exit 0
