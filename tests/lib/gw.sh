# tests/lib/gw.sh -- helpers for tests that run usbgwd (bash).
#
# Source it after common.sh and sim.sh:
#
#	. "$(dirname "$0")/../lib/common.sh"
#	. "$(dirname "$0")/../lib/sim.sh"
#	. "$(dirname "$0")/../lib/gw.sh"
#	sim_start sim
#	gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 500ms"
#	gw_start gw				# port 0, private db and socket
#	gw_wait_state gw sim1:1-2 pending	# via `usbgw list --json`
#	gwctl gw approve sim1:1-2		# OUT, ERR, RC as with run
#	"$TC" script "127.0.0.1:$(gw_port gw)" sim1:1-2
#	gw_finish gw				# SIGTERM, exit status, log checks
#
# Files of instance NAME: $T/NAME.conf, $T/NAME.db, $T/NAME.sock,
# $T/NAME.port, $T/NAME.pid (unless the configuration names its own),
# $T/NAME.log (stderr, debug level).
#
# With USBGW_ASAN=1 (binaries from `make SANITIZE=1`; unset, it is told
# from the binary), gw_finish checks the daemon's log and $T/asan.* for
# sanitizer reports; on a normal build it checks the daemon stopped the
# normal way.

EJSON=$USBGW_BUILD/e2e-json

# gw_conf NAME LINE...: write $T/NAME.conf, one LINE a line.
gw_conf() {
	local name=$1
	shift
	printf '%s\n' "$@" >"$T/$name.conf"
}

# gw_start NAME [ARGS...]: start usbgwd -f on 127.0.0.1 (port
# $GW_LISTEN_PORT, default 0) with $T/NAME.{conf,db,sock}; wait until it
# listens and its control socket exists.  The database and socket are
# kept between starts of the same NAME (restart tests).  Its pid file is
# $T/NAME.pid unless the configuration sets pid-file (ARGS may set -p):
# the daemon's default, /run/usbgwd.pid, is one file for every test.
# For a restart on the same port, set GW_LISTEN_PORT=$(free_port)
# before the first start: a port the kernel chose may be given to
# someone else while the daemon is down.
gw_start() {
	local name=$1 pidf=()
	shift
	rm -f "$T/$name.port"
	[ -e "$T/$name.conf" ] || : >"$T/$name.conf"
	grep -Eq '^[[:space:]]*pid-file[[:space:]]*=' "$T/$name.conf" ||
	    pidf=(-p "$T/$name.pid")
	# keep the logs of earlier runs of the same instance
	[ -s "$T/$name.log" ] && cat "$T/$name.log" >>"$T/$name.log.old"
	start_bg "$name" "$USBGWD" -f -c "$T/$name.conf" -d "$T/$name.db" \
	    -s "$T/$name.sock" -l "127.0.0.1:${GW_LISTEN_PORT:-0}" \
	    -P "$T/$name.port" "${pidf[@]}" -v debug "$@"
	if ! wait_file "$T/$name.port" 20 "$name"; then
		diag "usbgwd $name did not start:"
		_diag_text "$(tail -n 30 "$T/$name.log" 2>/dev/null)"
		return 1
	fi
	wait_for -t 10 -p "$name" test -S "$T/$name.sock"
}

# gw_sim_world: simulator "sim" with $T/sim.conf and gateway "gw" polling
# it as exporter sim1 every 200 ms, devices attached without waiting
# (attach-pending-wait = 0); GWA its USB/IP address.
gw_sim_world() {
	sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
	gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" \
	    "poll-interval = 200ms" "attach-pending-wait = 0"
	gw_start gw || bail_out "usbgwd did not start"
	GWA=$(gw_addr gw)
}

gw_port() { cat "$T/$1.port"; }
gw_addr() { echo "127.0.0.1:$(cat "$T/$1.port")"; }
gw_sock() { echo "$T/$1.sock"; }
gw_db() { echo "$T/$1.db"; }

# gwctl NAME ARGS...: run the CLI against instance NAME (sets OUT ERR RC).
gwctl() {
	local name=$1
	shift
	run "$USBGW" -s "$T/$name.sock" "$@"
}

