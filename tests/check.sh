#!/usr/bin/env bash
# The whole test suite, as CI runs it (`make check`):
#   1. warning-clean builds with gcc and clang (-Werror);
#   2. the real-kernel end-to-end suite in qemu (tests/e2e) on the gcc
#      build, unless USBGW_SKIP_E2E=1 -- its downloads fetched while that
#      build runs, started as soon as it is done, in the background and
#      at niceness -3: qemu's TCG keeps a core busy for over ten minutes,
#      the longest stage, while everything below mostly waits;
#   3. the unit tests and 127-deb-package (packages are built once) on the
#      gcc build;
#   4. the unit and integration tests on an ASan+UBSan build, in full;
#   5. a short pass of every libFuzzer harness (FUZZ_SMOKE seconds each,
#      FUZZ_JOBS at a time).
# The integration suite runs once, under ASan+UBSan, where it also finds
# memory errors; the gcc build's programs are what the e2e suite runs in
# a real kernel.  Every stage runs to its end (a failed stage does not
# hide the next one's results); the script fails if any did.
#
# Output: each stage's TAP through prove (-v into build/check/STAGE.log;
# on the terminal every line but the passing ones, so skips and failures
# show), then a table of the stages and, last, one line that counts every
# test point of every stage:  "check: N passed, N failed, N skipped".
# A skip is a test point whose tool is missing here; the count makes a
# new one visible.
#
# Unit and integration tests run JOBS at a time (prove -j; default 4 on
# any machine: they mostly wait on sockets and timers -- a batch of 8 used
# 10-12 s of CPU in 16.7 s at -j2 and 8.4 s at -j4).  Each test has its
# own temp dir, ports and sockets, and takes a machine-wide lock
# (tests/lib/common.sh: with_lock) for what only one may do at a time, the
# timing-sensitive parts included.  The known slow tests start first, so
# that the stage ends soon after the longest one.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

