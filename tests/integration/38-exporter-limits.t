#!/usr/bin/env bash
# What one exporter (a thin client, perhaps compromised) can make the
# gateway hold is bounded: at most max-devices-per-exporter devices present
# are taken (claimed, probed, remembered), and max-new-devices-per-minute
# new ones a minute; one audit row when it goes over, not one per poll;
# gone devices beyond the same number are forgotten, oldest first, and
# come back from the database when they return.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$USBGWD" "$USBGW" "$SIM" "$TC" sqlite3 socat perl
plan 21

printf 'device 1-1 { type keyboard; }\ndevice 1-2 { type storage; }\n' >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "max-devices-per-exporter = 4" "max-new-devices-per-minute = 1000"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim:1-2 pending || bail_out "sim:1-2 did not become pending"

listed() {	# the gateway's busids of exporter sim, sorted, one line
	"$USBGW" -s "$(gw_sock gw)" list --json 2>/dev/null | perl -MJSON::PP \
	    -0777 -e 'print map { "$_ " } sort map { $_->{busid} }
	    @{decode_json(<STDIN>)}'
}
imported() {	# did the gateway ever import BUSID at the simulator?
	grep -q "cmd=OP_REQ_IMPORT busid=$1\$" "$(sim_pdulog sim)"
}

for b in 1-3 1-4 1-5; do sim_ctl sim plug "$b" keyboard; done
gw_wait_state gw sim:1-4 pending
sleep 1		# five polls
is "$(listed)" "sim:1-1 sim:1-2 sim:1-3 sim:1-4 " "4 of the 5 listed devices are taken"
imported 1-5
isnt "$?" 0 "the fifth is not even claimed"
is "$(gw_audit_count gw exporter-over-limit)" 1 "one exporter-over-limit row, not one per poll"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'exporter-over-limit'")" \
    '^4 devices present \(max-devices-per-exporter\): 1-5 and any further devices not taken$' \
    "which says why"

# a device leaves: there is room again
sim_ctl sim unplug 1-1
gw_wait_state gw sim:1-5 pending 10
check $? "with 1-1 unplugged, 1-5 is taken"
is "$(gw_state gw sim:1-1)" gone "1-1 is gone (and remembered)"

# gone devices beyond the limit are forgotten, oldest first
for b in 1-2 1-3 1-4; do sim_ctl sim unplug "$b"; done
for b in 1-2 1-3 1-4; do gw_wait_state gw sim:$b gone 10; done
is "$(listed)" "sim:1-1 sim:1-2 sim:1-3 sim:1-4 sim:1-5 " "four gone devices and one present"
sim_ctl sim plug 1-6 keyboard
gw_wait_state gw sim:1-6 pending 10
check $? "a new device is taken"
is "$(listed)" "sim:1-2 sim:1-3 sim:1-4 sim:1-5 sim:1-6 " \
    "the oldest gone device (sim:1-1) is forgotten to make room"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE busid = 'sim:1-1'")" 1 \
    "the database still has it"
id1=$(gw_sql gw "SELECT id FROM devices WHERE busid = 'sim:1-1'")
sim_ctl sim plug 1-1 keyboard
gw_wait_state gw sim:1-1 pending 10
check $? "when it returns it is taken again"
is "$(gw_sql gw "SELECT count(*) FROM devices WHERE busid = 'sim:1-1'")/$(gw_sql gw "SELECT id FROM devices WHERE busid = 'sim:1-1'")" \
    "1/$id1" "as the same device row"

# ---- new devices a minute ---------------------------------------------------------
gw_finish gw
gw_conf gw "exporter sim 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "max-devices-per-exporter = 100" "max-new-devices-per-minute = 1"
gw_start gw || bail_out "usbgwd did not start again"
gw_wait_state gw sim:1-6 pending 10
check $? "after a restart every listed device is taken (its first list is not rated)"
sim_ctl sim plug 1-7 keyboard
sim_ctl sim plug 1-8 keyboard
sleep 1.5
n=0
imported 1-7 && n=$((n + 1))
imported 1-8 && n=$((n + 1))
is "$n" 1 "with one new device a minute, one of 1-7 and 1-8 is taken"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'exporter-over-limit' ORDER BY seq DESC LIMIT 1")" \
    '^1 new devices this minute \(max-new-devices-per-minute\): 1-[78] and any further new devices not taken yet$' \
    "the row says why"
gw_finish gw
done_testing
