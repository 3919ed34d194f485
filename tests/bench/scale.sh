#!/bin/bash
# Scale (issue 13): one gateway, many exporters.  For each size in
# SCALE_DEVICES (default "1000 10000"; 10 devices per exporter,
# SCALE_PER_EXPORTER), one usbgw-sim serves every exporter (an `exporters`
# statement, one port each) and a fresh usbgwd gets them all through
# `exporter.add` (tests/tools/scale-ctl.py, pipelined on one control
# connection; the configuration file holds at most 256).  Measured:
#
#   pending_s     from the first exporter.add to the first `status` that
#                 counts every device pending ("never (N of M pending
#                 after T s)" past SCALE_TIMEOUT, default 180 s)
#   cpu_ms/dev    the gateway's utime+stime (/proc/PID/stat) over that
#                 time, per device; and the ratio largest/smallest size
#   rss_kib/dev   VmRSS when all are pending minus VmRSS before, per device
#   control       `status` on a fresh connection every 0.1 s during the
#                 storm and 30 times at rest: p50, p99, max; and with each
#                 storm sample an operator's approve and revoke of the
#                 first exporter's 1-1 (fresh connections), timed
#   list_ms       `usbgw list --json` at rest, median of 3
#
# Then concurrency: SCALE_STREAMS (default 100) storage devices allowed by
# a rule, each used by its own usbip-tc running a verified bulk loopback
# (64 KiB URBs, 4 in flight, SCALE_SECONDS, default 10) through the
# gateway at once; against one stream alone: aggregate ratio (sum of the
# streams' MB/s / the lone stream's) and fairness (slowest / fastest).
#
# Targets (issue 13, at 10,000 devices): all pending <= 30 s; <= 0.5 ms
# CPU per device with 10k/1k <= 1.2; control p99 <= 100 ms during the
# storm; list --json <= 100 ms; RSS <= 16 KiB per device; aggregate >=
# 0.9x one stream; min/max >= 0.8.
#
# SCALE_DEVICES=1000 is the quick mode.  SCALE_POLL: the gateway's
# poll-interval (3s).  SCALE_PERF=DIR: `perf record` of the gateway
# during each storm, to DIR/perf-N.data (call graphs: SCALE_PERF_CG,
# default dwarf,16384, as the build has no frame pointers; sampling
# frequency SCALE_PERF_FREQ, default 499 Hz).  SCALE_STREAMS=0 skips the
# concurrency part.  The last line is
#   RESULT scale_pending_s=... cpu_ms_per_dev=... cpu_ratio_10k_1k=...
#     ctl_p99_ms=... list_ms=... rss_kib_per_dev=... agg_ratio=... fairness=...
# with the figures of the largest size ("never", "n/a" where none).
# Exit status: 0 when the run completed (targets met or not), 1 when a
# measurement could not be made.
set -u
B=${USBGW_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
SIZES=${SCALE_DEVICES:-1000 10000}
PER=${SCALE_PER_EXPORTER:-10}
TIMEOUT=${SCALE_TIMEOUT:-180}
POLL=${SCALE_POLL:-3s}
STREAMS=${SCALE_STREAMS:-100}
SECS=${SCALE_SECONDS:-10}
PERFDIR=${SCALE_PERF:-}
SIM=$B/usbgw-sim
GWD=$B/usbgwd
CLI=$B/usbgw
TC=$B/usbip-tc
CTL="python3 $(cd "$(dirname "$0")/../tools" && pwd)/scale-ctl.py"

for p in "$SIM" "$GWD" "$CLI" "$TC"; do
	[ -x "$p" ] || { echo "scale bench: $p not built"; exit 1; }
done

NAME=scale
. "$(dirname "$0")/lib.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/usbgw-bench-scale.XXXXXX") || exit 1
HZ=$(getconf CLK_TCK)
ulimit -n "$(ulimit -Hn)" 2>/dev/null

