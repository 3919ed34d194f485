#!/bin/bash
# exporter list's LAST SEEN and ERROR (issue 18 item 4): JSON last_seen is
# Unix seconds of the last good device list or null, last_error the last
# failure's text or null; the text shows the time with its zone, "never"
# and "-".  After the simulator is killed the error is there and last
# seen stays; both survive a restart of the daemon.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$USBGWD" "$USBGW" "$EJSON" socat sqlite3 perl
plan 23

# jget FIELD NAME: the raw JSON of FIELD of exporter NAME in $OUT ("null")
jget() {
	printf '%s' "$OUT" | perl -MJSON::PP -0777 -e '
	    for my $e (@{decode_json(<STDIN>)}) {
		next unless $e->{name} eq $ARGV[1];
		my $v = $e->{$ARGV[0]};
		print defined $v ? $v : "null"; }' "$1" "$2"
}

sim_start sim || bail_out "simulator did not start"
DEAD=$(free_port)		# nobody listens there
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" \
    "exporter dead 127.0.0.1:$DEAD" "poll-interval = 300ms"
t0=$(date +%s)
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-1 pending

_has_error() {
	timeout 20 "$USBGW" -s "$(gw_sock gw)" exporter list --json |
	    perl -MJSON::PP -0777 -e 'for (@{decode_json(<STDIN>)}) {
		exit 0 if $_->{name} eq $ARGV[0] && defined $_->{last_error} }
		exit 1' "$1"
}
wait_for -t 10 _has_error dead
check $? "the dead exporter has a last_error"

gwctl gw exporter list --json
seen=$(jget last_seen sim1)
like "$seen" '^[0-9]+$' "sim1: last_seen is Unix seconds ($seen)"
num_cmp "$seen" -ge "$t0" "... not before the daemon started"
num_cmp "$seen" -le "$(date +%s)" "... nor in the future"
is "$(jget last_error sim1)" null "sim1: last_error null"
is "$(jget last_seen dead)" null "dead: last_seen null (never)"
like "$(jget last_error dead)" "[Cc]onnection refused|closed" \
    "dead: last_error says why ($(jget last_error dead))"

gwctl gw exporter list
is "$RC" 0 "exporter list (text)"
like "$OUT" "NAME +ADDRESS +STATUS +DEVICES +LAST SEEN +ERROR" "header"
zone=$(date +%Z)
like "$OUT" "sim1 +127.0.0.1:[0-9]+ +up +5 +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} $zone +-" \
    "sim1: last seen with its zone ($zone), no error (-)"
like "$OUT" "dead +127.0.0.1:$DEAD +down +0 +never +.*([Cc]onnection refused|closed)" \
    "dead: never seen, the error"

# ---- the simulator killed ---------------------------------------------------------
stop_bg sim KILL
wait_for -t 15 _has_error sim1
check $? "after the simulator is killed, sim1 has a last_error"
gwctl gw exporter list --json
num_cmp "$(jget last_seen sim1)" -ge "$seen" "... and last_seen is still set (the last good list)"
err=$(jget last_error sim1)
like "$err" "[Cc]onnection refused|closed|reset" "sim1's last_error: $err"
like "$(jget last_error_at sim1)" '^[0-9]+$' "last_error_at: Unix seconds"

# ---- persisted --------------------------------------------------------------------
stop_bg gw TERM
is "$(gw_sql gw "SELECT last_seen = $seen OR last_seen >= $seen FROM exporters WHERE name = 'sim1'")" 1 \
    "the database has sim1's last_seen"
like "$(gw_sql gw "SELECT last_error FROM exporters WHERE name = 'sim1'")" "[Cc]onnection refused|closed|reset" \
    "... and its last_error"
gw_start gw || bail_out "usbgwd did not start again"
gwctl gw exporter list --json
num_cmp "$(jget last_seen sim1)" -ge "$seen" "after a restart: last_seen kept"
isnt "$(jget last_error sim1)" null "after a restart: last_error kept"
is "$(jget last_seen dead)" null "dead: still never seen"

gw_finish gw
done_testing