# gw_field NAME BUSID FIELD: FIELD of the device in `usbgw list --json`
# (empty if the device or the field is not there).
# A CLI failure (daemon busy on a loaded machine) is retried and its
# message kept in $T/gw_field.err.
gw_field() {
	local i json
	for i in 1 2 3; do
		if json=$(timeout 20 "$USBGW" -s "$T/$1.sock" list --json \
		    2>>"$T/gw_field.err"); then
			printf '%s' "$json" | "$EJSON" get "$3" "busid=$2" 2>/dev/null
			return 0
		fi
		sleep 0.2
	done
	return 1
}

gw_state() { gw_field "$1" "$2" state; }

_gw_state_is() { [ "$(gw_state "$1" "$2")" = "$3" ]; }

# gw_wait_state NAME BUSID STATE [SECONDS]: until the device is in STATE.
gw_wait_state() {
	wait_for -t "${4:-15}" -p "$1" _gw_state_is "$1" "$2" "$3"
}

# gw_sql NAME SQL: a query on the instance's database (read-only),
# waiting up to 10 s while the daemon writes.  An error (sqlite3 fails
# or says anything on stderr) is a helper_error: the next check fails
# with sqlite3's message and the query; gw_sql returns 1.
gw_sql() {
	local out rc e=$T/gw_sql.$BASHPID.err
	out=$(sqlite3 -batch -noheader -cmd '.timeout 10000' \
	    "file:$T/$1.db?mode=ro" "$2" 2>"$e")
	rc=$?
	if [ "$rc" != 0 ] || [ -s "$e" ]; then
		helper_error "gw_sql $1: sqlite3 exit status $rc: $(cat "$e")
  query: $2"
		rm -f "$e"
		return 1
	fi
	rm -f "$e"
	[ -n "$out" ] && printf '%s\n' "$out"
	return 0
}

_gw_sql_ge() { [ "$(gw_sql "$1" "$2")" -ge "$3" ] 2>/dev/null; }

# gw_wait_sql NAME SQL N [SECONDS]: until the query's number is >= N
# (audit rows are written in short batches).
gw_wait_sql() {
	wait_for -t "${4:-10}" _gw_sql_ge "$1" "$2" "$3"
}

# gw_audit_count NAME EVENT [WHERE]: audit rows of EVENT.
gw_audit_count() {
	gw_sql "$1" "SELECT count(*) FROM audit_log WHERE event = '$2'${3:+ AND $3}"
}

# gw_diag NAME [LINES]: the tail of the daemon's log as TAP comments.
gw_diag() {
	diag "usbgwd $1 log (last ${2:-40} lines):"
	_diag_text "$(tail -n "${2:-40}" "$T/$1.log" 2>/dev/null)"
}

# gw_log_sanitizer_clean NAME: true when the daemon's log (this run's
# and earlier ones') has no sanitizer report.
gw_log_sanitizer_clean() {
	! cat "$T/$1.log.old" "$T/$1.log" 2>/dev/null | grep -Eq "$SAN_REPORT_ERE"
}

# gw_asan: true when the binaries are sanitized: USBGW_ASAN=1, or, when
# USBGW_ASAN is not set, the daemon is built with AddressSanitizer.
gw_asan() {
	case ${USBGW_ASAN:-} in
	1) return 0 ;;
	'') grep -aq __asan_init "$USBGWD" 2>/dev/null ;;
	*) return 1 ;;
	esac
}

# gw_finish NAME: SIGTERM; three TAP lines.  First, it exits 0 in time.
# Then, on a sanitized build (gw_asan): no sanitizer report in its log,
# and none in $T/asan.* or $T/ubsan.* (every program of the test).  On a
# normal build, where there is no report to look for, that it stopped
# the normal way: its log has the SIGTERM and, after it, the last line
# of a complete shutdown ("stopped") -- when the log has info lines at
# all --, and it removed its control socket.
gw_finish() {
	local name=$1 log=$T/$1.log
	stop_bg "$name" TERM
	if ! is "$RC" 0 "usbgwd $name exits 0 on SIGTERM"; then
		gw_diag "$name"
	fi
	if gw_asan; then
		if gw_log_sanitizer_clean "$name"; then
			pass "usbgwd $name: no sanitizer report in its log"
		else
			fail "usbgwd $name: no sanitizer report in its log"
			_diag_text "$(cat "$T/$name.log.old" "$log" 2>/dev/null |
			    grep -E -A 30 "$SAN_REPORT_ERE" | head -n 40)"
		fi
		asan_clean "no sanitizer report files (ASan build)"
	else
		if ! grep -q '\[info\]: usbgwd .* started (pid' "$log" 2>/dev/null; then
			# (-v warning, or a log-target that is not stderr)
			pass "usbgwd $name: a clean stop in its log (no info lines there: its exit status only)"
		elif awk '/: SIGTERM: shutting down$/ { t = 1 }
		    t && /\]: stopped$/ { s = 1 } END { exit !s }' "$log" 2>/dev/null
		then
			pass "usbgwd $name: a clean stop in its log"
		else
			fail "usbgwd $name: a clean stop in its log"
			gw_diag "$name" 10
		fi
		if [ ! -e "$T/$name.sock" ]; then
			pass "usbgwd $name: control socket removed at exit"
		else
			fail "usbgwd $name: control socket removed at exit"
		fi
	fi
}