cpu_ms() {		# cpu_ms PID: utime + stime so far, in ms
	awk -v hz="$HZ" '{ printf "%.0f\n", ($14 + $15) * 1000 / hz }' \
	    "/proc/$1/stat" 2>/dev/null || echo 0
}
rss_kib() {		# rss_kib PID
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}
f() {			# f KEY LINE: KEY= of a RESULT line
	printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}
calc() { awk "BEGIN { printf \"%.${2:-2}f\", $1 }"; }
# verdict VALUE OP TARGET: "ok" or "MISSED" (n/a and never miss)
verdict() {
	case $1 in ''|n/a|never|nan) echo MISSED; return ;; esac
	awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN {
	    ok = op == "<=" ? v <= t : v >= t; print ok ? "ok" : "MISSED" }'
}

# stop PID: SIGTERM, then SIGKILL after 10 s
stop() {
	local i
	kill "$1" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# start_pair TAG SIMCONF GWCONF-LINES...: a simulator and a gateway;
# sets SIMPID GWPID GWP SOCK
start_pair() {
	local tag=$1 conf=$2
	shift 2
	"$SIM" -c "$conf" -P "$W/$tag.ports" -C "$W/$tag.simctl" \
	    >"$W/$tag-sim.log" 2>&1 &
	SIMPID=$!
	PIDS+=($SIMPID)
	wait_file "$W/$tag.ports" || die "simulator ($tag) did not start"
	printf '%s\n' "$@" >"$W/$tag-gw.conf"
	SOCK=$W/$tag.sock
	"$GWD" -f -c "$W/$tag-gw.conf" -d "$W/$tag.db" -s "$SOCK" -p none \
	    -l 127.0.0.1:0 -P "$W/$tag.gwport" -v warning \
	    >"$W/$tag-gw.log" 2>&1 &
	GWPID=$!
	PIDS+=($GWPID)
	wait_file "$W/$tag.gwport" || die "usbgwd ($tag) did not start"
	GWP=$(cat "$W/$tag.gwport")
	for ((i = 0; i < 100; i++)); do
		[ -S "$SOCK" ] && break
		sleep 0.1
	done
}

declare -A PEND CPU RSS P99 P50 MAX RP99 LIST
sizes_done=""
for N in $SIZES; do
	NEXP=$(( (N + PER - 1) / PER ))
	echo "-- $N devices: $NEXP exporters x $PER (poll-interval $POLL)"
	printf 'exporters %d devices-per-exporter %d type sourcesink\n' \
	    "$NEXP" "$PER" >"$W/s$N.conf"
	maxdev=$(( PER > 64 ? PER : 64 ))
	start_pair "s$N" "$W/s$N.conf" "poll-interval = $POLL" \
	    "max-devices-per-exporter = $maxdev" "log-level = warning"
	rss0=$(rss_kib "$GWPID")
	cpu0=$(cpu_ms "$GWPID")
	PERFPID=
	if [ -n "$PERFDIR" ]; then
		mkdir -p "$PERFDIR"
		perf record -q --call-graph "${SCALE_PERF_CG:-dwarf,16384}" \
		    -F "${SCALE_PERF_FREQ:-499}" -p "$GWPID" -o "$PERFDIR/perf-$N.data" \
		    >"$W/perf-$N.log" 2>&1 &
		PERFPID=$!
		sleep 0.5
	fi
	t0=$(date +%s.%N)
	$CTL "$SOCK" add "$W/s$N.ports" >"$W/add-$N.out" 2>"$W/add-$N.err" &
	ADDPID=$!
	first=$(awk 'NR == 1 { print $1; exit }' "$W/s$N.ports")
	w=$($CTL "$SOCK" watch "$N" "$TIMEOUT" "$t0" "$first:1-1" \
	    2>"$W/watch-$N.err")
	cpu1=$(cpu_ms "$GWPID")
	rss1=$(rss_kib "$GWPID")
	[ -n "$PERFPID" ] && { kill -INT "$PERFPID"; wait "$PERFPID"; }
	wait "$ADDPID"
	cat "$W/watch-$N.err"
	add=$(cat "$W/add-$N.out")
	[ -s "$W/add-$N.err" ] && head -n 5 "$W/add-$N.err"
	[ -n "$w" ] || die "scale-ctl watch gave no result"
	if [ "$(f reached "$w")" = 1 ]; then
		PEND[$N]=$(calc "$(f pending_s "$w")")
		pend_txt="${PEND[$N]} s"
	else
		PEND[$N]=never
		pend_txt="never ($(f pending "$w") of $N pending after $TIMEOUT s)"
	fi
	CPU[$N]=$(calc "($cpu1 - $cpu0) / $N" 3)
	RSS[$N]=$(calc "($rss1 - $rss0) / $N" 1)
	P50[$N]=$(f p50_ms "$w"); P99[$N]=$(f p99_ms "$w"); MAX[$N]=$(f max_ms "$w")
	r=$($CTL "$SOCK" rest 30)
	RP99[$N]=$(f p99_ms "$r")
	lt=()
	for k in 1 2 3; do
		s=$(date +%s%N)
		"$CLI" -s "$SOCK" list --json >"$W/list.json" 2>/dev/null ||
		    echo "  usbgw list --json failed"
		lt+=($(( ($(date +%s%N) - s) / 1000000 )))
	done
	LIST[$N]=$(median "${lt[@]}")
	listed=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' \
	    "$W/list.json" 2>/dev/null || echo "?")
	printf '  exporter.add: %s of %s in %s s\n' "$(f added "$add")" \
	    "$NEXP" "$(f seconds "$add")"
	printf '  all pending after        %-12s (target <= 30 s at 10,000)\n' \
	    "$pend_txt"
	printf '  gateway CPU per device   %-12s (target <= 0.5 ms)  %s\n' \
	    "${CPU[$N]} ms" "$(verdict "${CPU[$N]}" '<=' 0.5)"
	printf '  RSS per device           %-12s (target <= 16 KiB)  %s\n' \
	    "${RSS[$N]} KiB" "$(verdict "${RSS[$N]}" '<=' 16)"
	printf '  control during storm     p50 %s p99 %s max %s ms over %s samples, %s failed (target p99 <= 100 ms)  %s\n' \
	    "${P50[$N]}" "${P99[$N]}" "${MAX[$N]}" "$(f samples "$w")" \
	    "$(f failed "$w")" "$(verdict "${P99[$N]}" '<=' 100)"
	printf '  approve+revoke in storm  p50 %s p99 %s max %s ms over %s requests (%s error replies: device still probing)\n' \
	    "$(f decide_p50_ms "$w")" "$(f decide_p99_ms "$w")" \
	    "$(f decide_max_ms "$w")" "$(f decide_n "$w")" \
	    "$(f decide_errors "$w")"
	printf '  control at rest          p50 %s p99 %s max %s ms\n' \
	    "$(f p50_ms "$r")" "${RP99[$N]}" "$(f max_ms "$r")"
	printf '  list --json at rest      %-12s (%s devices; target <= 100 ms)  %s\n' \
	    "${LIST[$N]} ms" "$listed" "$(verdict "${LIST[$N]}" '<=' 100)"
	printf '  most devices gone at one sample during the storm: %s\n' \
	    "$(f max_gone "$w")"
	stop "$GWPID"
	stop "$SIMPID"
	sizes_done="$sizes_done $N"
done

first=${sizes_done# }; first=${first%% *}
last=${sizes_done##* }
ratio=n/a
if [ "$first" != "$last" ] && [ "${CPU[$first]}" != 0.000 ]; then
	ratio=$(calc "${CPU[$last]} / ${CPU[$first]}")
	printf -- '-- CPU per device %s/%s: %s (target <= 1.2)  %s\n' "$last" \
	    "$first" "$ratio" "$(verdict "$ratio" '<=' 1.2)"
fi

agg=n/a fair=n/a
if [ "$STREAMS" -gt 0 ]; then
	echo "-- concurrency: $STREAMS verified bulk loopback streams through one gateway"
	NEXP=$(( (STREAMS + 9) / 10 ))
	printf 'exporters %d devices-per-exporter 10 type storage name-prefix st\n' \
	    "$NEXP" >"$W/c.conf"
	start_pair c "$W/c.conf" "poll-interval = 1s" \
	    "max-sessions = $((STREAMS * 2 + 16))" \
	    "max-sessions-per-host = $((STREAMS * 2 + 16))" \
	    "log-level = warning"
	"$CLI" -s "$SOCK" policy add 'allow id 1209:0002' >/dev/null ||
	    die "policy add failed"
	$CTL "$SOCK" add "$W/c.ports" >/dev/null
	for ((i = 0; i < 600; i++)); do
		n=$("$CLI" -s "$SOCK" list --state authorized 2>/dev/null |
		    grep -c '^st')
		[ "$n" -ge "$STREAMS" ] && break
		sleep 0.2
	done
	[ "$n" -ge "$STREAMS" ] || die "only $n of $STREAMS devices authorized"
	busids=()
	for ((e = 1; e <= NEXP; e++)); do
		for ((d = 1; d <= 10; d++)); do
			busids+=("st$e:1-$d")
		done
	done
	one_stream() {		# one_stream BUSID OUTFILE
		local try
		for try in 1 2 3 4 5; do
			"$TC" load "127.0.0.1:$GWP" "$1" --dir loop --urb 64K \
			    --inflight 4 --seconds "$SECS" >"$2" 2>&1 &&
			    grep -q 'verified=yes' "$2" && return 0
			sleep 0.5
		done
		return 1
	}
	one_stream "${busids[0]}" "$W/solo.out" || {
		tail -n 5 "$W/solo.out"; die "the lone stream failed"; }
	solo=$(f mb_per_s "$(grep '^RESULT' "$W/solo.out")")
	# the lone stream's device is re-claimed once it is let go
	sleep 1
	spids=()
	for ((k = 0; k < STREAMS; k++)); do
		one_stream "${busids[$k]}" "$W/st$k.out" &
		spids+=($!)
	done
	bad=0
	for p in "${spids[@]}"; do wait "$p" || bad=$((bad + 1)); done
	rates=$(for ((k = 0; k < STREAMS; k++)); do
		grep -h '^RESULT' "$W/st$k.out" | grep 'verified=yes' |
		    tr ' ' '\n' | sed -n 's/^mb_per_s=//p'
	done)
	nr=$(printf '%s\n' "$rates" | grep -c .)
	sum=$(printf '%s\n' "$rates" | awk '{ s += $1 } END { printf "%.1f", s }')
	min=$(printf '%s\n' "$rates" | sort -g | head -n 1)
	max=$(printf '%s\n' "$rates" | sort -g | tail -n 1)
	if [ "$nr" -eq "$STREAMS" ] && [ -n "$solo" ]; then
		agg=$(calc "$sum / $solo")
		fair=$(calc "$min / $max")
	fi
	printf '  one stream alone         %s MB/s\n' "$solo"
	printf '  %d at once               %s verified, %s failed; sum %s MB/s, slowest %s, fastest %s\n' \
	    "$STREAMS" "$nr" "$bad" "$sum" "$min" "$max"
	printf '  aggregate / one stream   %-12s (target >= 0.9)  %s\n' "$agg" \
	    "$(verdict "$agg" '>=' 0.9)"
	printf '  slowest / fastest        %-12s (target >= 0.8)  %s\n' "$fair" \
	    "$(verdict "$fair" '>=' 0.8)"
	stop "$GWPID"
	stop "$SIMPID"
fi

echo "RESULT scale_pending_s=${PEND[$last]} cpu_ms_per_dev=${CPU[$last]} cpu_ratio_10k_1k=$ratio ctl_p99_ms=${P99[$last]} list_ms=${LIST[$last]} rss_kib_per_dev=${RSS[$last]} agg_ratio=$agg fairness=$fair"
exit 0
