#!/bin/bash
# The URB relay's cost: bulk throughput and URB round-trip latency seen
# by a vhci-side client (usbip-tc) over three paths to a simulated
# source/sink device, measured in one run:
#
#   direct   client -> usbgw-sim
#   gateway  client -> usbgwd -> usbgw-sim   (a second, identical simulator:
#                                            the gateway claims all of its
#                                            exporter's devices)
#   socat    client -> socat TCP-LISTEN:P,reuseaddr,fork TCP:127.0.0.1:SIM
#                      -> usbgw-sim
#   bare     client -> relay-bare -> usbgw-sim   (tests/tools/relay-bare.c:
#                                            read and write, nothing else;
#                                            the floor for any relay in a
#                                            process of its own)
#
# Throughput: --dir in, 64 KiB URBs, 16 in flight, BENCH_SECONDS each
# (default 5).  Latency: one 64-byte bulk IN URB at a time, median and
# p99 of BENCH_ITERATIONS (default 2000).  Each measurement is repeated
# BENCH_REPEAT times (default 3), the paths interleaved, and the median
# of the repetitions is reported.  Targets (issue 3): gateway >= 0.9x
# direct throughput, not slower than socat, added median latency <= 30 us.
# Also printed: the relay process's CPU time per GB relayed (gateway and
# bare, from /proc/PID/stat), and the gateway against the bare relay.
#
# BENCH_GW_RULE=RULE: the gateway's device is allowed by this admin rule
# instead of an approval (an interface-policy: the per-interface check).
#
# Exit status: 0 when every figure was measured (targets missed or not),
# 1 when a measurement could not be made.
set -u
B=${USBGW_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
SECS=${BENCH_SECONDS:-5}
ITER=${BENCH_ITERATIONS:-2000}
REPEAT=${BENCH_REPEAT:-3}
TC=$B/usbip-tc
BARE=$B/relay-bare
SIM=$B/usbgw-sim
GWD=$B/usbgwd
CLI=$B/usbgw

for p in "$TC" "$BARE" "$SIM" "$GWD" "$CLI"; do
	if [ ! -x "$p" ]; then
		echo "relay bench: $p not built"
		exit 1
	fi
done
if ! command -v socat >/dev/null 2>&1; then
	echo "relay bench: socat not installed"
	exit 1
fi

NAME=relay
. "$(dirname "$0")/lib.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/usbgw-bench-relay.XXXXXX") || exit 1

cat >"$W/sim.conf" <<'EOF'
device 1-5 { type sourcesink; }
EOF
start_sim() {		# start_sim NAME: prints its port
	"$SIM" -l 127.0.0.1:0 -p "$W/$1.port" -c "$W/sim.conf" >"$W/$1.log" 2>&1 &
	PIDS+=($!)
	wait_file "$W/$1.port" || die "simulator $1 did not start"
}
start_sim simd
start_sim simg
SIMD=$(cat "$W/simd.port")
SIMG=$(cat "$W/simg.port")

SOCATP=$(free_port) || die "no free port"
socat "TCP-LISTEN:$SOCATP,bind=127.0.0.1,reuseaddr,fork" "TCP:127.0.0.1:$SIMD" \
    >"$W/socat.log" 2>&1 &
PIDS+=($!)
for ((i = 0; i < 200; i++)); do
	ss -Htln "( sport = :$SOCATP )" 2>/dev/null | grep -q . && break
	sleep 0.05
done

"$BARE" -l 127.0.0.1:0 -u "127.0.0.1:$SIMD" -p "$W/bare.port" >"$W/bare.log" 2>&1 &
PIDS+=($!)
BAREPID=$!
wait_file "$W/bare.port" || die "relay-bare did not start"
BAREP=$(cat "$W/bare.port")

printf 'exporter sim 127.0.0.1:%s\npoll-interval = 1s\n' "$SIMG" >"$W/gw.conf"
"$GWD" -f -c "$W/gw.conf" -d "$W/gw.db" -s "$W/gw.sock" -p none -l 127.0.0.1:0 \
    -P "$W/gw.port" -v warning >"$W/gw.log" 2>&1 &
PIDS+=($!)
GWPID=$!
wait_file "$W/gw.port" || die "usbgwd did not start"
GWP=$(cat "$W/gw.port")
# BENCH_GW_RULE: an admin rule allows the device instead of an approval
# (e.g. one with an interface-policy, to measure the per-interface check)
if [ -n "${BENCH_GW_RULE:-}" ]; then
	"$CLI" -s "$W/gw.sock" policy add "$BENCH_GW_RULE" >/dev/null ||
	    die "the gateway refused BENCH_GW_RULE"
