# tests/lib/pg.sh -- a real PostgreSQL server for a test (bash).
#
# Source it after common.sh:
#
#	. "$(dirname "$0")/../lib/pg.sh"
#	pg_start "$T/pg" || bail_out "no PostgreSQL"	# sets PG_URI
#	"$USBGWD" -f -d "$PG_URI" ...
#	pg_stop "$T/pg"; pg_start "$T/pg"		# a restart keeps the data
#
# pg_start DIR: initdb into DIR/data (first time only) as the invoking
# user, or, when that is root, as `postgres` (else `nobody`) with DIR
# chowned to it; the server listens on no TCP address at all
# (listen_addresses = ''), only on a Unix socket in DIR (mode 0700: only
# that user and root reach it, so "trust" authentication is local to
# the test); fsync off for speed (synchronous_commit stays on: an
# immediate stop must not lose what was committed).  Waits with
# pg_isready.  Sets and
# exports PG_URI=postgresql://USER@/usbgw?host=DIR (database usbgw,
# created on the first start), PG_DIR, PG_USER, PG_BIN.  Every server
# started is stopped when the script exits.  need_pg skips the test
# when no PostgreSQL is installed (tests/deps.sh installs it).

# pg_gw_pair LEASE_S: a server, simulator sim with one storage device
# (SIMA its address, declared by no gateway) and gateways gwa and gwb
# (gateway-names gw-a, gw-b) started on it, polling every 300 ms, with a
# LEASE_S-second lease and one site key.  Needs sim.sh and gw.sh.
pg_gw_pair() {
	local g
	pg_start "$T/pg" || bail_out "PostgreSQL did not start"
	echo 'device 1-2 { type storage; }' >"$T/sim.conf"
	sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
	SIMA=127.0.0.1:$(sim_port sim)
	for g in a b; do
		gw_conf "gw$g" "poll-interval = 300ms" "lease-time = ${1}s" \
		    "audit-key = $T/site.key"
	done
	gw_start gwa -d "$PG_URI" -N gw-a || bail_out "gateway a did not start"
	gw_start gwb -d "$PG_URI" -N gw-b || bail_out "gateway b did not start"
}

PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
_pg_dirs=()

need_pg() {
	[ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] ||
	    skip_all "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb)"
}

# _pg_as CMD...: CMD as the server's user.
_pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$PG_USER" -- "$@"
	else
		"$@"
	fi
}

pg_start() {
	local dir=$1
	if [ "$(id -u)" = 0 ]; then
		PG_USER=postgres
		id -u postgres >/dev/null 2>&1 || PG_USER=nobody
	else
		PG_USER=$(id -un)
	fi
	mkdir -p "$dir" || return 1
	dir=$(cd "$dir" && pwd)
	PG_DIR=$dir
	if [ "$(id -u)" = 0 ]; then
		chown "$PG_USER" "$dir" || return 1
		# the server's user must traverse the parents ($T is 0700)
		local p=$dir
		while p=${p%/*}; [ -n "$p" ]; do
			[ -O "$p" ] && chmod o+x "$p"
			[ "$p" = "$T" ] && break
		done
	fi
	chmod 0700 "$dir"
	if [ ! -e "$dir/data/PG_VERSION" ]; then
		_pg_as "$PG_BIN/initdb" -D "$dir/data" -U "$PG_USER" -A trust \
		    -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 || {
			diag "initdb failed:"
			_diag_text "$(tail -n 20 "$dir/initdb.log")"
			return 1
		}
		cat >>"$dir/data/postgresql.conf" <<-CONF
		listen_addresses = ''
		unix_socket_directories = '$dir'
		unix_socket_permissions = 0700
		fsync = off
		full_page_writes = off
		max_connections = 40
		shared_buffers = 16MB
		CONF
	fi
	_pg_as "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
	    start >"$dir/pg_ctl.log" 2>&1 || {
		diag "pg_ctl start failed:"
		_diag_text "$(tail -n 20 "$dir/server.log" "$dir/pg_ctl.log" 2>/dev/null)"
		return 1
	}
	_pg_dirs+=("$dir")
	wait_for -t 30 "$PG_BIN/pg_isready" -q -h "$dir" -U "$PG_USER" || {
		diag "pg_isready: the server did not come up"
		return 1
	}
	if ! _pg_as "$PG_BIN/psql" -h "$dir" -U "$PG_USER" -d postgres -Atqc \
	    "SELECT 1 FROM pg_database WHERE datname = 'usbgw'" | grep -q 1; then
		_pg_as "$PG_BIN/createdb" -h "$dir" -U "$PG_USER" usbgw || return 1
	fi
	PG_URI="postgresql://$PG_USER@/usbgw?host=$dir"
	export PG_URI PG_DIR PG_USER PG_BIN
}

# pg_stop DIR [MODE]: stop the server (pg_ctl mode, default fast).
pg_stop() {
	[ -e "$1/data/postmaster.pid" ] || return 0
	_pg_as "$PG_BIN/pg_ctl" -D "$1/data" -m "${2:-fast}" -w -t 30 stop \
	    >>"$1/pg_ctl.log" 2>&1
}

# pg_sql SQL: run SQL with psql on PG_URI's database; output unaligned.
pg_sql() {
	_pg_as "$PG_BIN/psql" -X -v ON_ERROR_STOP=1 -h "$PG_DIR" -U "$PG_USER" \
	    -d usbgw -Atq -c "$1"
}

_pg_stop_all() {
	local d
	for d in "${_pg_dirs[@]}"; do
		pg_stop "$d" immediate
	done
}
trap '_pg_rc=$?; _pg_stop_all; (exit $_pg_rc); _cleanup' EXIT
