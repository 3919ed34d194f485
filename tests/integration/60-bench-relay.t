#!/bin/bash
# The relay benchmarks (make bench) work: relay-bare, the floor they
# compare the gateway with, is a faithful relay; relay.sh measures all
# four paths and prints every ratio; tls.sh measures plain, stunnel and
# native TLS and prints its one RESULT line; relay-link.sh (as root)
# shapes its links to the rate asked and leaves no namespace behind.  No figure is
# compared with a speed target here: that is the benchmark's job.
. "$(dirname "$0")/../lib/common.sh"
timing_sensitive

BARE=$USBGW_BUILD/relay-bare
need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$BARE" socat
plan 21

num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v v="$1" 'BEGIN { exit !(v > 0) }'; }

# ---- relay-bare ---------------------------------------------------------
printf 'device 1-5 { type sourcesink; }\ndevice 1-2 { type storage; }\n' >"$T/sim.conf"
start_bg sim "$SIM" -l 127.0.0.1:0 -p "$T/sim.port" -c "$T/sim.conf"
wait_file "$T/sim.port" 10 sim || bail_out "simulator did not start"
start_bg bare "$BARE" -l 127.0.0.1:0 -u "127.0.0.1:$(cat "$T/sim.port")" -p "$T/bare.port"
wait_file "$T/bare.port" 10 bare || bail_out "relay-bare did not start"
A=127.0.0.1:$(cat "$T/bare.port")

ok "the test script passes through relay-bare (source/sink)" "$TC" script "$A" 1-5
is "$(field failed "$OUT")" 0 "no step failed"
ok "16 MiB verified bulk loopback through relay-bare (mass storage)" \
    "$TC" script "$A" 1-2 --bytes 16M --skip unlink,unlink-pending,unlink-completed,interrupt,iso
is "$(field failed "$OUT")" 0 "no step failed"
nok "relay-bare refuses a bad address" "$BARE" -l 127.0.0.1:x -u 127.0.0.1:1
like "$ERR" 'bad address "127.0.0.1:x"' "and names it"

# ---- relay.sh -------------------------------------------------------------
run -t 180 env BENCH_SECONDS=1 BENCH_REPEAT=1 BENCH_ITERATIONS=100 \
    bash "$TOP/tests/bench/relay.sh"
is "$RC" 0 "relay.sh measured every figure" || _diag_output
for k in gw_direct_ratio gw_socat_ratio gw_bare_ratio bare_direct_ratio; do
	if num "$(field $k "$OUT")"; then pass "relay.sh: $k is a positive number"; else
		fail "relay.sh: $k is a positive number"
		diag "got '$(field $k "$OUT")'"
	fi
done
like "$OUT" $'\ngateway +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+\n' \
    "the gateway's row has its CPU per GB"

# ---- tls.sh ---------------------------------------------------------------
if ! command -v stunnel4 >/dev/null 2>&1 && ! command -v stunnel >/dev/null 2>&1; then
	skip 5 "tls.sh needs stunnel (tests/deps.sh installs stunnel4)"
else
	run -t 180 env BENCH_SECONDS=1 BENCH_REPEAT=1 BENCH_ITERATIONS=100 \
	    bash "$TOP/tests/bench/tls.sh"
	is "$RC" 0 "tls.sh measured every figure" || _diag_output
	is "$(printf '%s\n' "$OUT" | grep -c '^RESULT ')" 1 "tls.sh prints one RESULT line"
	for k in tls_mb_s stunnel_mb_s tls_stunnel_ratio; do
		if num "$(field $k "$OUT")"; then pass "tls.sh: $k is a positive number"; else
			fail "tls.sh: $k is a positive number"
			diag "got '$(field $k "$OUT")'"
		fi
	done
fi

# ---- relay-link.sh ----------------------------------------------------------
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
	skip 4 "relay-link.sh needs root and network namespaces"
else
	# namespaces are the machine's: the count below is only meaningful
	# if no other test makes or removes any meanwhile
	global_lock netns || bail_out "cannot take the netns lock"
	before=$(ip netns list | grep -c '^ugw-')
	run -t 180 env BENCH_LINK_RATE=100mbit BENCH_SECONDS=1 BENCH_REPEAT=1 \
	    BENCH_ITERATIONS=100 bash "$TOP/tests/bench/relay-link.sh"
	is "$RC" 0 "relay-link.sh measured every figure" || _diag_output
	num "$(field link_gw_direct_ratio "$OUT")" &&
	    pass "relay-link.sh: the ratio is a positive number" ||
	    fail "relay-link.sh: the ratio is a positive number"
	# 100 Mbit/s is 12.5 MB/s on the wire: the direct figure shows the
	# shaping took effect (unshaped veth moves hundreds of MB/s).
	direct=$(printf '%s\n' "$OUT" | awk '$1 == "direct" && $2 ~ /^[0-9.]+$/ { print $2 }')
	num_cmp "${direct:-0}" -le 13 "direct over a 100mbit link: at most 13 MB/s (got ${direct:-none})"
	is "$(ip netns list | grep -c '^ugw-')" "$before" "no namespace left behind"
	global_unlock netns
fi

done_testing
