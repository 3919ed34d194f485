#!/bin/bash
# 1,000 devices from 100 exporters of one usbgw-sim (`exporters`
# statement), on one gateway: not timed, but the whole path must work.
# The simulator: one port per exporter listed in its -P file, each
# exporter its own device list and imports (an import at one does not
# make the same busid busy at another).  The gateway: the 100 exporters
# added over the control socket, every device pending within a generous
# bound, `status` answering all through the claim storm, `list --json`
# returning the 1,000 with distinct busids, each device claimed (imported)
# at the simulator, and an unplug at one exporter making exactly that
# device gone.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"
timing_sensitive

SCALECTL=$(cd "$(dirname "$0")/../tools" && pwd)/scale-ctl.py
need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" socat python3 usbip
plan 24

NEXP=100
PER=10
N=$((NEXP * PER))
printf 'exporters %d devices-per-exporter %d type sourcesink\n' "$NEXP" \
    "$PER" >"$T/sim.conf"
sim_start sim -c "$T/sim.conf" -P "$T/sim.ports" ||
    bail_out "simulator did not start"

# ---- the simulator: independent exporters --------------------------------
is "$(wc -l <"$T/sim.ports")" "$NEXP" "the ports file lists $NEXP exporters"
is "$(awk '{ print $1 }' "$T/sim.ports" | sort -u | wc -l)" "$NEXP" \
    "exporter names are distinct"
is "$(awk '$2 > 0 && $2 < 65536 { print $2 }' "$T/sim.ports" | sort -u |
    wc -l)" "$NEXP" "each exporter has a port of its own"
P1=$(awk '$1 == "sim1" { print $2 }' "$T/sim.ports")
P2=$(awk '$1 == "sim2" { print $2 }' "$T/sim.ports")
run usbip --tcp-port "$P1" list -r 127.0.0.1
is "$(printf '%s\n' "$OUT" | grep -cE '^ +1-[0-9]+: ')" "$PER" \
    "the stock usbip list sees $PER devices at sim1"
like "$OUT" 'SIM-sim1-1-1|1209:0005' "sim1 lists its source/sink devices"

# an import held at sim1 leaves sim2's device of the same busid free
usbip_open 8 "$P1"
usbip_send_import 8 1-3
is "$(usbip_read_hex 8 8)" 0111000300000000 "import of 1-3 at sim1: ST_OK"
is "$(usbip_import_status "$P1" 1-3)" 2 "1-3 at sim1 is now busy (ST_DEV_BUSY)"
is "$(usbip_import_status "$P2" 1-3)" 0 "1-3 at sim2 is not (ST_OK)"
usbip_close 8
is "$(usbip_import_status "$P1" 99-1)" 4 "an unknown busid: ST_NODEV"
sim_ctl sim exporters
is "$(printf '%s\n' "$CTL_OUT" | grep -c ' devices=10 ')" "$NEXP" \
    "control 'exporters': $NEXP lines of 10 devices"
sim_ctl sim list nosuch
like "$CTL_OUT" '^error: no exporter nosuch' "list of an unknown exporter: an error"

# ---- the gateway: 1,000 devices ------------------------------------------
gw_conf gw "poll-interval = 1s" "log-level = info"
gw_start gw -v info || bail_out "usbgwd did not start"
on_fail() { gw_diag gw 40; }

t0=$(date +%s.%N)
python3 "$SCALECTL" "$(gw_sock gw)" add "$T/sim.ports" >"$T/add.out" \
    2>"$T/add.err" &
addpid=$!
W=$(python3 "$SCALECTL" "$(gw_sock gw)" watch "$N" 120 "$t0" 2>"$T/watch.err")
wait "$addpid"
like "$(cat "$T/add.out")" "^RESULT added=$NEXP failed=0 " \
    "$NEXP exporters added over the control socket" || diag "$(cat "$T/add.err")"
like "$W" 'reached=1 ' "all $N devices pending within 120 s" ||
    { diag "$W"; _diag_text "$(tail -n 5 "$T/watch.err")"; on_fail; }
like "$W" ' failed=0 ' "status answered every time during the claim storm" ||
    diag "$W"
num_cmp "$(field samples "$W")" -ge 1 "at least one status sample taken"
diag "storm: $W"

run "$USBGW" -s "$(gw_sock gw)" list --json
is "$RC" 0 "usbgw list --json at 1,000 devices"
printf '%s' "$OUT" >"$T/list.json"
is "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(len(d), len({x["busid"] for x in d}),
    sum(1 for x in d if x["state"] == "pending"))' "$T/list.json")" \
    "$N $N $N" "list --json: $N devices, $N distinct busids, all pending"

sim_ctl sim exporters
is "$(printf '%s\n' "$CTL_OUT" | awk '{ sub(/.*imported=/, ""); s += $1 }
    END { print s }')" "$N" "the simulator sees every device imported (claimed)"

sim_ctl sim unplug sim42/1-7
is "$RC" 0 "unplug sim42/1-7 at the simulator"
gw_wait_state gw sim42:1-7 gone 30
is "$(gw_state gw sim42:1-7)" gone "the gateway marks sim42:1-7 gone"
is "$(gw_state gw sim43:1-7)" pending "sim43:1-7 (same busid, other exporter) stays pending"

gw_finish gw
