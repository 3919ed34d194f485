#!/usr/bin/env bash
# approve --to limits an approval to a vhci host given as an address, a
# CIDR prefix or a host name (matched against the host's forward-
# confirmed reverse DNS name).  127.0.0.1 imports a device approved
# --to 127.0.0.0/8 (a prefix was compared as a string, so it never
# matched) and one approved --to localhost; not one approved --to
# 127.0.0.2.  A --to that could never match is a usage error and
# approves nothing: 10.0.0.0/33, 10.0.0.1/8 (host bits set), 'bad name!'.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
. "$(dirname "$0")/../lib/decision.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 25

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type keyboard; keys ""; }
device 1-2 { type storage; }
device 1-3 { type composite; keys ""; }
device 1-4 { type audio; }
device 1-5 { type sourcesink; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "attach-pending-wait = 0" "show-pending = no"
gw_start gw || bail_out "usbgwd did not start"
GWA=$(gw_addr gw)
for d in 1-1 1-2 1-3 1-4 1-5; do
	gw_wait_state gw sim1:$d pending || { gw_diag gw; bail_out "sim1:$d not pending"; }
done

# ---- a CIDR prefix -----------------------------------------------------------------
gwctl gw approve sim1:1-2 --to 127.0.0.0/8
is "$RC" 0 "approve sim1:1-2 --to 127.0.0.0/8"
is "$(gw_state gw sim1:1-2)" authorized "... authorized (for hosts in 127/8)"
run "$TC" import "$GWA" sim1:1-2
is "$RC" 0 "127.0.0.1 imports it (in 127.0.0.0/8)"
like "$OUT" 'ok import sim1:1-2 ' "... with the device record"

# ---- another address ------------------------------------------------------------------
gwctl gw approve sim1:1-5 --to 127.0.0.2
is "$RC" 0 "approve sim1:1-5 --to 127.0.0.2"
run "$TC" import "$GWA" sim1:1-5
is "$RC" 11 "127.0.0.1 may not import it (ST_NA)"
sleep 0.3
isnt "$(gw_state gw sim1:1-5)" attached "... and it is not attached"

run "$TC" list "$GWA"
is "$RC" 0 "DEVLIST from 127.0.0.1"
like "$OUT" 'sim1:1-2: ' "... lists the device approved for 127.0.0.0/8"
unlike "$OUT" 'sim1:1-5: ' "... not the one approved for 127.0.0.2 only"

# ---- a host name ------------------------------------------------------------------------
if localhost_resolves; then
	gwctl gw approve sim1:1-1 --to localhost
	is "$RC" 0 "approve sim1:1-1 --to localhost"
	run "$TC" import "$GWA" sim1:1-1
	is "$RC" 0 "127.0.0.1, verified as localhost, imports it"
	gwctl gw approve sim1:1-4 --to nosuchhost.invalid
	is "$RC" 0 "approve sim1:1-4 --to nosuchhost.invalid (a name nobody has)"
	run "$TC" import "$GWA" sim1:1-4
	is "$RC" 11 "127.0.0.1 may not import it (ST_NA)"
else
	skip 4 "getent hosts 127.0.0.1 does not say localhost"
fi

# ---- a --to that can never match ---------------------------------------------------------
for to in 10.0.0.0/33 10.0.0.1/8 'bad name!'; do
	gwctl gw approve sim1:1-3 --to "$to"
	is "$RC" 2 "approve --to '$to' is a usage error (exit 2)"
	like "$ERR" '.' "... with a message"
done
sleep 0.3
is "$(gw_state gw sim1:1-3)" pending "sim1:1-3 was approved for nobody: still pending"
is "$(gw_sql gw "SELECT count(*) FROM approvals a JOIN devices d ON
    d.id = a.device_id WHERE d.busid = 'sim1:1-3'")" 0 "... no approval recorded"

gw_finish gw
done_testing
