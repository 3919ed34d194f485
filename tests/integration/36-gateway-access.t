#!/bin/bash
# Access requests: with attach-pending-wait, an import of a pending
# device is held; an operator's approval during the wait lets it through
# (URBs pipelined behind the import included), a denial or the end of
# the wait refuses it, and nothing reaches the device meanwhile; with a
# wait of 0 the refusal is immediate.  Every request is audited with its
# outcome.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 28

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type composite; keys ""; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
PDU=$(sim_pdulog sim)
SIMA=127.0.0.1:$(sim_port sim)
gw_conf gw "exporter sim1 $SIMA" "poll-interval = 500ms" "attach-pending-wait = 3s" \
    "show-pending = yes"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-3 1-5; do gw_wait_state gw sim1:$d pending; done

now_ms() { echo $(($(date +%s%N) / 1000000)); }
vhci_urbs() {	# URBs below the gateway's own seqnum range, for one busid
	grep "cmd=CMD_SUBMIT.* busid=$1\$" "$PDU" |
	    sed -n 's/.* seqnum=\([0-9]*\) .*/\1/p' |
	    awk '$1 < 268435456 { n++ } END { print n + 0 }'
}

# ---- held, then approved ---------------------------------------------------------
t0=$(now_ms)
start_bg imp1 "$TC" import "$GWA" sim1:1-2 -t 10000
sleep 1.2
bg_alive imp1
check $? "import of a pending device is held (still waiting after 1.2 s)"
gwctl gw approve sim1:1-2 -m "asked for it"
is "$RC" 0 "operator approves during the wait"
ta=$(now_ms)
wait_bg imp1 10
is "$RC" 0 "the held import succeeds"
like "$(cat "$(bg_log imp1)")" 'ok import sim1:1-2 ' "... with the device record"
num_cmp $(($(now_ms) - ta)) -lt 1500 "answered right after the approval"

# ---- held, never decided: refused when the wait ends --------------------------------
t0=$(now_ms)
run -t 15 "$TC" import "$GWA" sim1:1-5 -t 10000
el=$(($(now_ms) - t0))
is "$RC" 11 "no decision: ST_NA"
num_cmp "$el" -ge 2800 "... only after the wait ($el ms)"
num_cmp "$el" -lt 6000 "... and not much later"

# ---- held, denied ---------------------------------------------------------------------
start_bg imp2 "$TC" import "$GWA" sim1:1-1 -t 10000
sleep 0.8
bg_alive imp2
check $? "second request held"
gwctl gw deny sim1:1-1
td=$(now_ms)
wait_bg imp2 10
is "$RC" 11 "denied during the wait: ST_NA"
num_cmp $(($(now_ms) - td)) -lt 1500 "answered right after the denial"

# ---- URBs pipelined behind a held import ------------------------------------------
n5=$(vhci_urbs 1-5)
run -t 15 "$TC" raw "$GWA" --op --expect-close --wait 6000 \
    --hex "$(op_import_hex sim1:1-5)" \
    --hex "$(submit_hex 1 0x00010002 1 0 18 0 $SETUP_GET_DEVICE)" \
    --hex "$(submit_hex 2 0x00010002 1 1 512)"
is "$RC" 0 "held import with URBs behind it, no decision: closed"
like "$OUT" 'raw received=8 data=0111000300000001' "... with ST_NA and nothing else"
sleep 0.3
is "$(vhci_urbs 1-5)" "$n5" "PDU log: none of the pipelined URBs reached the device"

# the devid the gateway will give sim1:1-3, from its DEVLIST (show-pending)
run "$TC" list "$GWA"
bn=$(printf '%s\n' "$OUT" | sed -n 's/^sim1:1-3: .* busnum \([0-9]*\) devnum \([0-9]*\) .*/\1 \2/p')
like "$bn" '^[0-9]+ [0-9]+$' "DEVLIST with show-pending gives the pending device's busnum/devnum"
start_bg raw3 "$TC" raw "$GWA" --op --expect-open --wait 3000 \
    --hex "$(op_import_hex sim1:1-3)" \
    --hex "$(submit_hex 1 $(( (${bn% *} << 16) | ${bn#* } )) 1 0 18 0 $SETUP_GET_DEVICE)"
sleep 1
gwctl gw approve sim1:1-3
wait_bg raw3 15
is "$RC" 0 "held import + URB, approved: the session stays open"
# the 320-byte import reply, then RET_SUBMIT (48) with 18 bytes
like "$(cat "$(bg_log raw3)")" 'raw received=386 data=01110003000000002f75736267772f' \
    "... the import reply, then the pipelined URB's answer"
sleep 0.3
is "$(vhci_urbs 1-3)" 1 "PDU log: the URB reached the device only after the approval"

# ---- wait 0: refused at once ------------------------------------------------------------
gw_conf gw "exporter sim1 $SIMA" "poll-interval = 500ms" "attach-pending-wait = 0"
kill -HUP "$(bg_pid gw)"
wait_log gw 'SIGHUP' 5
sleep 0.3
t0=$(now_ms)
run "$TC" import "$GWA" sim1:1-5
el=$(($(now_ms) - t0))
is "$RC" 11 "attach-pending-wait = 0: ST_NA"
num_cmp "$el" -lt 1000 "... at once ($el ms)"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 0 "an approved device still imports"

# ---- the record -------------------------------------------------------------------------
gw_wait_sql gw "SELECT count(*) FROM access_requests WHERE outcome != 'waiting'" 6
is "$(gw_sql gw "SELECT busid || ' ' || outcome FROM access_requests ORDER BY id")" \
"sim1:1-2 granted
sim1:1-5 timeout
sim1:1-1 denied
sim1:1-5 timeout
sim1:1-3 granted
sim1:1-5 refused" "access_requests: every request with its outcome"
is "$(gw_audit_count gw access-request)" 6 "one access-request audit row each"
is "$(gw_sql gw "SELECT count(*) FROM access_requests WHERE host_addr = '127.0.0.1'")" 6 \
    "requests record the vhci host's address"
ok "audit verify" "$USBGW" -s "$(gw_sock gw)" audit verify

gw_finish gw
done_testing
