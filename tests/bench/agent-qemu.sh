#!/bin/bash
# `make bench-agent`: issue 14's item 9 over several runs.  e2e 68 reads
# the same gadget disk through the gateway via usbip-host + usbipd and via
# usbgw-agent, five times with the guest's vCPUs left to the scheduler and
# five times split as deployed (protocol.md 1.9.6, "Benchmark"), and
# prints one ratio per placement.  Under TCG a single run's ratio moves
# by about +-20 % (protocol.md 1.9.3, "Where the two vCPUs run what"), so
# the goal (agent >= 0.8x usbip-host) is read on the median over
# BENCH_AGENT_RUNS runs (default 10) of the e2e scenarios 68 needs (00 20
# 60 61 67 68; E2E_AUDIO=0), one qemu at a time: run it on a quiet
# machine.  About 2 minutes a run.
#
# Prints a line per run and the medians; every run's prove output is kept
# in $B/bench-agent/run-N.log.  Not a test: exits 1 only if a run failed
# (a "not ok" or no ratio), never on the figures.
set -u
B=${USBGW_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
top=$(cd "$(dirname "$0")/../.." && pwd)
runs=${BENCH_AGENT_RUNS:-10}
case $runs in
''|*[!0-9]*|0) echo "bench-agent: BENCH_AGENT_RUNS: expected a count of runs >= 1, got '$runs'" >&2
	exit 2 ;;
esac
out=$B/bench-agent
mkdir -p "$out"
rm -f "$out"/run-*.log "$out"/runs.tsv
m=$B/e2e

metric() {		# metric NAME: this run's figure, or "-"
	if [ -s "$m/metric.$1" ]; then cat "$m/metric.$1"; else echo -; fi
}

median() {		# median < numbers, one a line ("-" left out)
	grep -v '^-$' | sort -g | awk '{ v[NR] = $1 }
	    END { if (NR == 0) print "-";
		  else if (NR % 2) print v[(NR + 1) / 2];
		  else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

cols="agent_vs_usbipd_read_ratio agent_vs_usbipd_read_ratio_split
agent_control_urb_median_us usbipd_control_urb_median_us
agent_exporter_cpu_ms_per_mib usbipd_exporter_cpu_ms_per_mib
agent_split_exporter_cpu_ms_per_mib usbipd_split_exporter_cpu_ms_per_mib"
echo "bench-agent: $runs run(s) of e2e 00 20 60 61 67 68; logs in $out"
printf 'run\tnot_ok\tratio_free\tratio_split\tctl_agent_us\tctl_usbip_host_us\tcpu_agent_free\tcpu_host_free\tcpu_agent_split\tcpu_host_split\n' |
	tee "$out/runs.tsv"
rc=0
for i in $(seq 1 "$runs"); do
	log=$out/run-$i.log
	( cd "$top" && USBGW_BUILD=$B E2E_ONLY="00 20 60 61 67 68" E2E_AUDIO=0 \
		prove -v tests/e2e/run.t ) > "$log" 2>&1
	bad=$(grep -c '^not ok' "$log")
	line="$i	$bad"
	for c in $cols; do line="$line	$(metric "$c")"; done
	printf '%s\n' "$line" | tee -a "$out/runs.tsv"
	if [ "$bad" != 0 ] || [ "$(metric agent_vs_usbipd_read_ratio)" = - ]; then
		echo "bench-agent: run $i failed ($bad not ok); see $log"
		rc=1
	fi
done

med() {			# med COLUMN: the median of runs.tsv's column
	awk -F'\t' -v c="$1" 'NR > 1 { print $c }' "$out/runs.tsv" | median
}
verdict() {		# verdict MEDIAN
	awk -v r="$1" 'BEGIN { if (r == "-") print "no figure";
	    else if (r + 0 >= 0.8) print "the goal, >= 0.8, is met";
	    else print "the goal, >= 0.8, is NOT met" }'
}
free=$(med 3) split=$(med 4)
echo
echo "bench-agent: medians over $runs run(s)"
echo "  read ratio agent / usbip-host, vCPUs free:  $free ($(verdict "$free"))"
echo "  read ratio agent / usbip-host, vCPUs split: $split ($(verdict "$split"))"
echo "  control URB round trip (us):  agent $(med 5), usbip-host $(med 6)"
echo "  exporter CPU per MiB read (ms): free: agent $(med 7), usbip-host $(med 8);" \
	"split: agent $(med 9), usbip-host $(med 10)"
echo "  runs below 0.8: free $(awk -F'\t' 'NR > 1 && $3 != "-" && $3 < 0.8' "$out/runs.tsv" | wc -l)," \
	"split $(awk -F'\t' 'NR > 1 && $4 != "-" && $4 < 0.8' "$out/runs.tsv" | wc -l) of $runs"
exit $rc