NCPU=$(nproc 2>/dev/null || echo 2)
[ "$NCPU" -ge 2 ] 2>/dev/null || NCPU=2
JOBS=${JOBS:-4}
FUZZ_SMOKE=${FUZZ_SMOKE:-8}
FUZZ_JOBS=${FUZZ_JOBS:-$NCPU}
OUT=${CHECK_OUT:-build/check}
t0=$(date +%s)
mkdir -p "$OUT"
rm -f "$OUT"/*.log "$OUT"/*.rc "$OUT"/*.time

stage() { printf '\n=== %s\n' "$*"; }

# A build stage: NAME, then make's arguments.  A failed build is a failed
# stage (counted as one failed test point).
build() {
	local name=$1 t rc
	shift
	stage "build ($name)"
	t=$(date +%s)
	make -s -j"$NCPU" WERROR=1 "$@" all >"$OUT/build-$name.log" 2>&1
	rc=$?
	grep -v '^  CC' "$OUT/build-$name.log"
	echo "$rc" >"$OUT/build-$name.rc"
	echo $(( $(date +%s) - t )) >"$OUT/build-$name.time"
	return "$rc"
}

# A prove stage: NAME, then prove's arguments.  Its whole output is kept
# in $OUT/NAME.log; shown (now, or by show for a background stage) without
# the passing test points.
prove_stage() {
	local name=$1 t rc
	shift
	t=$(date +%s)
	prove -v -f "$@" >"$OUT/$name.log" 2>&1 </dev/null
	rc=$?
	echo "$rc" >"$OUT/$name.rc"
	echo $(( $(date +%s) - t )) >"$OUT/$name.time"
	return "$rc"
}
show() {
	grep -avE '^ok [0-9]+( |$)' "$OUT/$1.log" | grep -avE '^ok$' ||
		true
	grep -aiE '^ok [0-9]+.*# skip' "$OUT/$1.log" || true
}

units() { ls "$1"/tests/test_* 2>/dev/null | grep -v '\.d$' || true; }
# The integration tests, slowest first (a static list: prove --state has
# nothing to go on in a fresh clone), then the others in name order.
# Wall times, one at a time, normal build: 45 26 s, 66 16 s, 36 14 s, 50 and 60
# 12 s, 48 11 s, 10 and 41 10 s, 20 9 s, 30-35 7-8 s; the rest 1-6 s.
# 63 19 s, 64 13 s; 80 4 s (19 s under ASan); 81 21 s, 82 19 s (SIGSTOP
# choreography), 83 5 s; 84 17 s, 85 17 s; 107 8-13 s, 109 9 s (enrollment);
# 120 21 s (issue 17 views); 123 19 s (a session per request), 125 9 s
# (600000 URBs); 130 12 s, 131 6 s, 132 12 s, 133 9-13 s (a PostgreSQL server each).
# 127 (make deb, lintian, install, start, purge) 110-170 s, make deb 50-100 s of it.
SLOW="137-lease-race 138-lease-takeover 139-lease-old-holder 45-policy-time 117-follow-bounds 80-scale-1k 70-relay-descriptors 63-relay-stall 66-claims-survive-polls 64-control-reserve 36-gateway-access 50-local 60-bench-relay
    48-control-lookup 10-sim-client 41-cli-fake 20-tshark 32-gateway-unplug
    31-gateway-revoke 30-gateway-claim 34-gateway-restart 35-gateway-malformed
    81-busy-gateway 82-busy-exporter 85-list-cache 84-probe-deadline
    120-iface-view 83-probe-queue 95-agent-evil 97-agent-hello-hog 98-agent-hostile-gateway 110-agent-tls-dialout
    89-agent-hostile-listen 107-enroll-revoke 109-enroll-agent-prompt
    123-relay-iface 125-relay-iface-flood 134-feed-approve 135-feed-rules-revoke 136-feed-audit-chain
    130-pg-unit-db 132-pg-daemon 133-pg-restart 140-pg-store-loss 141-pg-store-loss-keep 142-feed-exporters 143-feed-agent-revoke 144-pg-revoke-in-loss 146-pg-start-race"
# Run on the gcc build only (it skips itself under ASan).
NORMAL_ONLY="127-deb-package"
integ() {
	local n f
	for n in $SLOW; do
		[ -f "tests/integration/$n.t" ] && echo "tests/integration/$n.t"
	done
	for f in $(ls tests/integration/*.t 2>/dev/null | sort); do
		case " $(echo $SLOW $NORMAL_ONLY) " in
		*" $(basename "$f" .t) "*) ;;
		*) echo "$f" ;;
		esac
	done
}

STAGES=()

# The e2e suite's downloads and module build (tests/e2e/fetch.sh: network
# and apt mostly) go on while the gcc build runs; run.t finds them done.
fetch_pid=
if [ "${USBGW_SKIP_E2E:-0}" != 1 ] && [ -x tests/e2e/fetch.sh ]; then
	tests/e2e/fetch.sh >"$OUT/e2e-fetch.log" 2>&1 </dev/null &
	fetch_pid=$!
fi

# 1. the gcc build, which the e2e suite and stage 3 use
STAGES+=(build-gcc)
build gcc
gcc_rc=$?

# 2. the e2e suite in the background, on the gcc build (ended with the
# run if the run is cut short)
e2e_pid=
trap '[ -n "$e2e_pid" ] && kill -- -"$e2e_pid" 2>/dev/null' EXIT
trap 'exit 130' INT TERM
STAGES+=(e2e)
if [ "${USBGW_SKIP_E2E:-0}" = 1 ] || [ ! -f tests/e2e/run.t ]; then
	echo "tests/e2e/run.t .. skipped: USBGW_SKIP_E2E=1 or no tests/e2e/run.t" >"$OUT/e2e.log"
	echo 0 >"$OUT/e2e.rc"
else
	[ -z "$fetch_pid" ] || wait "$fetch_pid"	# run.t says if it failed
	if [ "$gcc_rc" = 0 ]; then
		stage "end-to-end: Debian's kernel in qemu (started in the background)"
		set -m	# its own process group, so that the trap ends qemu too
		USBGW_BUILD=$PWD/build E2E_BENCH_READS=${E2E_BENCH_READS:-1} \
		    prove_stage e2e tests/e2e/run.t &
		e2e_pid=$!
		# The longest stage, and the one TCG makes CPU-bound: a little
		# ahead of the stages below, which mostly wait (niceness -3,
		# which its processes inherit; needs root, else it runs as is).
		renice -n -3 -g "$e2e_pid" >/dev/null 2>&1 || true
		set +m
	else
		echo "1..0 # the gcc build failed" >"$OUT/e2e.log"
		echo 1 >"$OUT/e2e.rc"
	fi
fi

# 3. what runs on the gcc build only
STAGES+=(unit-gcc)
stage "unit tests and ${NORMAL_ONLY} (build/, $JOBS at a time)"
if [ "$gcc_rc" = 0 ]; then
	USBGW_BUILD=$PWD/build prove_stage unit-gcc -j"$JOBS" \
	    $(for n in $NORMAL_ONLY; do echo "tests/integration/$n.t"; done) \
	    $(units build)
	show unit-gcc
else
	echo "not run: the gcc build failed" >"$OUT/unit-gcc.log"
	echo 1 >"$OUT/unit-gcc.rc"
fi

# 4. everything under ASan+UBSan
STAGES+=(build-asan asan)
if build asan SANITIZE=1; then
	stage "unit + integration under ASan+UBSan (build-asan/, $JOBS at a time)"
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	USBGW_BUILD=$PWD/build-asan USBGW_ASAN=1 \
	    prove_stage asan -j"$JOBS" $(integ) $(units build-asan)
	show asan
fi

# 5. clang's warnings, the fuzzers
STAGES+=(build-clang)
build clang CC=clang B=build-clang
STAGES+=(fuzz)
stage "fuzz smoke (${FUZZ_SMOKE}s per harness, $FUZZ_JOBS at a time)"
if make -s -j"$NCPU" fuzz-build >"$OUT/build-fuzz.log" 2>&1; then
	USBGW_FUZZ_SMOKE=$FUZZ_SMOKE USBGW_FUZZ_JOBS=$FUZZ_JOBS \
	    prove_stage fuzz tests/fuzz/smoke.t
else
	cat "$OUT/build-fuzz.log" >"$OUT/fuzz.log"
	echo 1 >"$OUT/fuzz.rc"
fi
show fuzz

if [ -n "$e2e_pid" ]; then
	stage "end-to-end: Debian's kernel in qemu (waiting for it)"
	wait "$e2e_pid"
	e2e_pid=
fi
show e2e

# The table and the count.
stage "summary"
pass=0 failn=0 skipn=0 bad=0
printf '%-12s %6s %6s %6s %7s  %s\n' stage passed failed skipped seconds result
for s in "${STAGES[@]}"; do
	log=$OUT/$s.log rc=$(cat "$OUT/$s.rc" 2>/dev/null || echo 1)
	p=0 f=0 k=0
	if [ -f "$log" ] && [ "${s#build-}" = "$s" ]; then
		p=$(grep -acE '^ok [0-9]+( |$)' "$log")
		k=$(grep -aciE '^ok [0-9]+.*# skip' "$log")
		p=$((p - k))
		k=$((k + $(grep -acE '\.\. skipped: ' "$log")))
		f=$(grep -aE '^not ok [0-9]+' "$log" | grep -aciv '# todo')
	elif [ "$rc" = 0 ]; then
		p=1	# a build is one test point
	fi
	# a stage that failed with no failed test point (a bad plan, a test
	# that died): one failure
	[ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
	[ "$rc" != 0 ] && bad=1
	printf '%-12s %6d %6d %6d %7s  %s\n' "$s" "$p" "$f" "$k" \
	    "$(cat "$OUT/$s.time" 2>/dev/null || echo -)" \
	    "$([ "$rc" = 0 ] && echo PASS || echo FAIL)"
	pass=$((pass + p)) failn=$((failn + f)) skipn=$((skipn + k))
done
echo "skipped test points (a missing tool each; see the stage logs in $OUT/):"
grep -ahiE '^ok [0-9]+.*# skip|\.\. skipped: ' "$OUT"/*.log | sed 's/^/  /' || true
echo "all stages took $(( $(date +%s) - t0 )) s"
echo "check: $pass passed, $failn failed, $skipn skipped"
exit "$bad"
