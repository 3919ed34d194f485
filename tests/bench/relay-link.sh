#!/bin/bash
# The relay over links, as deployed: thin client, gateway and exporter in
# three network namespaces made here, joined by veth pairs shaped to
# BENCH_LINK_RATE (default 1gbit, tc tbf on every link end), and the same
# two measurements as relay.sh for
#
#   direct   client -(link)-> usbgw-sim
#   gateway  client -(link)-> usbgwd -(link)-> usbgw-sim
#
# On loopback (relay.sh) the paths differ by the CPU a relay process takes
# from the two cores the endpoints already saturate; here the link is what
# a deployment is limited by, and the ratio says whether the gateway costs
# throughput there.  Needs root (namespaces, tc); prints "skipped" and
# exits 0 otherwise.  Addresses: 10.231.{1,2,3}.0/24 inside the namespaces
# only.  BENCH_SECONDS, BENCH_REPEAT, BENCH_ITERATIONS as in relay.sh.
set -u
B=${USBGW_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
SECS=${BENCH_SECONDS:-5}
ITER=${BENCH_ITERATIONS:-2000}
REPEAT=${BENCH_REPEAT:-3}
RATE=${BENCH_LINK_RATE:-1gbit}
TC=$B/usbip-tc
SIM=$B/usbgw-sim
GWD=$B/usbgwd
CLI=$B/usbgw

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1 ||
    ! command -v tc >/dev/null 2>&1; then
	echo "relay-link bench: skipped (needs root, ip and tc)"
	exit 0
fi
for p in "$TC" "$SIM" "$GWD" "$CLI"; do
	if [ ! -x "$p" ]; then
		echo "relay-link bench: $p not built"
		exit 1
	fi
done

S=$$
NC=ugw-c-$S NG=ugw-g-$S NE=ugw-e-$S
NAME=relay-link
. "$(dirname "$0")/lib.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/usbgw-bench-link.XXXXXX") || exit 1
CLEANUP_MORE() {
	ip netns del "$NC" 2>/dev/null
	ip netns del "$NG" 2>/dev/null
	ip netns del "$NE" 2>/dev/null
}
TC_PREFIX=(ip netns exec "$NC")

# link NS1 IF1 ADDR1 NS2 IF2 ADDR2: a shaped veth pair
link() {
	ip link add "$2" type veth peer name "$5" || return 1
	ip link set "$2" netns "$1" && ip link set "$5" netns "$4" &&
	ip -n "$1" addr add "$3/24" dev "$2" && ip -n "$4" addr add "$6/24" dev "$5" &&
	ip -n "$1" link set "$2" up && ip -n "$4" link set "$5" up &&
	ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst 512kb latency 20ms &&
	ip netns exec "$4" tc qdisc add dev "$5" root tbf rate "$RATE" burst 512kb latency 20ms
}

for n in "$NC" "$NG" "$NE"; do
	ip netns add "$n" || die "cannot make network namespace $n"
	ip -n "$n" link set lo up
done
link "$NC" uc1$S 10.231.1.1 "$NE" ue1$S 10.231.1.2 || die "link client-exporter"
link "$NC" uc2$S 10.231.2.1 "$NG" ug2$S 10.231.2.2 || die "link client-gateway"
link "$NG" ug3$S 10.231.3.1 "$NE" ue3$S 10.231.3.2 || die "link gateway-exporter"

cat >"$W/sim.conf" <<'EOF'
device 1-5 { type sourcesink; }
EOF
ip netns exec "$NE" "$SIM" -A -l 10.231.1.2:0 -p "$W/simd.port" -c "$W/sim.conf" >"$W/simd.log" 2>&1 &
PIDS+=($!)
ip netns exec "$NE" "$SIM" -A -l 10.231.3.2:0 -p "$W/simg.port" -c "$W/sim.conf" >"$W/simg.log" 2>&1 &
PIDS+=($!)
wait_file "$W/simd.port" && wait_file "$W/simg.port" || die "simulators did not start"

printf 'exporter sim 10.231.3.2:%s\npoll-interval = 1s\n' "$(cat "$W/simg.port")" >"$W/gw.conf"
ip netns exec "$NG" "$GWD" -f -c "$W/gw.conf" -d "$W/gw.db" -s "$W/gw.sock" -p none \
    -l 10.231.2.2:0 -P "$W/gw.port" -v warning >"$W/gw.log" 2>&1 &
PIDS+=($!)
wait_file "$W/gw.port" || die "usbgwd did not start"
for ((i = 0; i < 200; i++)); do
	"$CLI" -s "$W/gw.sock" approve sim:1-5 >/dev/null 2>&1 && break
	sleep 0.1
done
[ $i -lt 200 ] || die "could not approve sim:1-5 at the gateway"

declare -A ADDR=([direct]=10.231.1.2:$(cat "$W/simd.port") [gateway]=10.231.2.2:$(cat "$W/gw.port"))
declare -A BUSID=([direct]=1-5 [gateway]=sim:1-5)
PATHS="direct gateway"

echo "relay over $RATE links: $REPEAT rounds; throughput: --dir in, 64 KiB URBs," \
    "16 in flight, ${SECS} s; latency: 64-byte bulk IN, $ITER URBs one at a time"
measure_rounds

# shellcheck disable=SC2086
dt=$(median ${TPUT[direct]:-}) gt=$(median ${TPUT[gateway]:-})
# shellcheck disable=SC2086
dm=$(median ${LMED[direct]:-}) gm=$(median ${LMED[gateway]:-})
printf '\n%-8s %14s %16s\n' path "MB/s (median)" "median RTT (us)"
printf '%-8s %14s %16s\n' direct "$dt" "$dm" gateway "$gt" "$gm"
awk -v gt="$gt" -v dt="$dt" -v gm="$gm" -v dm="$dm" -v rate="$RATE" '
BEGIN {
	if (dt > 0) {
		printf "\nover %s links: gateway/direct throughput %.3f (target >= 0.9: %s), added median latency %.1f us\n",
		    rate, gt / dt, ((gt / dt >= 0.9) ? "target met" : "TARGET MISSED"), gm - dm
		printf "RESULT link_rate=%s link_gw_direct_ratio=%.3f link_added_median_us=%.1f\n", rate, gt / dt, gm - dm
	} else
		print "\nratio: not computed (a throughput is missing)"
}'
[ $failed = 0 ] || { echo "relay-link bench: some measurements failed"; exit 1; }
exit 0
