#!/usr/bin/env bash
# The database file (issue 12, item 8).  A database usbgwd creates is
# 0600 with its -wal and -shm files, whatever the umask; an existing one
# that others can read is reported and left as it is.  One daemon per
# database: a second usbgwd on it refuses to start, on stderr, naming the
# holder's pid (in the foreground and when it would detach), and leaves
# the holder's files alone; usbgwd -n and the CLI are not held back; a
# holder killed with SIGKILL does not block a restart (the lock dies
# with the process).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
need_prog "$USBGWD" "$USBGW" sqlite3 stat
plan 31

mode_of() { stat -c %a "$1" 2>/dev/null || echo missing; }

# ---- created 0600 under umask 022 (a start by hand) --------------------------
umask 022
gw_conf gw "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"
is "$(mode_of "$T/gw.db")" 600 "umask 022: the database is created 0600"
is "$(mode_of "$T/gw.db-wal")" 600 "... its -wal file too"
is "$(mode_of "$T/gw.db-shm")" 600 "... and its -shm file"

# ---- a second daemon on the same database ----------------------------------------
PID=$(bg_pid gw)
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'daemon-start'" 1
: >"$T/gw2.conf"
run -t 20 "$USBGWD" -f -c "$T/gw2.conf" -d "$T/gw.db" -s "$T/gw2.sock" \
    -l 127.0.0.1:0 -p "$T/gw2.pid" -v debug
is "$RC" 1 "a second usbgwd on the same database refuses to start (exit 1)"
like "$ERR" "database $T/gw.db is in use by usbgwd pid $PID" \
    "... naming the database and the holder's pid"
ok "... and creates neither a control socket nor a pid file" \
    test ! -e "$T/gw2.sock" -a ! -e "$T/gw2.pid"
is "$(gw_audit_count gw daemon-start)" 1 "... nor writes to the database"

run -t 20 "$USBGWD" -c "$T/gw2.conf" -d "$T/gw.db" -s "$T/gw2.sock" \
    -l 127.0.0.1:0 -p "$T/gw2.pid"
is "$RC" 1 "without -f (it would detach): exit 1 too"
like "$ERR" "database $T/gw.db is in use by usbgwd pid $PID" \
    "... with the message on stderr, before it detaches"
ok "the holder still runs" kill -0 "$PID"
# (a build without the lock detached a second daemon: stop it)
stray_stop() {
	local p
	p=$(cat "$1" 2>/dev/null) || return 0
	kill -TERM "$p" 2>/dev/null &&
	    wait_for -t 10 sh -c "! kill -0 $p 2>/dev/null"
	rm -f "$1"
}
stray_stop "$T/gw2.pid"

run "$USBGWD" -n -c "$T/gw2.conf" -d "$T/gw.db"
is "$RC" 0 "usbgwd -n on a database in use: exit 0 (it takes no lock)"
is "$OUT" "configuration OK" "... configuration OK"
gwctl gw status
is "$RC" 0 "usbgw status works while the daemon holds the database"

# ---- SIGKILL: the lock dies with the process ----------------------------------
stop_bg gw KILL
gw_start gw || { gw_diag gw; bail_out "usbgwd did not restart after SIGKILL"; }
pass "usbgwd starts again after its predecessor was killed with SIGKILL"
is "$(cat "$T/gw.db.lock" 2>/dev/null)" "$(bg_pid gw)" \
    "the lock file next to the database names the new holder"
is "$(mode_of "$T/gw.db.lock")" 600 "the lock file is 0600"
gw_finish gw
gw_start again -d "$T/gw.db" || gw_diag again
ok "after a clean stop, another usbgwd starts on the database" kill -0 "$(bg_pid again)"
stop_bg again TERM

# ---- a detached holder: the pid named is the daemon's, not its parent's -------
: >"$T/bg.conf"
run "$USBGWD" -c "$T/bg.conf" -d "$T/bg.db" -s "$T/bg.sock" \
    -l 127.0.0.1:0 -p "$T/bg.pid"
is "$RC" 0 "usbgwd without -f detaches"
wait_file "$T/bg.pid" 10
wait_for -t 10 test -S "$T/bg.sock"
BGPID=$(cat "$T/bg.pid" 2>/dev/null)
run -t 20 "$USBGWD" -f -c "$T/gw2.conf" -d "$T/bg.db" -s "$T/gw2.sock" \
    -l 127.0.0.1:0 -p "$T/gw2.pid"
is "$RC" 1 "a second usbgwd on a detached daemon's database: exit 1"
like "$ERR" "database $T/bg.db is in use by usbgwd pid ${BGPID:-none}(\$|[^0-9])" \
    "... naming the detached daemon's pid"
kill -TERM "${BGPID:-0}" 2>/dev/null
wait_for -t 10 sh -c "! kill -0 ${BGPID:-0} 2>/dev/null"

# ---- umask 000: still 0600 -------------------------------------------------------
umask 000
gw_start u0 || bail_out "usbgwd did not start under umask 000"
umask 022
is "$(mode_of "$T/u0.db")" 600 "umask 000: the database is created 0600"
is "$(mode_of "$T/u0.db-wal")" 600 "... its -wal file too"
is "$(mode_of "$T/u0.db-shm")" 600 "... and its -shm file"
stop_bg u0 TERM

# ---- an existing database others can read: reported, left alone --------------
: >"$T/old.db"
chmod 0644 "$T/old.db"
gw_start old || bail_out "usbgwd did not start on an existing 0644 database"
like "$(cat "$T/old.log")" "warning.*database $T/old.db is readable by group or others \(mode 0644\)" \
    "an existing 0644 database: a warning naming it and its mode"
is "$(mode_of "$T/old.db")" 644 "... and its mode is left as it is"
gw_finish old
done_testing
