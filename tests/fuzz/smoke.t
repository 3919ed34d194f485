#!/usr/bin/env bash
# Run every libFuzzer harness for USBGW_FUZZ_SMOKE seconds (default 8) over
# its committed corpus, with its dictionary (tests/fuzz/NAME.dict) if it
# has one; a crash, leak, timeout or a dictionary libFuzzer cannot parse
# fails that harness.
cd "$(dirname "$0")/../.."
secs=${USBGW_FUZZ_SMOKE:-8}
fuzzers=$(ls build-fuzz/fuzz_* 2>/dev/null | grep -v '\.' || true)
n=0
for f in $fuzzers; do n=$((n + 1)); done
if [ "$n" -eq 0 ]; then
	echo "1..0 # SKIP no fuzzers built"
	exit 0
fi
echo "1..$n"
i=0
for f in $fuzzers; do
	i=$((i + 1))
	name=${f#build-fuzz/fuzz_}
	work=$(mktemp -d)
	corpus=tests/fuzz/corpus/$name
	[ -d "$corpus" ] || corpus=
	dict=tests/fuzz/$name.dict
	[ -f "$dict" ] && dict=-dict=$dict || dict=
	if "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix="$work/" $dict "$work" \
	    $corpus >"$work/log" 2>&1 &&
	    ! grep -q '^ParseDictionaryFile' "$work/log"; then
		execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || true)
		echo "ok $i - fuzz_$name ${secs}s${execs:+, $execs execs}"
	else
		echo "not ok $i - fuzz_$name"
		tail -40 "$work/log" | sed 's/^/# /'
	fi
	rm -rf "$work"
done
