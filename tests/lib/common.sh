# tests/lib/common.sh -- shared helpers for the integration tests (bash).
#
# Source it first thing in a tests/integration/NN-name.t script:
#
#	. "$(dirname "$0")/../lib/common.sh"
#	plan 3
#	port=$(free_port)
#	start_bg sim "$SIM" -l "127.0.0.1:$port" ...
#	wait_port "$port" || bail_out "simulator did not start"
#	run "$TC" import "127.0.0.1:$port" 1-1
#	is "$RC" 0 "import succeeds"
#	like "$OUT" 'busnum=' "import prints the record"
#	done_testing
#
# What it gives a test:
#   - TAP: plan, skip_all, ok/nok (run a command), check (a status),
#     is/isnt/like/unlike, same (is, but never on two empty values),
#     num_cmp, pass/fail, skip, diag/note, bail_out, TODO="reason" for
#     known failures, done_testing (exit status = number of failures);
#   - helper_error MSG: a helper that cannot give a value (it runs in
#     $(...), so it cannot fail a check itself) makes the next check fail
#     with MSG;
#   - run CMD...: runs CMD with a timeout, sets OUT, ERR and RC;
#   - a private temp dir $T (kept when a test fails or KEEP_TMP=1);
#   - background processes: start_bg NAME CMD..., stop_bg NAME [SIG],
#     bg_pid NAME, bg_log NAME, wait_bg NAME [SECONDS] (sets RC);
#     everything started is killed, by pid, when the script exits;
#   - machine-wide resources, shared with every other test running at the
#     same time (prove -j, other checkouts): free_port reserves the port
#     it hands out; global_lock/global_unlock/with_lock serialize what
#     only one test may do at a time (system users, network namespaces);
#   - readiness: free_port, wait_port PORT, wait_file FILE, wait_log NAME
#     ERE, wait_for CMD (each with a timeout; most can stop early when a
#     named background process dies);
#   - field KEY TEXT: the value of KEY=VALUE in the last RESULT line;
#   - binaries under $USBGW_BUILD (default: build/ of this tree):
#     $TC (usbip-tc), $SIM (usbgw-sim), $USBGWD, $USBGW; for_users PROG,
#     a copy other users can run;
#   - ASan: when the binaries are sanitized their reports go to
#     $T/asan.PID (and $T/ubsan.PID) files, whatever ASAN_OPTIONS the
#     caller set; asan_clean DESC checks there are none.

