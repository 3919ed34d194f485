#!/bin/bash
# The gateway dies (SIGKILL) and is started again on the same database:
# the same exporters (from the config file and from `usbgw exporter
# add`), the same busids (hashed ones too) and device records, every
# approval in force again without an operator (permanent, timed, and
# --once since the device never left its exporter), the audit trail
# intact and growing.  Then a clean restart (SIGTERM) keeps them too.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 37

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type composite; keys ""; }
device 1-4 { type audio; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
cat >"$T/sim2.conf" <<'EOF'
device 3-1 { type storage; serial "FAR-1"; }
EOF
sim_start sim2 -c "$T/sim2.conf" || bail_out "second simulator did not start"
SIMA=127.0.0.1:$(sim_port sim)
LONG=thin-client-in-room-4711-left	# 29 bytes: busids are hashed

gw_conf gw "exporter sim1 $SIMA" "poll-interval = 500ms"
# The restarts reuse the port: one reserved for this test, not one the
# kernel may give another program while the gateway is down.
GW_LISTEN_PORT=$(free_port) || bail_out "no free port"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-3 1-4 1-5; do gw_wait_state gw sim1:$d pending; done
gwctl gw exporter add "$LONG" "127.0.0.1:$(sim_port sim2)"
is "$RC" 0 "exporter added at run time"
farid() {
	"$USBGW" -s "$(gw_sock gw)" list --json 2>/dev/null |
	    "$EJSON" get busid exporter="$LONG" exporter_busid=3-1 2>/dev/null
}
wait_for -t 15 eval '[ -n "$(farid)" ]'
FAR=$(farid)
like "$FAR" '^g[0-9a-f]{16}$' "the far device has a hashed busid ($FAR)"
gw_wait_state gw "$FAR" pending

gwctl gw approve sim1:1-2 --permanent
is "$RC" 0 "approve --permanent sim1:1-2"
gwctl gw approve sim1:1-3 --for 1h
is "$RC" 0 "approve --for 1h sim1:1-3"
gwctl gw deny sim1:1-4 --permanent
is "$RC" 0 "deny --permanent sim1:1-4"
gwctl gw approve sim1:1-5
is "$RC" 0 "approve sim1:1-5 (once)"
gwctl gw approve "$FAR"
is "$RC" 0 "approve $FAR (once)"

ALL="sim1:1-1 sim1:1-2 sim1:1-3 sim1:1-4 sim1:1-5 $FAR"
snapshot() {		# busid, record id and state of every device
	local b
	for b in $ALL; do
		printf '%s id=%s state=%s\n' "$b" "$(gw_field gw "$b" id)" \
		    "$(gw_state gw "$b")"
	done
}
before=$(snapshot)
like "$before" 'sim1:1-1 id=[0-9]+ state=pending' "snapshot before: 1-1 pending"
like "$before" "$FAR id=[0-9]+ state=authorized" "snapshot before: the far device authorized"

start_bg hold "$TC" hold "$GWA" sim1:1-2 --expect-disconnect --within 1000 \
    --ready-file "$T/hold.ready"
wait_file "$T/hold.ready" 10 hold
check $? "a vhci host holds sim1:1-2 through the gateway"
gw_wait_state gw sim1:1-2 attached 5
store_wait() { gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND new_state = 'attached'" 1; }
store_wait
rows0=$(gw_sql gw "SELECT count(*) FROM audit_log")
appr0=$(gw_sql gw "SELECT count(*) FROM approvals")
last0=$(gw_sql gw "SELECT seq || ' ' || hash FROM audit_log ORDER BY seq DESC LIMIT 1")
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'state' AND busid = 'sim1:1-2' AND new_state = 'attached'")" \
    1 "the attachment is on record before the crash"

# ---- SIGKILL ------------------------------------------------------------------
kill -USR1 "$(bg_pid hold)"
stop_bg gw KILL
is "$RC" 137 "usbgwd killed with SIGKILL"
wait_bg hold 10
is "$RC" 0 "the vhci host saw the disconnect within 1 s"
wait_for -t 10 eval '[ "$(sim_dev_field sim 1-2 state)" != imported ]'
isnt "$(sim_dev_field sim 1-2 state)" imported "the exporter saw the claim end and freed the device"

gw_start gw || bail_out "usbgwd did not restart"
is "$(gw_port gw)" "$GW_LISTEN_PORT" "restarted on the same USB/IP port"
for b in sim1:1-2 sim1:1-3 sim1:1-5 "$FAR"; do gw_wait_state gw "$b" authorized 20; done
gw_wait_state gw sim1:1-4 blocked 5
gw_wait_state gw sim1:1-1 pending 5
after=$(snapshot)
is "$after" "$(printf '%s\n' "$before" | sed 's/^\(sim1:1-2 .*state=\)attached/\1authorized/')" \
    "after SIGKILL and restart: same busids, records and decisions"
is "$(gw_state gw sim1:1-5)" authorized "a --once approval survives: the device never left its exporter"
is "$(gw_field gw "$FAR" exporter)" "$LONG" "the run-time exporter was restored from the database"
is "$(gw_sql gw "SELECT count(*) FROM approvals")" "$appr0" \
    "no new approval: the standing ones were applied without an operator"
ok "audit verify after the crash" "$USBGW" -s "$(gw_sock gw)" audit verify
is "$(gw_sql gw "SELECT seq || ' ' || hash FROM audit_log WHERE seq = ${last0%% *}")" "$last0" \
    "the last row written before the crash is unchanged"
num_cmp "$(gw_sql gw "SELECT count(*) FROM audit_log")" -gt "$rows0" "the trail grew after the restart"
ok "64 MiB loopback through the restarted gateway" \
    "$TC" script "$GWA" sim1:1-2 --bytes 64M --skip unlink
like "$OUT" 'verified bytes=67108864 ' "data verified"
ok "far device usable by its hashed busid after the restart" \
    "$TC" load "$GWA" "$FAR" --dir loop --bytes 8M
run "$TC" import "$GWA" sim1:1-4
is "$RC" 11 "the denied device is still refused"
run "$TC" import "$GWA" sim1:1-1
is "$RC" 11 "the pending device is still not importable"

# ---- clean restart -------------------------------------------------------------------
rows1=$(gw_sql gw "SELECT count(*) FROM audit_log")
stop_bg gw TERM
is "$RC" 0 "SIGTERM: clean exit"
if ! gw_log_sanitizer_clean gw; then
	fail "no sanitizer report at the clean exit"
	gw_diag gw
else
	pass "no sanitizer report at the clean exit"
fi
gw_start gw || bail_out "usbgwd did not start after a clean stop"
for b in sim1:1-2 sim1:1-3 "$FAR" sim1:1-5; do gw_wait_state gw "$b" authorized 20; done
gw_wait_state gw sim1:1-4 blocked 5
gw_wait_state gw sim1:1-1 pending 5
is "$(snapshot | grep -v 'sim1:1-5')" \
    "$(printf '%s\n' "$before" | grep -v 'sim1:1-5' | sed 's/^\(sim1:1-2 .*state=\)attached/\1authorized/')" \
    "after a clean restart: same busids, records and decisions"
is "$(gw_state gw sim1:1-5)" authorized "a --once approval survives a clean restart too"
ok "audit verify after the clean restart" "$USBGW" -s "$(gw_sock gw)" audit verify
num_cmp "$(gw_sql gw "SELECT count(*) FROM audit_log")" -gt "$rows1" "the trail grew again"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'daemon-stop'")" 1 \
    "the clean stop is on record (the SIGKILL left none)"

gw_finish gw
done_testing
