#!/usr/bin/env bash
# A device may show one thing to the gateway's probe and another to the
# vhci host: the relay holds every descriptor the host reads on ep0
# (device, configuration by index, other-speed configuration, BOS,
# device qualifier, the language table and the identity's strings) to
# what the probe read.  A mismatch is not forwarded: the attachment
# ends, an identity-anomaly row is written, and the device is blocked
# until an operator looks.  A device with more configurations than the
# probe reads is refused.
#
# The simulator's "disguise" keys give a device a second face: after
# `inject BUSID disguise`, or after N descriptor reads in one import (a
# firmware counting reads), descriptor reads see the disguise.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 73

cat >"$T/sim.conf" <<'CONF'
device 1-1 { type storage; serial "HONEST"; configs 2 }
device 1-2 { type storage; serial "FACE-CFG"; disguise keyboard }
device 1-3 { type storage; serial "FACE-SERIAL"; disguise-serial "EVIL" }
device 1-4 { type storage; serial "FACE-BOS"; disguise-bos yes }
device 1-5 { type storage; serial "FACE-OTHER"; disguise-other-speed yes }
device 1-6 { type storage; serial "FACE-DEV"; disguise-bcd 0x0666 }
device 1-7 { type storage; serial "MANY"; configs 9 }
CONF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
gwctl gw policy add 'allow with-interface equals { 08:*:* }'
is "$RC" 0 "admin rule: allow with-interface equals { 08:*:* }"

for d in 1-1 1-2 1-3 1-4 1-5 1-6; do
	gw_wait_state gw sim1:$d authorized 15 || gw_diag gw
done
is "$(gw_state gw sim1:1-1)" authorized "the honest storage device is authorized"

# ---- an honest device: every descriptor read passes --------------------------------
LANG=0x0409
run "$TC" desc "$GWA" sim1:1-1 1:0:0:64 1:0:0:18 2:0:0:9 2:0:0:4096 2:1:0:9 \
    2:1:0:4096 2:2:0:9 3:0:0:255 3:1:$LANG 3:2:$LANG 3:3:$LANG 6:0:0:10 7:0:0:9 \
    15:0:0:5 3:3:0x0407
is "$RC" 0 "honest device: the host reads every descriptor through the relay"
like "$OUT" 'desc 2:1:0:4096: status=0 len=32 data=0902200001020' \
    "... the second configuration (value 2) passes"
like "$OUT" 'desc 2:2:0:9: status=-32 len=0' "... a third one stalls (there is none)"
like "$OUT" 'desc 3:3:0x0409: status=0 len=14 data=0e0348004f004e00450053005400' \
    "... the serial number string passes"
like "$OUT" 'desc 7:0:0:9: status=-32' "... the other-speed configuration stalls, as for the probe"
is "$(gw_audit_count gw identity-anomaly "busid = 'sim1:1-1'")" 0 "... no identity anomaly"
run "$TC" script "$GWA" sim1:1-1
is "$RC" 0 "honest device: the whole script passes (descriptors, data)"

# sim_imports BUSID: how many imports the simulator saw of BUSID.
sim_imports() {
	sim_ctl_list sim | sed -n "s/^$1 .* imports=\([0-9]*\).*/\1/p"
}
# claimed_again BUSID N: the gateway's claim is back (more than N imports).
claimed_again() {
	sim_ctl_list sim | grep -q "^$1 .*state=imported" &&
	    [ "$(sim_imports "$1")" -gt "$2" ] 2>/dev/null
}