# ---- locations ---------------------------------------------------------
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
USBGW_BUILD=${USBGW_BUILD:-$TOP/build}
case $USBGW_BUILD in /*) ;; *) USBGW_BUILD=$TOP/$USBGW_BUILD ;; esac
export USBGW_BUILD
TC=$USBGW_BUILD/usbip-tc
SIM=$USBGW_BUILD/usbgw-sim
USBGWD=$USBGW_BUILD/usbgwd
USBGW=$USBGW_BUILD/usbgw
TEST_NAME=$(basename "$0" .t)

# Default timeout (seconds) for run, wait_* and stop_bg.
TEST_TIMEOUT=${TEST_TIMEOUT:-30}

T=$(mktemp -d "${TMPDIR:-/tmp}/usbgw-$TEST_NAME.XXXXXX") || {
	echo "1..1"
	echo "not ok 1 - cannot create a temp dir"
	exit 255
}
export T

# Sanitizer reports go to files the test can check; tests must not
# depend on a leak detector's exit code racing with their own checks.
# Options the caller set (tests/check.sh sets its own) are kept; only a
# log_path is added when they have none, so that asan_clean sees every
# report of every program, not just those of the programs whose stderr
# somebody reads.
_san_opt() {		# _san_opt OPTIONS KEY=VALUE: add KEY unless set
	case ":$1:" in
	*":${2%%=*}="*) printf '%s\n' "$1" ;;
	*) printf '%s\n' "${1:+$1:}$2" ;;
	esac
}
ASAN_OPTIONS=$(_san_opt "${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}" "log_path=$T/asan")
UBSAN_OPTIONS=$(_san_opt "${UBSAN_OPTIONS:-print_stacktrace=1}" "log_path=$T/ubsan")
export ASAN_OPTIONS UBSAN_OPTIONS
# What a sanitizer's report looks like (in a log, or on stderr).
SAN_REPORT_ERE='ERROR: (Address|Leak|Thread|Memory)Sanitizer|[^ ]+:[0-9]+:[0-9]+: runtime error: |SUMMARY: UndefinedBehaviorSanitizer'

# ---- TAP ---------------------------------------------------------------
_tap_n=0
_tap_failed=0
_tap_planned=
_tap_bailed=

plan() {
	_tap_planned=$1
	echo "1..$1"
}

skip_all() {
	echo "1..0 # SKIP $*"
	_tap_planned=0
	exit 0
}

# fail_all REASON: the whole file fails at once (a built feature that does
# not work is a failure, never a skip: skip is for a missing tool only).
fail_all() {
	echo "1..1"
	echo "not ok 1 - $*"
	_tap_planned=0
	exit 1
}

# A test run while TODO="reason" is set is a known failure: reported
# with "# TODO reason" and not counted as failed (Test::More semantics).
TODO=

_tap_result() {		# _tap_result PASSED DESC
	local todo= herr=
	_tap_n=$((_tap_n + 1))
	[ -n "$TODO" ] && todo=" # TODO $TODO"
	# A helper that failed since the last check fails this one: the
	# value this check compares is likely the helper's non-answer.
	if [ -s "$_helper_errors" ]; then
		herr=$(cat "$_helper_errors")
		rm -f "$_helper_errors"
	fi
	if [ "$1" = 1 ] && [ -z "$herr" ]; then
		echo "ok $_tap_n - $2$todo"
		return 0
	fi
	[ -z "$TODO" ] && _tap_failed=$((_tap_failed + 1))
	echo "not ok $_tap_n - $2$todo"
	local i=1
	echo "#   Failed test '$2'"
	while [ $i -lt ${#BASH_LINENO[@]} ]; do
		if [ "${BASH_SOURCE[$i]}" = "$0" ]; then
			echo "#   at $0 line ${BASH_LINENO[$((i - 1))]}."
			break
		fi
		i=$((i + 1))
	done
	if [ -n "$herr" ]; then
		diag "a test helper failed before this check:"
		_diag_text "$herr"
	fi
	return 1
}

# helper_error MESSAGE: for helpers that give a value on stdout (and so
# usually run in $(...), where they cannot fail a check themselves): the
# helper could not do its job.  The message goes to stderr at once, and
# the next check of the test fails with it (done_testing fails the test
# if no check comes after).  The helper should also return non-zero.
_helper_errors=$T/helper-errors
helper_error() {
	# (on stderr once until the next check: helpers are polled)
	[ -s "$_helper_errors" ] || printf '# helper error: %s\n' "$*" >&2
	printf '%s\n' "$*" >>"$_helper_errors"
	return 0
}

pass() { _tap_result 1 "$1"; }
fail() { _tap_result 0 "$1"; }

# check STATUS DESC: passes when STATUS is 0.
check() {
	if [ "$1" = 0 ]; then _tap_result 1 "$2"; else
		_tap_result 0 "$2"
		diag "exit status $1"
		return 1
	fi
}

# ok DESC CMD...: runs CMD (with run), passes when it exits 0.
ok() {
	local desc=$1
	shift
	run "$@"
	if [ "$RC" = 0 ]; then
		_tap_result 1 "$desc"
	else
		_tap_result 0 "$desc"
		diag "command: $*"
		diag "exit status $RC"
		_diag_output
		return 1
	fi
}

# nok DESC CMD...: passes when CMD fails the normal way: it exits with a
# status from 1 to 123.  A crash is not the failure wanted: killed by a
# signal or any status >= 128, stopped by the run timeout (124), not run
# at all (125-127), or a sanitizer report (on its stderr or a new
# $T/asan.* or $T/ubsan.* file) all fail the check.
nok() {
	local desc=$1 why= before after new f
	shift
	before=$(_san_reports)
	run "$@"
	after=$(_san_reports)
	new=$(comm -13 <(printf '%s\n' "$before" | sort) \
	    <(printf '%s\n' "$after" | sort) | grep .)
	if [ "$RC" = 0 ]; then
		why="exit status 0 (wanted a failure)"
	elif [ "$RC" = 124 ]; then
		why="timed out after ${TEST_TIMEOUT}s (exit status 124)"
	elif [ "$RC" -ge 125 ] && [ "$RC" -le 127 ]; then
		why="exit status $RC: the command could not be run"
	elif [ "$RC" -ge 129 ] && [ "$RC" -le 192 ]; then
		why="exit status $RC: killed by signal $((RC - 128)) ($(kill -l $((RC - 128)) 2>/dev/null)), not a normal failure"
	elif [ "$RC" -ge 128 ]; then
		why="exit status $RC (>= 128: a crash, not a normal failure)"
	elif [[ $ERR =~ $SAN_REPORT_ERE ]]; then
		why="a sanitizer report on its stderr (exit status $RC)"
	elif [ -n "$new" ]; then
		why="a sanitizer report was written (exit status $RC)"
	fi
	if [ -z "$why" ]; then
		_tap_result 1 "$desc"
	else
		_tap_result 0 "$desc"
		diag "command: $*"
		diag "$why"
		_diag_output
		for f in $new; do
			diag "$f:"
			_diag_text "$(head -n 30 "$f")"
		done
		return 1
	fi
}

# _san_reports: the sanitizer report files so far, one a line.
_san_reports() {
	local f
	for f in "$T"/asan.* "$T"/ubsan.*; do
		[ -e "$f" ] && printf '%s\n' "$f"
	done
	return 0
}

is() {			# is GOT WANT DESC
	if [ "$1" = "$2" ]; then _tap_result 1 "$3"; else
		_tap_result 0 "$3"
		diag "got:      '$1'"
		diag "expected: '$2'"
		return 1
	fi
}

# same GOT WANT DESC: is, for two values read at run time (one of them
# the expectation): fails when either is empty, so a reading that failed
# on both sides is not taken for equality.
same() {
	if [ -z "$1" ] || [ -z "$2" ]; then
		_tap_result 0 "$3"
		diag "got:      '$1'"
		diag "expected: '$2'"
		diag "(an empty value: it was not read)"
		return 1
	fi
	is "$@"
}

isnt() {		# isnt GOT UNWANTED DESC
	if [ "$1" != "$2" ]; then _tap_result 1 "$3"; else
		_tap_result 0 "$3"
		diag "got '$1', wanted anything else"
		return 1
	fi
}

like() {		# like TEXT ERE DESC
	if [[ $1 =~ $2 ]]; then _tap_result 1 "$3"; else
		_tap_result 0 "$3"
		diag "'$2' does not match:"
		_diag_text "$1"
		return 1
	fi
}

unlike() {		# unlike TEXT ERE DESC
	if ! [[ $1 =~ $2 ]]; then _tap_result 1 "$3"; else
		_tap_result 0 "$3"
		diag "'$2' matches:"
		_diag_text "$1"
		return 1
	fi
}

# num_cmp A OP B DESC, OP one of -lt -le -gt -ge -eq -ne; decimals allowed.
num_cmp() {
	if awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
		if (a !~ /^-?[0-9]+(\.[0-9]+)?$/ || b !~ /^-?[0-9]+(\.[0-9]+)?$/)
			exit 1
		a += 0; b += 0
		if (op == "-lt") exit !(a < b); if (op == "-le") exit !(a <= b)
		if (op == "-gt") exit !(a > b); if (op == "-ge") exit !(a >= b)
		if (op == "-eq") exit !(a == b); if (op == "-ne") exit !(a != b)
		exit 1 }'; then
		_tap_result 1 "$4"
	else
		_tap_result 0 "$4"
		diag "wanted '$1' $2 '$3'"
		return 1
	fi
}

skip() {		# skip COUNT REASON
	local i
	for ((i = 0; i < $1; i++)); do
		_tap_n=$((_tap_n + 1))
		echo "ok $_tap_n # skip $2"
	done
}

diag() {
	local line
	while IFS= read -r line; do echo "# $line"; done <<<"$*"
}
note() { diag "$@"; }

_diag_text() {
	printf '%s\n' "$1" | head -n 40 | sed 's/^/#     /'
}

_diag_output() {
	[ -n "$OUT" ] && { diag "stdout:"; _diag_text "$OUT"; }
	[ -n "$ERR" ] && { diag "stderr:"; _diag_text "$ERR"; }
	return 0
}

# bail_out REASON: the test cannot go on.  A failed test point and the
# end of this file only: TAP's "Bail out!" would stop every other test of
# the run (make check runs them side by side, and every stage runs to its
# end).
bail_out() {
	_tap_n=$((_tap_n + 1))
	echo "not ok $_tap_n - bail out: $*"
	[ -z "$_tap_planned" ] && echo "1..$_tap_n"
	_tap_bailed=1
	exit 255
}

done_testing() {
	if [ -s "$_helper_errors" ]; then
		fail "no test helper failed after the last check"
	fi
	[ -z "$_tap_planned" ] && echo "1..$_tap_n"
	if [ -n "$_tap_planned" ] && [ "$_tap_planned" != "$_tap_n" ]; then
		diag "planned $_tap_planned tests, ran $_tap_n"
		[ $_tap_failed = 0 ] && _tap_failed=1
	fi
	[ $_tap_failed -gt 254 ] && _tap_failed=254
	exit $_tap_failed
}

# ---- running commands ------------------------------------------------
_run_seq=0

# run [-t SECONDS] CMD...: OUT=stdout, ERR=stderr, RC=exit status (124 on
# timeout).  Output is also kept in $T/run.N.{out,err}.
run() {
	local secs=$TEST_TIMEOUT
	if [ "$1" = -t ]; then secs=$2; shift 2; fi
	_run_seq=$((_run_seq + 1))
	local o=$T/run.$_run_seq.out e=$T/run.$_run_seq.err
	timeout -k 5 "$secs" "$@" >"$o" 2>"$e" </dev/null
	RC=$?
	OUT=$(cat "$o")
	ERR=$(cat "$e")
	return 0
}

# field KEY TEXT: the value of KEY= in the last line of TEXT starting
# with RESULT (empty if none).
field() {
	printf '%s\n' "$2" | grep '^RESULT ' | tail -n 1 |
	    tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}

# ---- background processes ------------------------------------------------
declare -A _bg_pid=()
_bg_order=()

# start_bg NAME CMD...: start CMD in the background, output in
# $T/NAME.log; its pid in $(bg_pid NAME).
start_bg() {
	local name=$1
	shift
	"$@" >"$T/$name.log" 2>&1 </dev/null &
	_bg_pid[$name]=$!
	_bg_order+=("$name")
}

bg_pid() { echo "${_bg_pid[$1]:-}"; }
bg_log() { echo "$T/$1.log"; }

bg_alive() {
	local pid=${_bg_pid[$1]:-}
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# wait_bg NAME [SECONDS]: wait for NAME to exit; RC = its exit status
# (124 if it is still running after SECONDS, when it is left alone).
wait_bg() {
	local name=$1 secs=${2:-$TEST_TIMEOUT} pid=${_bg_pid[$1]:-}
	local end=$((SECONDS + secs))
	RC=127
	[ -z "$pid" ] && return 1
	while kill -0 "$pid" 2>/dev/null; do
		if [ $SECONDS -ge $end ]; then RC=124; return 1; fi
		sleep 0.05
	done
	wait "$pid" 2>/dev/null
	RC=$?
	unset "_bg_pid[$name]"
	return 0
}

# stop_bg NAME [SIGNAL]: signal NAME (default TERM), wait up to 5 s,
# then SIGKILL.  RC = its exit status.
stop_bg() {
	local name=$1 sig=${2:-TERM} pid=${_bg_pid[$1]:-}
	RC=127
	[ -z "$pid" ] && return 1
	kill -s "$sig" "$pid" 2>/dev/null
	if ! wait_bg "$name" 5; then
		kill -s KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		RC=137
		unset "_bg_pid[$name]"
	fi
	return 0
}

_cleanup() {
	local status=$? name pid
	for name in "${_bg_order[@]}"; do
		pid=${_bg_pid[$name]:-}
		[ -n "$pid" ] && kill -s TERM "$pid" 2>/dev/null
	done
	for name in "${_bg_order[@]}"; do
		pid=${_bg_pid[$name]:-}
		[ -z "$pid" ] && continue
		for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -s KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	_ports_release
	if [ $_tap_failed -gt 0 ] || [ -n "$_tap_bailed" ] ||
	    [ "${KEEP_TMP:-0}" = 1 ]; then
		echo "# files kept in $T"
	else
		rm -rf "$T"
	fi
	exit $status
}
trap _cleanup EXIT
trap 'exit 254' INT TERM HUP

# ---- machine-wide resources ---------------------------------------------
# Every test on the machine shares these, whoever runs it: prove -j, a
# second checkout's suite, a developer's single test.  Lock files live in
# $USBGW_TEST_LOCKS (default /tmp/.usbgw-test-locks, mode 1777).
USBGW_TEST_LOCKS=${USBGW_TEST_LOCKS:-/tmp/.usbgw-test-locks}
declare -A _lock_fd=()

# timing_sensitive: the test's bounds are on time (SIGSTOP choreography,
# stall and deadline bounds, load): it holds the machine-wide lock
# "timing" for its whole run, so that no two such tests share the CPUs
# (make check runs the others 4 at a time beside it).
timing_sensitive() {
	global_lock timing 1200 || bail_out "cannot take the timing lock"
}

# _lockfile NAME: the path of lock NAME, created readable by all users.
_lockfile() {
	local f=$USBGW_TEST_LOCKS/$1.lock
	if [ ! -e "$f" ]; then
		mkdir -p "$USBGW_TEST_LOCKS" 2>/dev/null &&
		    chmod 1777 "$USBGW_TEST_LOCKS" 2>/dev/null
		(umask 0; : >>"$f") 2>/dev/null
	fi
	[ -r "$f" ] && printf '%s\n' "$f"
}

# global_lock NAME [SECONDS]: take the machine-wide exclusive lock NAME
# (flock(1) on $USBGW_TEST_LOCKS/NAME.lock), waiting up to SECONDS
# (default 600) for whoever holds it.  Held until global_unlock NAME or
# the end of the test.  Taking a lock the test holds already does
# nothing.  Programs started meanwhile inherit the lock's descriptor:
# one left running holds the lock until it exits.
global_lock() {
	local f fd
	[ -n "${_lock_fd[$1]:-}" ] && return 0	# this test holds it already
	f=$(_lockfile "$1") || { diag "global_lock $1: no lock file in $USBGW_TEST_LOCKS"; return 1; }
	exec {fd}<"$f" || return 1
	if ! flock -w "${2:-600}" "$fd"; then
		exec {fd}<&-
		diag "global_lock $1: still held by another test after ${2:-600} s"
		return 1
	fi
	_lock_fd[$1]=$fd
}

# global_unlock NAME: release lock NAME taken by global_lock.
global_unlock() {
	local fd=${_lock_fd[$1]:-}
	[ -z "$fd" ] && return 0
	exec {fd}<&-
	unset "_lock_fd[$1]"
}

# with_lock NAME CMD...: CMD (in this shell: a function may set
# variables) under global_lock NAME; its exit status (125 if the lock
# could not be had).  For what only one test on the machine may do at a
# time: system users and groups (/etc/passwd, /etc/group), network
# namespaces, kernel modules.
with_lock() {
	local name=$1 rc
	shift
	if [ -n "${_lock_fd[$name]:-}" ]; then	# held already (nested, or a
		"$@"				# trap while the lock is held)
		return
	fi
	global_lock "$name" || return 125
	"$@"
	rc=$?
	global_unlock "$name"
	return $rc
}

# free_port: a TCP port nobody uses (loopback), reserved for this test
# until it ends: no other test's free_port hands it out meanwhile, even
# if nothing listens on it yet (a restart on the same port).  It is
# picked below the kernel's ephemeral range (ip_local_port_range), so
# no program binding port 0 and no outgoing connection is given it
# either.  A program that can bind port 0 and report its port is better
# still.
free_port() {
	local lo=32768 hi=60999 a b p i
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null
	if [ "$lo" -ge 11024 ]; then
		a=$((lo - 10000)) b=$((lo - 1))
	elif [ "$hi" -le 55535 ]; then
		a=$((hi + 1)) b=65535
	else			# no room outside the range: as good as it gets
		a=20000 b=59999
	fi
	for ((i = 0; i < 200; i++)); do
		p=$((a + (RANDOM * 32768 + RANDOM) % (b - a + 1)))
		_port_in_use "$p" && continue
		if with_lock ports _port_claim "$p" >&2; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

_port_in_use() {
	if command -v ss >/dev/null 2>&1; then
		ss -Htan "( sport = :$1 )" 2>/dev/null | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# _port_claim PORT (under the "ports" lock): PORT is this test's unless
# a live test (maybe this one) reserved it already.  The reservation is
# a file naming the test's pid; _cleanup removes it.
_port_claim() {
	local f=$USBGW_TEST_LOCKS/port.$1 owner
	owner=$(cat "$f" 2>/dev/null)
	if [ -n "$owner" ] && { [ "$owner" = $$ ] || [ -d "/proc/$owner" ]; }; then
		return 1
	fi
	echo $$ >"$f" 2>/dev/null || return 1
	echo "$1" >>"$T/ports.reserved"
}

_ports_release() {
	local p f
	[ -s "$T/ports.reserved" ] || return 0
	while read -r p; do
		f=$USBGW_TEST_LOCKS/port.$p
		[ "$(cat "$f" 2>/dev/null)" = $$ ] && rm -f "$f"
	done <"$T/ports.reserved"
}

# ---- readiness ---------------------------------------------------------------

# wait_for [-t SECONDS] [-p NAME] CMD...: poll CMD until it succeeds;
# with -p, give up early once background process NAME has exited.
wait_for() {
	local secs=$TEST_TIMEOUT name=
	while :; do
		case $1 in
		-t) secs=$2; shift 2 ;;
		-p) name=$2; shift 2 ;;
		*) break ;;
		esac
	done
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -ge $end ] && return 1
		if [ -n "$name" ] && ! bg_alive "$name"; then
			"$@" >/dev/null 2>&1
			return
		fi
		sleep 0.05
	done
	return 0
}

_port_open() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }
# Listening, without connecting (a connection is something the
# program under test would see and log).
_port_listening() { ss -Htln "( sport = :$1 )" 2>/dev/null | grep -q .; }

# wait_port PORT [SECONDS [NAME]]: until something listens on PORT (NAME:
# stop waiting if that background process exits).
wait_port() {
	local p=()
	[ -n "${3:-}" ] && p=(-p "$3")
	if command -v ss >/dev/null 2>&1; then
		wait_for -t "${2:-$TEST_TIMEOUT}" "${p[@]}" _port_listening "$1"
	else
		wait_for -t "${2:-$TEST_TIMEOUT}" "${p[@]}" _port_open "$1"
	fi
}

# wait_file FILE [SECONDS [NAME]]: until FILE exists and is not empty.
wait_file() {
	local p=()
	[ -n "${3:-}" ] && p=(-p "$3")
	wait_for -t "${2:-$TEST_TIMEOUT}" "${p[@]}" test -s "$1"
}

# wait_log NAME ERE [SECONDS]: until NAME's log has a line matching ERE
# (gives up when NAME exits).
wait_log() {
	wait_for -t "${3:-$TEST_TIMEOUT}" -p "$1" grep -Eq -- "$2" "$T/$1.log"
}

# ---- requirements --------------------------------------------------------------

# need_prog PROG...: skip the whole test unless every PROG is available
# (a path, or a name in PATH).
# for_users PROG: a copy of PROG in $T/bin that any user can run (the tree
# may sit in a directory only its owner can enter, as a fresh mktemp -d
# clone does); prints its path.
for_users() {
	mkdir -p "$T/bin" && chmod 0755 "$T" "$T/bin" &&
	    cp "$1" "$T/bin/" && chmod 0755 "$T/bin/${1##*/}" &&
	    echo "$T/bin/${1##*/}"
}

need_prog() {
	local p
	for p in "$@"; do
		if [ -x "$p" ] || command -v "$p" >/dev/null 2>&1; then
			continue
		fi
		skip_all "$p not available"
	done
}

# asan_clean DESC: no AddressSanitizer/UBSan report was written.
asan_clean() {
	local f reports=()
	for f in "$T"/asan.* "$T"/ubsan.*; do
		[ -e "$f" ] && reports+=("$f")
	done
	if [ ${#reports[@]} -eq 0 ]; then
		_tap_result 1 "$1"
	else
		_tap_result 0 "$1"
		for f in "${reports[@]}"; do
			diag "$f:"
			_diag_text "$(head -n 30 "$f")"
		done
		return 1
	fi
}
