#!/usr/bin/env bash
# A revoke holds for the device's presence even when a rule allows it,
# across a gateway restart; an operator's approval ends it, and so does
# the device leaving (a new presence is decided by the rules again).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
need_prog "$USBGWD" "$USBGW" "$SIM"
plan 12

sim_start sim || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-5 pending || { gw_diag gw; bail_out "no pending device"; }
gwctl gw policy add 'allow id 1209:0005'
gw_wait_state gw sim1:1-5 authorized 5
is "$(gw_state gw sim1:1-5)" authorized "a rule authorizes the device"
gwctl gw revoke sim1:1-5 -m "lost badge"
is "$RC" 0 "revoke"
is "$(gw_state gw sim1:1-5)" pending "revoked: pending although the rule allows it"

stop_bg gw KILL
gw_start gw || bail_out "usbgwd did not restart"
gw_wait_state gw sim1:1-5 pending 10
sleep 1
is "$(gw_state gw sim1:1-5)" pending "after SIGKILL and restart the revoke still holds"
stop_bg gw TERM
gw_start gw || bail_out "usbgwd did not restart"
gw_wait_state gw sim1:1-5 pending 10
sleep 1
is "$(gw_state gw sim1:1-5)" pending "...and after a clean restart"

gwctl gw approve sim1:1-5
gw_wait_state gw sim1:1-5 authorized 5
is "$(gw_state gw sim1:1-5)" authorized "an operator's approval ends the revoke"
gwctl gw revoke sim1:1-5
is "$(gw_state gw sim1:1-5)" pending "revoked again"

sim_ctl sim unplug 1-5
gw_wait_state gw sim1:1-5 gone 5
is "$(gw_state gw sim1:1-5)" gone "unplugged: gone"
sim_ctl sim plug 1-5 sourcesink
gw_wait_state gw sim1:1-5 authorized 10
is "$(gw_state gw sim1:1-5)" authorized "plugged back: a new presence, the rule decides again"
gw_finish gw
done_testing
