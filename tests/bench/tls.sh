#!/bin/bash
# TLS for vhci hosts: the gateway's own TLS (tls-listen, protocol.md
# 1.10.7) against stunnel in front of its plain listener, and both
# against plain USB/IP, in one run, to one simulated source/sink device
# behind one usbgwd:
#
#   plain    usbip-tc -> usbgwd (plain listener) -> usbgw-sim
#   stunnel  usbip-tc -> stunnel client -> stunnel server -> usbgwd
#            (plain listener) -> usbgw-sim; TLS 1.3 between the two
#            stunnels, both 127.0.0.1, each a process of its own as on two
#            machines; the server shows the gateway's gateway.pem and
#            requires a client certificate from its CA (the host's, from
#            tlsid-issue), TCP_NODELAY on every socket
#   native   usbip-tc --tls-dir (its TLS relay, gateway/tls/tlsclient.c, in a
#            thread behind a socketpair) -> usbgwd tls-listen -> usbgw-sim
#
# Both TLS paths run the same OpenSSL and TLS 1.3 cipher suite with the
# same certificates (EC P-256, from the gateway's CA), so the difference
# is the relaying: stunnel's two extra processes and TCP hops against the
# gateway's in-process pump.
#
# The workloads are relay.sh's (tests/bench/lib.sh measure_rounds): bulk
# IN, 64 KiB URBs, 16 in flight, BENCH_SECONDS each (default 5); one
# 64-byte bulk IN URB at a time, median and p99 of BENCH_ITERATIONS
# (default 2000); BENCH_REPEAT rounds (default 3), the paths interleaved,
# the median of the rounds reported.  Also printed: the gateway side's
# CPU time per GB relayed (usbgwd, plus the stunnel server on that path,
# from /proc/PID/stat).  Target (issue 15): native >= 1.3x stunnel's
# throughput, its median latency no worse.  Last line:
#
#   RESULT tls_mb_s=… stunnel_mb_s=… tls_stunnel_ratio=… tls_added_us=…
#          stunnel_added_us=…          (added: median minus plain's)
#
# Exit status: 0 when every figure was measured (targets missed or not),
# 1 when a measurement could not be made.
set -u
B=${USBGW_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
SECS=${BENCH_SECONDS:-5}
ITER=${BENCH_ITERATIONS:-2000}
REPEAT=${BENCH_REPEAT:-3}
TC=$B/usbip-tc
SIM=$B/usbgw-sim
GWD=$B/usbgwd
CLI=$B/usbgw
ISSUE=$B/tlsid-issue

for p in "$TC" "$SIM" "$GWD" "$CLI" "$ISSUE"; do
	if [ ! -x "$p" ]; then
		echo "tls bench: $p not built"
		exit 1
	fi
done
STUNNEL=$(command -v stunnel4 || command -v stunnel) || {
	echo "tls bench: stunnel not installed (tests/deps.sh installs stunnel4)"
	exit 1
}

NAME=tls
. "$(dirname "$0")/lib.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/usbgw-bench-tls.XXXXXX") || exit 1

cat >"$W/sim.conf" <<'EOF'
device 1-5 { type sourcesink; }
EOF
"$SIM" -l 127.0.0.1:0 -p "$W/sim.port" -c "$W/sim.conf" >"$W/sim.log" 2>&1 &
PIDS+=($!)
wait_file "$W/sim.port" || die "simulator did not start"

TLSP=$(free_port) || die "no free port"
printf 'exporter sim 127.0.0.1:%s\npoll-interval = 1s\ntls-listen = 127.0.0.1:%s\n' \
    "$(cat "$W/sim.port")" "$TLSP" >"$W/gw.conf"
"$GWD" -f -c "$W/gw.conf" -d "$W/gw.db" -s "$W/gw.sock" -p none -l 127.0.0.1:0 \
    -P "$W/gw.port" -v warning >"$W/gw.log" 2>&1 &
PIDS+=($!)
GWPID=$!
wait_file "$W/gw.port" || die "usbgwd did not start"
GWP=$(cat "$W/gw.port")
for ((i = 0; i < 200; i++)); do
	"$CLI" -s "$W/gw.sock" approve sim:1-5 >/dev/null 2>&1 && break
	sleep 0.1
done
[ $i -lt 200 ] || die "could not approve sim:1-5 at the gateway"

# the host's certificate (the gateway's store exists once it started)
"$ISSUE" "$W/tls" "$W/host" bench01 >"$W/issue.log" 2>&1 ||
    die "tlsid-issue could not make a host certificate"

