#!/usr/bin/env bash
# Run every libFuzzer harness for USBGW_FUZZ_SMOKE seconds (default 8) over
# its committed corpus, with its dictionary (tests/fuzz/NAME.dict) if it
# has one; a crash, leak, timeout or a dictionary libFuzzer cannot parse
# fails that harness.  USBGW_FUZZ_JOBS harnesses run at a time (default:
# the number of CPUs); results are reported in name order.
cd "$(dirname "$0")/../.." || exit 1
secs=${USBGW_FUZZ_SMOKE:-8}
jobs=${USBGW_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $secs$jobs in *[!0-9]*|'')
	echo "1..1"
	echo "not ok 1 - USBGW_FUZZ_SMOKE and USBGW_FUZZ_JOBS take whole numbers (got '$secs', '$jobs')"
	exit 1 ;;
esac
[ "$jobs" -ge 1 ] || jobs=1
# a crashing input is kept here (the work folders are removed)
keep=${USBGW_FUZZ_ARTIFACTS:-build-fuzz/smoke-artifacts}
fuzzers=$(ls build-fuzz/fuzz_* 2>/dev/null | grep -v '\.' || true)
n=$(echo "$fuzzers" | grep -c . || true)
if [ "$n" -eq 0 ]; then
	echo "1..0 # SKIP no fuzzers built"
	exit 0
fi
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT

# one harness: its verdict line in $top/NAME.res, its log beside it
smoke_one() {
	local f=$1 name=${1#build-fuzz/fuzz_} work corpus dict execs
	work=$top/$name
	mkdir -p "$work/corpus"
	corpus=tests/fuzz/corpus/$name
	[ -d "$corpus" ] || corpus=
	dict=tests/fuzz/$name.dict
	[ -f "$dict" ] && dict=-dict=$dict || dict=
	if "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix="$work/" $dict "$work/corpus" \
	    $corpus >"$work/log" 2>&1 &&
	    ! grep -q '^ParseDictionaryFile' "$work/log"; then
		execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || true)
		echo "ok - fuzz_$name ${secs}s${execs:+, $execs execs}" >"$work.res"
	else
		mkdir -p "$keep/$name"
		cp "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* \
		    "$keep/$name/" 2>/dev/null
		{ echo "not ok - fuzz_$name (inputs kept in $keep/$name)"
		  tail -40 "$work/log" | sed 's/^/# /'; } >"$work.res"
	fi
}

running=0
for f in $fuzzers; do
	smoke_one "$f" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

echo "1..$n"
i=0
for f in $fuzzers; do
	i=$((i + 1))
	name=${f#build-fuzz/fuzz_}
	if [ -s "$top/$name.res" ]; then
		sed "1s/^\(not \)\{0,1\}ok /&$i /" "$top/$name.res"
	else
		echo "not ok $i - fuzz_$name (no result)"
	fi
done
