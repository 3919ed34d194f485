#!/usr/bin/env bash
# Hooks in the running daemon: a configured command runs on the chosen
# events with the details in USBGW_* variables (sanitized), and a hook that
# hangs is killed at its time limit while the daemon keeps serving.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

EJ=$USBGW_BUILD/e2e-json
need_prog "$USBGWD" "$USBGW" "$SIM" "$EJ" socat

sim_start sim || bail_out "simulator did not start"
SOCK=$T/control.sock
mkdir -p "$T/hooks"
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 300ms
hook-timeout = 700ms
hook pending,approve env > $T/hooks/\$USBGW_EVENT.\$USBGW_EXPORTER_BUSID
hook revoke trap '' TERM; sleep 60 & echo \$! > $T/hooks/child.pid; echo \$\$ > $T/hooks/hang.pid; wait; wait; wait
EOF
start_bg gw "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start"
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' list --state pending --json | \
    '$EJ' count | grep -qx 5" || bail_out "devices did not become pending"
DEV=$("$USBGW" -s "$SOCK" list --json | "$EJ" get busid exporter_busid=1-1)

wait_file "$T/hooks/pending.1-1" 5
check $? "pending hook ran for each new device"
env=$(cat "$T/hooks/pending.1-1" 2>/dev/null)
like "$env" "USBGW_EVENT=pending" "USBGW_EVENT"
like "$env" "USBGW_BUSID=$DEV" "USBGW_BUSID"
like "$env" "USBGW_VID=[0-9a-f]{4}" "USBGW_VID"
like "$env" "USBGW_PID=[0-9a-f]{4}" "USBGW_PID"
like "$env" "USBGW_EXPORTER=sim" "USBGW_EXPORTER"
like "$env" "USBGW_SERIAL=SIM-1-1" "USBGW_SERIAL"
like "$env" "USBGW_TIME=[0-9]+" "USBGW_TIME"
unlike "$env" "(HOME|USER|LOGNAME|ASAN_OPTIONS)=" "nothing of the daemon's environment"

"$USBGW" -s "$SOCK" approve "$DEV" -m 'ticket 7' >/dev/null
wait_file "$T/hooks/approve.1-1" 5
check $? "approve hook ran"
like "$(cat "$T/hooks/approve.1-1" 2>/dev/null)" "USBGW_REASON=.*ticket 7" \
    "operator's message passed"

# A hook that ignores SIGTERM and hangs: killed (SIGTERM, then SIGKILL
# 2 s later) at its 700 ms limit; meanwhile the daemon answers at once.
t0=$(date +%s%N)
"$USBGW" -s "$SOCK" revoke "$DEV" >/dev/null
wait_file "$T/hooks/hang.pid" 5
hp=$(cat "$T/hooks/hang.pid")
kill -0 "$hp" 2>/dev/null
check $? "hanging hook running"
ts=$(date +%s%N)
run "$USBGW" -s "$SOCK" list --json
te=$(date +%s%N)
is "$RC" 0 "daemon serves while the hook hangs"
num_cmp $(( (te - ts) / 1000000 )) -lt 500 "... without delay"
wait_for -t 10 sh -c "! kill -0 $hp 2>/dev/null"
check $? "hanging hook killed"
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
diag "hook killed after $ms ms (limit 700 ms + 2000 ms grace for SIGTERM)"
num_cmp "$ms" -ge 2500 "not before limit + grace"
num_cmp "$ms" -lt 6000 "and not much later"
wait_log gw 'time limit of 700 ms reached' 5
check $? "daemon logged the time limit"
cp=$(cat "$T/hooks/child.pid")
wait_for -t 5 sh -c "! { [ -r /proc/$cp/stat ] && awk '{ exit \$3 == \"Z\" }' /proc/$cp/stat; }"
check $? "the hook's child (its process group) is gone too"
run "$USBGW" -s "$SOCK" status --json
is "$RC" 0 "daemon still healthy"
stop_bg gw
is "$RC" 0 "daemon exits cleanly"
asan_clean "no sanitizer reports"
done_testing
