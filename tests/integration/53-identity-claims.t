#!/usr/bin/env bash
# Identity comes from the probe only.  An exporter that lists a device as
# something its descriptors say it is not (OP_REP_DEVLIST interface
# triplets or vid:pid), or whose import reply names a configuration the
# probe did not read (OP_REP_IMPORT bConfigurationValue), raises an
# identity anomaly: an `identity-anomaly` audit row and watch event,
# show's "anomaly" set, and the device blocked whatever the rules say.
# Here a HID keyboard (03:01:01) lies that it is mass storage, under
# the admin rule `allow with-interface equals { 08:*:* }`: it must never
# be authorized on the claim.  An honest storage device next to it is
# allowed by the same rule.  The simulator's lies (list-interfaces,
# list-id, import-config) are checked first against a simulator of
# their own.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 51

# 1-1: lists 08:06:50 instead of 03:01:01
# 1-3: its import reply says configuration 7 (it has only 1)
# 1-4: both lies
# 1-6: lists vid:pid 1209:0002 (it is 1209:0016)
# 1-2: an honest storage device
cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; list-interfaces "08:06:50"; }
device 1-3 { type keyboard; keys ""; product 0x0013; import-config 7; }
device 1-4 {
	type keyboard; keys ""; product 0x0014
	list-interfaces "08:06:50"; import-config 7
}
device 1-6 { type keyboard; keys ""; product 0x0016; list-id 1209:0002; }
device 1-2 { type storage; }
EOF

# ---- the simulator lies as asked -------------------------------------------------
sim_start simx -c "$T/sim.conf" || bail_out "simulator did not start"
run "$TC" list "127.0.0.1:$(sim_port simx)"
is "$RC" 0 "DEVLIST straight from a simulator"
like "$OUT" $'1-1: 1209:0001 [^\n]*\n[^\n]*\n    interface 0: 08/06/50\n' \
    "1-1 (a keyboard) is listed with a mass-storage interface"
like "$OUT" $'1-6: 1209:0002 ' "1-6 (1209:0016) is listed as 1209:0002"
like "$OUT" $'1-3: 1209:0013 [^\n]*\n[^\n]*\n    interface 0: 03/01/01\n' \
    "1-3 is listed as it is"
run "$TC" import "127.0.0.1:$(sim_port simx)" 1-3
like "$OUT" 'ok import 1-3 .* config=7/1 ' "1-3's import reply claims configuration 7"
run "$TC" script "127.0.0.1:$(sim_port simx)" 1-3 --skip bulk,unlink,unlink-pending,unlink-completed,interrupt,iso
like "$OUT" 'ok desc-config [^
]*interfaces=1' "... while its descriptors say configuration 1, a keyboard"
stop_bg simx
cat >"$T/bad.conf" <<'EOF'
device 1-1 { type keyboard; list-interfaces "8:6:50"; }
device 1-2 { type storage; list-id 1209:2; import-config 256; }
EOF
run -t 10 "$SIM" -c "$T/bad.conf" -l 127.0.0.1:0
isnt "$RC" 0 "the simulator refuses bad lies"
like "$ERR" 'bad.conf:1: list-interfaces: expected 1..32 interface triplets CC:SS:PP' \
    "... list-interfaces explained"
like "$ERR" 'bad.conf:2: list-id: expected VID:PID' "... list-id explained"
like "$ERR" 'bad.conf:2: import-config: expected a bConfigurationValue 0..255' \
    "... import-config explained"

# ---- the gateway ------------------------------------------------------------------------
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "poll-interval = 200ms" "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gwctl gw policy add 'allow with-interface equals { 08:*:* }'
is "$RC" 0 "admin rule: allow with-interface equals { 08:*:* }"
start_bg watch "$USBGW" -s "$(gw_sock gw)" watch --json
sleep 0.3
gwctl gw exporter add sim1 "127.0.0.1:$(sim_port sim)"
is "$RC" 0 "exporter add sim1 (the lying exporter)"

# every device claimed, probed and decided
decided() {
	local d s
	for d in 1-1 1-2 1-3 1-4 1-6; do
		s=$(gw_state gw sim1:$d)
		case $s in pending|authorized|blocked|attached) ;; *) return 1 ;; esac
	done
}
wait_for -t 15 -p gw decided || gw_diag gw
gw_wait_state gw sim1:1-2 authorized 5
is "$(gw_state gw sim1:1-2)" authorized "the honest storage device is authorized by the rule"
gw_show gw sim1:1-2
is "$(jget "$SHOW" anomaly)" null "... no anomaly"
is "$(jget "$(jget "$SHOW" decision)" by)" admin-rule "... decided by the admin rule"

# lie BUSID WHAT: the checks for one lying device.
lie() {
	local b=sim1:$1 what=$2 st an
	gw_wait_state gw "$b" blocked 2
	st=$(gw_state gw "$b")
	isnt "$st" authorized "$what: not authorized on the claim"
	is "$st" blocked "$what: blocked"
	gw_show gw "$b"
	an=$(jget "$SHOW" anomaly)
	[ -n "$an" ] && [ "$an" != null ]
	check $? "$what: show --json says why in \"anomaly\" (${an:-missing})"
	D=$(jget "$SHOW" decision)
	is "$(jget "$D" verdict)/$(jget "$D" by)" block/anomaly \
	    "$what: decision block, by anomaly"
	gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE
	    event = 'identity-anomaly' AND busid = '$b'" 1 2
	num_cmp "$(gw_audit_count gw identity-anomaly "busid = '$b'")" -ge 1 \
	    "$what: an identity-anomaly audit row"
	grep -F '"event":"identity-anomaly"' "$(bg_log watch)" |
	    grep -qF "\"busid\":\"$b\""
	check $? "$what: an identity-anomaly watch event"
	run "$TC" import "$GWA" "$b"
	is "$RC" 11 "$what: import refused (ST_NA)"
	is "$(gw_sql gw "SELECT count(*) FROM attachments a JOIN devices d ON
	    d.id = a.device_id WHERE d.busid = '$b'")" 0 "$what: never attached"
}
lie 1-1 "interfaces listed 08:06:50, probed 03:01:01"
lie 1-3 "import reply names configuration 7"
lie 1-4 "both lies"
lie 1-6 "vid:pid listed 1209:0002, probed 1209:0016"

# The claim's identity is the probe's: the interfaces recorded are the
# keyboard's, for every lying device.
is "$(gw_sql gw "SELECT group_concat(busid || '=' || interfaces, ' ') FROM
    (SELECT busid, interfaces FROM v_devices WHERE busid IN ('sim1:1-1',
    'sim1:1-3', 'sim1:1-4', 'sim1:1-6') AND state != 'gone' ORDER BY busid)")" \
    "sim1:1-1=03:01:01 sim1:1-3=03:01:01 sim1:1-4=03:01:01 sim1:1-6=03:01:01" \
    "the database records the probed interfaces (03:01:01) of each"

gw_finish gw
done_testing
