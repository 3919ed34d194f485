#!/usr/bin/env bash
# A vhci host that floods the gateway with URBs to a denied interface and
# does not read the answers (issue 17; protocol.md 1.6, "Per-interface
# enforcement"): the relay stops reading it once 4 MiB of answers wait,
# so it cannot make the gateway buffer without bound; when the host reads
# again the relay resumes and every URB is answered -EPIPE, in order.
# Only 16 refusals are audited one by one, then one summary row; none
# reaches the exporter.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

need_prog "$SIM" "$USBGWD" "$USBGW" python3 sqlite3
FLOOD=$TOP/tests/tools/iface-flood.py

cat >"$T/sim.conf" <<'CONF'
device 1-1 { type composite; serial "FL-C" }
CONF
gw_sim_world
gwctl gw policy add 'allow serial "FL-C" interface-policy allow { block 08:*:* }'
[ "$RC" = 0 ] || fail_all "the interface-policy rule is accepted (exit $RC): $OUT $ERR"
plan 14
gw_wait_state gw sim1:1-1 authorized 15
is "$(gw_state gw sim1:1-1)" authorized "the device is authorized"

N=600000	# 28.8 MB of requests and as much of answers
start_bg flood python3 "$FLOOD" 127.0.0.1 "$(gw_port gw)" sim1:1-1 2 $N \
    "$T/go"
wait_for -t 30 grep -q '^stopped_at=' "$T/flood.log"
check $? "the host stops sending: the gateway stopped reading it"
# while it does not read: the attachment's count, in show and its JSON
gwctl gw show sim1:1-1 --json
refused=$(printf '%s' "$OUT" | sed -n 's/.*"refused": *\([0-9]*\).*/\1/p')
num_cmp "${refused:-0}" -gt 80000 "show --json: refused counts what was refused so far ($refused)"
gwctl gw show sim1:1-1
like "$OUT" "refused +$refused " "usbgw show: the same count"
touch "$T/go"
wait_bg flood 120
is "$RC" 0 "all $N URBs answered -EPIPE, in order, once the host reads"
OUT=$(cat "$T/flood.log")
like "$OUT" "answered=$N epipe=$N" "... $N answers"
stopped=$(printf '%s\n' "$OUT" | sed -n 's/^stopped_at=\([0-9]*\) .*/\1/p')
num_cmp "${stopped:-0}" -lt $((N * 48)) \
    "the gateway stopped reading the host before it took every request ($stopped of $((N * 48)) bytes)"
num_cmp "${stopped:-0}" -lt $((20 * 1024 * 1024)) \
    "... well before 20 MiB (4 MiB of answers plus the sockets' buffers)"
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'iface-refused'" 17 10
is "$(gw_audit_count gw iface-refused)" 17 "16 refusals audited, then one summary"
like "$(gw_sql gw "SELECT detail FROM audit_log WHERE event = 'iface-refused'
    ORDER BY seq DESC LIMIT 1")" "^$N URBs and control requests" "the summary counts $N"
! grep -q "cmd=CMD_SUBMIT .* ep=2 .*busid=1-1\$" "$(sim_pdulog sim)"
check $? "none reached the exporter"
gw_finish gw
