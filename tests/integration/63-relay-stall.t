#!/bin/bash
# A stall is no progress, not a non-empty buffer.  With relay-stall-timeout
# = 1s, a vhci host that reads steadily (2.5 MB/s) behind a faster
# exporter keeps the gateway's output to it backed up for several stall
# periods and is NOT cut; when it stops reading altogether it IS cut,
# within the limit (plus a tick).  Likewise on the way in: a vhci host
# that sends a large OUT URB slowly (160 KB/s, each URB taking longer than
# the limit, the kernel holding the bytes below SO_RCVLOWAT) is not cut;
# one that stops in the middle of a URB is.  A bad relay-stall-timeout is
# a configuration error naming the line and the range.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

PEER=$TOP/tests/tools/slow-peer.py
need_prog "$SIM" "$USBGWD" "$USBGW" python3 sqlite3
plan 22

# --- configuration ---------------------------------------------------------
printf 'relay-stall-timeout = 100ms\nrelay-stall-timeout = soon\n' >"$T/bad.conf"
run "$USBGWD" -n -c "$T/bad.conf"
is "$RC" 2 "a bad relay-stall-timeout: exit 2"
like "$ERR" "bad.conf:1: relay-stall-timeout: .*500ms" "too short: line 1 named, with the range"
like "$ERR" "bad.conf:2: relay-stall-timeout: expected a duration" "not a duration: line 2 named"

# --- the gateway -----------------------------------------------------------
cat >"$T/sim.conf" <<'EOF'
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 300ms" \
    "relay-stall-timeout = 1s"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gw_wait_state gw sim1:1-5 pending || bail_out "device not pending"
gwctl gw approve sim1:1-5 --for 1h
is "$RC" 0 "approved"
gw_wait_state gw sim1:1-5 authorized

phase() {	# phase NAME KEY: KEY of the PHASE NAME line in $OUT
	printf '%s\n' "$OUT" | sed -n "s/^PHASE $1 .*\\b$2=\\([0-9.:]*\\).*/\\1/p"
}
tod_ms_diff() {	# tod_ms_diff HH:MM:SS.mmm HH:MM:SS.mmm: ms from the first
	[ -n "$1" ] && [ -n "$2" ] || { helper_error "no time: '$1' '$2'"; return 1; }
	awk -v a="$1" -v b="$2" 'function ms(t, p) { split(t, p, ":")
		return ((p[1] * 60 + p[2]) * 60 + p[3]) * 1000 }
		BEGIN { d = ms(b) - ms(a); if (d < 0) d += 86400000; printf "%d\n", d }'
}

# --- a slow reader ---------------------------------------------------------
# 256 URBs of 64 KiB in flight (16 MiB asked), read at 256 KiB per 100 ms:
# the exporter answers at once, the gateway's output to the host stays
# backed up (4 MiB high-water mark) the whole time, and drains steadily.
run -t 40 python3 "$PEER" read "$GWA" sim1:1-5 --urbs 256 --size 65536 \
    --rate 262144 --seconds 5 --stop-seconds 4
is "$RC" 0 "slow reader ran" || _diag_output
is "$(phase slow alive)" 1 "a reader at 2.5 MB/s is not cut in 5 stall periods" ||
    { _diag_output; gw_diag gw 15; }
num_cmp "$(phase slow bytes)" -ge $((8 << 20)) "it moved at least 8 MiB meanwhile"
is "$(phase stopped closed)" 1 "a reader that stops reading is cut"
# when, from the daemon's log: the close waits behind what it did not read
cut=$(sed -n 's/^\([0-9:.]*\) .*closed: vhci host stalled.*/\1/p' "$(bg_log gw)" | head -n 1)
after_ms=$(tod_ms_diff "$(phase slow stop_tod)" "$cut")
num_cmp "$after_ms" -le 4000 "within the limit and a tick or two"
# (from the reader's stop: its last read may come a scheduling delay
# before that on a loaded machine, so half the limit is the floor here)
num_cmp "$after_ms" -ge 500 "but not long before the limit"
wait_for -t 10 sh -c "grep -q 'vhci host stalled' '$(bg_log gw)'"
check $? "the log says the vhci host stalled"
gw_wait_state gw sim1:1-5 authorized 10
is "$(gw_state gw sim1:1-5)" authorized "the device is reclaimed and authorized again"

# --- a slow writer ------------------------------------------------------------
# OUT URBs of 512 KiB at 16 KiB per 100 ms: 3.2 s each, the gateway reading
# every 256 KiB (SO_RCVLOWAT), i.e. every 1.6 s: progress it must see in
# the socket's queue, not in its own buffer.
run -t 40 python3 "$PEER" trickle "$GWA" sim1:1-5 --size 524288 \
    --rate 16384 --seconds 6 --stop-seconds 8
is "$RC" 0 "slow writer ran" || _diag_output
is "$(phase slow alive)" 1 "a host sending a URB slower than the limit is not cut" ||
    { _diag_output; gw_diag gw 15; }
num_cmp "$(phase slow urbs)" -ge 2 "it sent two whole URBs or more"
is "$(phase stopped closed)" 1 "a host that stops in the middle of a URB is cut"
num_cmp "$(phase stopped after_ms)" -le 4000 "within the limit and a tick or two"
num_cmp "$(phase stopped after_ms)" -ge 500 "but not long before the limit"
gw_wait_state gw sim1:1-5 authorized 10
is "$(gw_state gw sim1:1-5)" authorized "reclaimed again"

gw_finish gw
done_testing
