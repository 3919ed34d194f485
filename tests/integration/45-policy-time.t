#!/usr/bin/env bash
# Time in the policy (issue 4): an approval for a duration revokes an
# attached device on time, and its expiry survives a gateway SIGKILL; a
# rule with a localtime() window revokes what it allowed when the window
# closes (localtime() takes HH:MM:SS, so the window is seconds long).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
need_prog "$USBGWD" "$USBGW" "$SIM" "$TC" sqlite3 awk
plan 19

sim_start sim || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-5 pending || { gw_diag gw; bail_out "no pending device"; }

# --- 1. approve --for: revoked on time, while attached --------------------
gwctl gw approve sim1:1-5 --for 3s -m "short"
is "$RC" 0 "approve --for 3s"
t_approve=$(date +%s.%N)
start_bg hold "$TC" hold "$(gw_addr gw)" sim1:1-5 --seconds 0 --expect-disconnect
wait_for -t 5 -p hold _gw_state_is gw sim1:1-5 attached
is "$(gw_state gw sim1:1-5)" attached "the device is attached through the gateway"
wait_bg hold 10
t_gone=$(date +%s.%N)
is "$RC" 0 "the client was disconnected when the approval expired"
elapsed=$(awk -v a="$t_gone" -v b="$t_approve" 'BEGIN { printf "%.2f", a - b }')
# expiry has one-second resolution (unix seconds)
num_cmp "$elapsed" -ge 2 "the approval lasted its 3 s (to the second)"
num_cmp "$elapsed" -lt 5 "...and was revoked within 2 s of its expiry"
diag "approval to disconnect: ${elapsed}s (approval for 3 s)"
gw_wait_state gw sim1:1-5 pending 5
is "$(gw_state gw sim1:1-5)" pending "after expiry the device is pending again"
gw_wait_sql gw "SELECT count(*) FROM approvals WHERE end_reason = 'expired'" 1
is "$(gw_sql gw "SELECT count(*) FROM approvals WHERE end_reason = 'expired'")" 1 \
    "the approval row ended as expired"

# --- 2. an expiry survives a gateway SIGKILL --------------------------------
gwctl gw approve sim1:1-2 --for 6s
is "$RC" 0 "approve --for 6s"
t_approve=$(date +%s)
gw_wait_state gw sim1:1-2 authorized 5
stop_bg gw KILL
gw_start gw || bail_out "usbgwd did not restart"
gw_wait_state gw sim1:1-2 authorized 10
is "$(gw_state gw sim1:1-2)" authorized "after SIGKILL and restart the timed approval holds"
gw_wait_state gw sim1:1-2 pending 12
t_pending=$(date +%s)
is "$(gw_state gw sim1:1-2)" pending "...and ends on time after the restart"
num_cmp $((t_pending - t_approve)) -ge 5 "the restart did not cut the approval short"
diag "approval to pending across a restart: $((t_pending - t_approve)) s (for 6 s)"

# --- 3. a localtime() window closes: revoked ----------------------------------
# localtime() takes seconds: a window from a minute ago to 15 s from now.
now=$(date +%s)
start_t=$(date -d "@$((now - 60))" +%H:%M:%S)
end_t=$(date -d "@$((now + 15))" +%H:%M:%S)
gwctl gw policy add "allow id 1209:0001 if localtime($start_t-$end_t)"
is "$RC" 0 "policy add with a window ending at $end_t"
gw_wait_state gw sim1:1-1 authorized 5
is "$(gw_state gw sim1:1-1)" authorized "inside the window the rule authorizes the device"
start_bg hold2 "$TC" hold "$(gw_addr gw)" sim1:1-1 --seconds 0 --expect-disconnect
wait_for -t 5 -p hold2 _gw_state_is gw sim1:1-1 attached
is "$(gw_state gw sim1:1-1)" attached "attached inside the window"
wait_bg hold2 40
is "$RC" 0 "the attachment is torn down when the window closes"
gw_wait_state gw sim1:1-1 pending 5
is "$(gw_state gw sim1:1-1)" pending "after the window the device is pending"
gw_finish gw
done_testing
