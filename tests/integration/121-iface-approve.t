#!/usr/bin/env bash
# Issue 17: an approval keeps the interface verdicts of the rule that
# matched.  A permanent approval writes a rule that ranks ahead of that
# rule (an admin's --override: first among the admin rules), so the
# verdicts are written into it as an explicit interface-policy; without
# that the written rule would allow every interface (fail open).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$USBGWD" "$USBGW" python3
plan 12

cat >"$T/sim.conf" <<'EOF2'
device 1-3 { type composite; keys ""; serial "S13"; }
device 1-4 { type composite; keys ""; serial "S14"; }
EOF2
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 500ms"
gw_start gw || bail_out "usbgwd did not start"

jx() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
ifaces() {	# ifaces BUSID: "class:decision ..." of show --json
	"$USBGW" -s "$(gw_sock gw)" show "$1" --json |
	    jx '" ".join(i["class"] + ":" + i["decision"] for i in d["decision"]["interfaces"])'
}

gwctl gw policy add 'ask id 1209:0003 interface-policy allow { block 08:*:* }'
is "$RC" 0 "an ask rule: the composite's storage interface denied once approved"
gw_wait_state gw sim1:1-3 pending
gw_wait_state gw sim1:1-4 pending

gwctl gw approve sim1:1-3 --permanent --override
is "$RC" 0 "approve --permanent --override (an admin rule, first in the admin tier)"
gw_wait_state gw sim1:1-3 authorized
gwctl gw policy list
like "$OUT" 'allow id 1209:0003 name "Simulated Composite" serial "S13" hash "[0-9a-f]{64}" via-exporter sim1 with-interface \{ 03:01:01 08:06:50 \} interface-policy block \{ allow 03:01:01 index 0 configuration 1 \}' \
    "the written rule carries the verdicts as an explicit interface-policy"
is "$(ifaces sim1:1-3)" "03:01:01:allow 08:06:50:deny" "the storage interface stays denied under the permanent rule"
is "$("$USBGW" -s "$(gw_sock gw)" show sim1:1-3 --json | jx 'd["decision"]["by"]')" admin-rule \
    "... decided by the written admin rule, not by the once approval"

gwctl gw approve sim1:1-4 --permanent
is "$RC" 0 "approve --permanent (operator tier)"
gw_wait_state gw sim1:1-4 authorized
is "$(ifaces sim1:1-4)" "03:01:01:allow 08:06:50:deny" "storage denied for the operator's permanent approval too"

# a policy that leaves nothing: the written rule allows no interface
gwctl gw policy insert 1 'ask id 1209:0003 serial "S15" interface-policy block { allow ff:*:* }'
sim_ctl sim plug 1-5 composite serial=S15
gw_wait_state gw sim1:1-5 pending
gwctl gw approve sim1:1-5 --permanent --override
is "$RC" 0 "approve --permanent a device whose policy denies every interface"
gw_wait_state gw sim1:1-5 authorized
gwctl gw policy list
like "$OUT" 'serial "S15" .*interface-policy block \{ block \*:\*:\* \}' "the written rule allows no interface"

gw_finish gw
done_testing
