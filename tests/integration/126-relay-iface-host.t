#!/usr/bin/env bash
# The relay enforces the interface verdicts of the decision that allowed
# the attaching host (issue 17; protocol.md 1.6, "Per-interface
# enforcement"), not those of the standing state, which is decided for
# no host: here the first rule names the host and denies the storage
# interface, the second allows the device whole for anybody.  Decided
# for no host only the second matches (no verdicts); the host's own
# decision is the first's.  Its storage URBs must be refused.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" socat sqlite3

cat >"$T/sim.conf" <<'CONF'
device 1-1 { type composite; serial "H-C"; interval 50 }
CONF
gw_sim_world
gwctl gw policy add 'allow serial "H-C" to-host 127.0.0.1 interface-policy allow { block 08:*:* }'
[ "$RC" = 0 ] || fail_all "the interface-policy rule is accepted (exit $RC): $OUT $ERR"
plan 10
gwctl gw policy add 'allow serial "H-C"'
is "$RC" 0 "a second rule allows the device whole, for any host"
gw_wait_state gw sim1:1-1 authorized 15
is "$(gw_state gw sim1:1-1)" authorized "authorized (by the second rule, for no host)"

submit() {
	printf '00000001%08xDEVID%08x%08x00000000%08x000000000000000000000000%s' \
	    "$1" "$2" "$3" "$4" "$5"
}
run "$TC" raw "$GWA" sim1:1-1 --hex "$(submit 0x6101 1 2 512 0000000000000000)$(submit 0x6102 1 1 8 0000000000000000)" \
    --wait 1500 --expect-open
is "$RC" 0 "the host attaches and the session stays open"
like "$OUT" 'data=0000000300006101000000000000000000000000ffffffe0' \
    "bulk IN 0x82 of the storage interface: -EPIPE from the gateway"
! grep -q "seqnum=$((0x6101)) .*busid=1-1\$" "$(sim_pdulog sim)"
check $? "... it never reached the exporter"
grep -q "seqnum=$((0x6102)) .*busid=1-1\$" "$(sim_pdulog sim)"
check $? "interrupt IN 0x81 of the HID interface reached the exporter"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'iface-refused'
    ORDER BY seq DESC LIMIT 1")" 'endpoint 0x82 of interface 1 ' \
    "audited: the host's decision denies interface 1"
gw_finish gw