# face BUSID WHAT READ [MATCH]: the device shows the host another face at READ.
face() {
	local b=sim1:$1 what=$2 read=$3 an n0
	n0=$(gw_audit_count gw identity-anomaly "busid = '$b'")
	sim_ctl sim inject "$1" disguise
	is "$RC" 0 "$what: the device puts on its disguise (claimed by the gateway)"
	run "$TC" desc "$GWA" "$b" 1:0:0:18 "$read"
	isnt "$RC" 0 "$what: the host's read of $read is not answered"
	like "$OUT" "desc $read: no reply \\(connection closed\\)" \
	    "$what: ... the relay closed the attachment"
	unlike "$OUT" "desc $read: status" "$what: ... no byte of the disguise reached the host"
	gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE
	    event = 'identity-anomaly' AND busid = '$b'" $((n0 + 1)) 5
	an=$(gw_sql gw "SELECT detail FROM audit_log WHERE event =
	    'identity-anomaly' AND busid = '$b' ORDER BY seq DESC LIMIT 1")
	like "$an" "${4:-descriptor}" "$what: audited as an identity anomaly ($an)"
	gw_wait_state gw "$b" blocked 5
	is "$(gw_state gw "$b")" blocked "$what: the device is blocked"
	run "$TC" import "$GWA" "$b"
	is "$RC" 11 "$what: a new import is refused"
}
face 1-2 "configuration (storage to the probe, keyboard to the host)" 2:0:0:9 \
    'configuration descriptor .index 0. the device shows the vhci host differs from the probe.s at byte 2'
face 1-3 "serial number string" 3:3:$LANG 'serial number string descriptor'
face 1-4 "BOS the probe never saw" 15:0:0:5 'a BOS descriptor .index 0. it did not show the probe'
face 1-5 "other-speed configuration the probe never saw" 7:0:0:9 \
    'other-speed configuration descriptor .index 0. it did not show the probe'
face 1-6 "device descriptor (bcdDevice)" 1:0:0:18 \
    'the device descriptor .index 0. the device shows the vhci host differs from the probe.s at byte 12'

gw_show gw sim1:1-2
D=$(jget "$SHOW" decision)
is "$(jget "$D" verdict)/$(jget "$D" by)" block/anomaly "configuration face: decision block, by anomaly"
is "$(gw_sql gw "SELECT count(*) FROM attachments a JOIN devices d ON d.id = a.device_id
    WHERE d.busid = 'sim1:1-2' AND a.ended_at IS NULL")" 0 \
    "configuration face: no attachment left open"

# An operator looks: approve --identity acknowledges; the device works again
# until it shows its other face again.
ID=$(jget "$SHOW" id)
gwctl gw approve sim1:1-2 --identity "$ID"
is "$RC" 0 "the operator approves the device after looking"
gw_wait_state gw sim1:1-2 authorized 5
run "$TC" script "$GWA" sim1:1-2
is "$RC" 0 "... the honest face works through the relay"
k=$(sim_imports 1-2)
run "$TC" desc "$GWA" sim1:1-2 2:0:0:9
is "$RC" 0 "... (a fresh claim: the disguise is off)"
wait_for -t 10 claimed_again 1-2 "$k"
check $? "... the gateway claims it again after the host let go"
sim_ctl sim inject 1-2 disguise
run "$TC" desc "$GWA" sim1:1-2 2:0:0:9
like "$OUT" 'no reply' "... the disguise again: not answered"
gw_wait_state gw sim1:1-2 blocked 5
is "$(gw_state gw sim1:1-2)" blocked "... and blocked again: an acknowledgement covers one occurrence"

# ---- a firmware that counts reads: the probe sees one face, the host the other ----
# The probe's reads are counted on a device without a disguise, then the
# device is plugged again with `disguise-after` that many reads.
sim_ctl sim plug 2-1 storage serial=COUNT
gw_wait_state gw sim1:2-1 authorized 15
c=$(grep -m1 'cmd=OP_REQ_IMPORT busid=2-1$' "$(sim_pdulog sim)" | sed 's/.* conn=\([0-9]*\) .*/\1/')
N=$(grep -c " conn=$c .*setup=8006.* busid=2-1$" "$(sim_pdulog sim)" || true)
num_cmp "${N:-0}" -ge 7 "the probe of a high-speed storage device reads $N descriptors"
sim_ctl sim unplug 2-1
gw_wait_state gw sim1:2-1 gone 10
sim_ctl sim plug 2-1 storage serial=COUNT disguise=keyboard disguise-after=$N
is "$RC" 0 "the device comes back showing the keyboard after $N reads"
gw_wait_state gw sim1:2-1 authorized 15
is "$(gw_state gw sim1:2-1)" authorized "... the probe saw mass storage: authorized by the rule"
run "$TC" script "$GWA" sim1:2-1
isnt "$RC" 0 "the host's first descriptor reads see the keyboard: the script fails"
like "$OUT" 'FAIL desc-config-head status 0, 0 bytes' "... the configuration read gets no bytes"
like "$OUT" 'DISCONNECT kind=eof' "... the relay closed the attachment"
unlike "$OUT" 'desc-config .*int' "... the host never saw an interrupt endpoint"
gw_wait_state gw sim1:2-1 blocked 5
is "$(gw_state gw sim1:2-1)" blocked "... the device is blocked"
num_cmp "$(gw_audit_count gw identity-anomaly "busid = 'sim1:2-1'")" -ge 1 \
    "... an identity-anomaly row"
# the claim is taken again and probed again (the probe still sees storage):
# the same identity, so the anomaly stands
sleep 1
is "$(gw_state gw sim1:2-1)" blocked "... still blocked after the claim is taken and probed again"

# ---- more configurations than the probe reads -----------------------------------------
# Refused, and kept claimed (nobody else imports it at the exporter);
# an operator's approval cannot let it through.
gw_wait_state gw sim1:1-7 blocked 10
is "$(gw_state gw sim1:1-7)" blocked "9 configurations: the device is refused (blocked)"
gw_show gw sim1:1-7
like "$(jget "$SHOW" anomaly)" 'has 9 configurations, more than the 8 the gateway reads' \
    "... show says why"
sim_ctl_list sim >"$T/simlist"
grep -q '^1-7 .*state=imported' "$T/simlist"
check $? "... the gateway keeps its claim at the exporter"
gwctl gw approve sim1:1-7
sleep 0.5
is "$(gw_state gw sim1:1-7)" blocked "... an operator's approval does not let it through"
run "$TC" import "$GWA" sim1:1-7
is "$RC" 11 "... an import of it is refused"
is "$(gw_sql gw "SELECT count(*) FROM attachments a JOIN devices d ON d.id = a.device_id
    WHERE d.busid = 'sim1:1-7'")" 0 "... never attached"
# ---- simulator keys are checked ----------------------------------------------------
printf 'device 1-1 { type storage; disguise mouse }\n' >"$T/bad.conf"
run -t 10 "$SIM" -c "$T/bad.conf" -l 127.0.0.1:0
like "$ERR" 'bad.conf:1: disguise: expected keyboard, storage' "sim: a bad disguise is explained"
printf 'device 1-1 { type storage; configs 0 }\n' >"$T/bad.conf"
run -t 10 "$SIM" -c "$T/bad.conf" -l 127.0.0.1:0
like "$ERR" 'bad.conf:1: configs: expected a number of configurations 1..255' \
    "sim: a bad configs is explained"

gw_finish gw