# the two stunnels: the gateway's server identity, the host's client one
SCP=$(free_port) || die "no free port"
SSP=$(free_port) || die "no free port"
[ "$SCP" != "$SSP" ] || SSP=$(free_port) || die "no free port"
stunnel_conf() {	# stunnel_conf NAME: common part
	cat <<EOF
foreground = yes
pid =
debug = 4
sslVersionMin = TLSv1.3
sslVersionMax = TLSv1.3
socket = l:TCP_NODELAY=1
socket = r:TCP_NODELAY=1
[$1]
TIMEOUTclose = 0
verifyChain = yes
requireCert = yes
EOF
}
{
	stunnel_conf gateway
	cat <<EOF
accept = 127.0.0.1:$SSP
connect = 127.0.0.1:$GWP
cert = $W/tls/gateway.pem
key = $W/tls/gateway.key
CAfile = $W/tls/ca.pem
EOF
} >"$W/stunnel-s.conf"
{
	stunnel_conf host
	cat <<EOF
client = yes
accept = 127.0.0.1:$SCP
connect = 127.0.0.1:$SSP
cert = $W/host/host.pem
key = $W/host/host.key
CAfile = $W/host/gateway-ca.pem
EOF
} >"$W/stunnel-c.conf"
"$STUNNEL" "$W/stunnel-s.conf" >"$W/stunnel-s.log" 2>&1 &
PIDS+=($!)
STSPID=$!
"$STUNNEL" "$W/stunnel-c.conf" >"$W/stunnel-c.log" 2>&1 &
PIDS+=($!)
for port in "$SSP" "$SCP" "$TLSP"; do
	for ((i = 0; i < 200; i++)); do
		ss -Htln "( sport = :$port )" 2>/dev/null | grep -q . && break
		sleep 0.05
	done
	[ $i -lt 200 ] || die "nothing listens on $port"
done

declare -A ADDR=([plain]=127.0.0.1:$GWP [stunnel]=127.0.0.1:$SCP
    [native]=127.0.0.1:$TLSP)
declare -A BUSID=([plain]=sim:1-5 [stunnel]=sim:1-5 [native]=sim:1-5)
TC_TLS=([native]=$W/host)
declare -A GWSIDE=([plain]=$GWPID [stunnel]="$GWPID $STSPID" [native]=$GWPID)
PATHS="plain stunnel native"
HZ=$(getconf CLK_TCK)

# one check before the rounds: each path imports and moves a URB
for p in $PATHS; do
	run_tc "$p" latency --kind in --size 64 --iterations 10 --warmup 0 \
	    >/dev/null || die "no URB round trip on the $p path"
done

cputicks() {		# cputicks PID...: their user + system clock ticks
	local p t=0 n
	for p in "$@"; do
		n=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null) || n=0
		t=$((t + ${n:-0}))
	done
	echo "$t"
}

declare -A CPUGB
T0=0
on_load_start() {
	# shellcheck disable=SC2086
	T0=$(cputicks ${GWSIDE[$1]})
}
on_load_done() {
	# shellcheck disable=SC2086
	CPUGB[$1]="${CPUGB[$1]:-} $(awk -v t="$(( $(cputicks ${GWSIDE[$1]}) - T0 ))" \
	    -v hz="$HZ" -v b="$(field bytes "$2")" \
	    'BEGIN { if (b > 0) printf "%.0f", t / hz * 1000 / (b / 1e9) }')"
}

echo "tls: $REPEAT rounds; throughput: --dir in, 64 KiB URBs, 16 in flight, ${SECS} s;" \
    "latency: 64-byte bulk IN, $ITER URBs one at a time"
echo "stunnel: $("$STUNNEL" -version 2>&1 | grep -m1 '^stunnel')"
measure_rounds
[ $failed = 0 ] || echo "tls bench: some measurements failed"

declare -A MT MM MP MC
printf '\n%-8s %14s %16s %14s %22s\n' path "MB/s (median)" "median RTT (us)" \
    "p99 RTT (us)" "gateway-side CPU ms/GB"
for p in $PATHS; do
	# shellcheck disable=SC2086
	MT[$p]=$(median ${TPUT[$p]:-})
	# shellcheck disable=SC2086
	MM[$p]=$(median ${LMED[$p]:-})
	# shellcheck disable=SC2086
	MP[$p]=$(median ${LP99[$p]:-})
	# shellcheck disable=SC2086
	MC[$p]=$(median ${CPUGB[$p]:-})
	printf '%-8s %14s %16s %14s %22s\n' "$p" "${MT[$p]}" "${MM[$p]}" "${MP[$p]}" \
	    "${MC[$p]}"
done

awk -v pt="${MT[plain]}" -v st="${MT[stunnel]}" -v nt="${MT[native]}" \
    -v pm="${MM[plain]}" -v sm="${MM[stunnel]}" -v nm="${MM[native]}" '
function verdict(ok) { return ok ? "target met" : "TARGET MISSED" }
BEGIN {
	if (pt > 0 && st > 0 && nt > 0 && pm > 0 && sm > 0 && nm > 0) {
		r = nt / st; na = nm - pm; sa = sm - pm
		printf "\nnative/stunnel throughput   %.3f   (target >= 1.3: %s)\n", r, verdict(r >= 1.3)
		printf "native/plain throughput     %.3f\n", nt / pt
		printf "stunnel/plain throughput    %.3f\n", st / pt
		printf "native added median latency  %.1f us\n", na
		printf "stunnel added median latency %.1f us (native no worse: %s)\n", sa, verdict(na <= sa)
		printf "RESULT tls_mb_s=%.0f stunnel_mb_s=%.0f tls_stunnel_ratio=%.3f tls_added_us=%.1f stunnel_added_us=%.1f\n", nt, st, r, na, sa
	} else {
		print "\nratios: not computed (a figure is missing)"
		exit 1
	}
}' || failed=1
exit $failed
