#!/usr/bin/env bash
# A slow user database (a directory server, as LDAP or sssd can be) does
# not stop the gateway: the control socket's user and group lookups run
# on a thread of their own.  With getpwuid_r made slow (tests/preload/
# slow-nss.so), a control client waits for its own lookup while the USB/IP
# side and the relay answer at once; a lookup longer than
# control-lookup-timeout refuses that client with a clear error and an
# audit row; the thread recovers for the next client.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"

SHIM=$USBGW_BUILD/preload/slow-nss.so
need_prog "$USBGWD" "$USBGW" "$SIM" "$TC" "$SHIM"
plan 15

ms_now() { date +%s%3N; }

sim_start sim || bail_out "simulator did not start"
SOCK=$T/control.sock
DELAY=$T/nss-delay
echo 0 >"$DELAY"
cat >"$T/gw.conf" <<EOF
exporter sim 127.0.0.1:$(sim_port sim)
poll-interval = 300ms
control-lookup-timeout = 10s
EOF
# (the shim is not sanitized: ASan must not insist on coming first)
start_bg gw env LD_PRELOAD="$SHIM" USBGW_TEST_NSS_DELAY_FILE="$DELAY" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$SOCK" \
    -l 127.0.0.1:0 -P "$T/gw.port" -p "$T/gw.pid"
wait_file "$T/gw.port" 10 gw || bail_out "usbgwd did not start: $(cat "$(bg_log gw)")"
GWA=127.0.0.1:$(cat "$T/gw.port")
wait_for -t 10 sh -c "'$USBGW' -s '$SOCK' list --state pending | grep -q sim:1-2" ||
    bail_out "devices did not become pending"
run "$USBGW" -s "$SOCK" approve sim:1-2
is "$RC" 0 "approve (no delay)"

# ---- a 5 s lookup: that client waits, nothing else does ---------------------
# (bounds far apart: shared 2-core machines, sanitizer builds)
echo 5000 >"$DELAY"
t0=$(ms_now)
"$USBGW" -s "$SOCK" status >"$T/slow.out" 2>&1 &
slow=$!
sleep 0.3
t1=$(ms_now)
run "$TC" list "$GWA"
t2=$(ms_now)
is "$RC" 0 "OP_REQ_DEVLIST at the gateway during the lookup"
num_cmp $((t2 - t1)) -lt 3000 "answered in $((t2 - t1)) ms (the lookup takes 5000)"
t1=$(ms_now)
run "$TC" script "$GWA" sim:1-2 --bytes 1M \
    --skip unlink,unlink-pending,unlink-completed,interrupt,iso
t2=$(ms_now)
is "$(field failed "$OUT")/$RC" 0/0 "verified loopback through the gateway during the lookup"
num_cmp $((t2 - t1)) -lt 4000 "in $((t2 - t1)) ms"
wait "$slow"
st=$?
t3=$(ms_now)
is "$st" 0 "the waiting client gets its answer"
like "$(cat "$T/slow.out")" "privilege admin" "with its privilege"
num_cmp $((t3 - t0)) -ge 4800 "after its own lookup ($((t3 - t0)) ms): the slow NSS was in effect"

# ---- a lookup over control-lookup-timeout ---------------------------------------
sed -i 's/^control-lookup-timeout = .*/control-lookup-timeout = 1s/' "$T/gw.conf"
kill -HUP "$(bg_pid gw)"
sleep 0.5
echo 4000 >"$DELAY"
t0=$(ms_now)
run "$USBGW" -s "$SOCK" status
t1=$(ms_now)
is "$RC" 1 "a client whose lookup times out is refused (exit 1)"
like "$ERR" "user and group lookup for uid [0-9]+ did not finish within 1000 ms" \
    "and told why"
num_cmp $((t1 - t0)) -lt 3000 "within the timeout, not the lookup ($((t1 - t0)) ms)"

# the thread finishes the stuck lookup, then serves the next client
echo 0 >"$DELAY"
sleep 4
run "$USBGW" -s "$SOCK" audit --json
like "$OUT" "did not finish within 1000 ms" "the refusal is in the audit trail"
run "$USBGW" -s "$SOCK" status
is "$RC" 0 "the next client is served once the directory answers again"

stop_bg gw TERM
is "$RC" 0 "SIGTERM: clean exit"
asan_clean "no sanitizer report (with the ASan build)"
done_testing
