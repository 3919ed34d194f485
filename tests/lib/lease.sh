# tests/lib/lease.sh -- several gateways on one PostgreSQL (exporter
# leases, protocol.md 4.4; tests 137-139).  Source after common.sh,
# sim.sh, gw.sh and pg.sh, with PG_URI set (pg_start).
#
#	lease_launch g1; lease_launch g2	# started at once, not waited for
#	lease_ready g1 && lease_ready g2
#	lease_snap; lease_where sim1:1-1	# the gateways listing it: "g2"
#	lease_holder sim1			# the unexpired lease's gateway: "g2"

# lease_world LEASE_S DEVICES GW...: a PostgreSQL server, simulator sim1
# with DEVICES (its config lines), and $T/GW.conf for each GW declaring
# sim1, polled every 300 ms, with a LEASE_S-second lease and one site
# key; LEASE_GWS set to the GWs.  The gateways are not started.
lease_world() {
	local secs=$1 devs=$2 g
	shift 2
	pg_start "$T/pg" || bail_out "PostgreSQL did not start"
	printf '%s\n' "$devs" >"$T/sim.conf"
	sim_start sim1 -c "$T/sim.conf" || bail_out "simulator did not start"
	LEASE_GWS="$*"
	for g in "$@"; do
		gw_conf "$g" "poll-interval = 300ms" "lease-time = ${secs}s" \
		    "audit-key = $T/site.key" \
		    "exporter sim1 127.0.0.1:$(sim_port sim1)"
	done
}

# lease_launch NAME [ARGS...]: usbgwd -f on PostgreSQL with $T/NAME.conf,
# not waiting (three of them start at once).
lease_launch() {
	local name=$1
	shift
	rm -f "$T/$name.port"
	[ -s "$T/$name.log" ] && cat "$T/$name.log" >>"$T/$name.log.old"
	start_bg "$name" "$USBGWD" -f -c "$T/$name.conf" -d "$PG_URI" \
	    -N "$name" -s "$T/$name.sock" -l 127.0.0.1:0 -P "$T/$name.port" \
	    -p "$T/$name.pid" -v debug "$@"
}

# lease_ready NAME: its port file and control socket are there.
lease_ready() {
	wait_file "$T/$1.port" 20 "$1" &&
	    wait_for -t 10 -p "$1" test -S "$T/$1.sock"
}

# lease_name NAME: the instance's name in exporter_leases (its
# gateway-name, NAME here, and its pid).
lease_name() { echo "$1/$(bg_pid "$1")"; }

# lease_snap [NAMES...]: one `usbgw list --json` of each running instance
# (of NAMES, default $LEASE_GWS) into $T/NAME.snap, for lease_where.
lease_snap() {
	local g
	for g in ${@:-$LEASE_GWS}; do
		rm -f "$T/$g.snap"
		bg_alive "$g" || continue
		timeout 20 "$USBGW" -s "$T/$g.sock" list --json \
		    >"$T/$g.snap" 2>/dev/null || rm -f "$T/$g.snap"
	done
}

# lease_where BUSID: the instances whose last lease_snap shows the device
# (any state but gone).
lease_where() {
	local busid=$1 g st out=
	for g in $LEASE_GWS; do
		[ -s "$T/$g.snap" ] || continue
		st=$("$EJSON" get state "busid=$busid" <"$T/$g.snap" 2>/dev/null)
		[ -n "$st" ] && [ "$st" != gone ] && out="$out${out:+ }$g"
	done
	echo "$out"
}

# lease_holder EXPORTER: the instance holding its unexpired lease (by the
# server's clock), "" if none, "?" if a gateway not of $LEASE_GWS.
lease_holder() {
	local who g
	who=$(pg_sql "SELECT l.gateway FROM exporter_leases l JOIN exporters e
	    ON e.id = l.exporter_id WHERE e.name = '$1' AND l.expires_ms >
	    (extract(epoch FROM now()) * 1000)::bigint")
	[ -z "$who" ] && return 0
	for g in $LEASE_GWS; do
		[ -n "$(bg_pid "$g")" ] && [ "$(lease_name "$g")" = "$who" ] &&
		    { echo "$g"; return 0; }
	done
	echo "?"
}

# sim_imports SIM BUSID: the simulator's count of accepted imports.
sim_imports() {
	sim_ctl "$1" list
	printf '%s\n' "$CTL_OUT" | awk -v b="$2" '$1 == b {
	    for (i = 1; i <= NF; i++) if ($i ~ /^imports=/) {
	        sub(/^imports=/, "", $i); print $i } }'
}

# sim_import_reqs SIM BUSID: OP_REQ_IMPORT requests the simulator saw.
sim_import_reqs() {
	grep -c "cmd=OP_REQ_IMPORT busid=$2\$" "$T/$1.pdu" 2>/dev/null
}

# sim_state SIM BUSID: imported or available, in the simulator's view.
sim_state() {
	sim_ctl "$1" list
	printf '%s\n' "$CTL_OUT" | awk -v b="$2" '$1 == b {
	    for (i = 1; i <= NF; i++) if ($i ~ /^state=/) {
	        sub(/^state=/, "", $i); print $i } }'
}