fi
for ((i = 0; i < 200; i++)); do
	[ -n "${BENCH_GW_RULE:-}" ] && "$CLI" -s "$W/gw.sock" list 2>/dev/null |
	    grep -q 'sim:1-5 .*authorized' && break
	[ -z "${BENCH_GW_RULE:-}" ] && "$CLI" -s "$W/gw.sock" approve sim:1-5 \
	    >/dev/null 2>&1 && break
	sleep 0.1
done
[ $i -lt 200 ] || die "could not approve sim:1-5 at the gateway"

declare -A ADDR=([direct]=127.0.0.1:$SIMD [gateway]=127.0.0.1:$GWP
    [socat]=127.0.0.1:$SOCATP [bare]=127.0.0.1:$BAREP)
declare -A BUSID=([direct]=1-5 [gateway]=sim:1-5 [socat]=1-5 [bare]=1-5)
declare -A RPID=([gateway]=$GWPID [bare]=$BAREPID)
PATHS="direct gateway socat bare"
HZ=$(getconf CLK_TCK)

cputicks() {		# cputicks PID: user + system clock ticks so far
	awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# the relay process's CPU ms per GB, for the paths with one
declare -A CPUGB
T0=0
on_load_start() {
	[ -n "${RPID[$1]:-}" ] && T0=$(cputicks "${RPID[$1]}")
	return 0
}
on_load_done() {
	[ -n "${RPID[$1]:-}" ] || return 0
	CPUGB[$1]="${CPUGB[$1]:-} $(awk -v t="$(( $(cputicks "${RPID[$1]}") - T0 ))" \
	    -v hz="$HZ" -v b="$(field bytes "$2")" \
	    'BEGIN { if (b > 0) printf "%.0f", t / hz * 1000 / (b / 1e9) }')"
}
echo "relay: $REPEAT rounds; throughput: --dir in, 64 KiB URBs, 16 in flight, ${SECS} s;" \
    "latency: 64-byte bulk IN, $ITER URBs one at a time"
measure_rounds
[ $failed = 0 ] || { echo "relay bench: some measurements failed"; }

declare -A MT MM MP MC
printf '\n%-8s %14s %16s %14s %18s\n' path "MB/s (median)" "median RTT (us)" \
    "p99 RTT (us)" "relay CPU ms/GB"
for p in $PATHS; do
	# shellcheck disable=SC2086
	MT[$p]=$(median ${TPUT[$p]:-})
	# shellcheck disable=SC2086
	MM[$p]=$(median ${LMED[$p]:-})
	# shellcheck disable=SC2086
	MP[$p]=$(median ${LP99[$p]:-})
	MC[$p]=-
	# shellcheck disable=SC2086
	[ -n "${RPID[$p]:-}" ] && MC[$p]=$(median ${CPUGB[$p]:-})
	printf '%-8s %14s %16s %14s %18s\n' "$p" "${MT[$p]}" "${MM[$p]}" "${MP[$p]}" "${MC[$p]}"
done

awk -v gt="${MT[gateway]}" -v dt="${MT[direct]}" -v st="${MT[socat]}" \
    -v gm="${MM[gateway]}" -v dm="${MM[direct]}" \
    -v bt="${MT[bare]}" -v bm="${MM[bare]}" '
function verdict(ok) { return ok ? "target met" : "TARGET MISSED" }
BEGIN {
	if (dt > 0 && st > 0) {
		r1 = gt / dt; r2 = gt / st; add = gm - dm
		printf "\ngateway/direct throughput  %.3f   (target >= 0.9: %s)\n", r1, verdict(r1 >= 0.9)
		printf "gateway/socat throughput   %.3f   (target >= 1.0: %s)\n", r2, verdict(r2 >= 1.0)
		printf "added median latency       %.1f us (target <= 30 us: %s)\n", add, verdict(add <= 30)
		if (bt > 0) {
			printf "\nthe floor on this machine (relay-bare: read and write, nothing else):\n"
			printf "bare/direct throughput     %.3f\n", bt / dt
			printf "bare added median latency  %.1f us\n", bm - dm
			printf "gateway/bare throughput    %.3f\n", gt / bt
			printf "gateway - bare latency     %.1f us\n", gm - bm
		}
		printf "RESULT gw_direct_ratio=%.3f gw_socat_ratio=%.3f added_median_us=%.1f bare_direct_ratio=%.3f gw_bare_ratio=%.3f bare_added_median_us=%.1f\n", r1, r2, add, bt / dt, (bt > 0 ? gt / bt : 0), bm - dm
	} else
		print "\nratios: not computed (a throughput is missing)"
}'
exit $failed
