#!/usr/bin/env bash
# Red team: an import held for an operator (attach-pending-wait) keeps a
# bare pointer to its device (ds->dev), and nothing tells the session when
# the device leaves memory.  The server registers no `freed` observer, and
# eviction (exp_evict_gone) only checks dev->ds (the attached session),
# not the sessions waiting on the device.
#
#  A. The exporter alone can do it: with max-devices-per-exporter gone
#     devices in memory, a new device evicts the oldest gone one.  A vhci
#     host holds an import of sim1:1-1 (pending), the exporter unplugs it
#     and plugs another: 1-1 is freed while the session still points at
#     it.  When that vhci host gives up (closes), dsession_close() reads
#     dev->busid and dev->ds of the freed device (heap-use-after-free in
#     an ASan build; in a normal build the pointer may also be matched to
#     a NEW device allocated at the same address by
#     server_device_decided(), which compares pointers only).
#  B. The same with `usbgw exporter remove`.
#
# Also visible without ASan: a held import of a device that is gone (or
# whose exporter was removed) is not answered (ST_NODEV/ST_NA); it hangs
# until attach-pending-wait ends.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 9

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 20s" "max-devices-per-exporter = 1"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw sim1:1-1 pending || { gw_diag gw; bail_out "sim1:1-1 not pending"; }

waiting() {
	gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE
	    outcome = 'waiting'" "$1" 5
}

# ---- A: the exporter unplugs the held device and plugs another ------------
# usbip-tc gives up after 3 s without an answer (-t: it closes then)
start_bg imp1 "$TC" import "$GWA" sim1:1-1 -t 3000
waiting 1 || diag "no waiting access request"
sim_ctl sim unplug 1-1
gw_wait_state gw sim1:1-1 gone 5 || diag "sim1:1-1 not gone"
sim_ctl sim plug 1-2 storage
gw_wait_state gw sim1:1-2 pending 5 || diag "sim1:1-2 not pending"
is "$(gw_field gw sim1:1-1 state)" "" "sim1:1-1 was evicted from memory (gone, over the limit)"
wait_bg imp1 6
isnt "$RC" 5 "the held import of the device that left is answered, not left to time out (exit $RC)"
sleep 0.3
if bg_alive gw; then pass "usbgwd still runs after the vhci host gave up"; else fail "usbgwd still runs after the vhci host gave up"; fi

# ---- B: the exporter is removed while an import is held -----------------------
start_bg imp2 "$TC" import "$GWA" sim1:1-2 -t 3000
waiting 1 || diag "no waiting access request"
gwctl gw exporter remove sim1
is "$RC" 0 "usbgw exporter remove sim1"
wait_bg imp2 6
isnt "$RC" 5 "the held import is answered when its exporter is removed (exit $RC)"
sleep 0.3
if bg_alive gw; then pass "usbgwd still runs"; else fail "usbgwd still runs"; fi

gw_finish gw
done_testing
