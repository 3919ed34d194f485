# tests/lib/decision.sh -- helpers for the decision tests (5x-*.t), bash.
# shellcheck shell=bash
#
# Source it after common.sh, sim.sh and gw.sh:
#
#	gw_show gw sim1:1-2			# SHOW = `usbgw show --json`, RC
#	jget "$SHOW" state			# a member of an object
#	jget "$(jget "$SHOW" decision)" verdict	# ... of a nested object
#	jcount "$(jget "$SHOW" approvals)" decision=deny
#	hold_start h1 gw sim1:1-1		# a vhci host holds the device
#	kill -USR1 "$(bg_pid h1)"; ...; hold_closed h1	# closed in time?
#
# JSON is read with e2e-json (no jq): an object is wrapped in [ ] so
# that `e2e-json get` reads it; nested arrays and objects come back as
# compact JSON text.  Every helper prints nothing when the member or the
# input is missing, so compare against a literal, never two outputs.

# jget JSON FIELD [KEY=VALUE ...]: FIELD of JSON (an object, or the
# first element of an array matching the KEY=VALUE conditions).
jget() {
	local j=$1
	shift
	j=${j#"${j%%[![:space:]]*}"}
	case $j in
	'{'*) j="[$j]" ;;
	'['*) ;;
	*) return 1 ;;
	esac
	printf '%s' "$j" | "$EJSON" get "$@" 2>/dev/null
}

# jcount JSONARRAY [KEY=VALUE ...]: how many elements match (empty when
# JSONARRAY is not an array).
jcount() {
	local j=$1
	shift
	j=${j#"${j%%[![:space:]]*}"}
	case $j in '['*) ;; *) return 1 ;; esac
	printf '%s' "$j" | "$EJSON" count "$@" 2>/dev/null
}

# gw_show NAME BUSID: SHOW = `usbgw show --json BUSID` (RC as run sets).
gw_show() {
	gwctl "$1" show --json "$2"
	SHOW=$OUT
}

# show_decision NAME BUSID FIELD: FIELD of the device's "decision".
show_decision() {
	gw_show "$1" "$2"
	jget "$(jget "$SHOW" decision)" "$3"
}

# show_approvals NAME BUSID: the device's "approvals" array (JSON).
show_approvals() {
	gw_show "$1" "$2"
	jget "$SHOW" approvals
}

# hold_start NAME GW BUSID [WITHIN_MS]: a vhci host (usbip-tc hold)
# imports BUSID through gateway GW and keeps it until the gateway closes
# the connection; it exits 0 only if that happens within WITHIN_MS
# (default 2000) of a SIGUSR1 sent to it (the marker).  Returns once
# data flows and the gateway says the device is attached.
hold_start() {
	local name=$1 gw=$2 busid=$3 within=${4:-2000}
	rm -f "$T/$name.ready"
	start_bg "$name" "$TC" hold "$(gw_addr "$gw")" "$busid" --seconds 0 \
	    --expect-disconnect --within "$within" --ready-file "$T/$name.ready"
	wait_file "$T/$name.ready" 10 "$name" || return 1
	gw_wait_state "$gw" "$busid" attached 5
}

# hold_closed NAME [SECONDS]: wait for the hold to end; true when it saw
# the gateway close the connection in time (RC = its exit status, 124
# if it is still running, when it is killed).
hold_closed() {
	wait_bg "$1" "${2:-3}"
	if [ "$RC" = 124 ]; then
		stop_bg "$1" TERM
		RC=124
	fi
	[ "$RC" = 0 ]
}

# gw_sql_rw NAME SQL: a statement that writes the instance's database
# behind the daemon's back (waits up to 5 s for its lock).
gw_sql_rw() {
	sqlite3 -batch -noheader -cmd '.timeout 5000' "$T/$1.db" "$2"
}

# state_row NAME BUSID OLD NEW COLUMN [AFTER_SEQ]: COLUMN of the last
# audit row that moved BUSID from OLD to NEW (after AFTER_SEQ).
state_row() {
	gw_sql "$1" "SELECT $5 FROM audit_log WHERE event = 'state' AND
	    busid = '$2' AND old_state = '$3' AND new_state = '$4' AND
	    seq > ${6:-0} ORDER BY seq DESC LIMIT 1"
}

# state_row_wait NAME BUSID OLD NEW [AFTER_SEQ [SECONDS]]: until such a
# row exists (audit rows are written in short batches).
state_row_wait() {
	gw_wait_sql "$1" "SELECT count(*) FROM audit_log WHERE event = 'state'
	    AND busid = '$2' AND old_state = '$3' AND new_state = '$4' AND
	    seq > ${5:-0}" 1 "${6:-2}"
}

# audit_seq NAME: the last audit row's seq (0 when none).
audit_seq() {
	gw_sql "$1" "SELECT IFNULL(MAX(seq), 0) FROM audit_log"
}

# localhost_resolves: true when 127.0.0.1's name is "localhost" (the
# name checks need it).
localhost_resolves() {
	getent hosts 127.0.0.1 2>/dev/null | awk '{ for (i = 2; i <= NF; i++)
	    if ($i == "localhost") f = 1 } END { exit !f }'
}
