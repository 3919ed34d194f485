# tests/bench/lib.sh -- shared by the relay benchmarks (bash; sourced).
#
# The script sets, before sourcing: NAME (for messages), and after:
# W (its work directory), ADDR and BUSID (associative arrays by path
# name), TC (usbip-tc), and optionally TC_PREFIX (an array: a command the
# client runs under, e.g. ip netns exec NS) and TC_TLS (an associative
# array: path name -> a --tls-dir for usbip-tc on that path).  It gets: a
# PIDS array of background processes, killed and waited for at exit with
# W removed (add its own steps with the CLEANUP_MORE function); die,
# wait_file, free_port, field, median, run_tc and measure_rounds.

PIDS=()
TC_PREFIX=()
declare -A TC_TLS=()
CLEANUP_MORE() { :; }
bench_cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	CLEANUP_MORE
	[ -n "${W:-}" ] && rm -rf "$W"
}
trap bench_cleanup EXIT
trap 'exit 1' INT TERM HUP

die() {			# die MESSAGE: the logs' tails, exit 1
	local f
	echo "$NAME bench: $*"
	for f in "$W"/*.log; do
		[ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
	done
	exit 1
}

wait_file() {		# wait_file FILE: up to 10 s for a non-empty FILE
	local i
	for ((i = 0; i < 200; i++)); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

free_port() {		# a TCP port nothing listens on (a guess, checked)
	local p i
	for ((i = 0; i < 100; i++)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		if ! ss -Htan "( sport = :$p )" 2>/dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

field() {		# field KEY TEXT: KEY= of the last RESULT line
	printf '%s\n' "$2" | grep '^RESULT ' | tail -n 1 | tr ' ' '\n' |
	    sed -n "s/^$1=//p" | head -n 1
}

median() {		# median of the numbers given
	printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
	    awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_tc PATH COMMAND ARGS...: one usbip-tc run on PATH, retried (the
# gateway needs a moment to reclaim the device after the last client).
run_tc() {
	local path=$1 out try
	local tls=()
	shift
	[ -n "${TC_TLS[$path]:-}" ] && tls=(--tls-dir "${TC_TLS[$path]}")
	for try in 1 2 3 4 5; do
		if out=$("${TC_PREFIX[@]}" "$TC" "$1" "${ADDR[$path]}" \
		    "${BUSID[$path]}" "${@:2}" "${tls[@]}" 2>&1); then
			printf '%s\n' "$out"
			return 0
		fi
		sleep 0.3
	done
	echo "$NAME bench: usbip-tc $* on $path failed:" >&2
	printf '%s\n' "$out" | tail -n 5 >&2
	return 1
}

# measure_rounds: REPEAT rounds over PATHS (the paths interleaved) of bulk
# IN throughput (64 KiB URBs, 16 in flight, SECS s: TPUT[path]) and
# 64-byte URB round trips (ITER one at a time: LMED, LP99[path]), each a
# space-separated list of the rounds' figures; failed=1 if a run failed.
# Hooks around each throughput run: on_load_start PATH, on_load_done
# PATH OUTPUT.
declare -A TPUT LMED LP99
failed=0
on_load_start() { :; }
on_load_done() { :; }
measure_rounds() {
	local r p out
	for ((r = 1; r <= REPEAT; r++)); do
		for p in $PATHS; do
			on_load_start "$p"
			if out=$(run_tc "$p" load --dir in --urb 64K --inflight 16 \
			    --seconds "$SECS" --no-verify); then
				TPUT[$p]="${TPUT[$p]:-} $(field mb_per_s "$out")"
				on_load_done "$p" "$out"
			else
				failed=1
			fi
			if out=$(run_tc "$p" latency --kind in --size 64 \
			    --iterations "$ITER" --warmup 200); then
				LMED[$p]="${LMED[$p]:-} $(field median_us "$out")"
				LP99[$p]="${LP99[$p]:-} $(field p99_us "$out")"
			else
				failed=1
			fi
		done
		printf 'round %d:' "$r"
		for p in $PATHS; do
			printf '  %s %s MB/s %s us' "$p" "${TPUT[$p]##* }" \
			    "${LMED[$p]##* }"
		done
		printf '\n'
	done
}
