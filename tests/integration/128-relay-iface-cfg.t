#!/usr/bin/env bash
# Per-interface enforcement across SET_CONFIGURATION (issue 17, review
# findings F2 and F3; protocol.md 1.6, "Per-interface enforcement"):
# the exporters apply a SET_CONFIGURATION or SET_INTERFACE before they
# read the next request, so a URB pipelined behind one cannot be judged
# against the endpoint map the relay holds: under interface verdicts it
# is refused (-EPIPE) until the reply arrives.  A SET_CONFIGURATION that
# fails (the stub may have applied it anyway) leaves the configuration
# unknown: the attachment ends, logged and audited.  Without an
# interface-policy neither happens.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" socat sqlite3

cat >"$T/sim.conf" <<'CONF'
device 1-1 { type composite; serial "CF-A"; interval 50 }
device 1-2 { type composite; serial "CF-B"; interval 50 }
device 1-3 { type audio; serial "CF-C" }
CONF
gw_sim_world
gwctl gw policy add 'allow serial "CF-A" interface-policy allow { block 08:*:* }'
[ "$RC" = 0 ] || fail_all "the interface-policy rule is accepted (exit $RC): $OUT $ERR"
plan 19
gwctl gw policy add 'allow serial "CF-B"'
is "$RC" 0 "CF-B allowed whole"
gwctl gw policy add 'allow serial "CF-C" interface-policy allow { block 08:*:* }'
gw_wait_state gw sim1:1-1 authorized 15
gw_wait_state gw sim1:1-2 authorized 15
gw_wait_state gw sim1:1-3 authorized 15

submit() {
	printf '00000001%08xDEVID%08x%08x00000000%08x000000000000000000000000%s%s' \
	    "$1" "$2" "$3" "$4" "$5" "${6:-}"
}
NOSETUP=0000000000000000
SETCONF1=0009010000000000
epipe() {
	printf '00000003%08x000000000000000000000000ffffffe0000000000000000000000000000000000000000000000000' "$1"
}
reached() {	# reached SEQ BUSID: the exporter received it
	grep -q "seqnum=$(($1)) .*busid=$2\$" "$(sim_pdulog sim)"
}

# ---- F2: an allowed URB pipelined behind SET_CONFIGURATION ---------------
run "$TC" raw "$GWA" sim1:1-1 --hex "$(submit 0x6001 0 0 0 $SETCONF1)$(submit 0x6002 1 1 8 "$NOSETUP")" \
    --wait 1500 --expect-open
is "$RC" 0 "CF-A: the session stays open"
reached 0x6001 1-1
check $? "CF-A: SET_CONFIGURATION 1 reached the exporter"
like "$OUT" "$(epipe 0x6002)" \
    "CF-A: interrupt IN 0x81 pipelined behind it: refused (-EPIPE) by the gateway"
! reached 0x6002 1-1
check $? "CF-A: ... and never reached the exporter"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'iface-refused'
    AND busid = 'sim1:1-1' ORDER BY seq DESC LIMIT 1")" 'in flight' \
    "CF-A: the refusal is audited"

# ---- F3: a SET_CONFIGURATION/SET_INTERFACE that fails ----------------------
# (the data stage's direction is not the setup packet's: the device stalls)
gw_wait_state gw sim1:1-1 authorized 15
run "$TC" raw "$GWA" sim1:1-1 --hex "$(submit 0x6101 1 0 0 $SETCONF1)" \
    --wait 1000 --expect-open
is "$RC" 0 "CF-A: a failed SET_CONFIGURATION to the current configuration (every interface at setting 0) keeps the session"
run "$TC" raw "$GWA" sim1:1-3 --hex "$(submit 0x6102 1 0 0 010b000001000000)" \
    --wait 1000 --expect-open
is "$RC" 0 "CF-C: a failed SET_INTERFACE to the current setting keeps the session"
run "$TC" raw "$GWA" sim1:1-3 --hex "$(submit 0x6103 1 0 0 010b010001000000)" \
    --wait 1500
like "$OUT" 'closed=1' "CF-C: a failed SET_INTERFACE to another setting ends the attachment"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE busid = 'sim1:1-3'
    AND detail LIKE 'configuration state unknown%'" 1 5
check $? "CF-C: audited (configuration state unknown)"

# ---- F8: a locally refused seqnum, unlinked, reused --------------------------
# The RET_UNLINK must not retire the reused URB (its real RET_SUBMIT would
# then blame the exporter): the reuse is the vhci host's fault.
gw_wait_state gw sim1:1-1 authorized 15
unlink() {	# unlink SEQ TARGET
	printf '00000002%08xDEVID0000000000000000%08x%048x' "$1" "$2" 0
}
run "$TC" raw "$GWA" sim1:1-1 --hex "$(submit 0x6401 1 2 512 "$NOSETUP")$(unlink 0x6402 0x6401)$(submit 0x6401 1 1 8 "$NOSETUP")" \
    --wait 1500
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE busid = 'sim1:1-1'
    AND event = 'malformed'" 1 5
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'malformed'
    AND busid = 'sim1:1-1' ORDER BY seq DESC LIMIT 1")" 'from vhci host' \
    "CF-A: a seqnum reused while an unlink names it: the vhci host's fault"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'malformed'
    AND detail LIKE '%from exporter%'")" 0 "CF-A: the exporter is not blamed"

# ---- without an interface-policy: unchanged -------------------------------
run "$TC" raw "$GWA" sim1:1-2 --hex "$(submit 0x6201 0 0 0 $SETCONF1)$(submit 0x6202 1 1 8 "$NOSETUP")" \
    --wait 1500 --expect-open
is "$RC" 0 "CF-B: the session stays open"
unlike "$OUT" ffffffe0 "CF-B: the pipelined URB is not refused"
reached 0x6202 1-2
check $? "CF-B: ... it reached the exporter"
run "$TC" raw "$GWA" sim1:1-2 --hex "$(submit 0x6301 1 0 0 $SETCONF1)" \
    --wait 1000 --expect-open
is "$RC" 0 "CF-B: a failed SET_CONFIGURATION keeps the session"
gw_finish gw
