#!/usr/bin/env bash
# The Prometheus endpoint (issue 18 item 2): off unless metrics-listen is
# set, a bare port on loopback; GET /metrics in the text format, checked
# by promtool (Debian's prometheus package); the figures follow what
# happens: devices by exporter and state, exporter up/down, attachments,
# relayed bytes and URBs, refusals by reason, access requests, the probe
# latency histogram, audit rows, control requests; other paths 404,
# other methods 501.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" curl promtool ss
plan 23

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type sourcesink; }
device 1-2 { type storage; }
device 1-3 { type keyboard; keys ""; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
MP=$(free_port)
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "metrics-listen = $MP"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-3 pending 10 || bail_out "not pending"
URL=http://127.0.0.1:$MP/metrics
m() { curl -fsS "$URL"; }
val() {	# val 'METRIC{LABELS}': its value now
	m | awk -v k="$1" '$1 == k { print $2 }'
}

is "$(ss -Htln "sport = :$MP" | awk '{print $4}')" "127.0.0.1:$MP" \
    "a bare port listens on 127.0.0.1 only"
m >"$T/m1"
is "$?" 0 "GET /metrics answers"
run promtool check metrics <"$T/m1"
is "$RC" 0 "promtool check metrics: no problems"
[ "$RC" = 0 ] || diag "$OUT $ERR"
is "$(val 'usbgw_devices{exporter="sim1",state="pending"}')" 3 "three pending devices"
is "$(val 'usbgw_exporter_up{exporter="sim1"}')" 1 "the exporter is up"
num_cmp "$(val usbgw_probe_duration_seconds_count)" -ge 3 \
    "three probes (or more) in the latency histogram"
is "$(val 'usbgw_probe_duration_seconds_bucket{le="+Inf"}')" \
    "$(val usbgw_probe_duration_seconds_count)" "... +Inf bucket = count"

c0=$(val usbgw_control_requests_total)
a0=$(val usbgw_audit_rows_total)
gwctl gw approve sim1:1-1
gwctl gw deny sim1:1-3
gw_wait_state gw sim1:1-1 authorized 5
num_cmp "$(val usbgw_control_requests_total)" -ge $((c0 + 2)) "control requests counted"
num_cmp "$(val usbgw_audit_rows_total)" -gt "$a0" "audit rows counted"

start_bg imp "$TC" hold "$(gw_addr gw)" sim1:1-1 --seconds 2
wait_for -t 10 sh -c "curl -fsS '$URL' | grep -qx 'usbgw_attachments 1'"
is "$(val usbgw_attachments)" 1 "one attachment while imported"
is "$(val 'usbgw_devices{exporter="sim1",state="attached"}')" 1 "... the device attached"
wait_bg imp 20
wait_for -t 10 sh -c "curl -fsS '$URL' | grep -qx 'usbgw_attachments 0'"
"$TC" load "$(gw_addr gw)" sim1:1-1 --dir in --bytes 1048576 >/dev/null 2>&1
"$TC" load "$(gw_addr gw)" sim1:1-1 --dir out --bytes 65536 >/dev/null 2>&1
num_cmp "$(val usbgw_relayed_urbs_total)" -ge 1 "URBs relayed"
num_cmp "$(val 'usbgw_relayed_bytes_total{direction="from_device"}')" -gt 0 \
    "bytes relayed from the device"
num_cmp "$(val 'usbgw_relayed_bytes_total{direction="to_device"}')" -gt 0 \
    "bytes relayed to the device"

"$TC" import "$(gw_addr gw)" sim1:9-9 >/dev/null 2>&1
"$TC" import "$(gw_addr gw)" sim1:1-3 >/dev/null 2>&1
"$TC" import "$(gw_addr gw)" sim1:1-2 >/dev/null 2>&1
is "$(val 'usbgw_refusals_total{reason="unknown_busid"}')" 1 "refusal: unknown busid"
is "$(val 'usbgw_refusals_total{reason="device_blocked"}')" 1 "refusal: device blocked"
is "$(val 'usbgw_refusals_total{reason="device_pending"}')" 1 "refusal: device pending"
is "$(val usbgw_access_requests_total)" 1 "... which was an access request"

kill "$(bg_pid sim)"
wait_for -t 15 sh -c "curl -fsS '$URL' | grep -qx 'usbgw_exporter_up{exporter=\"sim1\"} 0'"
is "$(val 'usbgw_exporter_up{exporter="sim1"}')" 0 "the exporter down: 0"
m >"$T/m2"
run promtool check metrics <"$T/m2"
is "$RC" 0 "promtool: still no problems"

is "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MP/")" 404 "/ is 404"
is "$(curl -s -o /dev/null -w "%{http_code}" -X POST "$URL")" 501 "POST is refused (501: only GET and HEAD are taken)"
echo 'metrics-listen = 127.0.0.1' >"$T/bad.conf"
run "$USBGWD" -n -c "$T/bad.conf"
like "$ERR" 'metrics-listen: expected PORT \(on 127.0.0.1\), ADDRESS:PORT or none' \
    "metrics-listen without a port: refused, saying what is expected"
