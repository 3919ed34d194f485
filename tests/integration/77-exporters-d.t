#!/bin/bash
# exporters.d (issue 18 item 4): its *.conf files are read at start and on
# SIGHUP; SIGHUP adds new exporters, makes changed ones again and removes
# the ones whose lines were deleted -- failing closed: an attached device
# of a removed exporter loses its vhci host at once and is gone.  A
# broken file at SIGHUP keeps the old set (every error by file:line), and
# a line deleted while the daemon was down is gone at the next start.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 35

cat >"$T/sim.conf" <<'EOF'
device 1-2 { type storage; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
sim_start sim2 -c "$T/sim.conf" || bail_out "simulator 2 did not start"
sim_start sim3 -c "$T/sim.conf" || bail_out "simulator 3 did not start"
SIMA=127.0.0.1:$(sim_port sim)
SIM2A=127.0.0.1:$(sim_port sim2)
SIM3A=127.0.0.1:$(sim_port sim3)
D=$T/exporters.d
mkdir -p "$D"
printf '# floor 1\nexporter ex1 %s\n' "$SIMA" >"$D/a.conf"
printf 'poll-interval = 300ms\n' >"$D/notes.txt"	# not *.conf: not read

gw_conf gw "poll-interval = 300ms"
run "$USBGWD" -n -c "$T/gw.conf"
is "$RC" 0 "usbgwd -n reads exporters.d"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw ex1:1-2 pending
check $? "the exporter of exporters.d/a.conf is polled at start"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get file name=ex1)" "a.conf:2" \
    "exporter list --json: where it is declared"

# hup: SIGHUP, then until the log says the reload is done
hups=0
hup() {
	hups=$((hups + 1))
	kill -HUP "$(bg_pid gw)"
	wait_for -t 10 eval "[ \"\$(grep -c 'SIGHUP: reloading' '$T/gw.log')\" -ge $hups ]"
	# the reload is one loop callback: a CLI answer after it sees its end
	gwctl gw status
}

# ---- attach ex1:1-2 and keep data moving -----------------------------------------
gwctl gw approve ex1:1-2
is "$RC" 0 "approve ex1:1-2"
rm -f "$T/load.ready"
start_bg load "$TC" load "$GWA" ex1:1-2 --seconds 60 --dir loop \
    --expect-disconnect --within 3000 --ready-file "$T/load.ready"
wait_file "$T/load.ready" 10 load
check $? "a vhci host moves data through ex1:1-2"
gw_wait_state gw ex1:1-2 attached 5
check $? "ex1:1-2 attached"

# ---- add: a new file ------------------------------------------------------------------
printf 'exporter ex2 %s\n' "$SIM2A" >"$D/b.conf"
hup
gw_wait_state gw ex2:1-2 pending
check $? "SIGHUP: ex2 of the new b.conf added and polled"
is "$(gw_state gw ex1:1-2)" attached "ex1:1-2 still attached (its line unchanged)"
is "$(gw_audit_count gw exporter-add "object = 'ex2' AND detail LIKE '%(b.conf:1)'")" 1 \
    "exporter-add row for ex2, saying where"

# ---- change: ex2 moves to sim3 -----------------------------------------------------------
printf 'exporter ex2 %s\n' "$SIM3A" >"$D/b.conf"
hup
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" get port name=ex2)" "$(sim_port sim3)" \
    "SIGHUP: ex2's changed address taken"
wait_for -t 10 eval '[ "$(sim_dev_field sim3 1-2 imports)" -ge 1 ]'
check $? "ex2 now claims sim3's device"
is "$(gw_state gw ex1:1-2)" attached "ex1:1-2 still attached"

# ---- a broken file at SIGHUP: the old set stays ---------------------------------------------
printf 'exporter ex3 %s\nexporter ex4 %s\n' "$SIM2A" "$SIM2A" >"$D/c.conf"
rm -f "$D/b.conf"		# deleted at the same reload: must not happen
hup
wait_log gw "c.conf:2: exporter ex4: address $SIM2A is exporter ex3's \(line 1\)" 5
check $? "the error names the file:line and the other exporter"
like "$(cat "$T/gw.log")" "configuration has errors; keeping the old one" \
    "... and the old configuration is kept"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" count)" 2 "still ex1 and ex2"
is "$(printf '%s' "$OUT" | "$EJSON" count name=ex2)" 1 \
    "ex2 not removed by the reload that failed"
is "$(printf '%s' "$OUT" | "$EJSON" count name=ex3)" 0 "ex3 not added"
printf 'exporter broken\n' >"$D/c.conf"
hup
wait_log gw "c.conf:1: expected \"exporter NAME HOST\[:PORT\]" 5
check $? "a malformed line: file:line and what was expected"
rm -f "$D/c.conf"
printf 'exporter ex2 %s\n' "$SIM3A" >"$D/b.conf"

# ---- remove: ex1's line deleted while its device is attached -------------------------------
imports_before=$(sim_dev_field sim 1-2 imports)
: >"$D/a.conf"
hup
wait_bg load 10
is "$RC" 0 "the vhci host lost the device (within 3 s of the reload)"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" count name=ex1)" 0 "ex1 removed"
is "$(gw_field gw ex1:1-2 state)" "" "ex1:1-2 gone from the device list"
is "$(gw_sql gw "SELECT state FROM devices WHERE busid = 'ex1:1-2'")" gone \
    "the database: ex1:1-2 gone"
is "$(gw_sql gw "SELECT count(*) FROM attachments a JOIN devices d ON d.id = a.device_id WHERE d.busid = 'ex1:1-2' AND a.ended_at IS NULL")" 0 \
    "its attachment ended"
is "$(gw_audit_count gw exporter-remove "object = 'ex1' AND detail = 'no longer in the configuration (was a.conf:2)'")" 1 \
    "an exporter-remove row: no longer in the configuration, where it was"
is "$(gw_sql gw "SELECT removed_at IS NOT NULL FROM exporters WHERE name = 'ex1'")" 1 \
    "ex1 marked removed in the database"
run "$TC" import "$GWA" ex1:1-2
isnt "$RC" 0 "an import of ex1:1-2 through the gateway is refused"
wait_for -t 10 eval '[ "$(sim_dev_field sim 1-2 state)" != imported ]'
check $? "the gateway let go of the device at the exporter"
sleep 1
is "$(sim_dev_field sim 1-2 imports)" "$imports_before" \
    "and never claimed it again"
is "$(gw_state gw ex2:1-2)" pending "ex2 untouched"

# ---- a line deleted while the daemon is down ----------------------------------------------
stop_bg gw TERM
rm -f "$D/b.conf"
printf 'exporter ex5 %s\n' "$SIMA" >"$D/e.conf"
gw_start gw || bail_out "usbgwd did not start again"
gw_wait_state gw ex5:1-2 pending
check $? "at start: ex5 of e.conf added"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" count name=ex2)" 0 \
    "at start: ex2, whose file went while the daemon was down, removed"
is "$(gw_audit_count gw exporter-remove "object = 'ex2' AND detail LIKE 'no longer in the configuration (was b.conf:1)'")" 1 \
    "... with its audit row"

gw_finish gw
done_testing
