#!/bin/bash
# One exporter, one name (issue 18 item 4): an exporter whose address
# (host:port after parsing, IPv6 and case normalised) is another's is
# refused in every path -- the config file, exporters.d, exporter add,
# import, and a reload whose file names a database exporter's address --
# with a message naming both.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3
plan 19

sim_start sim || bail_out "simulator did not start"
SP=$(sim_port sim)
P=$(free_port)
D=$T/exporters.d
mkdir -p "$D"

# ---- the config file --------------------------------------------------------------
gw_conf gw "exporter a [::1]:$P" "exporter b [0:0:0::1]:$P"
run "$USBGWD" -n -c "$T/gw.conf"
is "$RC" 2 "config file: the same address twice is refused (usbgwd -n)"
like "$ERR" "gw.conf:2: exporter b: address \[::1\]:$P is exporter a's \(line 1\): one exporter, one name" \
    "... naming both"

# ---- exporters.d against the config file ---------------------------------------------
gw_conf gw "exporter sim1 127.0.0.1:$SP" "poll-interval = 300ms"
printf 'exporter copy 127.0.0.1:%s\n' "$SP" >"$D/x.conf"
run "$USBGWD" -n -c "$T/gw.conf"
is "$RC" 2 "exporters.d: the config file's address is refused"
like "$ERR" "exporters.d/x.conf:1: exporter copy: address 127.0.0.1:$SP is exporter sim1's \(gw.conf:1\)" \
    "... naming the file and line of both"
run "$USBGWD" -f -c "$T/gw.conf" -d "$T/gw.db" -s "$T/gw.sock" \
    -l 127.0.0.1:0 -p "$T/gw.pid"
is "$RC" 2 "usbgwd does not start with it (exit 2)"
rm -f "$D/x.conf"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-1 pending

# ---- exporter add -------------------------------------------------------------------
gwctl gw exporter add dup "127.0.0.1:$SP"
is "$RC" 1 "exporter add at sim1's address: refused (exit 1)"
like "$ERR" "exporter dup: address 127.0.0.1:$SP is exporter sim1's \(declared at gw.conf:1\): one exporter, one name" \
    "... naming both"
gwctl gw exporter add v6a "[::1]:$P"
is "$RC" 0 "exporter add v6a [::1]:PORT"
gwctl gw exporter add v6b "[0::0:1]:$P"
is "$RC" 1 "exporter add of the same IPv6 address written another way: refused"
like "$ERR" "address \[::1\]:$P is exporter v6a's \(added with usbgw exporter add or import\)" \
    "... naming v6a"
gwctl gw exporter add h1 "LocalHost.Example:$P"
gwctl gw exporter add h2 "localhost.example:$P"
like "$ERR" "exporter h2: address localhost.example:$P is exporter h1's" \
    "host names compare without case"

# ---- import -------------------------------------------------------------------------
printf 'imp 127.0.0.1:%s\n' "$SP" >"$T/imp.txt"
gwctl gw exporter import "$T/imp.txt"
is "$RC" 2 "import at sim1's address: refused"
like "$ERR" "imp.txt:1: exporter imp: address 127.0.0.1:$SP is exporter sim1's \(declared at gw.conf:1\)" \
    "... naming both"

# ---- a reload whose exporters.d file takes a database exporter's address ---------------
printf 'exporter late [::1]:%s\n' "$P" >"$D/late.conf"
kill -HUP "$(bg_pid gw)"
wait_log gw "configuration has errors; keeping the old one" 10
check $? "SIGHUP: refused, the old configuration kept"
like "$(cat "$T/gw.log")" "late.conf:1: exporter late: address \[::1\]:$P is exporter v6a's \(added with usbgw exporter add or import\)" \
    "... the log names both"
gwctl gw exporter list --json
is "$(printf '%s' "$OUT" | "$EJSON" count name=late)" 0 "late not added"

gw_finish gw
done_testing
