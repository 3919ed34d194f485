#!/bin/bash
# A hostile dial-out agent (tests/tools/agent-evil.py, protocol.md
# 1.9.4): oversized, unknown, out-of-sequence and lying messages close
# its control connection with a `malformed` audit row; a flood of PINGs
# is read at most 256 a second; a device it invents is claimed, refused
# by the agent (OPEN_FAILED) and gone, never pending; forged, replayed,
# expired and other-busid DIALBACK tokens are refused (ST_NA) with an
# `agent-refused` row each; an unknown extension version gets ST_NA with
# version 1.  The gateway lives on and answers throughout.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$USBGWD" "$USBGW" sqlite3 python3
plan 30

EVIL=$TOP/tests/tools/agent-evil.py
gw_conf gw "agent tc66 from 127.0.0.1/32" "poll-interval = 1s"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)

evil() { run -t 60 python3 "$EVIL" "$1" "$GWA"; }
res() { printf '%s\n' "$OUT" | sed -n "s/^RESULT $1=//p"; }
malformed_rows() {
	gw_sql gw "SELECT count(*) FROM audit_log WHERE event = 'malformed' AND exporter = 'tc66' AND detail LIKE '%$1%'"
}

for sc in oversized:'message length out of range' \
    unknown:'unknown message type' badseq:'sequence number 7, expected 1' \
    snaplie:'snapshot of 1 devices announced 2'; do
	name=${sc%%:*} why=${sc#*:}
	evil "$name"
	is "$(res closed)" 1 "$name: the control connection is closed"
	gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'malformed' AND detail LIKE '%$why%'" 1
	check $? "$name: a malformed row ($why)"
done
like "$(cat "$T/gw.log")" 'agent tc66 .*control closed: malformed control message: unknown message type' \
    "the log line names the reason"

evil flood
is "$(res closed)" 0 "flood: the connection stays (backpressure, not a close)"
# 256 a second in windows of 1 s: any 2 s span meets at most 3 windows
# (without the limit all 3000 are answered within a few ms)
num_cmp "$(res pongs_2s)" -le 768 \
    "flood: at most 3 x 256 messages read in 2 s ($(res pongs_2s) PONGs)"
like "$(cat "$T/gw.log")" 'agent tc66: 256 messages this second, reading paused' \
    "flood: reading paused"
gwctl gw status
is "$RC" 0 "the gateway answers during and after the flood"

evil lie
is "$(res open_import)" 7-7 "lie: the invented device is claimed (OPEN_IMPORT)"
gw_wait_state gw tc66:7-7 gone 10
check $? "lie: OPEN_FAILED ST_NODEV: the device is gone, never pending"
is "$(gw_sql gw "SELECT count(*) FROM audit_log WHERE busid = 'tc66:7-7' AND new_state = 'pending'")" 0 \
    "lie: no pending row for it"

evil tokens
is "$(res forged)" 1 "a forged token: ST_NA"
is "$(res good)" 0 "the issued token: ST_OK"
is "$(res replayed)" 1 "the same token again: ST_NA (single use)"
is "$(res other_busid)" 1 "a token for 7-7 shown with busid 7-8: ST_NA"
is "$(res expired)" 1 "a token after 11 s: ST_NA (expired)"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'agent-refused'" 4
check $? "four agent-refused rows"
rows=$(gw_sql gw "SELECT group_concat(detail, ' | ') FROM audit_log WHERE event = 'agent-refused'")
like "$rows" 'token not issued, used or expired.*token not issued, used or expired.*issued for another busid.*token not issued, used or expired' \
    "the rows say why, in order"

evil version
is "$(res status)" 1 "extension version 9: ST_NA"
is "$(res ext_version)" 1 "with the version spoken here"

gwctl gw status
is "$RC" 0 "the gateway lives on"
gwctl gw exporter list --json
like "$OUT" '"name": "tc66"' "the agent is still declared"

gw_finish gw