# ---- USB/IP PDUs as hex, for usbip-tc raw (--hex) ----------------------

# hex32 N: N as 8 hex digits (two's complement for negative N).
hex32() { printf '%08x' $(($1 & 0xffffffff)); }

# op_import_hex BUSID: an OP_REQ_IMPORT (40 bytes).
op_import_hex() {
	local b
	b=$(printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n')
	while [ ${#b} -lt 64 ]; do b=${b}00; done
	printf '0111800300000000%s' "${b:0:64}"
}

# submit_hex SEQ DEVID DIR EP LEN [NPACKETS [SETUP [FLAGS]]]: a CMD_SUBMIT
# header (48 bytes).  DEVID is a number or the word DEVID (raw fills in
# the imported device's); SETUP 16 hex digits.
submit_hex() {
	local dev=$2
	[ "$dev" = DEVID ] || dev=$(hex32 "$dev")
	printf '00000001%s%s%s%s%s%s00000000%s00000000%s' "$(hex32 "$1")" \
	    "$dev" "$(hex32 "$3")" "$(hex32 "$4")" "$(hex32 "${8:-0}")" \
	    "$(hex32 "$5")" "$(hex32 "${6:-0}")" "${7:-0000000000000000}"
}

# iso_desc_hex OFFSET LENGTH [ACTUAL [STATUS]]: one ISO descriptor.
iso_desc_hex() {
	printf '%s%s%s%s' "$(hex32 "$1")" "$(hex32 "$2")" "$(hex32 "${3:-0}")" \
	    "$(hex32 "${4:-0}")"
}

# GET_DESCRIPTOR(device), 18 bytes: the usual first URB.
SETUP_GET_DEVICE=8006000100001200

# sim_dev_field SIM BUSID KEY: KEY=VALUE of the device's line in the
# simulator's `list` (state, imports, urbs, bytes_in, ...); empty when
# the simulator lists no such device or key.  When the control socket
# fails (no answer, or not "ok") it prints nothing, returns 1 and the
# next check fails (helper_error): no value is not a value.
sim_dev_field() {
	sim_ctl "$1" list
	if [ "$RC" != 0 ]; then
		helper_error "sim_dev_field $1 $2 $3: the simulator's control socket $T/$1.ctl failed: ${CTL_OUT:-no answer}"
		return 1
	fi
	printf '%s\n' "$CTL_OUT" | awk -v b="$2" '$1 == b' | tr ' ' '\n' |
	    sed -n "s/^$3=//p" | head -n 1
}

# ---- timing from the daemon's log ----------------------------------------
# The daemon stamps each log line with the local time of day to the ms;
# measuring from there leaves the CLI's own latency (large under ASan
# on a loaded machine) out of "how fast did the gateway react".

# day_ms: milliseconds since local midnight, now.
day_ms() {
	date +%H:%M:%S.%3N | awk '{ split($1, a, ":")
	    printf "%d\n", (a[1] * 3600 + a[2] * 60 + a[3]) * 1000 + 0.5 }'
}

# gw_log_after_ms NAME ERE T0: ms from T0 (a day_ms) to the first line
# of the daemon's log matching ERE stamped at or after T0; 99999 if none.
gw_log_after_ms() {
	awk -v re="$2" -v t0="$3" '
	    $0 ~ re { split($1, a, ":")
		ms = int((a[1] * 3600 + a[2] * 60 + a[3]) * 1000 + 0.5)
		if (ms < t0 - 43200000) ms += 86400000	# past midnight
		if (ms >= t0) { print ms - t0; found = 1; exit } }
	    END { if (!found) print 99999 }' "$T/$1.log"
}
